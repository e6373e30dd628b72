"""Showing what the store holds: a line per message part for people, JSON for scripts, and suggested commands."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

import click
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    CompactionPart,
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryPromptPart,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)
from pydantic_ai.usage import RunUsage
from rich.text import Text

from processors import part_text

from .._codec import dump_messages, dump_usage
from .._display import call_text, one_line
from ..results import StoredSummary
from ._runtime import Settings, out

__all__ = (
    'CLIP',
    'clip',
    'compaction_line',
    'echo_json',
    'messages_json',
    'print_suggestion',
    'record_json',
    'render_messages',
    'role',
)

CLIP = 300
"""How many characters of a message part a listing shows, unless `--full`."""


def clip(text: str, full: bool) -> str:
    """`text` whole, or flattened to one line and cut at `CLIP` characters, saying how much was left out."""
    if full:
        return text
    flat = ' '.join(text.split())
    return flat if len(flat) <= CLIP else f'{flat[:CLIP]}… (+{len(flat) - CLIP} chars)'


def _user_content(part: UserPromptPart) -> str:
    text, media = part_text(part)
    return f'{text} [{media} media item{"s" if media != 1 else ""}]'.strip() if media else text


def _part_line(part: Any, message: ModelMessage, full: bool) -> tuple[str, str, str]:
    """A part as (speaker, style, text)."""
    if isinstance(message, ModelRequest):
        if isinstance(part, SystemPromptPart):
            return 'system', 'magenta', clip(part.content, full)
        if isinstance(part, UserPromptPart):
            return 'user', 'bold cyan', clip(_user_content(part), full)
        if isinstance(part, CompactionPart):
            return 'summary', 'bold yellow', clip(part.content or '(opaque)', full)
        if isinstance(part, BaseToolReturnPart):
            outcome = '' if part.outcome == 'success' else f'({part.outcome}) '
            return f'tool {part.tool_name} ⇒', 'green', clip(outcome + one_line(part.content), full)
        if isinstance(part, RetryPromptPart):
            target = f' {part.tool_name}' if part.tool_name else ''
            return f'retry{target}', 'red', clip(one_line(part.content), full)
        if isinstance(part, RetryFeedbackPart):
            return 'retry', 'red', clip(one_line(part.content), full)
    else:
        if isinstance(part, TextPart):
            return 'assistant', 'bold blue', clip(part.content, full)
        if isinstance(part, ThinkingPart):
            return 'assistant (thinking)', 'dim blue', clip(part.content, full)
        if isinstance(part, NativeToolCallPart):
            return 'assistant → native', 'blue', clip(call_text(part), full)
        if isinstance(part, BaseToolCallPart):
            return 'assistant →', 'blue', clip(call_text(part), full)
        if isinstance(part, NativeToolReturnPart):
            return f'native {part.tool_name} ⇒', 'green', clip(one_line(part.content), full)
        if isinstance(part, FilePart):
            return 'assistant file', 'blue', getattr(part.content, 'media_type', 'file')
        if isinstance(part, CompactionPart):
            who = f' by {part.provider_name}' if part.provider_name else ''
            return f'compaction{who}', 'yellow', clip(part.content or '(opaque to this store)', full)
    if isinstance(part, SpeechPart):
        return 'speech', 'cyan', clip(part.transcript or '(audio)', full)
    text, _ = part_text(part)  # parts this renderer has no reading for still show what they carry
    return getattr(part, 'part_kind', type(part).__name__), 'dim', clip(text, full)


def render_messages(
    messages: Sequence[ModelMessage], positions: Sequence[int], *, full: bool = False
) -> Iterator[Text]:
    """Each message part as one line, `[position] speaker: text`; instructions only where they change."""
    instructions: str | None = None
    for position, message in zip(positions, messages, strict=True):
        label = f'[{position}] '
        if isinstance(message, ModelRequest) and message.instructions and message.instructions != instructions:
            instructions = message.instructions
            yield Text.assemble((label, 'dim'), ('instructions', 'magenta'), ': ', clip(instructions, full))
        for part in message.parts:
            speaker, style, text = _part_line(part, message, full)
            separator = ' ' if speaker.endswith(('→', '⇒')) else ': '
            yield Text.assemble((label, 'dim'), (speaker, style), separator, text)


def role(message: ModelMessage) -> str:
    """Who a message is from: `user`, `assistant`, `tool` (returns), or `request` (anything else sent)."""
    if isinstance(message, ModelResponse):
        return 'assistant'
    kinds = {type(part) for part in message.parts}
    if UserPromptPart in kinds:
        return 'user'
    if any(issubclass(kind, BaseToolReturnPart) for kind in kinds):
        return 'tool'
    return 'request'


def messages_json(messages: Sequence[ModelMessage]) -> list[Any]:
    """Messages as pydantic-ai's own JSON (what `ModelMessagesTypeAdapter` loads back)."""
    loaded: list[Any] = json.loads(dump_messages(list(messages)))
    return loaded


def record_json(record: Any) -> dict[str, Any]:
    """A result dataclass (`SessionInfo`, `StoredSummary`) as JSON values: usage as pydantic-ai dumps it, ISO times."""
    data: dict[str, Any] = asdict(record)
    for name, value in vars(record).items():
        if isinstance(value, RunUsage):
            data[name] = dump_usage(value)
        elif isinstance(value, datetime):
            data[name] = value.isoformat()
    return data


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def print_suggestion(settings: Settings, text: str) -> None:
    """A dim hint naming a command to run next, with what to set first if the command can't name the database."""
    out.print(Text(text, style='dim'))
    if settings.env_note:
        out.print(Text(settings.env_note, style='dim'))


def compaction_line(session_id: str, summary: StoredSummary | None) -> str:
    """What a compaction did, in one line."""
    if summary is None:
        return f'Nothing to compact in {session_id!r} yet: its history is no longer than the tail it keeps.'
    return (
        f'Compacted {session_id!r}: summary {summary.index + 1} folds in messages '
        f'{summary.covers_from}-{summary.covers_to - 1} ({summary.tokens} tokens); the window now starts at '
        f'{summary.covers_to}.'
    )
