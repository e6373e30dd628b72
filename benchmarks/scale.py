"""Scale on PostgreSQL: several processes, each with many sessions at once, on one server, directly and through
PgBouncer in transaction mode; `session_store.SessionStore` against the OpenAI Agents SDK's `SQLAlchemySession`.

Run it with one command from the repo root (the project venv is fine, so is a bare `python3`):

    python benchmarks/scale.py
    python benchmarks/scale.py --processes 2 --sessions 50 --turns 10 --delay 50
    python benchmarks/scale.py --routes direct           # no PgBouncer
    python benchmarks/scale.py --quick                   # a tiny load, one run each: does it run, roughly how

`--quick` sets the defaults to 2 processes x 4 sessions, 3 timed turns after 1 untimed, one pass with a 10 ms
delay and one run of each contender; flags given with it win. Its figures only show that every contender runs.

The peer is never a dependency of this project: as in benchmarks/store.py, the script re-executes itself in the
private venv `<repo>/.bench-venv` that `_bench_env.py` makes (or says, on lines starting `PEERS UNAVAILABLE:`, why
it can't, and measures ours alone). The server is `testkit/postgres.py`'s (`$SESSION_STORE_TEST_PG_URL`, else a
throwaway local cluster); each contender's run gets a fresh database on it, dropped after. Both libraries write to
the same server with its settings (the section title prints `fsync` and `synchronous_commit`): equal durability.
PgBouncer is Debian's, started by `testkit/faults.py` in front of the same server (`pool_mode = transaction`,
`default_pool_size` from `--bouncer-pool`).

The load: `--processes` processes (`_scale_worker.py`), each with `--sessions` sessions running at once on one
event loop, each session `--warmup` untimed turns, then, once every process is warm and all are told to start
together, `--turns` timed turns one after another. A turn is `_scripted_turn`'s pydantic-ai agent on a scripted
`FunctionModel`: the user's question, a `lookup_order` tool call, its result, the answer (4 messages), each of
the 2 model requests waiting `--delay` ms first, as a provider would. The contenders run the same agent on the
same history size (a sliding window of 100 messages keeping 20, the agent's window capability shaping every
request), so what differs is the storage:
- ours: `session.run(agent, prompt)` on `SessionStore(url, processor=that window, transaction_pooler=...)`
  (`transaction_pooler=True` through PgBouncer), one store per process;
- the peer: `get_items(limit=20)`, the agent, `add_items(the turn's 4 items)`, one engine per process and a
  `SQLAlchemySession` per session, as its documentation shows. The agent runs on a history kept in memory,
  since a pydantic-ai agent does not take the peer's OpenAI Responses items. Through PgBouncer the peer's
  engine gets SQLAlchemy's documented asyncpg settings for it (no statement caches, a unique name per
  prepared statement): without them asyncpg's prepared statements fail there;
- the agent alone, nothing stored: the ceiling the machine allows under this load.
Both libraries' engines get `pool_size` and `max_overflow` from `--pool-size` and `--max-overflow` (SQLAlchemy's
defaults, 5 and 10). The contenders' runs alternate (`--repeats` rounds, each in another order), so the load from
other work on this shared machine falls on each alike.

Each `--delay` is a pass of its own. By default 50 ms, where 100 sessions ask more CPU of this 2-core machine than
it has (pydantic-ai's own work is some 20 ms of CPU a turn): the turns/s are then what the machine can do, and
each contender's CPU per turn decides them; and 1,000 ms, a provider's usual latency, where the machine keeps up
and the time in the store's calls is the store's own, not the queue of an event loop that is never free.

Figures, per pass:
- turns/s: the timed turns of all processes over the time from the first process's start of them to the last
  one's end; the median of the runs. CPU/turn: the processes' CPU over their timed turns (`time.process_time`;
  the server's is not counted); less the agent alone's, it is what each store costs the client.
- turn p50/p99: the wall time of a turn (model delays included).
- what the store adds per turn, p50/p99: the time the turn spends in the store's calls. Ours: the store's own
  OpenTelemetry spans of a run, `session_store.load_window` (the window read a run starts with) and
  `session_store.store_run` (its write), timed by a tracer the worker installs; the peer: its `get_items` and
  `add_items` calls, timed around them. Not `session.run` minus the same agent run without a store: with many
  sessions on one event loop, a turn's wall time carries the loop's queueing, which varies from turn to turn by
  more than the store costs, so a difference of two runs can't be had per turn, nor its p99. The time in the
  store's calls still counts the loop's and the pool's queueing inside those calls, which is what a user waits;
  `lag p99` (how late the loop wakes a task that sleeps 10 ms) shows how much queueing there is. Ours' spans
  leave out a run's CPU work outside the store's calls (counting the new messages' tokens, which the processor does).
- store CPU per turn: each contender's CPU/turn less the agent alone's, and ours over the peer's.
- server connections: `count(*)` from `pg_stat_activity` for the run's database, sampled every 20 ms while its
  processes live: the peak (printed beside each contender's turns/s too), against the bound the pools set
  (processes x (pool_size + max_overflow): ours keeps one pool per store, as the peer's engine does; through
  PgBouncer the bound is PgBouncer's pool).

Targets (issues 21 and 28), each printed as a ratio, met or MISSED, in every pass: ours >= 2 x the peer's turns/s
at equal durability (a capacity target: the 50 ms pass is the one that measures capacity; the line also prints
what a store costing nothing would reach, the agent alone's turns/s over the peer's); ours' p99 store overhead
<= 5 ms (stated for 100 concurrent sessions, the default load); ours' peak server connections within its pools'
bound, and at most the peer's plus one a process (the connection budget); ours' store CPU per turn <= 0.6 x the
peer's.
Sanity checks (assertions): every process stored every turn it ran.

This file is the command: its arguments, the header, each route's passes in order. Beside it: `_scale_job.py`
(what a process is told and says back), `_scale_worker.py` (a process), `_scale_runs.py` (a contender's run:
its processes, the connections counted, PgBouncer), `_scale_report.py` (figures, tables, targets),
`_scripted_turn.py` (the agent), and benchmarks/store.py's `_store_*` modules it shares.
"""
# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import AGENTS_SQLALCHEMY, OUR_DIST, PEERS, distribution, ensure_environment

ensure_environment([AGENTS_SQLALCHEMY])

import argparse
import asyncio
import dataclasses
import importlib.metadata
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from _bench_db import postgres_server
from _bench_util import load_average, machine
from _scale_job import Load
from _scale_report import Figures, print_results, print_table
from _scale_runs import Outcome, Route, bouncer_route, run_contender
from _store_contenders import HAVE_PEER
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from testkit.faults import PoolerUnavailable

PEER_DIST = distribution(PEERS[AGENTS_SQLALCHEMY])
ROUTES = ('direct', 'pgbouncer')
DEFAULTS = {'processes': 4, 'sessions': 25, 'turns': 6, 'warmup': 1, 'repeats': 2}
DEFAULT_DELAYS = (50.0, 1000.0)
QUICK = {'processes': 2, 'sessions': 4, 'turns': 3, 'warmup': 1, 'repeats': 1}
QUICK_DELAYS = (10.0,)
"""`--quick`: a tiny load, one run of each contender, one pass."""


@dataclass(frozen=True)
class Plan:
    load: Load
    """The load of every pass, but its delay."""
    delays: Sequence[float]
    """Seconds each model request waits, one pass each."""
    repeats: int
    routes: Sequence[str]
    bouncer_pool: int

    @property
    def contenders(self) -> list[str]:
        return ['alone', 'ours', *(['peer'] if HAVE_PEER else [])]

    def passes(self) -> list[Load]:
        return [dataclasses.replace(self.load, delay=delay) for delay in self.delays]


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return 'not installed'


def bouncer_version() -> str:
    try:
        said = subprocess.run(['pgbouncer', '--version'], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 'PgBouncer (version unknown)'
    return said.splitlines()[0] if said else 'PgBouncer (version unknown)'


def ms(seconds: float) -> str:
    return f'{seconds * 1000:g} ms'


def print_header(plan: Plan) -> None:
    names = (OUR_DIST, PEER_DIST, 'pydantic-ai-slim', 'SQLAlchemy', 'asyncpg')
    print(f'{machine()}; ' + ', '.join(f'{name} {version(name)}' for name in names))
    load = plan.load
    print(
        f'load: {load.processes} processes x {load.sessions} sessions = {load.concurrent} at once, {load.turns} timed '
        f'turns each after {load.warmup} untimed; a turn is 2 model requests + 1 tool call; a pass per model delay: '
        + ', '.join(map(ms, plan.delays))
    )
    print(f'pools {load.pool_size} + {load.max_overflow} an engine; {plan.repeats} alternating runs of each contender')
    print(load_average('at start'))


async def describe(server: str) -> str:
    engine = create_async_engine(server)
    try:
        async with engine.connect() as conn:
            settings = {
                name: await conn.scalar(text(f'SHOW {name}'))
                for name in ('server_version', 'fsync', 'synchronous_commit', 'max_connections')
            }
    finally:
        await engine.dispose()
    where = make_url(server)
    return (
        f'=== PostgreSQL {settings["server_version"]}, {where.host}:{where.port}, a fresh database per run; '
        f'fsync={settings["fsync"]}, synchronous_commit={settings["synchronous_commit"]} for both libraries, '
        f'max_connections={settings["max_connections"]}'
    )


async def measure(route: Route, load: Load, plan: Plan) -> tuple[dict[str, Figures], dict[str, str]]:
    """Every contender's runs of `load` on `route`, in turns, each round in another order: the figures of those that
    ran, and why each one that failed did (a process that raised: its last lines). A contender that failed once is
    not run again in this pass."""
    contenders = plan.contenders
    outcomes: dict[str, list[Outcome]] = {contender: [] for contender in contenders}
    failures: dict[str, str] = {}
    for repeat in range(plan.repeats):
        first = repeat % len(contenders)
        for contender in contenders[first:] + contenders[:first]:
            if contender in failures:
                continue
            try:
                outcome = await run_contender(contender, route, load)
            except RuntimeError as error:
                failures[contender] = str(error)
                print(f'   run {repeat + 1}, {contender}: FAILED: {error}', flush=True)
                continue
            outcomes[contender].append(outcome)
            print(
                f'   run {repeat + 1}, {contender}: {outcome.turns_per_second:,.1f} turns/s, '
                f'peak {outcome.peak_connections} server connections; {load_average("now")}',
                flush=True,
            )
    print()
    return {contender: Figures.of(runs) for contender, runs in outcomes.items() if runs}, failures


async def measure_route(route: Route, plan: Plan) -> list[str]:
    """The route's passes, printed; what failed in them."""
    if route.bouncer is None:
        print(f'\nPostgreSQL {route.name}: each process connects to the server itself')
    else:
        print(
            f'\nPostgreSQL {route.name}: {bouncer_version()} in transaction mode, default_pool_size '
            f'{route.bouncer_pool}; ours with transaction_pooler=True, the peer with no statement caches'
        )
    failed = []
    for load in plan.passes():
        where = f'PostgreSQL {route.name} @{ms(load.delay)}'
        print(f'\n{where}: each model request waits {ms(load.delay)}\n')
        figures, failures = await measure(route, load, plan)
        print_table(figures, route, load)
        print_results(figures, failures, route, load, where)
        print(load_average(f'after {where}'))
        failed += [f'{contender} on {where}' for contender in failures]
    return failed


async def run(plan: Plan) -> None:
    started = time.perf_counter()
    print_header(plan)
    server, why = postgres_server()
    if server is None:
        print(f'\n=== PostgreSQL figures skipped: {why}')
        return
    print(f'\n{await describe(server)}')
    failed = []
    for name in plan.routes:
        if name == 'direct':
            failed += await measure_route(Route('direct', server), plan)
            continue
        try:
            with bouncer_route(server, plan.bouncer_pool) as route:
                failed += await measure_route(route, plan)
        except PoolerUnavailable as error:
            print(f'\n=== PgBouncer figures skipped: {error}')
    print(f'\nTotal {time.perf_counter() - started:.0f} s; {load_average("at the end")}')
    if failed:
        raise SystemExit(f'FAILED: {"; ".join(failed)} (see the FAILED lines above)')


def parse_args() -> Plan:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    quick = ', '.join(f'{key} {value}' for key, value in QUICK.items())
    parser.add_argument(
        '--quick', action='store_true', help=f'a tiny load, one run each ({quick}, delay {QUICK_DELAYS[0]:g} ms)'
    )
    parser.add_argument('--processes', type=int, help=f'processes (default {DEFAULTS["processes"]})')
    parser.add_argument('--sessions', type=int, help=f'sessions per process, at once (default {DEFAULTS["sessions"]})')
    parser.add_argument('--turns', type=int, help=f'timed turns per session (default {DEFAULTS["turns"]})')
    parser.add_argument('--warmup', type=int, help=f'untimed turns per session first (default {DEFAULTS["warmup"]})')
    parser.add_argument(
        '--delay',
        type=float,
        nargs='+',
        help='ms each model request waits, one pass per value (default '
        + ' '.join(map('{:g}'.format, DEFAULT_DELAYS))
        + ')',
    )
    parser.add_argument('--repeats', type=int, help=f'runs of each contender (default {DEFAULTS["repeats"]})')
    parser.add_argument('--pool-size', type=int, default=5, help="each engine's pool_size (default 5)")
    parser.add_argument('--max-overflow', type=int, default=10, help="each engine's max_overflow (default 10)")
    parser.add_argument('--bouncer-pool', type=int, default=20, help="PgBouncer's default_pool_size (default 20)")
    parser.add_argument('--routes', nargs='+', choices=ROUTES, default=list(ROUTES))
    args = parser.parse_args()
    chosen = QUICK if args.quick else DEFAULTS

    def given(name: str) -> int:
        value = getattr(args, name)
        return int(value if value is not None else chosen[name])

    delays = args.delay or (QUICK_DELAYS if args.quick else DEFAULT_DELAYS)
    load = Load(
        processes=given('processes'),
        sessions=given('sessions'),
        warmup=given('warmup'),
        turns=given('turns'),
        delay=delays[0] / 1000,
        pool_size=args.pool_size,
        max_overflow=args.max_overflow,
    )
    if min(load.processes, load.sessions, load.turns) < 1 or load.warmup < 0 or min(delays) < 0:
        parser.error('processes, sessions and turns must be at least 1; warmup and delays not negative')
    return Plan(
        load=load,
        delays=[delay / 1000 for delay in delays],
        repeats=max(1, given('repeats')),
        routes=args.routes,
        bouncer_pool=args.bouncer_pool,
    )


if __name__ == '__main__':
    asyncio.run(run(parse_args()))
