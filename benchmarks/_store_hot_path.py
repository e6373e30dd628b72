"""benchmarks/store.py part 4, the hot path: on one long session each, a warm window read, a first open after
a restart and what the store adds to a run, ours against the peer in turn within each round, and issue 19's
targets for them. See store.py's docstring for the protocol."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from _bench_util import quiet_gc
from _seeding import Archive
from _store_contenders import (
    HAVE_PEER,
    Databases,
    WindowedAgent,
    ours_first_open,
    peer_engine,
    peer_first_open,
    peer_session,
    peer_warm_open,
)
from _store_conversation import TAIL, TRIGGER, our_archive, peer_archive, peer_turn, token_counts
from _store_measuring import cell, median_ms, print_target
from pydantic_ai.messages import ModelMessage

from session_store import SessionStore

HOT_SIZE, HOT_ROUNDS, QUICK_HOT_ROUNDS = 2_000, 31, 5
"""The session's length, and the rounds measured."""
TARGET_WARM_READ, TARGET_FIRST_OPEN = 1.0, 1.0
TARGET_ADDED = {'SQLite': 0.15, 'PostgreSQL': 0.5}
"""The targets, each as ours / the peer's (issue 19; first open and what a run adds, per backend, issue 28)."""


@dataclass(frozen=True)
class HotPath:
    """Median ms per round of each figure; the peer's are None when it is not installed."""

    ours_warm: float
    ours_first: float
    ours_added: float
    peer_warm: float | None = None
    peer_first: float | None = None
    peer_cycle: float | None = None


def slid(window: Sequence[ModelMessage]) -> None:
    """Checks a sliding window's: between its kept tail and its trigger."""
    assert TAIL <= len(window) <= TRIGGER, len(window)


async def fill_hot(store: SessionStore, messages: Sequence[ModelMessage]) -> None:
    """The session 'hot' at its steady state: `messages` archived, the window its last `TAIL` (a sliding window's
    cut, no summary), imported whole (`_seeding.Archive`)."""
    archive = Archive('hot')
    archive.append(messages, token_counts(messages))
    archive.window_start = len(messages) - TAIL
    await archive.store_in(store)


async def hot_path_benchmark(databases: Databases, rounds: int) -> HotPath:
    """The rounds: each contender's figures taken in turn, on one session of `HOT_SIZE` messages each."""
    windowed = WindowedAgent.sliding(TRIGGER)
    ours_url, peer_url = databases.url('hot-ours'), databases.url('hot-peer')
    times: dict[str, list[float]] = {name: [] for name in ('ours_warm', 'ours_first', 'ours_added')}
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(SessionStore(ours_url, processor=windowed.processor))
        await fill_hot(store, our_archive(HOT_SIZE))
        session = await store.session('hot')
        first_open = ours_first_open(ours_url, slid, 'hot', windowed.processor)
        peer = None
        if HAVE_PEER:
            times.update(peer_warm=[], peer_first=[], peer_cycle=[])
            engine = peer_engine(peer_url, synchronous_normal=databases.sqlite)
            stack.push_async_callback(engine.dispose)
            peer = peer_session('hot', engine)
            await peer.add_items(peer_archive(HOT_SIZE))
        for turn in range(rounds + 1):  # the first round warms every path up, untimed
            timed: dict[str, float] = {}
            with quiet_gc():
                start = time.perf_counter()
                window = await session.context()
                timed['ours_warm'] = time.perf_counter() - start
                slid(window)
                alone, in_session = await windowed.alone_then_in_session(session, window, f'Turn M{turn}')
                timed['ours_added'] = in_session - alone
                timed['ours_first'] = await first_open()
                if peer is not None:
                    held = HOT_SIZE + 4 * turn
                    timed['peer_warm'] = await peer_warm_open(peer, held, TAIL)()
                    start = time.perf_counter()
                    await peer.get_items(TAIL)
                    await peer.add_items(peer_turn(held // 4))
                    timed['peer_cycle'] = time.perf_counter() - start
                    timed['peer_first'] = await peer_first_open(peer_url, held + 4, TAIL, 'hot')()
            if turn:
                for name, seconds in timed.items():
                    times[name].append(seconds)
    return HotPath(**median_ms(times))


PEER_CYCLE = "peer's read + add_items"


def print_hot_path(hot: HotPath, rounds: int, backend: str) -> None:
    print(
        f'4. The hot path on {backend}: a {HOT_SIZE:,}-message session, sliding window {TRIGGER}/{TAIL}, the '
        f'scripted agent, {rounds} alternating rounds, median ms'
    )
    rows = [
        ('warm window read', 'session.context()', hot.ours_warm, f'get_items(limit={TAIL})', hot.peer_warm),
        (
            'first open after restart',
            'new store + session + context()',
            hot.ours_first,
            f'new engine + session + get_items(limit={TAIL})',
            hot.peer_first,
        ),
        (
            'what the store adds to a run',
            'session.run - agent.run',
            hot.ours_added,
            f'get_items(limit={TAIL}) + add_items(4)',
            hot.peer_cycle,
        ),
    ]
    for name, ours_is, ours, peer_is, peer in rows:
        print(f'   {name:<30} ours {ours:>7.2f}  ({ours_is})')
        print(f'   {"":<30} peer {cell(peer, 7)}  ({peer_is})')
    print()
    targets = [
        ('warm window read', hot.ours_warm, hot.peer_warm, TARGET_WARM_READ, f"peer's get_items(limit={TAIL})"),
        ('first open after restart', hot.ours_first, hot.peer_first, TARGET_FIRST_OPEN, "peer's first open"),
        ('what the store adds to a run', hot.ours_added, hot.peer_cycle, TARGET_ADDED[backend], PEER_CYCLE),
    ]
    for name, ours, peer, target, against in targets:
        print_target(backend, name, target, against, None if peer is None else ours / peer, at_least=False)
    print()
