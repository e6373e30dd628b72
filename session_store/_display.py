"""What the command line and the web page show alike: the values in message parts as text, and a window's tokens.

What each kind of part holds is `_parts`' table; this is how its pieces are written out: tool calls as
they read in code, tool arguments and results on one line, media as a count. A window's token counts are
made here once for both, so `session-store context`, the context page and `/api/context` agree.
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Any

from ._codec import dump_usage
from .results import SessionWindow, StoredSummary

if TYPE_CHECKING:
    from processors import TiktokenCounter

__all__ = ('call_text', 'one_line', 'summary_json', 'tiktoken_counter', 'window_tokens', 'with_media')


@cache
def tiktoken_counter() -> TiktokenCounter:
    """The one `TiktokenCounter` of the process, made on first use: loading its encoding takes most of a second."""
    from processors import TiktokenCounter  # with pydantic-ai, which what shows no window does without

    return TiktokenCounter()


def summary_json(summary: StoredSummary) -> dict[str, Any]:
    """A summary as the command line's and the web's JSON give it, numbered from 1 as every listing numbers it."""
    return {
        'number': summary.number,
        'covers_from': summary.covers_from,
        'covers_to': summary.covers_to,
        'text': summary.text,
        'tokens': summary.tokens,
        'model_name': summary.model_name,
        'usage': dump_usage(summary.usage),
        'created_at': summary.created_at.isoformat(),
    }


def window_tokens(window: SessionWindow) -> list[int]:
    """Each window message's tokens: as stored (counted once, when archived), and the request carrying the summary,
    whose stored count no longer holds, counted now with tiktoken, whichever processor the store was opened with."""
    return [
        stored if stored is not None else tiktoken_counter()([message])
        for stored, message in zip(window.tokens, window.messages, strict=True)
    ]


def one_line(value: Any) -> str:
    """Tool arguments and results as compact text: strings as they are, the rest as one-line JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def call_text(tool_name: str, args: Any) -> str:
    """A tool call as it reads in code: `lookup_order(order_id='ORDER-1042')`."""
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return f'{tool_name}({args})'
    if isinstance(args, dict):
        shown = ', '.join(
            f'{k}={v!r}' if isinstance(v, str | int | float | bool) else f'{k}={one_line(v)}' for k, v in args.items()
        )
        return f'{tool_name}({shown})'
    return f'{tool_name}({"" if args is None else one_line(args)})'


def with_media(text: str, count: int, *, between: str = ' ') -> str:
    """`text` followed, after `between`, by what stands for the `count` images, audio and documents said beside
    it (`[1 media item]`, `[3 media items]`), or `text` alone when there are none."""
    if not count:
        return text
    return f'{text}{between}[{count} media item{"s" if count != 1 else ""}]'.strip()
