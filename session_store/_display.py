"""How the values in message parts read as text wherever they are shown: the command line and the web page.

What each kind of part holds is `_parts`' table; this is how its pieces are written out: tool calls as
they read in code, tool arguments and results on one line, media as a count.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ('call_text', 'media_note', 'one_line')


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


def media_note(count: int) -> str:
    """`[1 media item]`, `[3 media items]`: what stands for the images, audio and documents a prompt holds."""
    return f'[{count} media item{"s" if count != 1 else ""}]'
