"""benchmarks/store.py part 2, opening a session against its archive's size: a first open and a warm one of
ours (summary + kept tail) and of the peer (`get_items()` and `get_items(limit=20)`), at each size, and our
growth from the smallest archive to the largest. See store.py's docstring for the protocol."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from _bench_db import analyze
from _bench_util import size_label
from _store_contenders import (
    HAVE_PEER,
    Databases,
    build_ours,
    build_peer,
    ours_first_open,
    ours_warm_open,
    peer_first_open,
    peer_session,
    peer_warm_open,
    summarized,
)
from _store_conversation import TAIL
from _store_measuring import PEER_MISSING, Measure, cell, print_target, round_robin, versus
from sqlalchemy.ext.asyncio import create_async_engine

from session_store import SessionStore

TARGET_GROWTH = 2.0
"""The target, reported against, never asserted: ours at the largest archive costs at most this much more
than at the smallest."""


@dataclass(frozen=True)
class Opening:
    """Median ms to open a session and read what a run starts from, for one archive size."""

    ours_first: float
    ours_warm: float
    peer_first_all: float | None = None
    """The peer's figures are None when it is not installed."""
    peer_warm_all: float | None = None
    peer_first_tail: float | None = None
    peer_warm_tail: float | None = None

    def ours(self, first: bool) -> float:
        return self.ours_first if first else self.ours_warm

    def peer_all(self, first: bool) -> float | None:
        return self.peer_first_all if first else self.peer_warm_all

    def peer_tail(self, first: bool) -> float | None:
        return self.peer_first_tail if first else self.peer_warm_tail


async def opening_measures(stack: AsyncExitStack, databases: Databases, size: int) -> dict[str, Measure]:
    """Both archives of `size` messages (ours alone without the peer), built and analyzed, and the six ways
    of opening them."""
    ours_url = databases.url(f'ours-{size}')
    await build_ours(ours_url, size)
    store = await stack.enter_async_context(SessionStore(ours_url))
    await analyze(store.engine)
    check = summarized(size)
    ours = {'ours_first': ours_first_open(ours_url, check), 'ours_warm': ours_warm_open(store, check)}
    if not HAVE_PEER:
        return ours
    peer_url = databases.url(f'peer-{size}')
    await build_peer(peer_url, size)
    engine = create_async_engine(peer_url)
    stack.push_async_callback(engine.dispose)
    await analyze(engine)
    session = peer_session('archive', engine)
    return {
        **ours,
        'peer_first_all': peer_first_open(peer_url, size, None),
        'peer_warm_all': peer_warm_open(session, size, None),
        'peer_first_tail': peer_first_open(peer_url, size, TAIL),
        'peer_warm_tail': peer_warm_open(session, size, TAIL),
    }


async def opening_benchmark(databases: Databases, sizes: Sequence[int], repeats: int) -> dict[int, Opening]:
    """Every size's archives are built first; then all sizes and contenders are timed in turns, so that the
    growth from the smallest archive to the largest is measured under the same load too."""
    async with AsyncExitStack() as stack:
        measures = {
            (size, name): measure
            for size in sizes
            for name, measure in (await opening_measures(stack, databases, size)).items()
        }
        medians = await round_robin(measures, repeats)
    return {size: Opening(**{name: ms for (at, name), ms in medians.items() if at == size}) for size in sizes}


def print_opening_table(openings: dict[int, Opening], backend: str) -> None:
    print(f'2. Open a session + build its window on {backend}, median ms (ours: summary + 20-message tail)')
    print(f'   {"archived":>9} | {"ours":^21} | {"peer, get_items()":^21} | {"peer, get_items(20)":^21}'.rstrip())
    print(f'   {"":>9} |' + ' |'.join([f' {"first":>10} {"warm":>10}'] * 3))
    for size, o in openings.items():
        cells = (o.ours_first, o.ours_warm, o.peer_first_all, o.peer_warm_all, o.peer_first_tail, o.peer_warm_tail)
        print(
            f'   {size:>9,} |'
            + ' |'.join(f' {cell(a)} {cell(b)}' for a, b in zip(cells[::2], cells[1::2], strict=True))
        )
    print()


def print_opening_lines(openings: dict[int, Opening], backend: str, mode: str) -> None:
    """One line per archive size for `mode` ('first open' or 'warm'): ours against the peer, and our growth."""
    first = mode == 'first open'
    smallest = min(openings)
    base = openings[smallest].ours(first)
    for size, o in openings.items():
        ours, peer_all, peer_tail = o.ours(first), o.peer_all(first), o.peer_tail(first)
        growth = (
            f'; ours growth {size_label(smallest)} -> {size_label(size)}: {ours / base:.2f} x'
            if size != smallest
            else ''
        )
        head = f'open+window @{size_label(size)} ({mode}) on {backend}: ours {ours:.2f} ms'
        if peer_all is None or peer_tail is None:
            print(f'{head}, peer {PEER_MISSING}{growth}')
            continue
        print(
            f'{head}, peer {peer_all:.2f} ms (get_items all) -> {versus(ours, peer_all, higher_is_better=False)}; '
            f'peer {peer_tail:.2f} ms (get_items limit=20) -> {versus(ours, peer_tail, higher_is_better=False)}'
            f'{growth}'
        )


def print_opening(openings: dict[int, Opening], backend: str) -> None:
    print_opening_table(openings, backend)
    for mode in ('first open', 'warm'):
        print_opening_lines(openings, backend, mode)
    smallest, largest = min(openings), max(openings)
    if largest != smallest:
        for mode in ('first open', 'warm'):
            first = mode == 'first open'
            print_target(
                f'{backend} ({mode})',
                f'ours @{size_label(largest)}',
                TARGET_GROWTH,
                f'ours @{size_label(smallest)}',
                openings[largest].ours(first) / openings[smallest].ours(first),
                at_least=False,
            )
    print()
