"""Cost of a turn through pydantic-ai's door into `session_store` (`store.conversations.load` + `save`, a store with a
summarizing processor) against the OpenAI Agents SDK's `SQLAlchemySession` (`get_items(limit=20)` + `add_items`),
at 100, 10k and 100k archived messages, on SQLite and on PostgreSQL.

Run it with one command from the repo root (the project venv is fine, so is a bare `python3`):

    python benchmarks/conversations.py
    python benchmarks/conversations.py --sizes 100 10000 --repeats 5 --backends postgresql
    python benchmarks/conversations.py --quick       # sizes 100 and 1,000, 2 cycles: does it run, roughly how

`--quick` sets the defaults to sizes 100 and 1,000 and 2 timed cycles; flags given with it win. Its figures are
noisy and only show that both contenders run and roughly how they compare.

The peer is never a dependency of this project: as in benchmarks/store.py, the script re-executes itself in the
private venv `<repo>/.bench-venv` that `_bench_env.py` makes (or says, on lines starting `PEERS UNAVAILABLE:`, why
it can't, and measures ours alone). Backends as in benchmarks/store.py (`_store_contenders.Databases`): a SQLite
file per library and size in a temporary directory, and a fresh database per library and size on the PostgreSQL
server of `testkit/postgres.py` (skipped, saying why, when there is none), ANALYZEd once built.

The archives are benchmarks/store.py's (`build_ours`, `build_peer`): the session `archive` of 100, 10k or 100k
messages of tool-using turns, ours with its summary chain (the latest summary covering all but the last 20
messages), built in memory and stored with the public `store.import_` (`_seeding.py`), the peer's with `add_items`
in batches. Ours is then opened as a pydantic-ai user would, with a summarizing
processor: `SessionStore(url, processor=SummarizationProcessor(FunctionModel(summarizer), trigger=('messages',
40), keep=('messages', 20)))`, the summarizer a scripted `FunctionModel` answering at once with a summary of 1,500
characters.

A turn, ours: `conversation = await store.conversations.load('archive')` (the window a Session would run from:
head, latest summary, kept tail; compacted first when it has reached the trigger, the summary stored in its own
transaction), `result = await agent.run(prompt, conversation=conversation, usage_limits=UsageLimits(request_limit=
None))` with `_scripted_turn`'s agent (a tool call and its return: 4 new messages), `await
store.conversations.save(result)`. Only `load` and `save` are timed; the agent's run between them is not. The
peer's turn: `get_items(limit=20)` + `add_items` of the same turn's 4 items, both timed. On SQLite the peer runs
with `synchronous=NORMAL`, ours' setting (equal durability); on PostgreSQL durability is the server's, the same
for both.

With a trigger of 40 messages keeping 20, every 5th load compacts (20 new messages since the last summary). So a
measure is 5 turns, one compaction cycle, and its figure the mean per turn: a summary's cost is spread over the
turns it serves, as a user's chat pays it. After one untimed cycle, `--repeats` cycles of each contender and size
are taken in turns (`_store_measuring.round_robin`), so the load from other work on this shared machine falls on
each alike; the figure is the median cycle. The report also splits ours' mean turn into `load` and `save`.

Targets, each printed as a ratio, met or MISSED, per backend: ours flat from the smallest archive to the largest
(at most 2 x, issue 20), and at every size at most 0.6 x the peer's turn on SQLite, 0.8 x on PostgreSQL (issue
28). Sanity checks (assertions): every load hands back a window (at most 42 messages), every turn is stored (the
archive grows by 4 messages a turn), the summarizer never fails and is called about once a cycle, and the peer
returns its 20 items and stores every item. Timings are printed, never asserted.
"""
# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import AGENTS_SQLALCHEMY, OUR_DIST, PEERS, distribution, ensure_environment

ensure_environment([AGENTS_SQLALCHEMY])

import argparse
import asyncio
import importlib.metadata
import statistics
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack

from _bench_db import describe, postgres_server
from _bench_util import load_average, machine, size_label
from _conversations_door import CYCLE, TRIGGER, Contenders, contenders
from _store_contenders import Databases, PostgresDatabases, SqliteFiles
from _store_conversation import TAIL
from _store_measuring import PEER_MISSING, print_target, round_robin
from sqlalchemy.engine import make_url

PEER_DIST = distribution(PEERS[AGENTS_SQLALCHEMY])
BACKENDS = ('sqlite', 'postgresql')
DEFAULT_SIZES = (100, 10_000, 100_000)
DEFAULT_REPEATS = 9
QUICK_SIZES = (100, 1_000)
QUICK_REPEATS = 2
TARGET_GROWTH = 2.0
"""Ours at the largest archive at most this many times ours at the smallest."""
TARGET_VERSUS_PEER = {'SQLite': 0.6, 'PostgreSQL': 0.8}
"""Ours' turn at most this many times the peer's, per backend (issue 28)."""


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return 'not installed'


async def measure(
    databases: Databases, sizes: list[int], repeats: int
) -> tuple[dict[tuple[int, str], float], Contenders]:
    """Median ms per turn of each contender and size, the cycles taken in turns; the contenders, checked."""
    async with AsyncExitStack() as stack:
        built = await contenders(stack, databases, sizes)
        medians = await round_robin(built.measures(), repeats)
        await built.check()
    return medians, built


def print_backend(medians: dict[tuple[int, str], float], built: Contenders, backend: str) -> None:
    sizes = sorted(built.doors)
    print(
        f'Conversation-door turn on {backend}: ms per turn, the median of cycles of {CYCLE} turns (one compaction '
        f'each: trigger {TRIGGER}, keep {TAIL})'
    )
    print(f'   {"archived":>9} | {"ours":>8} {"load":>8} {"save":>8} | {"peer":>8} | {"ours/peer":>9}')
    for size in sizes:
        door = built.doors[size]
        ours, peer = medians[size, 'ours'], medians.get((size, 'peer'))
        load, save = statistics.mean(door.loads) * 1000, statistics.mean(door.saves) * 1000
        versus = '-' if peer is None else f'{ours / peer:.2f} x'
        peer_cell = '-' if peer is None else f'{peer:.2f}'
        print(f'   {size:>9,} | {ours:>8.2f} {load:>8.2f} {save:>8.2f} | {peer_cell:>8} | {versus:>9}')
    print('   (load and save: the mean of every timed turn, compactions included)')
    print()
    smallest, largest = sizes[0], sizes[-1]
    for size in sizes:
        ours, peer = medians[size, 'ours'], medians.get((size, 'peer'))
        head = f'conversation turn @{size_label(size)} on {backend}: ours {ours:.2f} ms (load + save)'
        if peer is None:
            print(f'{head}, peer {PEER_MISSING}')
        else:
            print(f'{head}, peer {peer:.2f} ms (get_items(20) + add_items(4)) -> ours/peer {ours / peer:.2f} x')
    growth = medians[largest, 'ours'] / medians[smallest, 'ours']
    print(
        f'conversation turn growth on {backend}: ours @{size_label(smallest)} -> @{size_label(largest)} {growth:.2f} x'
    )
    print()
    if largest != smallest:
        print_target(
            backend,
            f'ours @{size_label(largest)}',
            TARGET_GROWTH,
            f'ours @{size_label(smallest)}',
            growth,
            at_least=False,
        )
    for size in sizes:
        peer = medians.get((size, 'peer'))
        print_target(
            f'{backend} @{size_label(size)}',
            'conversation-door turn',
            TARGET_VERSUS_PEER[backend],
            "the peer's get_items(20) + add_items(4)",
            None if peer is None else medians[size, 'ours'] / peer,
            at_least=False,
        )
    print()


async def run_backend(databases: Databases, title: str, sizes: list[int], repeats: int) -> None:
    print(f'\n{title}\n')
    try:
        medians, built = await measure(databases, sizes, repeats)
        print_backend(medians, built, databases.title)
        print(load_average(f'after {databases.title}'))
    finally:
        databases.close()


async def run(sizes: list[int], repeats: int, backends: Sequence[str]) -> None:
    started = time.perf_counter()
    names = (OUR_DIST, PEER_DIST, 'pydantic-ai-slim', 'SQLAlchemy', 'aiosqlite', 'asyncpg')
    print(f'{machine()}; ' + ', '.join(f'{name} {version(name)}' for name in names))
    print(f'archives: {", ".join(map(size_label, sizes))} messages; {repeats} timed cycles of {CYCLE} turns each')
    print(load_average('at start'))
    if 'sqlite' in backends:
        where = 'a file per library and size in a temporary directory'
        await run_backend(SqliteFiles(), await describe('sqlite+aiosqlite://', where), sizes, repeats)
    if 'postgresql' in backends:
        server, why = postgres_server()
        if server is None:
            print(f'\n=== PostgreSQL figures skipped: {why}')
        else:
            at = make_url(server)
            title = await describe(server, f'{at.host}:{at.port}, a fresh database per library and size')
            await run_backend(PostgresDatabases(server), title, sizes, repeats)
    print(f'\nTotal {time.perf_counter() - started:.0f} s; {load_average("at the end")}')


def parse_args() -> tuple[list[int], int, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        '--quick',
        action='store_true',
        help=f'sizes {" ".join(map(str, QUICK_SIZES))}, {QUICK_REPEATS} cycles: a check that it runs, not a measure',
    )
    parser.add_argument(
        '--sizes', type=int, nargs='+', help=f'archived messages (default {" ".join(map(str, DEFAULT_SIZES))})'
    )
    parser.add_argument('--repeats', type=int, help=f'timed cycles per contender and size (default {DEFAULT_REPEATS})')
    parser.add_argument('--backends', nargs='+', choices=BACKENDS, default=list(BACKENDS))
    args = parser.parse_args()
    sizes = sorted(set(args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)))
    if any(size < TAIL + 4 or size % 4 for size in sizes):
        parser.error(f'sizes must be multiples of 4, at least {TAIL + 4}')
    repeats = args.repeats if args.repeats is not None else QUICK_REPEATS if args.quick else DEFAULT_REPEATS
    if repeats < 1:
        parser.error('repeats must be at least 1')
    return sizes, repeats, args.backends


if __name__ == '__main__':
    asyncio.run(run(*parse_args()))
