"""Instructions per operation, counted by callgrind: ours against the OpenAI Agents SDK's `SQLAlchemySession`, on
SQLite and on PostgreSQL, at 100, 10k and 100k archived messages. The repeatable measure of a turn's client cost.

Run it from the repo root (the project venv is fine, so is a bare `python3`; valgrind must be installed, on x86-64):

    python benchmarks/instructions.py                       # 100, 10,000 and 100,000 archived messages
    python benchmarks/instructions.py --sizes 100 10000 --repeats 5 --backends postgresql
    python benchmarks/instructions.py --quick               # 100 and 1,000, SQLite and PostgreSQL, in minutes

Wall time on a shared machine moves with the load; the number of instructions the client process executes for an
operation barely does. So this counts them, under `valgrind --tool=callgrind`, and the other benchmarks' times stay
secondary readings. The database server is another process, outside valgrind: a PostgreSQL server's work is not
counted (benchmarks/server_share.py counts its statements and blocks); SQLite's is, as it runs in the client.

The figures, per backend and archive size, each the instructions of one operation:
- door turn: ours `store.conversations.load` + `store.conversations.save` on a store with a summarizing processor
  (trigger 40, keep 20), benchmarks/conversations.py's turn; the peer's `get_items(limit=20)` + `add_items` of the
  same turn's 4 items (on SQLite with `synchronous=NORMAL`, ours' setting).
- Session.run store part: ours `session.run(agent, prompt)` on the same store, counting only the store's spans
  `session_store.load_window` (reading and decoding the window) and `session_store.store_run` (encoding and
  sealing the run's rows, the write, the window kept in memory); the summarizer runs inside the agent's run
  there, so it is not counted. Held against the peer's turn as above.
- first open: ours a new `SessionStore(url)` + `store.session(id)` + `session.context()`; the peer a new engine +
  `SQLAlchemySession(id, engine=..., create_tables=True)` + `get_items(limit=20)`. Closing is not counted.
The agent between a turn's `load` and `save` is `_scripted_turn`'s (a tool call and its return, 4 messages, no
model): it runs, but outside the counted regions, so no agent's work is counted. A door turn and a run are counted
over a cycle of 5 turns (one compaction each, as a chat pays it), and the figure is the mean per turn.

The method. The archives are built first, outside valgrind, as benchmarks/conversations.py builds them
(`build_ours`, `build_peer`: `_seeding.py`'s import for ours, `add_items` in batches for the peer), PostgreSQL's
ANALYZEd. Then one process, `_instructions_worker.py`, runs under

    valgrind --tool=callgrind --instr-atstart=no --vgdb=no

with `PYTHONHASHSEED=0`. It imports and opens everything and runs every measure once uninstrumented (nothing is
counted while callgrind only translates code, and it runs several times faster), then starts instrumentation
with a callgrind client request and takes `--repeats` rounds of every measure. Around each counted region it makes
two more client requests: zero every thread's counts, then dump them to a file labelled with the region's name
(`_callgrind.py` makes the requests through `ctypes`). The work between regions (the agent, the checks) is
instrumented but zeroed away. Every thread is counted: aiosqlite runs SQLite on a thread of its own. The garbage
collector is off inside the rounds (collected between them), as `timeit` does. What an empty region counts (the
requests' own cost, a few thousand instructions) is taken off each region. A figure is the median of the repeats,
and its spread is (max - min) / median. Dividing two runs' totals instead (setup alone, and setup plus the
operations) would take a process start under full instrumentation each, minutes apiece here, and subtract
billions of instructions of imports to find millions; callgrind's `--toggle-collect` and `TOGGLE_COLLECT` switch
one thread's counting only, so SQLite's thread would escape them.

Below each backend's figures, ours' door turn and run in parts, each part's median count per region and how many
regions a cycle has: a turn's `load` (`compacting load` for the one that summarized) and `save`, a run's
`load_window` and `store_run`. The regions of one cycle differ (a load's window grows by 4 messages a turn until
it is summarized; SQLite's writes vary from commit to commit), which is why a cycle, not a turn, is the unit.

How repeatable: on PostgreSQL most spreads are under 1% (a first open's, which waits on connecting, up to a few
%). On SQLite, whose own work is counted in the client, a run's `store_run` and a first open vary from one to the
next (a sawtooth over successive opens, a commit now and then costing twice the others), so a median of 3 cycles
can still spread by 5-20% there; `--repeats` narrows it. A default run took 4.5 minutes on this machine.

Sanity checks (assertions): every region was counted (two per ours' turn and run, one per peer turn and per
open), our windows are at most the trigger plus 2 messages, the peer returns its 20 items. Counts are printed,
never asserted. With `--quick` (sizes 100 and 1,000, 3 repeats) a run takes a couple of minutes on 2 cores.
"""
# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import AGENTS_SQLALCHEMY, OUR_DIST, PEERS, distribution, ensure_environment

ensure_environment([AGENTS_SQLALCHEMY])

import argparse
import asyncio
import importlib.metadata
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _bench_db import analyze, describe, postgres_server
from _bench_util import load_average, machine
from _callgrind import read_dumps, supported
from _conversations_door import CYCLE
from _instructions_worker import EMPTY, FIGURES, OPERATIONS, OURS, PEER, PEER_OF, REGIONS, measure_key
from _store_contenders import HAVE_PEER, Databases, PostgresDatabases, SqliteFiles, build_ours, build_peer
from _store_conversation import TAIL
from _store_measuring import PEER_MISSING
from sqlalchemy.ext.asyncio import create_async_engine

from session_store import SessionStore

PEER_DIST = distribution(PEERS[AGENTS_SQLALCHEMY])
WORKER = Path(__file__).resolve().parent / '_instructions_worker.py'
BACKENDS = ('sqlite', 'postgresql')
DEFAULT_SIZES = (100, 10_000, 100_000)
DEFAULT_REPEATS = 3
QUICK_SIZES = (100, 1_000)
QUICK_REPEATS = 3
VALGRIND = ('--tool=callgrind', '--instr-atstart=no', '--vgdb=no')


@dataclass(frozen=True)
class Figure:
    """One operation's instructions over the repeats."""

    counts: Sequence[float]

    @property
    def median(self) -> float:
        return statistics.median(self.counts)

    @property
    def spread(self) -> float:
        """(max - min) / median, in percent."""
        return (max(self.counts) - min(self.counts)) / self.median * 100

    def __str__(self) -> str:
        return f'{self.median:,.0f} instructions (spread {self.spread:.1f}%)'


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return 'not installed'


def valgrind_version(valgrind: str) -> str:
    return subprocess.run([valgrind, '--version'], capture_output=True, text=True, check=True).stdout.strip()


async def build(databases: Databases, sizes: Sequence[int]) -> list[dict[str, object]]:
    """Both archives of every size (the peer's if it is here), PostgreSQL's analyzed; their URLs."""
    archives: list[dict[str, object]] = []
    for size in sizes:
        ours = databases.url(f'instructions-ours-{size}')
        await build_ours(ours, size)
        async with SessionStore(ours) as store:
            await analyze(store.engine)
        peer = None
        if HAVE_PEER:
            peer = databases.url(f'instructions-peer-{size}')
            await build_peer(peer, size)
            engine = create_async_engine(peer)
            try:
                await analyze(engine)
            finally:
                await engine.dispose()
        archives.append({'size': size, 'ours': ours, 'peer': peer})
    return archives


def count(valgrind: str, plan: dict[str, object]) -> dict[str, list[int]]:
    """Run the worker under callgrind on `plan`; each region label's instruction counts, the empty regions' cost
    taken off."""
    with tempfile.TemporaryDirectory(prefix='instructions-') as folder:
        plan_file, dumps = Path(folder) / 'plan.json', Path(folder) / 'dumps'
        dumps.mkdir()
        plan_file.write_text(json.dumps(plan))
        env = {key: value for key, value in os.environ.items() if key != 'PYTHONHASHSEED'} | {'PYTHONHASHSEED': '0'}
        command = [
            valgrind,
            *VALGRIND,
            f'--callgrind-out-file={dumps}/callgrind.out.%p',
            sys.executable,
            str(WORKER),
            str(plan_file),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            tail = '\n'.join((done.stdout + done.stderr).splitlines()[-40:])
            raise SystemExit(f'the worker under callgrind exited {done.returncode}:\n{tail}')
        regions: dict[str, list[int]] = defaultdict(list)
        for name, instructions in read_dumps(dumps):
            regions[name].append(instructions)
    empty = statistics.median(regions.pop(EMPTY))
    return {name: [instructions - round(empty) for instructions in found] for name, found in regions.items()}


@dataclass(frozen=True)
class Counted:
    """A measure's figure and, for ours' operations counted in parts, each part's median per region, with its
    regions a measure."""

    figure: Figure
    parts: dict[str, tuple[float, int]]


def figures(regions: dict[str, list[int]], title: str, sizes: Sequence[int], repeats: int) -> dict[str, Counted]:
    """Each measure's figure (instructions per operation) by `measure_key`; checks every region was counted."""
    found: dict[str, Counted] = {}
    for size in sizes:
        for (figure, contender), expected in REGIONS.items():
            if contender == PEER and not HAVE_PEER:
                continue
            key, operations = measure_key(title, size, figure, contender), OPERATIONS[figure]
            parts: dict[str, list[float]] = {part: [] for part in expected}
            for repeat, (part, regions_expected) in itertools.product(range(repeats), expected.items()):
                counted = regions.get(f'{key}|{repeat}|{part}', [])
                assert len(counted) == regions_expected, f'{key}|{repeat}|{part}: {len(counted)} regions counted'
                parts[part].append(sum(counted))
            totals = [sum(part[repeat] for part in parts.values()) / operations for repeat in range(repeats)]
            split = (
                {part: (statistics.median(counts) / expected[part], expected[part]) for part, counts in parts.items()}
                if len(parts) > 1
                else {}
            )
            found[key] = Counted(Figure(totals), split)
    return found


def print_backend(found: dict[str, Counted], title: str, sizes: Sequence[int]) -> None:
    for figure in FIGURES:
        for size in sizes:
            ours = found[measure_key(title, size, figure, OURS)].figure
            peer_counted = found.get(measure_key(title, size, PEER_OF[figure], PEER))
            head = f'{figure} @{size:,} on {title}: ours {ours}'
            if peer_counted is None:
                print(f'{head}, peer {PEER_MISSING}')
            else:
                peer = peer_counted.figure
                print(
                    f'{head}, peer {peer.median:,.0f} (spread {peer.spread:.1f}%) -> ours/peer '
                    f'{ours.median / peer.median:.2f} x'
                )
    for figure in FIGURES:
        for size in sizes:
            parts = found[measure_key(title, size, figure, OURS)].parts
            if parts:
                split = ', '.join(f'{part} {count:,.0f} (x {times})' for part, (count, times) in parts.items())
                print(f"   ours' {figure} @{size:,} in parts, each (times a cycle of {CYCLE} turns): {split}")
    print()


async def prepare(backends: Sequence[str], sizes: Sequence[int]) -> tuple[list[Databases], list[dict[str, object]]]:
    """Every backend's databases and archives, and the plan's entries for them; PostgreSQL skipped, saying why,
    without a server."""
    made: list[Databases] = []
    entries: list[dict[str, object]] = []
    if 'sqlite' in backends:
        files = SqliteFiles()
        made.append(files)
        print(await describe('sqlite+aiosqlite://', 'a file per library and size in a temporary directory'))
        entries.append({'title': files.title, 'sqlite': True, 'archives': await build(files, sizes)})
    if 'postgresql' in backends:
        server, why = postgres_server()
        if server is None:
            print(f'=== PostgreSQL figures skipped: {why}')
        else:
            databases = PostgresDatabases(server)
            made.append(databases)
            print(await describe(server, 'a fresh database per library and size; the server is not counted'))
            entries.append({'title': databases.title, 'sqlite': False, 'archives': await build(databases, sizes)})
    return made, entries


def run(sizes: Sequence[int], repeats: int, backends: Sequence[str], valgrind: str) -> None:
    started = time.perf_counter()
    names = (OUR_DIST, PEER_DIST, 'pydantic-ai-slim', 'SQLAlchemy', 'aiosqlite', 'asyncpg')
    print(f'{machine()}; ' + ', '.join(f'{name} {version(name)}' for name in names))
    print(
        f'{valgrind_version(valgrind)} --tool=callgrind, instructions of the client process per operation; '
        f'archives: {", ".join(f"{size:,}" for size in sizes)} messages; the median of {repeats} '
        f'(door turn and Session.run: the mean of a cycle of 5 turns)'
    )
    print(load_average('at start'))
    made, entries = asyncio.run(prepare(backends, sizes))
    try:
        built = time.perf_counter()
        print(f'archives built in {built - started:.0f} s; counting under callgrind ...\n', flush=True)
        regions = count(valgrind, {'repeats': repeats, 'backends': entries})
        print(f'counted in {time.perf_counter() - built:.0f} s\n')
        for entry in entries:
            title = str(entry['title'])
            print_backend(figures(regions, title, sizes, repeats), title, sizes)
    finally:
        for databases in made:
            databases.close()
    print(f'Total {time.perf_counter() - started:.0f} s; {load_average("at the end")}')


def parse_args() -> tuple[list[int], int, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        '--quick',
        action='store_true',
        help=f'sizes {" ".join(map(str, QUICK_SIZES))}, {QUICK_REPEATS} repeats: a check that it runs, in minutes',
    )
    parser.add_argument(
        '--sizes',
        type=int,
        nargs='+',
        help=f'archived messages (default {" ".join(map(str, DEFAULT_SIZES))})',
    )
    parser.add_argument('--repeats', type=int, help=f'counts per figure (default {DEFAULT_REPEATS})')
    parser.add_argument('--backends', nargs='+', choices=BACKENDS, default=list(BACKENDS))
    args = parser.parse_args()
    sizes = sorted(set(args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)))
    if any(size < TAIL + 4 or size % 4 for size in sizes):
        parser.error(f'sizes must be multiples of 4, at least {TAIL + 4}')
    repeats = args.repeats if args.repeats is not None else QUICK_REPEATS if args.quick else DEFAULT_REPEATS
    if repeats < 1:
        parser.error('repeats must be at least 1')
    return sizes, repeats, args.backends


def main() -> None:
    sizes, repeats, backends = parse_args()
    valgrind = shutil.which('valgrind')
    if valgrind is None:
        raise SystemExit('instructions.py: valgrind is not installed (Debian: apt-get install valgrind)')
    if (why := supported()) is not None:
        raise SystemExit(f'instructions.py: {why}')
    run(sizes, repeats, backends, valgrind)


if __name__ == '__main__':
    main()
