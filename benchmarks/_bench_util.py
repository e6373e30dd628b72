"""Small helpers the benchmark scripts share: keeping the collector out of timed code, and report labels."""

from __future__ import annotations

import gc
import os
import platform
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


@contextmanager
def quiet_gc() -> Iterator[None]:
    """One full collection first, then none inside the timed code, as in `timeit`."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def size_label(size: int) -> str:
    """A message count for a report: `100`, `10k`, `1,500`."""
    return f'{size // 1000}k' if size >= 1000 and size % 1000 == 0 else f'{size:,}'


def machine() -> str:
    """The interpreter and the machine: `Python 3.11.7 on x86_64, 2 CPUs`."""
    return f'Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs'


def load_average(when: str) -> str:
    """The load average, which shows in every figure: other work on the machine competes for its CPUs."""
    if not hasattr(os, 'getloadavg'):
        return f'load average {when}: unknown on this platform'
    return f'load average {when}: ' + ', '.join(f'{load:.2f}' for load in os.getloadavg())


def sentence(rng: random.Random, words: Sequence[str], length: int) -> str:
    """A sentence of about `length` characters drawn from `words`: text for a synthetic conversation."""
    drawn: list[str] = []
    chars = 0
    while chars < length:
        word = rng.choice(words)
        drawn.append(word)
        chars += len(word) + 1
    return ' '.join(drawn)[:length].capitalize() + '.'
