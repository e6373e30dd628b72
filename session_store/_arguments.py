"""Checks of what callers pass to the public API, made before any I/O: a bad argument is a `TypeError` or a
`ValueError` naming the parameter, never a driver's error from deep in a query."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ('MAX_COUNT', 'check_count', 'check_seconds', 'check_text', 'check_user_prompt')

MAX_COUNT = 2**63 - 1
"""The largest count a database column holds (a 64-bit integer): what any limit or offset may be."""


def check_count(value: Any, name: str, *, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    """`value` as a count from `minimum` to `maximum`.

    Raises:
        TypeError: Not an int (a bool is not a count).
        ValueError: Outside the bounds, which the message names.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f'{name} must be an int; got {value!r}.')
    if not minimum <= value <= maximum:
        raise ValueError(f'{name} must be between {minimum} and {maximum}; got {value}.')
    return value


def check_seconds(value: Any, name: str) -> float | None:
    """`value` as a positive, finite number of seconds, or `None` (no limit).

    Raises:
        TypeError: Not a number.
        ValueError: Not positive, or not finite.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f'{name} must be a number of seconds, or None; got {value!r}.')
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f'{name} must be a positive, finite number of seconds; got {value!r}.')
    return float(value)


def check_text(value: str, name: str) -> str:
    """`value`, if it can be stored: UTF-8 has no form for a lone surrogate (`'\\ud800'`), so no database takes one.

    Raises:
        ValueError: It holds a lone surrogate, which the message locates.
    """
    try:
        value.encode('utf-8')
    except UnicodeEncodeError as error:
        raise ValueError(
            f'{name} holds a lone surrogate ({value[error.start : error.end]!r} at index {error.start}), which no '
            'database can store: pass text as str decoded properly (errors="surrogatepass" input needs repair).'
        ) from None
    return value


def check_user_prompt(prompt: Any) -> None:
    """A run's prompt (a str, or a sequence of user content), checked as `check_text` checks text, so a prompt the
    store could not archive is refused before the model is called."""
    if isinstance(prompt, str):
        check_text(prompt, 'user_prompt')
    elif isinstance(prompt, Sequence):
        for item in prompt:
            if isinstance(item, str):
                check_text(item, 'user_prompt')
