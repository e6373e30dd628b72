"""benchmarks/scale.py's runs: one contender's load on a fresh database, its processes started together, the
server's connections sampled meanwhile, and PgBouncer in transaction mode in front of the server.

Import this only after `_bench_env.ensure_environment([AGENTS_SQLALCHEMY])`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]  # ships no type hints
from _scale_job import READY, Job, Load, Timing, job_argument
from _store_contenders import peer_engine, peer_session
from sqlalchemy.engine import make_url

from session_store import SessionStore
from testkit.faults import pgbouncer
from testkit.postgres import drop_database, fresh_database

WORKER = Path(__file__).resolve().parent / '_scale_worker.py'
RUN_TIMEOUT = 900.0
"""Seconds one contender's run (its processes' start, warm-up and timed turns) may take before it is stopped."""
SAMPLE_EVERY = 0.02
"""Seconds between two counts of the server's connections."""
SETTLE = 5.0
"""Seconds the count may wait for the connections that made the tables to end, before the processes start."""
_RAISED = re.compile(r'^[A-Za-z_][\w.]*(Error|Exception|Unavailable|Conflict|Full)\b')
"""A traceback's last line: the exception's name, then what it says."""


@dataclass(frozen=True)
class Route:
    """How the processes reach the server: directly, or through PgBouncer (`bouncer` is its URL then)."""

    name: str
    server: str
    """The server's own URL: databases are made, and connections counted, there."""
    bouncer: str | None = None
    bouncer_pool: int | None = None
    """PgBouncer's `default_pool_size`: the server connections it opens per database and user."""

    @property
    def pooler(self) -> bool:
        return self.bouncer is not None

    def url(self, database: str) -> str:
        """The URL the processes use for `database` (a URL on the server)."""
        if self.bouncer is None:
            return database
        through = make_url(self.bouncer)
        return make_url(database).set(host=through.host, port=through.port).render_as_string(hide_password=False)

    def bound(self, load: Load) -> int:
        """The most server connections the contender's pools can open: every process's one pool (ours and the
        peer's alike), `pool_size + max_overflow`; through PgBouncer, at most its pool, whatever the clients hold."""
        clients = load.processes * (load.pool_size + load.max_overflow)
        return clients if self.bouncer_pool is None else min(clients, self.bouncer_pool)


@contextlib.contextmanager
def bouncer_route(server: str, pool: int) -> Iterator[Route]:
    """PgBouncer in transaction mode in front of `server` (testkit's, stopped after), as a route."""
    with (
        tempfile.TemporaryDirectory(prefix='scale-pgbouncer-') as root,
        pgbouncer(server, Path(root), pool_size=pool) as url,
    ):
        yield Route('PgBouncer', server, bouncer=url, bouncer_pool=pool)


@dataclass
class Outcome:
    """One run of one contender: its timed turns, how long they took, and the server connections it held."""

    timings: list[Timing]
    seconds: float
    """From the first process's start of its timed turns to the last one's end."""
    peak_connections: int
    timed_connections: float
    """The median count while the timed turns ran."""
    cpu: float
    """CPU seconds the processes spent on their timed turns (the server's are not counted)."""
    lags: list[float]
    """How late the processes' event loops woke a task sleeping 10 ms, in seconds, sampled during the timed turns."""

    @property
    def turns_per_second(self) -> float:
        return len(self.timings) / self.seconds

    @property
    def cpu_per_turn(self) -> float:
        return self.cpu / len(self.timings)


@dataclass
class _Sampler:
    """Counts the server's connections to one database, every `SAMPLE_EVERY` seconds, until stopped."""

    server: str
    database: str
    samples: list[tuple[float, int]] = field(default_factory=list[tuple[float, int]])

    async def run(self, settled: asyncio.Event) -> None:
        """Count, once the preparation's connections are gone (or after `SETTLE` seconds) setting `settled`."""
        dsn = make_url(self.server).set(drivername='postgresql').render_as_string(hide_password=False)
        connection = await asyncpg.connect(dsn)
        try:
            deadline = time.monotonic() + SETTLE
            while await self._count(connection) and time.monotonic() < deadline:
                await asyncio.sleep(SAMPLE_EVERY)
            settled.set()
            while True:
                self.samples.append((time.monotonic(), await self._count(connection)))
                await asyncio.sleep(SAMPLE_EVERY)
        finally:
            await connection.close()

    async def _count(self, connection: asyncpg.Connection) -> int:
        query = 'SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()'
        return int(await connection.fetchval(query, self.database))

    def peak(self) -> int:
        return max((count for _, count in self.samples), default=0)

    def median_between(self, start: float, end: float) -> float:
        during = [count for at, count in self.samples if start <= at <= end]
        return statistics.median(during) if during else 0.0


@contextlib.asynccontextmanager
async def _sampling(server: str, database: str) -> AsyncIterator[_Sampler]:
    sampler = _Sampler(server, database)
    settled = asyncio.Event()
    task = asyncio.create_task(sampler.run(settled))
    try:
        await asyncio.wait([task, asyncio.create_task(settled.wait())], return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # the sampler could not connect: say why
        yield sampler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@dataclass
class _Worker:
    """A process of the load, speaking `_scale_worker`'s protocol."""

    job: Job
    process: asyncio.subprocess.Process
    errors: list[bytes] = field(default_factory=list[bytes])
    lines: list[str] = field(default_factory=list[str])
    draining: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, job: Job) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            job_argument(job),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        worker = cls(job, process)
        worker.draining = asyncio.create_task(worker._drain_errors())
        return worker

    async def _drain_errors(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(65_536):
            self.errors.append(chunk)

    async def _line(self) -> str:
        assert self.process.stdout is not None
        line = (await self.process.stdout.readline()).decode()
        if not line:
            await self.process.wait()
            raise RuntimeError(f'process {self.job.process} of {self.job.contender} failed: {self.failure()}')
        self.lines.append(line)
        return line.strip()

    def failure(self) -> str:
        """The process's exit and the error it raised last (a traceback's line naming the exception)."""
        said = b''.join(self.errors).decode(errors='replace').strip().splitlines() or self.lines[-3:]
        raised = [line for line in said if _RAISED.match(line)]
        return f'exit {self.process.returncode}: ' + (raised[-1] if raised else ' / '.join(said[-3:]))

    async def ready(self) -> None:
        while await self._line() != READY:
            pass

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b'go\n')

    async def result(self) -> dict[str, object]:
        found: dict[str, object] = json.loads(await self._line())
        await self.process.wait()
        return found

    def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


async def prepare(contender: str, url: str) -> None:
    """The contender's tables in the new database, made before its processes start, as a deployment would."""
    if contender == 'ours':
        async with SessionStore(url):
            pass
    elif contender == 'peer':
        engine = peer_engine(url)
        try:
            await peer_session('setup', engine).get_items()
        finally:
            await engine.dispose()


async def run_contender(contender: str, route: Route, load: Load) -> Outcome:
    """The contender's processes on a fresh database, started together once every one is warm; the database
    dropped after."""
    database = fresh_database(route.server)
    try:
        await prepare(contender, database)
        name = make_url(database).database
        assert name is not None
        async with _sampling(route.server, name) as sampler:
            workers: list[_Worker] = []
            try:
                async with asyncio.timeout(RUN_TIMEOUT):
                    workers = [
                        await _Worker.start(job) for job in load.jobs(contender, route.url(database), route.pooler)
                    ]
                    await asyncio.gather(*(worker.ready() for worker in workers))
                    for worker in workers:
                        worker.go()
                    results = await asyncio.gather(*(worker.result() for worker in workers))
            finally:
                for worker in workers:
                    worker.stop()
    finally:
        drop_database(database)
    started = min(float(result['started']) for result in results)  # type: ignore[arg-type]
    ended = max(float(result['ended']) for result in results)  # type: ignore[arg-type]
    timings = [tuple(timing) for result in results for timing in result['timings']]  # type: ignore[attr-defined]
    expected = load.concurrent * load.turns
    assert len(timings) == expected, f'{contender}: {len(timings)} timed turns of {expected}'
    return Outcome(
        timings=timings,  # type: ignore[arg-type]
        seconds=ended - started,
        peak_connections=sampler.peak(),
        timed_connections=sampler.median_between(started, ended),
        cpu=sum(float(result['cpu']) for result in results),  # type: ignore[arg-type]
        lags=[float(lag) for result in results for lag in result['lags']],  # type: ignore[attr-defined]
    )


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` (0.5, 0.99) percentile of `values`, interpolated between the two nearest."""
    ordered = sorted(values)
    at = share * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)
