"""One process of benchmarks/scale.py's load: many sessions of one contender, each running turns one after another,
all of them at once on one event loop.

    python benchmarks/_scale_worker.py '<the Job as JSON>'

It opens its contender (engine, store, sessions), runs the untimed warm-up turns, prints `ready`, waits for a
line on its standard input (the parent's start, given to every process at once), runs the timed turns, checks
that every turn was stored, and prints one JSON line: when the timed turns began and ended (`time.monotonic`,
one clock for every process on the machine), the CPU seconds this process spent on them (`time.process_time`),
how late its event loop woke a sleeping task meanwhile (a probe's samples: the loop's queueing), and, per turn,
its seconds: the whole turn, and the time in the store's read and in its write.

The contenders, each turn `_scripted_turn`'s agent on the same scripted model with the same delay and the same
history size (a sliding window, 100 messages keeping 20):

- `ours`: `session.run(agent, prompt)` on a `SessionStore` with that window as its processor. The time in the
  store's calls is what its own OpenTelemetry spans measure, `session_store.load_window` (the read a run starts
  with) and `session_store.store_run` (the run's write), timed by `_store_spans`.
- `peer`: `get_items(limit=20)`, the agent on a history kept in memory (the peer's items are the OpenAI
  Agents SDK's, which a pydantic-ai agent does not take), then `add_items` of the turn's 4 items; each timed.
- `alone`: the agent on its in-memory history and nothing stored: the ceiling the load allows.
"""
# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

import json
import sys

from _bench_env import AGENTS_SQLALCHEMY, ensure_environment

# Only the peer's process needs the peer (the parent, which started this one, found it importable or ran without).
ensure_environment([AGENTS_SQLALCHEMY] if json.loads(sys.argv[1])['contender'] == 'peer' else [])

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from _scale_job import READY, Job, Timing, job_of
from _scripted_turn import prompt, turn_agent
from _store_contenders import peer_engine, peer_session
from _store_conversation import TAIL, TRIGGER, peer_turn
from _store_spans import LOAD_WINDOW, STORE_RUN, time_spans
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from processors import SlidingWindow, SlidingWindowProcessor
from session_store import SessionStore

RunTurn = Callable[[int, int], Awaitable[tuple[float, float]]]
"""Runs turn `n` of session `index`; the seconds it spent in the store's read and in its write."""


# ---------------------------------------------------------------------------------------------------
# The contenders
# ---------------------------------------------------------------------------------------------------


def window() -> SlidingWindowProcessor:
    return SlidingWindowProcessor(trigger=('messages', TRIGGER), keep=('messages', TAIL))


@dataclass
class InMemory:
    """The agent on a history kept in memory, slid as the store's window slides, with the same window capability."""

    agent: Agent[None, str]
    capability: SlidingWindow
    histories: list[list[ModelMessage]]

    @classmethod
    def of(cls, job: Job) -> InMemory:
        processor = window()
        capability = SlidingWindow(trigger=processor.trigger, keep=processor.keep)
        return cls(turn_agent(job.load.delay), capability, [[] for _ in range(job.load.sessions)])

    async def run(self, index: int, turn: int) -> None:
        result = await self.agent.run(
            prompt(turn), message_history=self.histories[index], capabilities=[self.capability]
        )
        messages = result.all_messages()
        self.histories[index] = messages[-TAIL:] if len(messages) > TRIGGER else messages


@asynccontextmanager
async def ours(job: Job) -> AsyncIterator[RunTurn]:
    options = {'pool_size': job.load.pool_size, 'max_overflow': job.load.max_overflow}
    store = SessionStore(job.url, processor=window(), transaction_pooler=job.pooler, engine_options=options)
    async with store:
        sessions = [await store.session(session_id) for session_id in job.session_ids()]
        agent = turn_agent(job.load.delay)

        async def run_turn(index: int, turn: int) -> tuple[float, float]:
            spent = time_spans()  # this session's task: each runs in a context of its own
            await sessions[index].run(agent, prompt(turn))
            return spent[LOAD_WINDOW], spent[STORE_RUN]

        yield run_turn
        stored = {info.session_id: info.message_count for info in await store.sessions()}
    expected = 4 * (job.load.warmup + job.load.turns)
    missing = {sid: stored.get(sid) for sid in job.session_ids() if stored.get(sid) != expected}
    assert not missing, f'ours stored other than {expected} messages: {missing}'


def pooler_options() -> dict[str, Any]:
    """SQLAlchemy's documented asyncpg settings behind PgBouncer in transaction mode: no statement cache on either
    side, and a name of its own for every prepared statement."""
    return {
        'connect_args': {
            'statement_cache_size': 0,
            'prepared_statement_cache_size': 0,
            'prepared_statement_name_func': lambda: f'__asyncpg_{uuid.uuid4().hex}__',
        }
    }


@asynccontextmanager
async def peer(job: Job) -> AsyncIterator[RunTurn]:
    options: dict[str, Any] = {'pool_size': job.load.pool_size, 'max_overflow': job.load.max_overflow}
    engine = peer_engine(job.url, **options, **(pooler_options() if job.pooler else {}))
    try:
        sessions = [peer_session(session_id, engine) for session_id in job.session_ids()]
        memory = InMemory.of(job)

        async def run_turn(index: int, turn: int) -> tuple[float, float]:
            session = sessions[index]
            start = time.perf_counter()
            await session.get_items(TAIL)
            read = time.perf_counter() - start
            await memory.run(index, turn)
            start = time.perf_counter()
            await session.add_items(peer_turn(turn))
            return read, time.perf_counter() - start

        yield run_turn
        expected = 4 * (job.load.warmup + job.load.turns)
        counts = [len(await session.get_items()) for session in sessions]
    finally:
        await engine.dispose()
    assert all(count == expected for count in counts), f'the peer stored other than {expected} items: {counts}'


@asynccontextmanager
async def alone(job: Job) -> AsyncIterator[RunTurn]:
    memory = InMemory.of(job)

    async def run_turn(index: int, turn: int) -> tuple[float, float]:
        await memory.run(index, turn)
        return 0.0, 0.0

    yield run_turn


OPEN = {'ours': ours, 'peer': peer, 'alone': alone}


# ---------------------------------------------------------------------------------------------------
# The process
# ---------------------------------------------------------------------------------------------------


async def run_sessions(run_turn: RunTurn, sessions: int, first: int, count: int) -> list[Timing]:
    """Turns `first..first+count` of every session, the sessions at once and each one's turns in order."""

    async def one(index: int) -> list[Timing]:
        timings = []
        for turn in range(first, first + count):
            start = time.perf_counter()
            read, write = await run_turn(index, turn)
            timings.append((time.perf_counter() - start, read, write))
        return timings

    per_session: Sequence[list[Timing]] = await asyncio.gather(*(one(index) for index in range(sessions)))
    return [timing for timings in per_session for timing in timings]


LAG_PROBE = 0.01
"""Seconds the loop-lag probe sleeps between two looks at the clock."""


async def probe_lag(lags: list[float]) -> None:
    """How late the event loop wakes a task that slept `LAG_PROBE` seconds, until cancelled: the queueing each of
    a turn's awaits (a model request, a round trip to the server) waits on top of its own time."""
    while True:
        start = time.perf_counter()
        await asyncio.sleep(LAG_PROBE)
        lags.append(time.perf_counter() - start - LAG_PROBE)


async def main(job: Job) -> None:
    async with OPEN[job.contender](job) as run_turn:
        await run_sessions(run_turn, job.load.sessions, 0, job.load.warmup)
        print(READY, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        lags: list[float] = []
        probe = asyncio.create_task(probe_lag(lags))
        started, cpu = time.monotonic(), time.process_time()
        timings = await run_sessions(run_turn, job.load.sessions, job.load.warmup, job.load.turns)
        ended, cpu = time.monotonic(), time.process_time() - cpu
        probe.cancel()
    print(json.dumps({'started': started, 'ended': ended, 'cpu': cpu, 'timings': timings, 'lags': lags}), flush=True)


if __name__ == '__main__':
    asyncio.run(main(job_of(sys.argv[1])))
