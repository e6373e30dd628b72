"""The `session-store` command against real databases (SQLite files and PostgreSQL).

Most commands run in-process through click's `CliRunner`; a few run end to end in new processes,
as a user runs them: the `session-store` entry point, the demo across its two processes, an error exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from alembic import command
from alembic.config import Config
from click.testing import CliRunner
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from session_store import SessionStore
from session_store._db.schema import head_revision, migrations_dir
from session_store.cli import main
from session_store.cli._app import COMMANDS
from session_store.results import SessionWindow, StoredSummary
from testkit.scripted import ParallelToolAssistant, scripted_agent
from testkit.templates import NewDatabase
from tests._demo import twelve_demo_turns, twenty_four_demo_turns


@dataclass(frozen=True)
class Result:
    """What a command did, however it ran: its exit code and what it wrote to stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str


def cli(
    *args: str,
    db: str | None = None,
    cwd: Path,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    unset: Callable[[str], bool] = lambda name: False,
) -> Result:
    """`session-store [--db DB] ARGS...` in this process, from `cwd`, without $SESSION_STORE_URL.

    An exception the command lets escape is a bug: it propagates with its traceback instead of
    becoming an exit code.
    """
    environment: dict[str, str | None] = {name: None for name in os.environ if unset(name)}
    environment['SESSION_STORE_URL'] = None
    environment['COLUMNS'] = '200'  # rich wraps at the terminal's width; keep lines whole for the assertions
    environment.update(env or {})
    with contextlib.chdir(cwd):
        result = CliRunner().invoke(
            main, [*(['--db', db] if db else []), *args], input=stdin or '', env=environment, catch_exceptions=False
        )
    # session_store.cli's rich consoles pick their colours once, at import, from the streams of that moment:
    # under `pytest -s` on a terminal that is a tty, and the captured text would carry ANSI styles.
    return Result(result.exit_code, click.unstyle(result.stdout), click.unstyle(result.stderr))


def spawn(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """`session-store ARGS...` through the installed entry point, in a new process, as a user runs it."""
    executable = shutil.which('session-store', path=os.pathsep.join([str(Path(sys.executable).parent), os.defpath]))
    assert executable is not None, 'the session-store entry point is installed beside this Python'
    environment = {k: v for k, v in os.environ.items() if k != 'SESSION_STORE_URL'}
    environment['COLUMNS'] = '200'
    environment.update(env or {})
    done = subprocess.run(
        [executable, *args],
        cwd=cwd,
        input='',
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def ok(result: Result) -> str:
    assert result.returncode == 0, f'exit {result.returncode}\n{result.stdout}\n{result.stderr}'
    assert 'Traceback' not in result.stderr
    return result.stdout


def fails(result: Result, *fragments: str) -> str:
    """The command failed with exit code 1 and exactly one readable line on stderr, holding `fragments`."""
    assert result.returncode == 1, f'exit {result.returncode}\n{result.stdout}\n{result.stderr}'
    assert 'Traceback' not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith('Error: ')
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def cli_many(*commands: list[str], db: str | None = None, cwd: Path) -> list[Result]:
    """Several commands, one after the other."""
    return [cli(*args, db=db, cwd=cwd) for args in commands]


async def _archive(url: str, session_id: str) -> list[ModelMessage]:
    async with SessionStore(url) as store:
        return await store.history(session_id, limit=None)


async def _chain_and_window(url: str, session_id: str) -> tuple[list[StoredSummary], SessionWindow]:
    """The session's summary chain and the window its next request starts from, read from the store itself."""
    async with SessionStore(url) as store:
        return await store.summaries(session_id), await store.window(session_id)


def sessions_json(result: Result) -> dict[str, dict[str, object]]:
    return {info['session_id']: info for info in json.loads(ok(result))}


# The demo: the main job, on the embedded default database


@pytest.mark.slow
def test_demo_runs_offline_and_leaves_a_database_the_other_commands_read(tmp_path: Path) -> None:
    # End to end: the installed entry point, whose demo resumes in a second process of its own.
    result = spawn('demo', cwd=tmp_path)
    report = ok(result)
    assert (tmp_path / 'sessions.db').exists(), 'the demo writes ./sessions.db by default'
    chain, window = asyncio.run(_chain_and_window(f'sqlite+aiosqlite:///{tmp_path / "sessions.db"}', 'demo'))
    last = chain[-1]
    assert "session 'demo' (scope 'demo')" in report
    assert re.search(r'messages archived +480 ', report)
    assert re.search(rf'summaries made +{len(chain)} +one chain, covering messages 0-{last.covers_to - 1}\b', report)
    assert len(chain) >= 10, 'a 120-turn conversation summarized every ~10 turns'
    assert 'The summary chain continued across the restart' in report
    for line in ('session-store history demo --limit 20', 'session-store summaries demo', 'session-store context demo'):
        assert line in report
    assert 'session-store search ORDER-1042' in report
    assert 'Process 1 stopped after turn 60' in result.stderr  # the progress, on stderr

    listing, history, summaries, context, hits = cli_many(
        ['sessions'],
        ['history', 'demo', '--limit', '20'],
        ['summaries', 'demo'],
        ['context', 'demo'],
        ['search', 'ORDER-1042'],
        cwd=tmp_path,
    )
    assert 'demo' in ok(listing) and '480' in listing.stdout
    lines = ok(history).splitlines()
    assert lines[0].startswith('[0] system: You are the support agent')
    assert lines[1] == '[0] user: Hi, where is my order ORDER-1000? It was supposed to arrive by now.'
    assert lines[2] == "[1] assistant → lookup_order(order_id='ORDER-1000')"
    assert lines[4].startswith('[2] tool lookup_order ⇒ {"order_id": "ORDER-1000", "item": "kettle"')
    assert lines[-1] == '… more: session-store history demo --offset 20 --limit 20'
    assert f'#1  messages 0-{chain[0].covers_to - 1} ({chain[0].covers_to} new), the first' in ok(summaries)
    assert f'#{last.number}  messages {last.covers_from}-{last.covers_to - 1}' in summaries.stdout
    assert last.text.split('(')[0] in summaries.stdout  # 'Summary 14: 112 customer turns so far '
    assert 'with a summary of the rest' in ok(context)
    assert f'[{window.positions[0]}] system: You are the support agent' in context.stdout
    assert f'[{window.positions[0]}] summary: {last.text[:40]}' in context.stdout
    assert context.stdout.rstrip().endswith('[next] user: <the new prompt>')
    assert 'demo [24] user: Hi, where is my order ORDER-1042?' in ok(hits)

    # Run again: a new session beside the first; --fresh replaces it instead.
    again = ok(cli('demo', '--turns', '4', cwd=tmp_path))
    assert "session 'demo-2'" in again and 'session-store history demo-2 --limit 20' in again
    ok(cli('demo', '--turns', '4', '--fresh', cwd=tmp_path))
    listed = sessions_json(cli('sessions', '--json', cwd=tmp_path))
    assert {name: info['message_count'] for name, info in listed.items()} == {'demo': 16, 'demo-2': 16}


# Reviewing, on both backends


@pytest.mark.slow  # the demo runs half its turns in a second process
@pytest.mark.parametrize('new_database', ['postgresql'], indirect=True)
def test_the_demo_suggests_commands_without_the_databases_password(db_url: str, tmp_path: Path) -> None:
    # Without a password the suggestions name the database (test_cli_defects checks that on SQLite).
    password = make_url(db_url).password
    assert password is not None
    report = ok(cli('demo', '--turns', '4', db=db_url, cwd=tmp_path))
    assert 'session-store history demo --limit 20 ' in report and '--db' not in report
    assert 'set $SESSION_STORE_URL' in report and str(password) not in report


async def _titled_and_plain(url: str) -> None:
    async with SessionStore(url) as store:
        agent = scripted_agent(ParallelToolAssistant())
        for session_id in ('titled', 'plain'):  # the plain one updated last
            await (await store.session(session_id, scope='team')).run(agent, 'Turn M0')
        await store.conversations.update('titled', title='Refund for ORD-1042')


def test_sessions_shows_the_titles_of_the_titled(db_url: str, tmp_path: Path) -> None:
    untitled = ok(cli('sessions', db=db_url, cwd=tmp_path))
    asyncio.run(_titled_and_plain(db_url))
    assert 'No sessions' in untitled
    lines = ok(cli('sessions', db=db_url, cwd=tmp_path)).splitlines()
    header = next(line for line in lines if 'session' in line and 'scope' in line)
    assert [name.strip() for name in header.split('┃')[1:4]] == ['session', 'title', 'scope']
    titled, plain = (next(line for line in lines if f'{name} ' in line) for name in ('titled', 'plain'))
    assert 'Refund for' in titled and 'Refund' not in plain  # folded, in a narrow terminal
    listed = sessions_json(cli('sessions', '--json', db=db_url, cwd=tmp_path))
    assert {name: info['title'] for name, info in listed.items()} == {'titled': 'Refund for ORD-1042', 'plain': None}
    # A listing with no titled session has no title column (the plain session, updated last).
    assert ' title ' not in ok(cli('sessions', '--limit', '1', db=db_url, cwd=tmp_path))


@pytest.mark.slow_on_postgresql
def test_review_commands_show_what_the_store_holds(new_database: NewDatabase, tmp_path: Path) -> None:
    # The demo conversation's 24 turns, run in this process (once for the run): what `demo` itself prints is
    # checked where it runs, and its second process adds nothing to what the review commands read.
    db_url = new_database(fill=twenty_four_demo_turns)
    archive = asyncio.run(_archive(db_url, 'demo'))
    chain, window = asyncio.run(_chain_and_window(db_url, 'demo'))
    assert len(archive) == 96 and len(chain) >= 2

    results = cli_many(
        ['sessions', '--json'],
        ['sessions', '--scope', 'demo'],
        ['sessions', '--scope', 'nobody'],
        ['history', 'demo', '--offset', '4', '--limit', '4'],
        ['history', 'demo', '--all', '--json'],
        ['history', 'demo', '--offset', '90', '--limit', '50', '--json'],
        ['summaries', 'demo', '--json'],
        ['summaries', 'demo'],
        ['context', 'demo', '--json'],
        ['search', 'order-1042', '--json'],
        ['search', 'ORDER-1042', '--session', 'demo', '--limit', '2'],
        ['search', 'no such text anywhere'],
        db=db_url,
        cwd=tmp_path,
    )
    listed, scoped, unscoped, page, everything, last_page, chain_json, chain_text, window_json = results[:9]
    hits, few, none = results[9:]

    info = sessions_json(listed)['demo']
    assert (info['scope'], info['message_count'], info['summary_count']) == ('demo', 96, len(chain))
    assert 'demo' in ok(scoped) and '96' in scoped.stdout
    assert 'No sessions under scope' in ok(unscoped)

    lines = ok(page).splitlines()
    assert [line.split(']')[0] for line in lines if line.startswith('[')] == ['[4', '[5', '[5', '[6', '[6', '[7']
    assert lines[6].startswith('… more: session-store history demo --offset 8 --limit 4')

    stored = json.loads(ok(everything))
    assert ModelMessagesTypeAdapter.validate_python(stored['messages']) == archive
    assert stored['next_offset'] is None
    tail = json.loads(ok(last_page))
    assert (tail['offset'], len(tail['messages']), tail['next_offset']) == (90, 6, None)

    links = json.loads(ok(chain_json))
    assert [(s['covers_from'], s['covers_to'], s['text']) for s in links] == [
        (s.covers_from, s.covers_to, s.text) for s in chain
    ]
    assert [s['covers_from'] for s in links[1:]] == [s['covers_to'] for s in links[:-1]]
    assert f'#2  messages {chain[1].covers_from}-{chain[1].covers_to - 1}' in ok(chain_text)
    assert 'extends #1' in chain_text.stdout

    shown = json.loads(ok(window_json))
    assert shown['positions'] == window.positions
    assert ModelMessagesTypeAdapter.validate_python(shown['messages']) == window.messages
    assert shown['archived_messages'] == 96 and len(shown['tokens']) == len(window.messages)
    assert any(part['part_kind'] == 'compaction' for message in shown['messages'] for part in message['parts'])

    found = json.loads(ok(hits))
    assert found and all('ORDER-1042' in hit['text'] for hit in found)
    assert [hit['position'] for hit in found] == sorted((hit['position'] for hit in found), reverse=True)
    assert {hit['position'] for hit in found} >= {24, 25, 26, 27}  # turn 6's prompt, calls, returns and answer
    assert '2 messages containing' in ok(few) and 'pass --limit for more' in few.stdout
    assert "No archived message contains 'no such text anywhere'" in ok(none)

    # The URL can come from the environment instead of --db.
    from_env = cli('sessions', '--json', cwd=tmp_path, env={'SESSION_STORE_URL': db_url})
    assert set(sessions_json(from_env)) == {'demo'}


@pytest.mark.slow_on_postgresql
def test_export_import_round_trip_is_exact(new_database: NewDatabase, tmp_path: Path) -> None:
    source = new_database(fill=twelve_demo_turns)
    target = new_database(empty=True)  # `import` into a database nothing has opened yet makes its schema
    # The demo conversation's 12 turns, run in this process (once for the run): `demo` would run half of them in
    # a second process, which the demo's own tests cover and an export does not need.
    ok(cli('export', 'demo', '-o', str(tmp_path / 'demo.jsonl'), db=source, cwd=tmp_path))
    lines = [json.loads(line) for line in (tmp_path / 'demo.jsonl').read_text().splitlines()]
    assert [line['kind'] for line in lines[:3]] == ['session', 'segment', 'message']
    assert [line['position'] for line in lines if line['kind'] == 'message'] == list(range(48))
    assert any(line['kind'] == 'summary' for line in lines)

    imported = ok(cli('import', str(tmp_path / 'demo.jsonl'), db=target, cwd=tmp_path))
    assert "Imported 'demo'" in imported and '48 messages' in imported
    before, after = cli_many(
        ['history', 'demo', '--all', '--json'], ['summaries', 'demo', '--json'], db=source, cwd=tmp_path
    )
    again, again_chain, exported_again = cli_many(
        ['history', 'demo', '--all', '--json'],
        ['summaries', 'demo', '--json'],
        ['export', 'demo'],
        db=target,
        cwd=tmp_path,
    )
    assert json.loads(ok(again)) == json.loads(ok(before))
    assert json.loads(ok(again_chain)) == json.loads(ok(after))
    assert ok(exported_again) == (tmp_path / 'demo.jsonl').read_text(), 'export -> import -> export is byte-identical'

    # The id is taken now; under another id and scope it goes in, and that scope lists only it.
    fails(cli('import', str(tmp_path / 'demo.jsonl'), db=target, cwd=tmp_path), "session 'demo' already exists")
    ok(
        cli(
            'import',
            '-',
            '--session-id',
            'copy',
            '--scope',
            'other',
            db=target,
            cwd=tmp_path,
            stdin=exported_again.stdout,
        )
    )
    assert set(sessions_json(cli('sessions', '--scope', 'other', '--json', db=target, cwd=tmp_path))) == {'copy'}

    # Delete asks first; answering no keeps the session.
    declined = cli('delete', 'copy', db=target, cwd=tmp_path, stdin='n\n')
    assert declined.returncode == 1 and 'Traceback' not in declined.stderr
    assert "Deleted session 'copy'" in ok(cli('delete', 'copy', '--yes', db=target, cwd=tmp_path))
    fails(cli('history', 'copy', db=target, cwd=tmp_path), "No session 'copy'")
    assert set(sessions_json(cli('sessions', '--json', db=target, cwd=tmp_path))) == {'demo'}


def test_import_rejects_a_file_that_is_not_an_export(tmp_path: Path) -> None:
    (tmp_path / 'bad.jsonl').write_text('{"kind": "session", "format": "session-store/1"}\nnot json\n')
    fails(
        cli('import', str(tmp_path / 'bad.jsonl'), db=f'sqlite:///{tmp_path / "x.db"}', cwd=tmp_path),
        'bad.jsonl, line 2: not JSON',
    )


# Chat


def test_chat_runs_each_line_through_the_stored_session(db_url: str, tmp_path: Path) -> None:
    first = cli(
        'chat', 'c1', '--model', 'test', '--system', 'Be brief.',
        db=db_url, cwd=tmp_path, stdin='hello there\n\nwhere is ORDER-1042?\n/quit\nnever sent\n',
    )  # fmt: skip
    reply = 'assistant: (test model, offline) You said:'
    assert ok(first).splitlines() == [f'[1] {reply} hello there', f'[3] {reply} where is ORDER-1042?']
    resumed = cli('chat', 'c1', '--model', 'test', db=db_url, cwd=tmp_path, stdin='again\n')
    assert ok(resumed).splitlines() == [f'[5] {reply} again']
    lines = ok(cli('history', 'c1', db=db_url, cwd=tmp_path)).splitlines()
    assert lines[:2] == ['[0] system: Be brief.', '[0] user: hello there']
    assert '[2] user: where is ORDER-1042?' in lines and '[4] user: again' in lines
    assert not any('never sent' in line for line in lines)


def test_chat_without_a_usable_model_fails_in_one_line(tmp_path: Path) -> None:
    db = f'sqlite:///{tmp_path / "chat.db"}'
    fails(cli('chat', 'c1', '--model', 'nonsense', db=db, cwd=tmp_path), 'Unknown model: nonsense')
    # Without the provider package or without the key: either way one line, before anything is stored.
    no_key = cli('chat', 'c1', '--model', 'openai:gpt-4o', db=db, cwd=tmp_path, unset=lambda k: k.endswith('_API_KEY'))
    fails(no_key, 'Model error')
    assert not (tmp_path / 'chat.db').exists()


# Errors: one line, exit code 1, no traceback


def test_errors_are_one_readable_line(tmp_path: Path) -> None:
    db = f'sqlite:///{tmp_path / "sessions.db"}'
    ok(cli('migrate', db=db, cwd=tmp_path))
    results = cli_many(
        ['history', 'nosuch'],
        ['summaries', 'nosuch'],
        ['context', 'nosuch'],
        ['export', 'nosuch'],
        ['delete', 'nosuch', '--yes'],
        ['--db', 'nonsense', 'sessions'],
        ['--db', 'mysql://u@h/db', 'sessions'],
        ['--db', 'postgresql+asyncpg://u:p@127.0.0.1:1/x', 'sessions'],
        ['--db', f'sqlite:///{tmp_path / "typo.db"}', 'history', 'demo'],
        db=db,
        cwd=tmp_path,
    )
    for result in results[:5]:
        fails(result, "No session 'nosuch'")
    fails(results[5], "Not a database URL: 'nonsense'")
    fails(results[6], 'Unsupported database URL')
    fails(results[7], 'Cannot reach the database at postgresql+asyncpg://u:***@127.0.0.1:1/x')
    fails(results[8], 'No database file at', 'session-store demo')
    assert not (tmp_path / 'typo.db').exists(), 'reviewing a mistyped path leaves no empty database behind'
    usage = cli('history', cwd=tmp_path)  # a usage error is click's: exit 2, said on stderr
    assert usage.returncode == 2 and "Missing argument 'ID'" in usage.stderr and not usage.stdout


def test_a_server_out_of_reach_is_one_line_that_says_nothing_was_stored_only_for_writes(tmp_path: Path) -> None:
    unreachable = 'postgresql://app:secret@127.0.0.1:1/app'  # nothing listens on port 1
    where = 'Cannot reach the database at postgresql+asyncpg://app:***@127.0.0.1:1/app (ConnectionRefusedError'
    reads = [
        ['sessions'],
        ['history', 's1'],
        ['summaries', 's1'],
        ['context', 's1'],
        ['search', 'order'],
        ['branches', 's1'],
        ['export', 's1'],
    ]
    for args in reads:
        line = fails(cli(*args, db=unreachable, cwd=tmp_path), where, 'retry once the server is back')
        assert 'stored' not in line, (args, line)
    for args in (['delete', 's1', '--yes'], ['rewind', 's1', '0'], ['migrate']):
        fails(cli(*args, db=unreachable, cwd=tmp_path), where, '; nothing was stored.')


@pytest.mark.parametrize('new_database', ['sqlite'], indirect=True)
def test_db_takes_a_sqlite_files_path(new_database: NewDatabase) -> None:
    file = Path(str(make_url(new_database()).database))
    folder = file.parent
    ok(cli('chat', 'c1', '--model', 'test', db='./sessions.db', cwd=folder, stdin='hello there\n'))
    (folder / 'sub').mkdir()
    home = {'HOME': str(folder)}
    for given, cwd in [
        ('sessions.db', folder),
        ('../sessions.db', folder / 'sub'),
        (str(file), folder),
        ('~/sessions.db', folder / 'sub'),
    ]:
        shown = ok(cli('history', 'c1', db=given, cwd=cwd, env=home))
        assert shown.splitlines()[0] == '[0] user: hello there', given
    listed = ok(cli('sessions', '--json', cwd=folder, env={'SESSION_STORE_URL': './sessions.db'}))
    assert [info['session_id'] for info in json.loads(listed)] == ['c1']
    # Something that is neither a URL nor plainly a path (a URL missing its colon) is still refused, saying both.
    fails(cli('sessions', db='postgres//db.example.com/app', cwd=folder), 'nor the path of a SQLite file')
    assert sorted(path.name for path in folder.iterdir() if path.suffix == '.db') == ['sessions.db']


@pytest.mark.slow
def test_the_entry_point_fails_in_one_line_in_a_new_process(tmp_path: Path) -> None:
    # The exit codes and the one line on stderr are what a shell script sees, not only what CliRunner reports.
    fails(spawn('--db', 'nonsense', 'sessions', cwd=tmp_path), "Not a database URL: 'nonsense'")
    usage = spawn('history', cwd=tmp_path)
    assert usage.returncode == 2 and "Missing argument 'ID'" in usage.stderr and not usage.stdout


async def _upgrade(url: str, revision: str) -> None:
    def upgrade(connection: Connection) -> None:
        config = Config()
        config.set_main_option('script_location', str(migrations_dir()))
        config.attributes['connection'] = connection
        command.upgrade(config, revision)

    store = SessionStore(url, migrate=False)
    try:
        async with store.engine.begin() as connection:
            await connection.run_sync(upgrade)
    finally:
        await store.close()


async def _stamp(url: str, revision: str) -> None:
    store = SessionStore(url, migrate=False)
    try:
        async with store.engine.begin() as connection:
            await connection.execute(text('UPDATE alembic_version SET version_num = :v'), {'v': revision})
    finally:
        await store.close()


def test_a_database_needing_migration_says_so_and_migrate_fixes_it(new_database: NewDatabase, tmp_path: Path) -> None:
    empty, older = new_database(empty=True), new_database(empty=True)
    newer = new_database()  # at head, then stamped with a revision no release has
    for url in (empty, older):
        if url.startswith('sqlite'):
            Path(url.split('///', 1)[1]).touch()  # an existing, empty SQLite file
    head = head_revision()

    async def prepare() -> None:
        await _upgrade(older, '0001')
        await _stamp(newer, 'f00dfeed')

    asyncio.run(prepare())

    refused = cli_many(
        ['--db', empty, 'sessions'], ['--db', older, 'sessions'], ['--db', newer, 'sessions'], cwd=tmp_path
    )
    fails(refused[0], 'is empty', 'session-store migrate')
    if head != '0001':
        fails(refused[1], 'at schema revision 0001, older than', 'session-store migrate')
    newer_said = fails(
        refused[2], 'f00dfeed', 'does not know', 'a newer session-store wrote it', 'Upgrade session-store'
    )

    assert f'Created the session-store schema (revision {head})' in ok(cli('migrate', db=empty, cwd=tmp_path))
    upgraded = ok(cli('migrate', db=older, cwd=tmp_path))
    assert (f'from schema revision 0001 to {head}' if head != '0001' else 'nothing to do') in upgraded
    assert 'nothing to do' in ok(cli('migrate', db=older, cwd=tmp_path))
    # `migrate` can't go back from a revision it doesn't know: it says so as the read commands do, in the same line.
    assert fails(cli('migrate', db=newer, cwd=tmp_path)) == newer_said
    for url in (empty, older):
        assert 'No sessions' in ok(cli('sessions', db=url, cwd=tmp_path))


# Help


def test_every_command_has_help() -> None:
    runner = CliRunner()
    top = runner.invoke(main, ['--help'])
    assert top.exit_code == 0 and 'SESSION_STORE_URL' in top.output
    context = click.Context(main)  # the commands load on demand: look each one up
    commands = {name: command for name in main.list_commands(context) if (command := main.get_command(context, name))}
    visible = [name for name, command in commands.items() if not command.hidden]
    assert set(visible) == {
        'branches', 'chat', 'compact', 'context', 'delete', 'demo', 'encrypt', 'eval', 'export', 'fork', 'history',
        'import', 'keygen', 'migrate', 'prune', 'rekey', 'rewind', 'search', 'serve', 'sessions', 'summaries',
        'switch', 'vacuum',
    }  # fmt: skip
    for name in visible:
        assert name in top.output
        shown = runner.invoke(main, [name, '--help'])
        assert shown.exit_code == 0, shown.output
        summary = (commands[name].help or '').split('\n')[0]
        assert summary and summary.split(':')[0] in ' '.join(shown.output.split())
        # They alone touch no database of the user's: the eval runs in a temporary one of its own.
        assert ('--db' in shown.output) is (name not in ('keygen', 'eval'))


def test_the_help_lists_each_command_by_its_own_help_without_importing_it() -> None:
    # `--help` lists the commands from `COMMANDS`, importing none: each entry must say what the command itself does.
    context = click.Context(main)
    for name, listed in COMMANDS.items():
        command = main.get_command(context, name)
        assert command is not None, name
        assert command.callback is not None and command.callback.__module__ == f'session_store.cli{listed.module}'
        assert listed.summary == ('' if command.hidden else ' '.join((command.help or '').split('\n\n')[0].split()))
    assert sorted(main.commands) == sorted(COMMANDS)  # every command registered is listed there
