"""How benchmarks/store.py, scale.py and conversations.py measure and report: timed actions taken in turns,
medians, and the lines that compare ours with the peer or with a target."""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import TypeVar

from _bench_util import quiet_gc

K = TypeVar('K', bound=Hashable)
Measure = Callable[[], Awaitable[float]]
"""One timed action: it returns the seconds it timed, its setup, teardown and checks left out."""

PEER_MISSING = 'not measured (PEERS UNAVAILABLE: see the first lines)'
"""What stands for the peer's figures when it could not be installed."""


def median_ms(seconds: Mapping[K, Iterable[float]]) -> dict[K, float]:
    """The median of each series of seconds, in ms."""
    return {name: statistics.median(series) * 1_000 for name, series in seconds.items()}


async def round_robin(measures: Mapping[K, Measure], repeats: int) -> dict[K, float]:
    """The median ms of each measure, taken in turns (after one untimed pass), so that load from other
    processes on the machine falls on every contender alike."""
    for measure in measures.values():
        await measure()
    times: dict[K, list[float]] = {name: [] for name in measures}
    for _ in range(repeats):
        for name, measure in measures.items():
            with quiet_gc():
                times[name].append(await measure())
    return median_ms(times)


def rate(items: int, seconds: float) -> float:
    return items / seconds


def versus(ours: float, peer: float, *, higher_is_better: bool) -> str:
    """How ours compares, as a factor: 'N x faster' or 'N x slower'."""
    factor = ours / peer if higher_is_better else peer / ours
    return f'{factor:.2f} x faster' if factor >= 1 else f'{1 / factor:.2f} x slower'


def cell(ms: float | None, width: int = 10) -> str:
    """A table cell of ms, or a dash for a peer that is not installed."""
    return f'{"-":>{width}}' if ms is None else f'{ms:{width}.2f}'


def print_target(where: str, subject: str, bound: float, against: str, ratio: float | None, *, at_least: bool) -> None:
    """`target on WHERE: SUBJECT <= BOUND x AGAINST: RATIO x, met` (or `>=`, or `MISSED`), the ratio being
    ours / what it is held against; a ratio of None is a peer that was not measured."""
    head = f'target on {where}: {subject} {">=" if at_least else "<="} {bound:g} x {against}'
    if ratio is None:
        print(f'{head}: peer {PEER_MISSING}')
        return
    met = ratio >= bound if at_least else ratio <= bound
    print(f'{head}: {ratio:.2f} x, {"met" if met else "MISSED"}')


def print_limit(where: str, subject: str, value: float, bound: float, unit: str = '', digits: int = 2) -> None:
    """`target on WHERE: SUBJECT <= BOUND UNIT: VALUE UNIT (RATIO x), met` (or `MISSED`), for a target that is a
    bound of its own rather than a multiple of the peer's; the ratio is value / bound, `digits` the value's decimals."""
    ratio = value / bound
    unit = f' {unit}' if unit else ''
    print(f'target on {where}: {subject} <= {bound:g}{unit}: {value:.{digits}f}{unit} ({ratio:.2f} x), ', end='')
    print('met' if ratio <= 1 else 'MISSED')
