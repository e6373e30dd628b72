"""Paths through a session's tree of segments, as positions: which segment holds which positions of a path.

Plain arithmetic over the segments' parents and starts, with no database in it, so that the storage layer and the
export format (which carries a session's tree as it is) share one implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ('Segments', 'Span', 'span_at', 'spans_of')

Segments = dict[int, tuple[int | None, int]]
"""A session's segments: each one's parent and the position it starts at."""


@dataclass(frozen=True)
class Span:
    """The positions `[start, end)` of a path that one segment holds."""

    segment_pk: int
    start: int
    end: int


def spans_of(segments: Segments, segment_pk: int, length: int) -> list[Span]:
    """The first `length` positions of the path ending in `segment_pk`, given the session's segments."""
    spans: list[Span] = []
    end, current = length, segment_pk
    while True:
        parent, starts_at = segments[current]
        if end > starts_at or not spans:
            spans.append(Span(current, starts_at, end))
        if parent is None:
            break
        end, current = min(end, starts_at), parent
    return spans[::-1]


def span_at(spans: Sequence[Span], position: int) -> Span:
    """The span holding `position`."""
    for span in spans:
        if span.start <= position < span.end:
            return span
    raise IndexError(position)
