"""Failure messages of a bounded size: where two values first differ, and a short diff of the part that holds it.

A check compares whole histories, records and views; printed whole, one failure ran to tens of kilobytes of
message dumps, with the difference somewhere inside. These say where it is and show only that part.
"""

from __future__ import annotations

import dataclasses
import difflib
import pprint
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ('LIMIT', 'bounded', 'difference', 'shown')

LIMIT = 4000
"""The most characters a failure's message holds."""
LINES = 24
"""The most lines of a diff."""
WIDTH = 160
"""The most characters of a line of a diff."""


def shown(value: object, width: int = 300) -> str:
    """`value`'s repr, cut in the middle to at most `width` characters."""
    text = repr(value)
    if len(text) <= width:
        return text
    half = (width - 5) // 2
    return f'{text[:half]} ... {text[-half:]}'


def bounded(text: str, limit: int = LIMIT) -> str:
    """`text` cut in the middle to at most `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    half = (limit - 60) // 2
    return f'{text[:half]}\n... ({len(text) - 2 * half} characters left out) ...\n{text[-half:]}'


@dataclass(frozen=True)
class _Found:
    """Where two values first differ: the path to it, the values there, and the outermost item of a sequence
    (a message of a history, say) that holds it, on each side, for the diff."""

    path: str
    mine: object
    theirs: object
    item: tuple[object, object] | None
    note: str = ''


_ABSENT = object()


def _fields(value: object) -> Mapping[object, object] | None:
    if isinstance(value, Mapping):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    return None


def _items(value: object) -> Sequence[object] | None:
    return value if isinstance(value, (list, tuple)) else None


def _first(mine: object, theirs: object, path: str, item: tuple[object, object] | None) -> _Found:
    mine_fields, their_fields = _fields(mine), _fields(theirs)
    if mine_fields is not None and their_fields is not None and type(mine) is type(theirs):
        for key in [*mine_fields, *(key for key in their_fields if key not in mine_fields)]:
            a, b = mine_fields.get(key, _ABSENT), their_fields.get(key, _ABSENT)
            if a is _ABSENT or b is _ABSENT:
                return _Found(f'{path}[{key!r}]', a, b, item)
            if a != b:
                return _first(a, b, f'{path}[{key!r}]', item)
    mine_items, their_items = _items(mine), _items(theirs)
    if mine_items is not None and their_items is not None:
        for n, (a, b) in enumerate(zip(mine_items, their_items, strict=False)):
            if a != b:
                return _first(a, b, f'{path}[{n}]', item or (a, b))
        if len(mine_items) != len(their_items):
            n = min(len(mine_items), len(their_items))
            extra = mine_items[n] if len(mine_items) > n else their_items[n]
            return _Found(
                path,
                f'{len(mine_items)} items',
                f'{len(their_items)} items',
                item,
                f'the first item only one holds: {shown(extra)}',
            )
    return _Found(path, mine, theirs, item)


def difference(mine: object, theirs: object, names: tuple[str, str] = ('the backend', 'the reference')) -> str:
    """Where `mine` and `theirs` (named `names`) first differ, a path of keys and indexes into them, with the
    values there and a diff of the item of a sequence holding it: a few lines, whatever their size."""
    found = _first(mine, theirs, '', None)
    # A length is said as it is; a value, as its repr.
    mine, theirs = (str(side) if found.note else shown(side) for side in (found.mine, found.theirs))
    lines = [
        f'they first differ at {found.path or "the top"}:',
        f'  {names[0]}: {mine}',
        f'  {names[1]}: {theirs}',
        *([found.note] if found.note else []),
    ]
    if found.item is not None:
        ours, others = (pprint.pformat(side, width=100, sort_dicts=False).splitlines() for side in found.item)
        diff = list(difflib.unified_diff(others, ours, names[1], names[0], n=2, lineterm=''))
        cut = [line if len(line) <= WIDTH else f'{line[: WIDTH - 4]} ...' for line in diff[:LINES]]
        if len(diff) > LINES:
            cut.append(f'... ({len(diff) - LINES} more lines of diff)')
        lines += ['the item of the sequence holding it, as a diff:', *cut]
    return bounded('\n'.join(lines))
