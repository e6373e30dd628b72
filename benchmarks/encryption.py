"""What encryption at rest costs: the same work on a plain store and on an encrypted one, as a ratio.

Run it from the repo root (the project venv, with the `encryption` extra):

    python benchmarks/encryption.py
    python benchmarks/encryption.py --quick        # small sizes, one repeat: does it run, roughly how

Both stores run side by side in one process, on the same backend, each in its own new database: SQLite (an
aiosqlite file in a temporary directory) and PostgreSQL (a fresh database on the server `testkit/postgres.py`
finds or starts; skipped, saying why, when there is none). Every figure is the median over `--repeats`, the
two stores taken in alternation so load from other processes falls on each alike.

- append: what a run costs the store: `session.run` of a scripted agent (`_scripted_turn.py`) that stores one
  tool-using turn of 4 messages, over `--turns` turns, timed by the store's own OpenTelemetry spans of the
  run, `session_store.load_window` (warm: the window cached at the session's revision) and
  `session_store.store_run` (`_store_spans.py`), the agent's work left out; the encrypted store seals each
  payload and makes its blind search words.
- first open: a new store (engine, schema check, the hot path's SQL compiled anew) opening a session with
  `--size` archived messages (stored with the public `store.import_`, `_seeding.py`; the window a sliding
  window's cut 20 from the end) and building its window (a sliding window's 20 kept messages): the
  encrypted store opens each of them.
- history: reading the whole archive back (`store.history(id)`), every message opened.
- search: `store.search(words, match='words')` over the archive: FTS5 or tsvector over words against the
  same index over blind words.
"""

# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import ensure_environment

ensure_environment()  # no peer: the repo root on sys.path (for `testkit.postgres`), and the project installed

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from _bench_db import postgres_server
from _bench_util import load_average, machine, quiet_gc
from _scripted_turn import turn_agent
from _seeding import Archive
from _store_spans import LOAD_WINDOW, STORE_RUN, time_spans
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from processors import SlidingWindowProcessor, count_tokens_approximately
from session_store import Encryption, SessionStore
from testkit.postgres import drop_database, fresh_database

TAIL = 20
KEYS = Encryption(keys={'k1': Encryption.generate_key()})
_FILLER = 'the customer asked about the parcel, the refund and the invoice for order number ' * 8


def question(number: int) -> str:
    """The user prompt of turn `number`."""
    return f'Question {number} zebra{number % 50}: {_FILLER[:120]}'


def turn(number: int) -> list[ModelMessage]:
    """One tool-using turn: a question, a tool call, its result, an answer."""
    call = f'call_{number:07d}'
    return [
        ModelRequest(parts=[UserPromptPart(question(number))]),
        ModelResponse(parts=[ToolCallPart('lookup_order', {'order': f'A-{number:07d}'}, tool_call_id=call)]),
        ModelRequest(parts=[ToolReturnPart('lookup_order', f'Result {number}: {_FILLER[:400]}', tool_call_id=call)]),
        ModelResponse(parts=[TextPart(f'Answer {number}: {_FILLER[:250]}')]),
    ]


def counted(messages: list[ModelMessage]) -> list[int]:
    return [count_tokens_approximately([message]) for message in messages]


Measure = Callable[[], Awaitable[float]]


async def alternate(measures: dict[str, Measure], repeats: int) -> dict[str, float]:
    """The median seconds of each measure, run in turns."""
    taken: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(repeats):
        for name, measure in measures.items():
            with quiet_gc():
                taken[name].append(await measure())
    return {name: statistics.median(values) for name, values in taken.items()}


def store(url: str, sealed: bool) -> SessionStore:
    return SessionStore(
        url,
        processor=SlidingWindowProcessor(trigger=('messages', 100), keep=('messages', TAIL)),
        encryption=KEYS if sealed else None,
    )


@dataclass
class Figures:
    append: dict[str, float]
    first_open: dict[str, float]
    history: dict[str, float]
    search: dict[str, float]


async def append_turns(stores: dict[str, SessionStore], turns: int) -> dict[str, float]:
    """Median seconds per turn of a run's `load_window` + `store_run` spans, the stores taking turns."""
    taken: dict[str, list[float]] = {name: [] for name in stores}
    agent = turn_agent(script=turn, system_prompt=None)
    sessions = {name: await opened.session('append') for name, opened in stores.items()}
    for number in range(turns):
        for name, session in sessions.items():
            with quiet_gc():
                spent = time_spans()
                await session.run(agent, question(number))
                taken[name].append(spent[LOAD_WINDOW] + spent[STORE_RUN])
    for opened in stores.values():
        assert len(await opened.history('append')) == 4 * turns
    return {name: statistics.median(values) for name, values in taken.items()}


async def build_archive(opened: SessionStore, size: int) -> None:
    """Session 'archive': `size` messages of `turn`s, its window their last `TAIL` (a sliding window's cut)."""
    archive = Archive('archive')
    messages = [message for number in range(size // 4) for message in turn(number)]
    archive.append(messages, counted(messages))
    archive.window_start = len(messages) - TAIL
    await archive.store_in(opened)


async def measure_backend(urls: dict[str, str], turns: int, size: int, repeats: int) -> Figures:
    stores = {name: store(url, name == 'encrypted') for name, url in urls.items()}
    try:
        append = await append_turns(stores, turns)
        for opened in stores.values():
            await build_archive(opened, size)

        def first_open(name: str) -> Measure:
            async def measure() -> float:
                start = time.perf_counter()
                fresh = store(urls[name], name == 'encrypted')
                try:
                    window = await (await fresh.session('archive')).context()
                    elapsed = time.perf_counter() - start
                finally:
                    await fresh.close()
                assert len(window) == TAIL, len(window)  # the kept tail
                return elapsed

            return measure

        def history(name: str) -> Measure:
            async def measure() -> float:
                start = time.perf_counter()
                read = await stores[name].history('archive')
                elapsed = time.perf_counter() - start
                assert len(read) == size, len(read)
                return elapsed

            return measure

        def search(name: str) -> Measure:
            async def measure() -> float:
                start = time.perf_counter()
                hits = await stores[name].search('zebra7 refund', match='words', session_id='archive', limit=1_000)
                elapsed = time.perf_counter() - start
                assert len(hits) == size // 4 // 50, len(hits)
                return elapsed

            return measure

        return Figures(
            append=append,
            first_open=await alternate({name: first_open(name) for name in urls}, repeats),
            history=await alternate({name: history(name) for name in urls}, repeats),
            search=await alternate({name: search(name) for name in urls}, repeats),
        )
    finally:
        for opened in stores.values():
            await opened.close()


def report(backend: str, figures: Figures, turns: int, size: int) -> None:
    rows = [
        (f'append (load_window + store_run spans of session.run, 4 messages, {turns} turns)', figures.append),
        (f'first open @{size:,}', figures.first_open),
        (f'history @{size:,}', figures.history),
        (f'search words @{size:,}', figures.search),
    ]
    for label, taken in rows:
        plain, sealed = taken['plain'] * 1e3, taken['encrypted'] * 1e3
        figures_ = f'plain {plain:.2f} ms, encrypted {sealed:.2f} ms'
        print(f'{label} on {backend}: {figures_} -> encrypted/plain {sealed / plain:.2f} x')


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='small sizes and one repeat (seconds)')
    parser.add_argument('--turns', type=int, help='turns appended (default 200; 20 with --quick)')
    parser.add_argument('--size', type=int, help='archived messages for open, history and search (default 10,000)')
    parser.add_argument('--repeats', type=int, help='repeats of each read (default 7; 1 with --quick)')
    args = parser.parse_args()
    turns = args.turns or (20 if args.quick else 200)
    size = args.size or (1_000 if args.quick else 10_000)
    repeats = args.repeats or (1 if args.quick else 7)
    print(f'encryption at rest: AES-256-GCM per value, blind search index; {machine()}; {load_average("at start")}')
    with tempfile.TemporaryDirectory() as folder:
        urls = {name: f'sqlite+aiosqlite:///{folder}/{name}.db' for name in ('plain', 'encrypted')}
        report('SQLite', await measure_backend(urls, turns, size, repeats), turns, size)
    server, why = postgres_server()
    if server is None:
        print(f'=== PostgreSQL figures skipped: {why}')
        return
    urls = {name: fresh_database(server) for name in ('plain', 'encrypted')}
    try:
        report('PostgreSQL', await measure_backend(urls, turns, size, repeats), turns, size)
    finally:
        for url in urls.values():
            drop_database(url)
    print(load_average('at the end'))


if __name__ == '__main__':
    asyncio.run(main())
