"""Defects of the `session-store` command, each pinned in-process through click's `CliRunner`."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from sqlalchemy.exc import OperationalError

from session_store import SessionStore
from session_store.cli import main
from session_store.cli._demo_run import run_turns
from session_store.cli._runtime import Settings, open_store
from testkit.templates import NewDatabase
from tests._cli import fails, ok

REVIEW = (
    ['sessions'],
    ['history', 'demo'],
    ['summaries', 'demo'],
    ['context', 'demo'],
    ['search', 'ORDER-1042'],
    ['export', 'demo'],
)
"""Every command that only reads, with arguments that find something in the demo session."""


pytestmark = pytest.mark.usefixtures('wide_console')


@pytest.fixture(scope='module')
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file holding 12 turns of the demo conversation (48 messages, a summary), closed cleanly."""
    path = tmp_path_factory.mktemp('demo') / 'sessions.db'
    asyncio.run(run_turns(f'sqlite+aiosqlite:///{path}', 'demo', 0, 12))
    assert sorted(p.name for p in path.parent.iterdir()) == ['sessions.db'], 'a closed store leaves no WAL files'
    return path


@pytest.fixture
def db(demo_file: Path, tmp_path: Path) -> Path:
    """A fresh copy of the demo database, alone in its own directory."""
    folder = tmp_path / 'media'
    folder.mkdir()
    return Path(shutil.copy(demo_file, folder / 'sessions.db'))


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Each file in `folder` with its content's digest and modification time."""
    return {
        path.name: (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(folder.iterdir())
    }


# `search X --session nosuch` said "no matches" with exit 0


def test_search_in_an_unknown_session_fails_in_one_line(db: Path) -> None:
    url = f'sqlite:///{db}'
    fails(invoke('--db', url, 'search', 'ORDER-1042', '--session', 'nosuch'), "No session 'nosuch'")
    fails(
        invoke('--db', url, 'search', 'ORDER-1042', '--session', 'demo', '--scope', 'other'),
        "No session 'demo' under scope 'other'",
    )
    found = invoke('--db', url, 'search', 'ORDER-1042', '--session', 'demo')
    assert found.exit_code == 0 and 'demo [24] user: Hi, where is my order ORDER-1042?' in found.stdout


# Search showed the agent's instructions (and a system prompt) as `user:` words


async def shop_conversation(url: str) -> None:
    """`shop`: two runs of an agent with instructions, the first request also holding a system prompt."""
    async with SessionStore(url) as store:
        session = await store.session('shop')
        agent = Agent(
            TestModel(custom_output_text='It ships today.'),
            instructions='You answer customers of an online shop.',
            system_prompt='Shop policy: refunds within 30 days.',
        )
        for prompt in ('Where is my order ORD-1042?', 'Can the online shop refund it?'):
            await session.run(agent, prompt)


def test_search_says_who_said_what_it_found(new_database: NewDatabase) -> None:
    url = new_database(fill=shop_conversation)

    def hits(text: str) -> list[str]:
        return [line for line in ok(invoke('--db', url, 'search', text)).splitlines() if line.startswith('shop [')]

    # Every request carries the instructions: found there, they are shown as instructions, never as the user's.
    assert hits('answer customers') == [
        'shop [2] instructions: You answer customers of an online shop.',
        'shop [0] instructions: You answer customers of an online shop.',
    ]
    # A request whose prompt holds the text too shows the prompt; the others, where the instructions hold it.
    assert hits('online shop') == [
        'shop [2] user: Can the online shop refund it?',
        'shop [0] instructions: You answer customers of an online shop.',
    ]
    assert hits('refunds within') == ['shop [0] system: Shop policy: refunds within 30 days.']
    assert hits('ORD-1042') == ['shop [0] user: Where is my order ORD-1042?']
    assert hits('ships today') == ['shop [3] assistant: It ships today.', 'shop [1] assistant: It ships today.']


# Review commands failed on read-only media ("unable to open database file")


def test_review_commands_leave_the_database_file_as_it_was(db: Path) -> None:
    before = snapshot(db.parent)
    for args in REVIEW:
        result = invoke('--db', f'sqlite:///{db}', *args)
        assert result.exit_code == 0, (args, result.output)
    after = snapshot(db.parent)
    assert after['sessions.db'] == before['sessions.db'], 'reading changed the database file'
    assert 'sessions.db-journal' not in after
    # SQLite's read-only WAL reader may leave its shared-memory index behind, but never log anything.
    assert not (db.parent / 'sessions.db-wal').exists() or (db.parent / 'sessions.db-wal').stat().st_size == 0


@pytest.fixture
def read_only_media(db: Path) -> Iterator[Path]:
    """`db` in a directory nobody can create files in, as on read-only media.

    Root ignores permission bits, so as root the directory is made immutable (`chattr +i`), which
    binds root too; the fixture checks that a new file really can't be made there.
    """
    folder = db.parent
    if os.geteuid() == 0:
        made = subprocess.run(['chattr', '+i', str(folder)], capture_output=True, check=False)
        if made.returncode != 0:
            pytest.skip(f'cannot make a directory immutable here: {made.stderr.decode().strip()}')
    else:
        folder.chmod(0o555)
    try:
        with pytest.raises(OSError):
            (folder / 'probe').touch()
        yield db
    finally:
        if os.geteuid() == 0:
            subprocess.run(['chattr', '-i', str(folder)], check=True)
        else:
            folder.chmod(0o755)


@pytest.mark.spawns('chattr', reason='an immutable directory as root: two chattr calls of a few ms, no Python')
def test_review_commands_read_a_database_on_read_only_media(read_only_media: Path) -> None:
    url = f'sqlite:///{read_only_media}'
    before = snapshot(read_only_media.parent)
    outputs = {args[0]: invoke('--db', url, *args) for args in REVIEW}
    for name, result in outputs.items():
        assert result.exit_code == 0, (name, result.output)
    assert 'provider tokens in/out' in outputs['sessions'].stdout
    assert outputs['history'].stdout.startswith('[0] system: You are the support agent')
    assert '#1  messages 0-' in outputs['summaries'].stdout
    assert 'with a summary of the rest' in outputs['context'].stdout
    assert 'demo [24] user: Hi, where is my order ORDER-1042?' in outputs['search'].stdout
    assert json.loads(outputs['export'].stdout.splitlines()[0])['kind'] == 'session'
    assert snapshot(read_only_media.parent) == before, 'no WAL, shared-memory or journal file, and no change'

    # Writing there fails in one line that says why, before anything is changed.
    fails(invoke('--db', url, 'delete', 'demo', '--yes'), 'Cannot open the database', 'read-only')
    assert snapshot(read_only_media.parent) == before


# A new database in a read-only directory said only "unable to open database file"


@pytest.mark.spawns('chattr', reason='an immutable directory as root: two chattr calls of a few ms, no Python')
def test_a_new_database_where_no_file_can_be_made_says_why(read_only_media: Path, tmp_path: Path) -> None:
    exported = tmp_path / 'demo.jsonl'
    assert invoke('--db', f'sqlite:///{read_only_media}', 'export', 'demo', '-o', str(exported)).exit_code == 0
    folder = read_only_media.parent
    new = folder / 'new.db'
    before = snapshot(folder)
    for args in (['migrate'], ['import', str(exported)], ['chat', 'talk', '--model', 'test']):
        fails(
            invoke('--db', str(new), *args),
            f'Cannot open the database at {new}: the directory {folder} is read-only for this user',
        )
    assert snapshot(folder) == before
    # A directory that isn't there: SQLite says the same, and so is told apart.
    nowhere = tmp_path / 'nowhere' / 'new.db'
    for args in (['migrate'], ['import', str(exported)]):
        fails(invoke('--db', str(nowhere), *args), f'the directory {nowhere.parent} does not exist')
    assert not nowhere.parent.exists()


def test_the_store_a_review_opens_refuses_writes(db: Path) -> None:
    async def write_through_review_store() -> None:
        async with open_store(Settings(f'sqlite:///{db}')) as store:
            with pytest.raises(OperationalError, match='readonly'):
                await store.delete('demo')
            assert len(await store.history('demo')) == 48

    before = snapshot(db.parent)['sessions.db']
    asyncio.run(write_through_review_store())
    assert snapshot(db.parent)['sessions.db'] == before


def test_a_database_that_cannot_be_read_says_why(db: Path) -> None:
    fails(invoke('--db', f'sqlite:///{db.parent}', 'history', 'demo'), 'is a directory, not a database file')
    (db.parent / 'notes.txt').write_text('not a database\n')
    fails(invoke('--db', f'sqlite:///{db.parent / "notes.txt"}', 'sessions'), 'file is not a database')

    # No read permission: root reads any file, so only another user can see this refusal for real.
    if os.geteuid() != 0:
        db.chmod(0)
        for args in REVIEW:
            fails(invoke('--db', f'sqlite:///{db}', *args), f'{db} is not readable by this user')


# An in-memory URL was told to run `migrate`


@pytest.mark.parametrize('url', ['sqlite+aiosqlite://', 'sqlite://', 'sqlite:///:memory:'])
def test_an_in_memory_database_is_not_told_to_migrate(url: str) -> None:
    for args in REVIEW:
        line = fails(invoke('--db', url, *args), 'in-memory SQLite database', 'nothing to read')
        assert 'migrate' not in line and 'No database file' not in line


# Errors: click's usage errors exit 2 with a usage block; everything else exits 1 in one line


def test_usage_errors_keep_clicks_convention_and_other_errors_are_one_line(db: Path, tmp_path: Path) -> None:
    missing = invoke('--db', f'sqlite:///{db}', 'history')
    assert missing.exit_code == 2 and 'Usage: ' in missing.stderr and "Missing argument 'ID'" in missing.stderr
    fails(invoke('--db', f'sqlite:///{db}', 'export', 'demo', '-o', str(tmp_path / 'no' / 'x.jsonl')), 'Could not open')
    fails(invoke('--db', f'sqlite:///{db}', 'history', 'nosuch'), "No session 'nosuch'")
    fails(invoke('--db', f'sqlite:///{tmp_path / "typo.db"}', 'sessions'), 'No database file at')
    assert not (tmp_path / 'typo.db').exists()


# Token counters named for what they count


@pytest.mark.slow  # the demo starts a second process
def test_token_counters_say_what_they_count(db: Path, tmp_path: Path) -> None:
    listing = invoke('--db', f'sqlite:///{db}', 'sessions')
    assert listing.exit_code == 0 and 'provider tokens in/out' in listing.stdout

    demo_db = tmp_path / 'demo.db'
    report = invoke('--db', f'sqlite:///{demo_db}', 'demo', '--turns', '4')
    assert report.exit_code == 0, report.output
    assert 'tokens sent to the model (counted)' in report.stdout
    assert 'not the usage a provider reports' in report.stdout
    suggested = f'session-store history demo --limit 20 --db sqlite:///{demo_db}'
    assert suggested in report.stdout, 'the suggested commands name the database'
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith('demo.db')) == ['demo.db'], (
        'the demo tidies its WAL files away'
    )
