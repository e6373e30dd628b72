"""benchmarks/store.py's contenders, ours and the OpenAI Agents SDK's `SQLAlchemySession`: the databases each
gets, their archives filled, their sessions opened and timed, and ours run with the tests' scripted agent.

Import this only after `_bench_env.ensure_environment([AGENTS_SQLALCHEMY])`: `HAVE_PEER` says whether the
peer could be had, and every figure of the peer's is left out without it.
"""

from __future__ import annotations

import abc
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _bench_env import AGENTS_SQLALCHEMY, peer_ready
from _seeding import Archive
from _store_conversation import (
    SUMMARY_TEXT,
    TAIL,
    our_archive,
    peer_archive,
    peer_turn,
    token_counts,
)
from _store_measuring import Measure
from pydantic_ai import Agent
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, SystemPromptPart
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from processors import SlidingWindow, SlidingWindowProcessor
from session_store import Session, SessionStore
from testkit.postgres import drop_database, fresh_database
from testkit.scripted import ParallelToolAssistant, scripted_agent

HAVE_PEER = peer_ready(AGENTS_SQLALCHEMY)
"""Whether the peer is installed here (`ensure_environment` made it so, or said why it could not)."""
if HAVE_PEER:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
if TYPE_CHECKING:
    from agents.items import TResponseInputItem as PeerItem

SUMMARY_EVERY = 80
"""Messages each summary of an archive's chain covers (a trigger of 100 messages keeping 20)."""
BUILD_BATCH = 5_000
"""Items per `add_items` while filling the peer's archive."""

Check = Callable[[Sequence[ModelMessage]], None]
"""Asserts that a window we built is the one expected."""


# ---------------------------------------------------------------------------------------------------
# Databases
# ---------------------------------------------------------------------------------------------------


class Databases(abc.ABC):
    """Fresh, empty databases of one backend, one per `url()` call; `close()` removes them all."""

    title: str
    """How the report names the backend."""

    sqlite: bool
    """Whether these are SQLite databases, where the peer is also measured with `synchronous=NORMAL`."""

    @abc.abstractmethod
    def url(self, name: str) -> str:
        """The async SQLAlchemy URL of a new empty database; `name` says what it is for."""

    @abc.abstractmethod
    def close(self) -> None:
        """Remove every database made."""


class SqliteFiles(Databases):
    """Database files in one temporary directory."""

    title = 'SQLite'
    sqlite = True

    def __init__(self) -> None:
        self._directory = tempfile.TemporaryDirectory(prefix='store-bench-')
        self._count = 0

    def url(self, name: str) -> str:
        self._count += 1
        return f'sqlite+aiosqlite:///{Path(self._directory.name) / f"{self._count:03d}-{name}.db"}'

    def close(self) -> None:
        self._directory.cleanup()


class PostgresDatabases(Databases):
    """Databases made with `testkit.postgres.fresh_database` on one server, dropped by `close()`."""

    title = 'PostgreSQL'
    sqlite = False

    def __init__(self, server: str) -> None:
        self._server = server
        self._urls: list[str] = []

    def url(self, name: str) -> str:
        url = fresh_database(self._server)
        self._urls.append(url)
        return url

    def close(self) -> None:
        for url in self._urls:
            drop_database(url)


def peer_engine(url: str, *, synchronous_normal: bool = False, **options: Any) -> AsyncEngine:
    """The peer's engine; on SQLite, with `synchronous=NORMAL` if asked (its default is FULL). `options` go to
    `create_async_engine` (pool sizes, `connect_args`), as a peer user would give them."""
    engine = create_async_engine(url, **options)
    if synchronous_normal:

        @event.listens_for(engine.sync_engine, 'connect')
        def _normal(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute('PRAGMA synchronous=NORMAL')
            cursor.close()

    return engine


def peer_session(session_id: str, engine: AsyncEngine) -> SQLAlchemySession:
    """The peer's session on `engine`, making its tables on first use, as its documentation shows."""
    return SQLAlchemySession(session_id, engine=engine, create_tables=True)


# ---------------------------------------------------------------------------------------------------
# Ours through an agent
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowedAgent:
    """The tests' scripted agent (`ParallelToolAssistant`), a store's sliding window and the same window as
    the agent's capability: what a session runs, and the agent alone on the same window."""

    processor: SlidingWindowProcessor
    capability: SlidingWindow
    agent: Agent[None, str]

    @classmethod
    def sliding(cls, trigger: int) -> WindowedAgent:
        """A window sliding at `trigger` messages, keeping the last `TAIL`."""
        processor = SlidingWindowProcessor(trigger=('messages', trigger), keep=('messages', TAIL))
        capability = SlidingWindow(trigger=processor.trigger, keep=processor.keep)
        return cls(processor, capability, scripted_agent(ParallelToolAssistant()))

    async def alone_then_in_session(
        self, session: Session, window: list[ModelMessage], prompt: str
    ) -> tuple[float, float]:
        """Seconds of `agent.run(prompt)` alone on `window` with the window capability, nothing stored (its
        result dropped), then of `session.run(agent, prompt)`: the difference is what the session adds."""
        start = time.perf_counter()
        await self.agent.run(prompt, message_history=window, capabilities=[self.capability])
        middle = time.perf_counter()
        await session.run(self.agent, prompt)
        return middle - start, time.perf_counter() - middle


# ---------------------------------------------------------------------------------------------------
# Archives
# ---------------------------------------------------------------------------------------------------


def summary_cuts(size: int) -> list[int]:
    """Where each summary of the chain ends: every `SUMMARY_EVERY` messages, the last one `TAIL` from the end."""
    last = size - TAIL
    return [*range(SUMMARY_EVERY, last, SUMMARY_EVERY), last]


def grow(archive: Archive, messages: Sequence[ModelMessage], tokens: Sequence[int], end: int) -> None:
    """Extend the archive's active path to `end` messages (`messages[at]` at each position `at`), summarized as
    a session would be: the chain goes on from the path's last summary (where its window starts) with one at
    every `summary_cuts(end)` after it, each covering from the one before."""
    archive.append(messages[archive.length : end], tokens[archive.length : end])
    for cut in (cut for cut in summary_cuts(end) if cut > archive.window_start):
        archive.summarize(cut, f'{SUMMARY_TEXT} [{cut}]', len(SUMMARY_TEXT) // 4, 'bench')


async def build_ours(url: str, size: int) -> None:
    """Session 'archive': `size` messages with their summary chain, imported whole (`_seeding.Archive`)."""
    messages = our_archive(size)
    archive = Archive('archive')
    grow(archive, messages, token_counts(messages), size)
    async with SessionStore(url) as store:
        await archive.store_in(store)
        info = (await store.sessions())[0]
    assert (info.message_count, info.summary_count) == (size, len(summary_cuts(size))), info


async def build_peer(url: str, size: int) -> None:
    """The peer's session 'archive': `size` items, added in batches of `BUILD_BATCH`."""
    items = peer_archive(size)
    engine = peer_engine(url)
    try:
        session = peer_session('archive', engine)
        for start in range(0, size, BUILD_BATCH):
            await session.add_items(items[start : start + BUILD_BATCH])
    finally:
        await engine.dispose()


# ---------------------------------------------------------------------------------------------------
# Opening a session and reading what a run starts from
# ---------------------------------------------------------------------------------------------------


def summarized(size: int) -> Check:
    """Checks a window of an archive grown by `grow` to `size` messages: the latest summary and the system
    prompt riding in the first of the last `TAIL` messages."""

    def check(window: Sequence[ModelMessage]) -> None:
        assert len(window) == TAIL, f'ours built a window of {len(window)} messages at {size}'
        first = window[0]
        assert isinstance(first, ModelRequest), first
        kinds = [type(part) for part in first.parts]
        assert kinds[:2] == [SystemPromptPart, CompactionPart], kinds
        summary = first.parts[1]
        assert isinstance(summary, CompactionPart) and (summary.content or '').endswith(f'[{size - TAIL}]'), summary

    return check


def check_items(items: Sequence[PeerItem], limit: int | None, size: int) -> None:
    """The peer's read of a session of `size` items: all of them, or the last `limit`."""
    expected = size if limit is None else min(size, limit)
    assert len(items) == expected, f'the peer returned {len(items)} of {expected} items at {size}'
    assert items[-1] == peer_turn(size // 4 - 1)[-1], items[-1]


def ours_first_open(
    url: str, check: Check, session_id: str = 'archive', processor: SlidingWindowProcessor | None = None
) -> Measure:
    """A new `SessionStore` (engine, schema revision check), `store.session(id)`, `session.context()`, the
    window then checked; closing the store is not timed."""

    async def measure() -> float:
        start = time.perf_counter()
        store = SessionStore(url, processor=processor)
        try:
            window = await (await store.session(session_id)).context()
            elapsed = time.perf_counter() - start
        finally:
            await store.close()
        check(window)
        return elapsed

    return measure


def ours_warm_open(store: SessionStore, check: Check, session_id: str = 'archive') -> Measure:
    """`store.session(id)` + `session.context()` on an open store."""

    async def measure() -> float:
        start = time.perf_counter()
        window = await (await store.session(session_id)).context()
        elapsed = time.perf_counter() - start
        check(window)
        return elapsed

    return measure


def peer_first_open(url: str, size: int, limit: int | None, session_id: str = 'archive') -> Measure:
    """A new engine, `SQLAlchemySession(id, engine=..., create_tables=True)`, `get_items(limit)` of a session
    of `size` items; disposing of the engine is not timed."""

    async def measure() -> float:
        start = time.perf_counter()
        engine = create_async_engine(url)
        try:
            items = await peer_session(session_id, engine).get_items(limit)
            elapsed = time.perf_counter() - start
        finally:
            await engine.dispose()
        check_items(items, limit, size)
        return elapsed

    return measure


def peer_warm_open(session: SQLAlchemySession, size: int, limit: int | None) -> Measure:
    """`get_items(limit)` on an open session of `size` items."""

    async def measure() -> float:
        start = time.perf_counter()
        items = await session.get_items(limit)
        elapsed = time.perf_counter() - start
        check_items(items, limit, size)
        return elapsed

    return measure
