"""Large tool outputs shortened in what a model is sent, never in the history.

A tool return whose text is over the limit is replaced, in a copy of its message, by its first and
last lines (or characters, when it has few lines) around a note of what was left out. The history's
own messages and parts are never changed, so the run's messages and any archive of them stay whole.
Media is never read or shortened.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pydantic_core
from pydantic_ai.messages import MULTI_MODAL_CONTENT_TYPES, BaseToolReturnPart, ModelMessage, ModelRequest

from .tokens import TokenCounter, count_tokens

_CHARS_PER_TOKEN = 4
_REMEMBERED = 256


def shorten(text: str, head_lines: int, tail_lines: int, max_chars: int) -> str:
    """`text` cut to its first `head_lines` and last `tail_lines` lines, then, if still over `max_chars`,
    to its first and last characters, each cut marked with how much it left out."""
    lines = text.splitlines()
    if len(lines) > head_lines + tail_lines:
        omitted = len(lines) - head_lines - tail_lines
        kept_tail = lines[len(lines) - tail_lines :] if tail_lines else []
        text = '\n'.join([*lines[:head_lines], f'... ({omitted} lines omitted) ...', *kept_tail])
    if len(text) > max_chars:
        half = max(1, max_chars // 2)
        omitted = len(text) - 2 * half
        text = f'{text[:half]}\n... ({omitted} characters omitted) ...\n{text[-half:]}'
    return text


def _shorter(value: Any, head_lines: int, tail_lines: int, max_chars: int) -> Any:
    """`value` with every text in it over `max_chars` shortened; media and small values as they are."""
    if isinstance(value, str):
        return shorten(value, head_lines, tail_lines, max_chars) if len(value) > max_chars else value
    if isinstance(value, MULTI_MODAL_CONTENT_TYPES) or value is None:
        return value
    if isinstance(value, list):
        items = [_shorter(item, head_lines, tail_lines, max_chars) for item in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if isinstance(value, bool | int | float):
        return value
    text = pydantic_core.to_json(value, fallback=str, bytes_mode='base64').decode()
    return shorten(text, head_lines, tail_lines, max_chars) if len(text) > max_chars else value


@dataclass
class ToolOutputLimit:
    """Shortens tool returns over `max_tokens` (at four characters a token) in copies of the messages."""

    max_tokens: int
    head_lines: int = 5
    tail_lines: int = 5
    _done: OrderedDict[int, tuple[ModelMessage, ModelMessage]] = field(
        default_factory=OrderedDict[int, tuple[ModelMessage, ModelMessage]], repr=False
    )

    @property
    def max_chars(self) -> int:
        return self.max_tokens * _CHARS_PER_TOKEN

    def message(self, message: ModelMessage) -> ModelMessage:
        """`message` itself, or a copy whose oversized tool returns are shortened."""
        if not isinstance(message, ModelRequest):
            return message
        remembered = self._done.get(id(message))
        if remembered is not None and remembered[0] is message:
            return remembered[1]
        parts = []
        changed = False
        for part in message.parts:
            if isinstance(part, BaseToolReturnPart):
                content = _shorter(part.content, self.head_lines, self.tail_lines, self.max_chars)
                if content is not part.content:
                    part = replace(part, content=content)
                    changed = True
            parts.append(part)
        shortened = replace(message, parts=parts) if changed else message
        # Keyed by id and holding the message, so the id can't be reused while the entry lives.
        self._done[id(message)] = (message, shortened)
        while len(self._done) > _REMEMBERED:
            self._done.popitem(last=False)
        return shortened

    def messages(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """`messages` with oversized tool returns shortened, in copies; the originals are untouched."""
        return [self.message(message) for message in messages]

    def counter(self, counter: TokenCounter) -> TokenCounter:
        """`counter`, counting messages as the model will see them: with their tool returns shortened."""

        async def count(messages: Sequence[ModelMessage]) -> int:
            return await count_tokens(counter, self.messages(messages))

        return count
