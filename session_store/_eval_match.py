"""How the retention eval reads a window: normalized matching, and a value bound to its item.

Two rules decide whether a window holds a fact, and every check of the eval uses them (the lookups, the other
question kinds, the recall searches' answers and the summary's share of the budget):

- **Normalized**: text and value are compared as words, with case, punctuation and spacing aside
  (`ORD 83564`, `ord-83564` and `ORD83564` are `ORD-83564`), thousands separators dropped (`1,200` is `1200`)
  and a few abbreviations spelled out (`Harbour St.` is `Harbour Street`). A value is matched whole:
  `46 Mill Lane` is not in `146 Mill Lane`.
- **Bound**: a value counts for a fact only in a span that also names the fact's item, with no other item of
  the conversation named between the two. A span is a sentence: it ends at `.`, `!` or `?` before a space, or at
  a line's end. So a summary that keeps the numbers but not what they belong to (`ORD-83564. 46 Mill Lane.`)
  keeps no fact, and a list of items followed by a list of values binds each value at most to its neighbour.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = ('ABBREVIATIONS', 'CORRECTION_WORDS', 'Position', 'Reading', 'holds', 'words')

ABBREVIATIONS = {
    'st': 'street',
    'rd': 'road',
    'ave': 'avenue',
    'av': 'avenue',
    'ln': 'lane',
    'ct': 'court',
    'sq': 'square',
    'req': 'requests',
    'reqs': 'requests',
}
"""Short forms spelled out before matching (as words, after case and punctuation are set aside)."""

CORRECTION_WORDS = frozenset(
    {'was', 'were', 'instead', 'previously', 'formerly', 'earlier', 'old', 'changed', 'corrected', 'correction'}
    | {'replaced', 'replaces', 'superseded', 'longer', 'updated', 'before', 'originally'}
)
"""Words that mark a span as telling of a change: a replaced value named in it is not a claim that it is current."""

_ABBREVIATED = re.compile(rf'\b({"|".join(ABBREVIATIONS)})\.', re.IGNORECASE)
_SENTENCE_END = re.compile(r'(?<=[.!?])\s+|\n+')
_THOUSANDS = re.compile(r'(?<=\d)[,\u00a0\u202f\u2009](?=\d{3}(?!\d))')
_NOT_WORD = re.compile(r'[\W_]+')
_LETTER_DIGIT = re.compile(r'(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])')


@lru_cache(maxsize=1 << 16)
def words(text: str) -> tuple[str, ...]:
    """`text` as the words it is matched by: case, punctuation and number formats aside, abbreviations spelled
    out, letters and digits apart (`TRK7782828` is `trk 7782828`)."""
    flat = _THOUSANDS.sub('', text.casefold())
    flat = _LETTER_DIGIT.sub(' ', _NOT_WORD.sub(' ', flat))
    return tuple(ABBREVIATIONS.get(word, word) for word in flat.split())


def _find(haystack: Sequence[str], needle: Sequence[str]) -> list[int]:
    """Where `needle` starts in `haystack`, word by word."""
    size = len(needle)
    if not size:
        return []
    first = needle[0]
    return [
        index
        for index in range(len(haystack) - size + 1)
        if haystack[index] == first and tuple(haystack[index : index + size]) == tuple(needle)
    ]


def holds(text: str, value: str) -> bool:
    """Whether `text` holds `value` whole, normalized (see the module's docstring), bound to nothing."""
    return bool(_find(words(text), words(value)))


Position = tuple[int, int]
"""Where a bound value stands in a text: its span, and its first word in that span."""


@dataclass(frozen=True)
class _Span:
    words: tuple[str, ...]
    items: tuple[tuple[int, int, str], ...]
    """Every item named in the span: its first word, one past its last word, and the item."""
    marks_change: bool


class Reading:
    """A text read once for many checks: split into spans, each span's words and the items it names.

    `items` are all the items of the conversation (the ones another item's value must not be bound across)."""

    def __init__(self, text: str, items: Iterable[str]) -> None:
        named = [(item, words(item)) for item in items]
        spans = []
        for sentence in _SENTENCE_END.split(_ABBREVIATED.sub(r'\1', text)):
            said = words(sentence)
            if not said:
                continue
            present = set(said)
            found = tuple(
                sorted(
                    (start, start + len(item_words), item)
                    for item, item_words in named
                    if item_words and item_words[0] in present
                    for start in _find(said, item_words)
                )
            )
            spans.append(_Span(said, found, not CORRECTION_WORDS.isdisjoint(said)))
        self._spans = tuple(spans)

    def bound(self, item: str, value: str) -> list[Position]:
        """Every place `value` is bound to `item`: in a span naming `item`, no other item named between them."""
        value_words = words(value)
        places = []
        for number, span in enumerate(self._spans):
            if not span.items:
                continue
            for start in _find(span.words, value_words):
                end = start + len(value_words)
                if any(self._between(span, named, start, end) for named in span.items if named[2] == item):
                    places.append((number, start))
        return places

    @staticmethod
    def _between(span: _Span, named: tuple[int, int, str], start: int, end: int) -> bool:
        """Whether no other item lies between the item naming `named` and the value at `start`..`end`."""
        low, high = (named[1], start) if named[0] < start else (end, named[0])
        return not any(low <= other[0] and other[1] <= high and other[2] != named[2] for other in span.items)

    def current_last(self, item: str, current: str, stale: str) -> bool:
        """Whether `current` is bound to `item` and reads as the current value: every span binding `stale` to the
        item either comes before the last one binding `current` (in reading order, word by word) or tells of the
        change (`was`, `instead`, `corrected`: `CORRECTION_WORDS`)."""
        now = self.bound(item, current)
        if not now:
            return False
        latest = max(now)
        return all(place < latest or self._spans[place[0]].marks_change for place in self.bound(item, stale))
