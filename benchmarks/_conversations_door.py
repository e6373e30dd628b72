"""benchmarks/conversations.py's contenders: a turn through pydantic-ai's door (`store.conversations.load` + `save`)
on a store with a summarizing processor, against the peer's `get_items(limit=20)` + `add_items(4 items)`, each on
an archive of a given size, timed a compaction cycle at a time. See conversations.py's docstring for the protocol.

Import this only after `_bench_env.ensure_environment([AGENTS_SQLALCHEMY])`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from _bench_db import analyze
from _scripted_turn import UNLIMITED, prompt, turn_agent
from _store_contenders import HAVE_PEER, Databases, build_ours, build_peer, peer_engine, peer_session
from _store_conversation import TAIL, Summarizer, peer_turn
from _store_measuring import Measure
from pydantic_ai import Agent

from session_store import SessionStore

if TYPE_CHECKING:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

TRIGGER = 40
"""Messages in the window at which the store's processor summarizes, keeping `TAIL` (20)."""
CYCLE = (TRIGGER - TAIL) // 4
"""Turns from one compaction to the next: a measure runs this many, so each holds one compaction."""
SESSION = 'archive'
"""The session every archive holds (`build_ours`, `build_peer`)."""


@dataclass
class Door:
    """Ours on one archive: the store with the summarizing processor, the agent, the turns to come, and what the
    timed turns spent in `load` and in `save`."""

    store: SessionStore
    agent: Agent[None, str]
    summarizer: Summarizer
    turns: Iterator[int]
    size: int
    loads: list[float] = field(default_factory=list[float])
    saves: list[float] = field(default_factory=list[float])
    ran: int = 0

    def measure(self) -> Measure:
        """`CYCLE` turns; the mean seconds a turn spent in `load` and `save`, the agent's run between them not timed."""

        async def cycle() -> float:
            spent = 0.0
            for _ in range(CYCLE):
                load, save = await self.turn(next(self.turns))
                self.loads.append(load)
                self.saves.append(save)
                spent += load + save
            return spent / CYCLE

        return cycle

    async def turn(self, turn: int) -> tuple[float, float]:
        conversations = self.store.conversations
        start = time.perf_counter()
        conversation = await conversations.load(SESSION)
        loaded = time.perf_counter() - start
        assert conversation is not None
        # The window a Session would run from: the head, the latest summary and at most the tail before the trigger.
        assert len(conversation.messages) <= TRIGGER + 2, len(conversation.messages)
        result = await self.agent.run(prompt(turn), conversation=conversation, usage_limits=UNLIMITED)
        start = time.perf_counter()
        await conversations.save(result)
        self.ran += 1
        return loaded, time.perf_counter() - start

    async def check(self) -> None:
        """Every turn stored, a summary made each cycle (none failed), the archive whole."""
        (info,) = [info for info in await self.store.sessions() if info.session_id == SESSION]
        assert info.message_count == self.size + 4 * self.ran, (info.message_count, self.size, self.ran)
        assert not self.summarizer.failures, self.summarizer.failures
        assert self.summarizer.calls >= self.ran // CYCLE - 1, (self.summarizer.calls, self.ran)


@dataclass
class PeerTurns:
    """The peer on one archive: `get_items(limit=20)` + `add_items` of the turn's 4 items."""

    session: SQLAlchemySession
    turns: Iterator[int]
    size: int
    url: str
    """The peer's database."""
    ran: int = 0

    def measure(self) -> Measure:
        """`CYCLE` turns, as ours; the mean seconds a turn spent in the peer's two calls."""
        session = self.session

        async def cycle() -> float:
            start = time.perf_counter()
            for _ in range(CYCLE):
                items = await session.get_items(TAIL)
                assert len(items) == TAIL, len(items)
                await session.add_items(peer_turn(next(self.turns)))
                self.ran += 1
            return (time.perf_counter() - start) / CYCLE

        return cycle


@dataclass
class Contenders:
    """Every size's archives, built, with their measures and what checks them after."""

    doors: dict[int, Door] = field(default_factory=dict[int, Door])
    peers: dict[int, PeerTurns] = field(default_factory=dict[int, PeerTurns])

    def measures(self) -> dict[tuple[int, str], Measure]:
        found = {(size, 'ours'): door.measure() for size, door in self.doors.items()}
        return found | {(size, 'peer'): peer.measure() for size, peer in self.peers.items()}

    async def check(self) -> None:
        for door in self.doors.values():
            await door.check()
        for size, peer in self.peers.items():
            items = await peer.session.get_items()
            assert len(items) == size + 4 * peer.ran, (len(items), size, peer.ran)


async def contenders(stack: AsyncExitStack, databases: Databases, sizes: list[int]) -> Contenders:
    """Both archives of every size, built and analyzed; ours opened with the summarizing processor, the peer's
    engine at ours' durability on SQLite (`synchronous=NORMAL`)."""
    built = Contenders()
    for size in sizes:
        ours_url = databases.url(f'door-ours-{size}')
        await build_ours(ours_url, size)
        summarizer = Summarizer()
        store = await stack.enter_async_context(SessionStore(ours_url, processor=summarizer.processor(TRIGGER, TAIL)))
        await analyze(store.engine)
        turns = itertools.count(size // 4)
        built.doors[size] = Door(store, turn_agent(), summarizer, turns, size)
        if not HAVE_PEER:
            continue
        peer_url = databases.url(f'door-peer-{size}')
        await build_peer(peer_url, size)
        engine = peer_engine(peer_url, synchronous_normal=databases.sqlite)
        stack.push_async_callback(engine.dispose)
        await analyze(engine)
        built.peers[size] = PeerTurns(peer_session(SESSION, engine), itertools.count(size // 4), size, peer_url)
    return built
