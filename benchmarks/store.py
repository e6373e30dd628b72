"""Session storage cost of `session_store.SessionStore` against the OpenAI Agents SDK's `SQLAlchemySession`,
on SQLite and on PostgreSQL.

Run it with one command from the repo root (the project venv is fine, so is a bare `python3`):

    python benchmarks/store.py
    python benchmarks/store.py --turns 100 --sizes 100 10000 --repeats 5     # a quicker pass
    python benchmarks/store.py --backends postgresql                          # one backend
    python benchmarks/store.py --quick          # tiny sizes, one repeat, in seconds: does it run, roughly how

`--quick` sets the defaults to 8 turns, sizes 100 and 1,000, one repeat of everything; flags given with it
win. Its figures are noisy and only show that every contender runs and roughly how they compare.

The peer is never a dependency of this project. When `openai-agents[sqlalchemy]` isn't importable, the
script re-executes itself in the private venv `<repo>/.bench-venv` (gitignored), made or brought up to
date first with this project (editable) and every benchmark's peer: see `_bench_env.py`. The peer never
calls a model: no API keys, no network beyond pip. When that venv can't be made (no package index), the
script says so on its first lines (`PEERS UNAVAILABLE: ...`) and measures ours alone.

Backends, each library with its own defaults in its own database:
- SQLite: an aiosqlite file in a temporary directory.
- PostgreSQL (asyncpg): a fresh database on a real server from `testkit/postgres.py` (the server named by
  `$SESSION_STORE_TEST_PG_URL`, else a throwaway local cluster when PostgreSQL is installed; it runs with
  fsync off, for both libraries alike), dropped at the end. Skipped, saying why, when there is no server.
  After an archive is built, ANALYZE refreshes the planner's statistics, as autovacuum would.

The conversation is made of tool-using turns of 4 messages: a user request, a response calling a tool,
the request returning its result, a text answer. The peer stores the same turn as 4 OpenAI Responses
input items (a user message, a `function_call`, a `function_call_output`, an assistant message).

1. Append throughput, messages (items) stored per second over `--turns` turns on one session, on a
   fresh database each time, median of 3 (of 1 with `--quick`):
   - ours through an agent: `session.run(agent, prompt)` with a pydantic-ai `Agent` on the tests'
     scripted `FunctionModel` (one turn per run), so the agent's own work is included. The store's
     processor is a sliding window (trigger 100 messages, keep 20), the steady state of a long session.
     Before each run, untimed, the session's window is read and the same agent runs on it alone, with
     the same window capability and nothing stored: the difference is what the session adds per run.
   - storage alone: our store's own write of the turn's 4 messages inside `session.run` (the scripted
     agent of `_scripted_turn.py`, storing the same 4 messages the peer gets as items; the window sliding
     at 100 to keep the last 20), timed by the store's OpenTelemetry span `session_store.store_run`,
     against the peer's `add_items(...)` of the 4 items. "Store only" times just that; "read + store"
     adds what a run reads first: our `session_store.load_window` span (summary + kept tail), the peer's
     `get_items()` (all items: what its Runner loads by default). The spans are what users' tracing
     sees; the agent's own work between them is not counted (it is in the first figure). Earlier
     versions timed a call of the store's private run cycle instead; the spans' figures replace it.
     On SQLite the peer runs twice, with its defaults (WAL, `synchronous=FULL`: each commit is fsynced)
     and with `synchronous=NORMAL`, the setting ours uses: equal durability. On PostgreSQL durability is
     the server's, the same for both.
     The contenders append turn by turn in alternation, so load from other processes on the machine
     falls on each alike.
   Target (issue 19), printed as a ratio, met or MISSED: our `store_run` span >= 2 x the peer's `add_items`
   at equal durability on SQLite (the peer with `synchronous=NORMAL`), >= 1.5 x on PostgreSQL. The search
   index stays in our write transaction (a stored message is searchable at once); the earlier 3 x is
   withdrawn.

2. Opening a session and building its window, with 100, 10k and 100k archived messages. Ours holds the
   archive of a summarizing session: a summary chain (one summary per 80 messages, each extending the
   last) whose latest summary covers all but the last 20 messages, and `window_start` there; it is
   built in memory as a `SessionExport` and stored with the public `store.import_(...)` (`_seeding.py`:
   one transaction, the messages inserted in batches). The peer's archive is filled with `add_items`
   in batches of 5,000 items. Every archive is built first; then the median over `--repeats`, every
   size and figure taken in turns (so the growth with archive size is measured under the same load):
   - first open: a new `SessionStore(url)` (engine, schema revision check) + `await store.session(id)`
     + `await session.context()` (the `load_window` a run starts with); the peer: a new engine +
     `SQLAlchemySession(id, engine=..., create_tables=True)` + `await session.get_items()`. Closing
     the store or disposing of the engine is not timed.
   - warm: `store.session(id)` + `session.context()` on an open store; the peer's `get_items()` on an
     open session.
   The peer is measured both with `get_items()` (all items, what its Runner loads) and with
   `get_items(limit=20)` (the tail alone, a like-for-like read without the summary).
   Target, printed, never asserted: ours at the largest size costs at most 2 x ours at the smallest.

3. Branched against linear, ours alone (the peer has no branches): opening a session and building its
   window, first open and warm as in 2, when the active path crosses 10 branch points in a tree of 100k
   archived messages, against a linear session whose active path has the same length (10k messages), in
   the same database. The tree is what 10 rewinds leave: each of the path's first 10 segments runs on for
   9,000 messages past the point where the next one forks from it, so the 90,000 messages beyond the path
   lie in 10 branches off it. It is built in memory as a session grows one (`_seeding.Archive`: messages
   and summaries appended, then a rewind at each fork point, as `session.rewind` leaves the tree) and
   stored with `store.import_(...)`; "built in" is that import. Both sessions carry the summary chain of 2 (one
   summary per 80 messages along every path, the active path's latest 20 messages before its end), so
   both windows are the same summary + 20-message tail: what differs is the tree walked to find them.
   With `--quick`: 1,000 messages in the tree, a path of 400 crossing 3 branch points.
   Target, printed, never asserted: branched at most 2 x linear, first open and warm.

4. The hot path, as issue 11 measures it: one session of 2,000 messages each (ours with a sliding window
   100/20 and the tests' scripted agent), 31 rounds (5 with `--quick`) after one untimed, the contenders in
   turn within each round, medians:
   - warm window read: `session.context()` on an open store, against the peer's `get_items(limit=20)`;
   - first open after restart: a new `SessionStore` + `store.session(id)` + `session.context()`, against a
     new engine + `SQLAlchemySession(...)` + `get_items(limit=20)`. Each side's new engine compiles its SQL
     anew (SQLAlchemy's compiled cache belongs to an engine), as after a restart;
   - what the store adds to a run: `session.run(agent, prompt)` minus `agent.run(prompt)` on the same
     window with the same window capability and nothing stored, against the peer's
     `get_items(limit=20)` + `add_items(4 items)`.
   On SQLite the peer runs with `synchronous=NORMAL`, ours' setting (equal durability). The targets, each
   printed as a ratio, met or MISSED: warm read <= 1.0 x the peer's `get_items(limit=20)` (issue 19), first
   open <= 1.0 x the peer's, what the store adds to a run <= 0.15 x the peer's `get_items(limit=20)` +
   `add_items` on SQLite and <= 0.5 x on PostgreSQL (issue 28).

This file is the command: its arguments, the header, each backend's parts in order. The parts and what
they share live beside it, each module named for what it holds:
- `_store_conversation.py`: the tool-using turns in both libraries' formats, archives of them, token counts;
- `_store_contenders.py`: each backend's databases, the peer's engine and session, ours through the
  scripted agent, the archives filled with a summary chain, each side's first and warm opens, timed;
- `_store_measuring.py`: measures taken in turns, medians, comparisons and target lines;
- `_store_append.py` (1.), `_store_opening.py` (2.), `_store_branched.py` (3.), `_store_hot_path.py` (4.);
- `_seeding.py`: archives built in memory and stored with `store.import_` (public API only);
- `_store_spans.py`: the store's OpenTelemetry spans `load_window` and `store_run`, timed.
Nothing here reaches into the store's private modules (tests/test_packaging.py checks it).

Sanity checks (assertions): every append run stores exactly its messages; our window is the summary
plus the 20-message tail; the peer returns every item it was given; the tree has its branches where they
were made and holds every message written. Timings are printed, never asserted.
"""
# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import AGENTS_SQLALCHEMY, OUR_DIST, PEERS, distribution, ensure_environment

ensure_environment([AGENTS_SQLALCHEMY])

import argparse
import asyncio
import importlib.metadata
import time
from collections.abc import Sequence
from dataclasses import dataclass

from _bench_db import describe, postgres_server
from _bench_util import load_average, machine, size_label
from _store_append import append_benchmark, print_append
from _store_branched import (
    BRANCH_POINTS,
    QUICK_BRANCH_POINTS,
    QUICK_TREE,
    QUICK_TREE_PATH,
    TREE,
    TREE_PATH,
    Tree,
    branched_benchmark,
    print_branched,
)
from _store_contenders import Databases, PostgresDatabases, SqliteFiles
from _store_conversation import TAIL
from _store_hot_path import HOT_ROUNDS, QUICK_HOT_ROUNDS, hot_path_benchmark, print_hot_path
from _store_opening import opening_benchmark, print_opening
from sqlalchemy.engine import make_url

PEER_DIST = distribution(PEERS[AGENTS_SQLALCHEMY])

BACKENDS = ('sqlite', 'postgresql')
DEFAULT_TURNS = 250
DEFAULT_SIZES = (100, 10_000, 100_000)
DEFAULT_REPEATS = 11
APPEND_REPEATS = 3
QUICK_TURNS = 8
QUICK_SIZES = (100, 1_000)
QUICK_REPEATS = 1
"""`--quick`: one repeat of every figure, append runs included."""


@dataclass(frozen=True)
class Plan:
    """What a run measures, from the command line."""

    turns: int
    """Turns appended per append run."""
    sizes: Sequence[int]
    """Archived messages to open sessions on, ascending."""
    repeats: int
    """Timed repetitions of each opening figure."""
    append_repeats: int
    """Append runs, each on fresh databases, per append figure."""
    tree: Tree
    """The branched session of 3."""
    parts: Sequence[int]
    """Which of the parts 1, 2, 3, 4 to run."""
    rounds: int
    """4: rounds of the hot path."""


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return 'not installed'


def print_header(plan: Plan) -> None:
    names = (OUR_DIST, PEER_DIST, 'pydantic-ai-slim', 'SQLAlchemy', 'aiosqlite', 'asyncpg')
    print(f'{machine()}; ' + ', '.join(f'{name} {version(name)}' for name in names))
    print(f'append: {plan.turns} turns x 4 messages, median of {plan.append_repeats} fresh databases; ', end='')
    print(f'open: {", ".join(map(size_label, plan.sizes))} archived messages, median of {plan.repeats}; ', end='')
    tree = plan.tree
    print(f'branched: {tree.branch_points} branch points, {size_label(tree.path)} path, ', end='')
    print(f'{size_label(tree.stored)} tree; parts {", ".join(map(str, plan.parts))}')
    print(load_average('at start'))


async def run_backend(databases: Databases, title: str, plan: Plan) -> None:
    """The parts asked for on one backend's databases, removed at the end."""
    print(f'\n{title}\n')
    try:
        if 1 in plan.parts:
            appends = await append_benchmark(databases, plan.turns, plan.append_repeats)
            print_append(appends, plan.turns, databases.title)
        if 2 in plan.parts:
            print_opening(await opening_benchmark(databases, plan.sizes, plan.repeats), databases.title)
        if 3 in plan.parts:
            branched = await branched_benchmark(databases, plan.tree, plan.repeats)
            print_branched(branched, plan.tree, databases.title)
        if 4 in plan.parts:
            print_hot_path(await hot_path_benchmark(databases, plan.rounds), plan.rounds, databases.title)
        print(load_average(f'after {databases.title}'))
    finally:
        databases.close()


async def run_sqlite(plan: Plan) -> None:
    files = SqliteFiles()
    title = await describe('sqlite+aiosqlite://', 'a file per library and run in a temporary directory')
    await run_backend(files, title, plan)


async def run_postgres(plan: Plan) -> None:
    """The same on PostgreSQL, or say why there is none."""
    server, why = postgres_server()
    if server is None:
        print(f'\n=== PostgreSQL figures skipped: {why}')
        return
    where = make_url(server)
    title = await describe(server, f'{where.host}:{where.port}, a fresh database per library and run')
    await run_backend(PostgresDatabases(server), title, plan)


async def run(plan: Plan, backends: Sequence[str]) -> None:
    started = time.perf_counter()
    print_header(plan)
    if 'sqlite' in backends:
        await run_sqlite(plan)
    if 'postgresql' in backends:
        await run_postgres(plan)
    print(f'\nTotal {time.perf_counter() - started:.0f} s; {load_average("at the end")}')


def parse_args() -> tuple[Plan, list[str]]:
    """The plan (`--quick` changes the defaults, flags given with it win) and the backends."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        '--quick',
        action='store_true',
        help=f'tiny sizes and one repeat of everything, done in seconds (turns {QUICK_TURNS}, sizes '
        f'{" ".join(map(str, QUICK_SIZES))}, repeats {QUICK_REPEATS}): a check that it runs, not a measurement',
    )
    parser.add_argument('--turns', type=int, help=f'turns appended per append run (default {DEFAULT_TURNS})')
    parser.add_argument(
        '--sizes', type=int, nargs='+', help=f'archived messages (default {" ".join(map(str, DEFAULT_SIZES))})'
    )
    parser.add_argument('--repeats', type=int, help=f'timed repetitions per figure (default {DEFAULT_REPEATS})')
    parser.add_argument('--tree', type=int, help=f'3: messages in the branched tree (default {TREE})')
    parser.add_argument('--tree-path', type=int, help=f'3: messages on its active path (default {TREE_PATH})')
    parser.add_argument('--branch-points', type=int, help=f'3: branch points on the path (default {BRANCH_POINTS})')
    parser.add_argument('--rounds', type=int, help=f'4: rounds of the hot path (default {HOT_ROUNDS})')
    parser.add_argument('--backends', nargs='+', choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument(
        '--parts',
        type=int,
        nargs='+',
        choices=(1, 2, 3, 4),
        default=[1, 2, 3, 4],
        help='which parts to run (default all)',
    )
    args = parser.parse_args()
    quick = args.quick

    def given(value: int | None, quick_default: int, default: int) -> int:
        return value if value is not None else quick_default if quick else default

    sizes = sorted(args.sizes or (QUICK_SIZES if quick else DEFAULT_SIZES))
    if any(size < TAIL + 4 or size % 4 for size in sizes):
        parser.error(f'sizes must be multiples of 4, at least {TAIL + 4}')
    tree = Tree(
        size=given(args.tree, QUICK_TREE, TREE),
        path=given(args.tree_path, QUICK_TREE_PATH, TREE_PATH),
        branch_points=given(args.branch_points, QUICK_BRANCH_POINTS, BRANCH_POINTS),
    )
    if (problem := tree.problem()) is not None:
        parser.error(f'--tree {tree.size} --tree-path {tree.path} --branch-points {tree.branch_points}: {problem}')
    plan = Plan(
        turns=given(args.turns, QUICK_TURNS, DEFAULT_TURNS),
        sizes=sizes,
        repeats=given(args.repeats, QUICK_REPEATS, DEFAULT_REPEATS),
        append_repeats=QUICK_REPEATS if quick else APPEND_REPEATS,
        tree=tree,
        parts=sorted(set(args.parts)),
        rounds=given(args.rounds, QUICK_HOT_ROUNDS, HOT_ROUNDS),
    )
    return plan, args.backends


if __name__ == '__main__':
    asyncio.run(run(*parse_args()))
