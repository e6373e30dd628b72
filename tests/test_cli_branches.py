"""The branch commands (`branches`, `history --branch`, `rewind`, `switch`, `fork`) and chat's slash commands.

In-process through click's `CliRunner`, on both backends: each test builds a branched session with
the library, runs the commands, and checks what they print and what the store holds afterwards.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from click.testing import CliRunner, Result
from pydantic_ai.messages import ModelMessage

from session_store import SessionStore
from session_store.cli import main
from session_store.results import Branch
from testkit.scripted import ParallelToolAssistant, scripted_agent
from testkit.templates import NewDatabase
from tests._cli import fails, ok
from tests._demo import twenty_four_demo_turns
from tests._web import web_client

T = TypeVar('T')


pytestmark = pytest.mark.usefixtures('wide_console')


def invoke(url: str, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ['--db', url, *args], input=stdin)


def on_store(url: str, work: Callable[[SessionStore], Awaitable[T]]) -> T:
    """`work` against a store on `url`, opened and closed around it."""

    async def go() -> T:
        async with SessionStore(url) as store:
            return await work(store)

    return asyncio.run(go())


def history(url: str, session_id: str = 'demo', branch: str | int | None = None) -> list[ModelMessage]:
    return on_store(url, lambda store: store.history(session_id, branch=branch))


def branches(url: str, session_id: str = 'demo') -> list[Branch]:
    async def work(store: SessionStore) -> list[Branch]:
        return await (await store.session(session_id)).branches()

    return on_store(url, work)


async def build_tree(url: str) -> None:
    """`demo` under scope `u1`: branch 1 holds turns 0-2 (12 messages); branch 2, active, rewound to 8, turns 100-101.

    Each turn is 4 messages: the prompt, three parallel tool calls, their returns, the answer. Another session,
    `first`, was made before it, so that its branches' tips (database-wide ids) are not their numbers.
    """
    async with SessionStore(url) as store:
        await store.session('first', scope='u2')
        session = await store.session('demo', scope='u1')
        agent = scripted_agent(ParallelToolAssistant())
        for turn in range(3):
            await session.run(agent, f'Turn M{turn}')
        await session.rewind(8)
        for turn in (100, 101):
            await session.run(agent, f'Turn M{turn}')


@pytest.fixture
def tree(new_database: NewDatabase) -> str:
    """A database of the test's own holding `build_tree`'s session: a copy of one it was built in once for the run."""
    return new_database(fill=build_tree)


def test_branches_shows_the_tree_with_the_active_branch_marked(tree: str) -> None:
    lines = ok(invoke(tree, 'branches', 'demo')).splitlines()
    assert lines[0] == "Session 'demo': 2 branches; branch 2 is active (●)"
    first = next(line for line in lines[1:] if 'branch 1' in line)
    second = next(line for line in lines[1:] if 'branch 2' in line)
    assert '12 messages · from the start' in first and 'last prompt "Turn M2"' in first and '●' not in first
    assert '● branch 2 (active)  16 messages · forks at 8' in second and 'last prompt "Turn M101"' in second
    assert lines.index(first) < lines.index(second)
    assert second.index('●') > first.index('branch 1'), 'the branch sits under the one it forked from'
    assert any('session-store history demo --branch N' in line for line in lines)
    assert any('session-store switch demo N' in line for line in lines)

    # Scripts get each branch's tip as well, the opaque id that stays the same whatever else the database holds.
    listed = json.loads(ok(invoke(tree, 'branches', 'demo', '--scope', 'u1', '--json')))
    first, second = (b.tip for b in branches(tree))
    assert [{k: v for k, v in b.items() if k != 'updated_at'} for b in listed] == [
        {
            'tip': first,
            'number': 1,
            'active': False,
            'message_count': 12,
            'forked_at': None,
            'parent': None,
            'preview': 'Turn M2',
        },
        {
            'tip': second,
            'number': 2,
            'active': True,
            'message_count': 16,
            'forked_at': 8,
            'parent': first,
            'preview': 'Turn M101',
        },
    ]
    assert first != '1', 'the tree is built after another session, so its tips are not its numbers'
    assert [b['updated_at'] for b in listed] == [b.updated_at.isoformat() for b in branches(tree)]


@pytest.mark.slow_on_postgresql
def test_history_reads_a_branch_instead_of_the_active_path(tree: str) -> None:
    active = ok(invoke(tree, 'history', 'demo', '--all'))
    assert '[8] user: Turn M100' in active and 'Turn M2' not in active
    other = ok(invoke(tree, 'history', 'demo', '--branch', '1', '--offset', '8'))
    assert other.splitlines()[0] == '[8] user: Turn M2'
    assert other.splitlines()[-1] == '[11] assistant: Answer M2-a done'
    paged = ok(invoke(tree, 'history', 'demo', '--branch', '1', '--limit', '4'))
    assert 'session-store history demo --offset 4 --limit 4 --branch 1' in paged

    document = json.loads(ok(invoke(tree, 'history', 'demo', '--branch', '1', '--all', '--json')))
    assert (document['branch'], len(document['messages']), document['next_offset']) == (1, 12, None)
    assert json.loads(ok(invoke(tree, 'history', 'demo', '--json')))['branch'] is None
    # By its tip, as a script keeps it: the same path, from the command and from the store.
    tip = branches(tree)[0].tip
    assert ok(invoke(tree, 'history', 'demo', '--tip', tip, '--offset', '8')) == other
    by_tip = ok(invoke(tree, 'history', 'demo', '--tip', tip, '--limit', '4'))
    assert f'session-store history demo --offset 4 --limit 4 --tip {tip}' in by_tip
    assert history(tree, branch=tip) == history(tree, branch=1) and len(history(tree, branch=1)) == 12

    fails(
        invoke(tree, 'history', 'demo', '--branch', '99'),
        "Session 'demo' has no branch 99: it has branches numbered 1 to 2",
    )
    fails(invoke(tree, 'history', 'demo', '--tip', 'abc'), "no branch 'abc'")
    fails(invoke(tree, 'history', 'demo', '--tip', '1'), "no branch '1'")  # the other session's branch
    fails(invoke(tree, 'history', 'demo', '--branch', '1', '--tip', tip), 'by its number or by --tip, not both')


def test_rewind_switch_and_fork_change_the_store_and_say_so(tree: str) -> None:
    before = history(tree)
    said = ok(invoke(tree, 'rewind', 'demo', '12', '--scope', 'u1'))
    assert said == "Rewound 'demo' to 12 messages; the 4 after them stay as branch 2.\n"
    assert history(tree) == before[:12]
    tips = [b.tip for b in branches(tree)]
    assert [(b.number, b.message_count, b.forked_at, b.active) for b in branches(tree)] == [
        (1, 12, None, False),
        (2, 16, 8, False),
        (3, 12, 12, True),
    ]
    assert ok(invoke(tree, 'rewind', 'demo', '12')) == (
        "'demo' holds 12 messages on its active path already; nothing to rewind.\n"
    )

    said = ok(invoke(tree, 'switch', 'demo', '2'))
    assert said == "Switched 'demo' to branch 2: 16 messages, forked at 8.\n"
    assert history(tree) == before
    # Nothing ran from the rewind: its empty branch went when the path left it, and the others kept their numbers.
    assert [(b.tip, b.number, b.active) for b in branches(tree)] == [(tips[0], 1, False), (tips[1], 2, True)]
    assert (
        ok(invoke(tree, 'switch', 'demo', '2')) == "Branch 2 is the active path of 'demo' already; nothing changed.\n"
    )
    assert ok(invoke(tree, 'switch', 'demo', '--tip', tips[0])) == "Switched 'demo' to branch 1: 12 messages.\n"
    assert history(tree) == history(tree, branch=1)

    said = ok(invoke(tree, 'fork', 'demo', '--at', '8', '--to', 'copy'))
    assert said == "Forked 'demo' at 8 messages into 'copy' (scope 'u1').\n"
    assert history(tree, 'copy') == history(tree)[:8]
    sessions = {s['session_id']: s for s in json.loads(ok(invoke(tree, 'sessions', '--json')))}
    assert (sessions['copy']['scope'], sessions['copy']['message_count']) == ('u1', 8)
    assert sessions['demo']['message_count'] == 12


@pytest.mark.slow_on_postgresql
def test_export_and_import_carry_every_branch(tree: str, tmp_path: Path) -> None:
    path = tmp_path / 'demo.jsonl'
    exported = invoke(tree, 'export', 'demo', '--scope', 'u1', '-o', str(path))
    ok(exported)
    assert "Exported 'demo': 2 branches, 20 messages and 0 summaries" in exported.stderr
    imported = ok(invoke(tree, 'import', str(path), '--session-id', 'copy'))
    assert "Imported 'copy'" in imported and '2 branches, 20 messages and 0 summaries' in imported
    source, copy = branches(tree), branches(tree, 'copy')
    assert [(b.number, b.active, b.message_count, b.forked_at, b.preview) for b in copy] == [
        (b.number, b.active, b.message_count, b.forked_at, b.preview) for b in source
    ]
    for theirs, mine in zip(source, copy, strict=True):
        assert history(tree, 'copy', mine.tip) == history(tree, 'demo', theirs.tip)
    assert ok(invoke(tree, 'branches', 'copy')).splitlines()[0] == "Session 'copy': 2 branches; branch 2 is active (●)"


@pytest.mark.slow_on_postgresql
def test_bad_ids_positions_and_tips_fail_in_one_line_and_change_nothing(tree: str) -> None:
    before, known = history(tree), branches(tree)
    fails(invoke(tree, 'rewind', 'demo', '99'), 'position must be 0 to 16', 'got 99')
    fails(invoke(tree, 'rewind', 'demo', '10'), 'Rewinding to position 10 would separate tool call')
    fails(invoke(tree, 'rewind', 'demo', '1', '--scope', 'other'), "No session 'demo' under scope 'other'")
    fails(
        invoke(tree, 'switch', 'demo', '99'),
        "Session 'demo' has no branch 99; it has branches 1 to 2 (see `branches`).",
    )
    fails(invoke(tree, 'switch', 'demo', '--tip', '1'), "Session 'demo' has no branch with tip '1'")
    fails(invoke(tree, 'switch', 'demo'), 'Say which branch: its number N')
    fails(invoke(tree, 'fork', 'demo', '--at', '99', '--to', 'copy'), 'at must be 0 to 16')
    fails(invoke(tree, 'fork', 'demo', '--at', '10', '--to', 'copy'), 'Forking at position 10 would separate tool call')
    fails(invoke(tree, 'fork', 'demo', '--at', '8', '--to', 'demo'), "Session 'demo' already exists")
    fails(invoke(tree, 'branches', 'nosuch'), "No session 'nosuch'")
    fails(invoke(tree, 'branches', 'demo', '--scope', 'other'), "No session 'demo' under scope 'other'")
    for write in (['rewind', 'nosuch', '0'], ['switch', 'nosuch', '1'], ['fork', 'nosuch', '--at', '0', '--to', 'x']):
        fails(invoke(tree, *write), "No session 'nosuch'")
    assert history(tree) == before and branches(tree) == known
    assert [s['session_id'] for s in json.loads(ok(invoke(tree, 'sessions', '--json')))] == ['demo', 'first']
    missing = CliRunner().invoke(main, ['--db', tree, 'fork', 'demo', '--to', 'copy'])
    assert missing.exit_code == 2 and "Missing option '--at'" in missing.output


@pytest.mark.slow_on_postgresql
def test_chat_rewinds_regenerates_lists_and_switches_between_lines(db_url: str) -> None:
    def reply(prompt: str) -> str:
        return f'assistant: (test model, offline) You said: {prompt}'

    typed = '\n'.join(
        [
            'hello',
            'second',
            '/regenerate',  # answers 'second' again: the old answer stays as branch 1
            '/branches',
            '/rewind 2',  # back to after 'hello'; branch 2 (the regenerated answer) stays
            '/rewind 99',
            '/switch 7',
            '/frob',
            'third',
            '/switch 1',
            '/branches',
        ]
    )
    ok(invoke(db_url, 'chat', 'before', '--model', 'test', stdin='hi\n'))  # so that the tips are not the numbers
    result = invoke(db_url, 'chat', 'c', '--model', 'test', stdin=typed + '\n')
    lines = ok(result).splitlines()
    assert lines[:3] == [f'[1] {reply("hello")}', f'[3] {reply("second")}', f'[3] {reply("second")}']
    assert lines[3] == "Session 'c': 2 branches; branch 2 is active (●)"
    assert '  branch 1  4 messages · from the start' in lines[4] and 'last prompt "second"' in lines[4]
    assert '● branch 2 (active)  4 messages · forks at 3' in lines[5]
    assert lines[6:10] == [
        "Rewound 'c' to 2 messages; the 2 after them stay as branch 2.",
        f'[3] {reply("third")}',
        "Switched 'c' to branch 1: 4 messages.",
        "Session 'c': 3 branches; branch 1 is active (●)",
    ]
    assert [line.strip() for line in result.stderr.splitlines()] == [
        'Error: position must be 0 to 2 (the active path length); got 99.',
        "Error: Session 'c' has no branch 7; it has branches 1 to 3 (see `branches`).",
        "Not a command: '/frob'. Commands: /rewind N, /regenerate, /compact [FOCUS], /branches, /switch N, /quit.",
    ]

    assert [(b.number, b.message_count, b.forked_at, b.active, b.preview) for b in branches(db_url, 'c')] == [
        (1, 4, None, True, 'second'),
        (2, 4, 3, False, 'second'),
        (3, 4, 2, False, 'third'),
    ]
    assert branches(db_url, 'c')[0].tip != '1'
    third = ok(invoke(db_url, 'history', 'c', '--branch', '3')).splitlines()
    assert third == ['[0] user: hello', f'[1] {reply("hello")}', '[2] user: third', f'[3] {reply("third")}']


def test_chat_regenerate_without_a_prompt_says_so_and_goes_on(db_url: str) -> None:
    result = invoke(db_url, 'chat', 'empty', '--model', 'test', stdin='/regenerate\n/rewind\nhi\n')
    assert ok(result).splitlines() == ['[1] assistant: (test model, offline) You said: hi']
    assert result.stderr.splitlines() == [
        "Error: Session 'empty' has no user prompt to answer again.",
        "Not a command: '/rewind'. Commands: /rewind N, /regenerate, /compact [FOCUS], /branches, /switch N, /quit.",
    ]
    assert len(history(db_url, 'empty')) == 2


def test_branches_and_history_of_a_branch_leave_a_sqlite_file_as_it_was(tmp_path: Path) -> None:
    url = f'sqlite+aiosqlite:///{tmp_path / "sessions.db"}'

    async def build(store: SessionStore) -> None:
        session = await store.session('demo')
        await session.run(scripted_agent(ParallelToolAssistant()), 'Turn M0')
        await session.rewind(0)

    on_store(url, build)
    before = {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in tmp_path.iterdir()}
    assert 'branch 1' in ok(invoke(url, 'branches', 'demo'))
    assert '[0] user: Turn M0' in ok(invoke(url, 'history', 'demo', '--branch', '1'))
    after = {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in tmp_path.iterdir()}
    assert after['sessions.db'] == before['sessions.db'], 'reading the branches changed the database file'
    assert not (tmp_path / 'sessions.db-wal').exists() or (tmp_path / 'sessions.db-wal').stat().st_size == 0


async def summarized_then_rewound(url: str) -> None:
    """`demo` (scope `demo`): 24 demo turns (96 messages, two summaries), rewound to 8 (one branch each way)."""
    await twenty_four_demo_turns(url)
    async with SessionStore(url) as store:
        await (await store.session('demo', scope='demo')).rewind(8)


def test_every_listing_counts_the_active_paths_messages_and_summaries(new_database: NewDatabase) -> None:
    # Issue 47: after an edit `sessions` said "10 messages, 3 summaries" (the active path's messages, every branch's
    # summaries), where `context` said the window had no summary and the browser "10 messages, 0 summaries".
    url = new_database(fill=summarized_then_rewound)

    def counts() -> set[tuple[int, int]]:
        """(messages, summaries) as each view gives them: `sessions` as text and JSON, the browser's list and page."""
        [row] = [line.split('│') for line in ok(invoke(url, 'sessions')).splitlines() if ' demo ' in line]
        [listed] = json.loads(ok(invoke(url, 'sessions', '--json')))
        with web_client(url, read_only=True) as client:
            [info] = client.get('/api/sessions').json()['sessions']
            page = client.get('/api/sessions/demo').json()
        return {
            (int(row[3]), int(row[4])),
            (listed['message_count'], listed['summary_count']),
            (info['message_count'], info['summary_count']),
            (page['message_count'], page['summary_count']),
        }

    assert counts() == {(8, 0)}
    assert 'no summaries on its active path: 2 more summaries stored on its other branches' in ok(
        invoke(url, 'summaries', 'demo')
    )
    ok(invoke(url, 'switch', 'demo', '1'))
    assert counts() == {(96, 2)}
