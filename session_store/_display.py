"""How stored message parts read as text wherever they are shown: the command line and the web page."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import BaseToolCallPart

__all__ = ('call_text', 'one_line')


def one_line(value: Any) -> str:
    """Tool arguments and results as compact text: strings as they are, the rest as one-line JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def call_text(part: BaseToolCallPart) -> str:
    """A tool call as it reads in code: `lookup_order(order_id='ORDER-1042')`."""
    args: Any = part.args
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return f'{part.tool_name}({args})'
    if isinstance(args, dict):
        shown = ', '.join(
            f'{k}={v!r}' if isinstance(v, str | int | float | bool) else f'{k}={one_line(v)}' for k, v in args.items()
        )
        return f'{part.tool_name}({shown})'
    return f'{part.tool_name}({"" if args is None else one_line(args)})'
