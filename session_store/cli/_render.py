"""Showing what the store holds: a line per message part for people, JSON for scripts, and suggested commands."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any, assert_never

import click
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.usage import RunUsage
from rich.text import Text

from .._codec import dump_messages, dump_usage
from .._display import call_text, media_note, one_line
from .._parts import PartKind, Reading, read_part
from .._parts import message_role as role  # under the name the commands import
from ..results import StoredSummary
from ._runtime import Settings, out

__all__ = (
    'CLIP',
    'clip',
    'compaction_line',
    'echo_json',
    'messages_json',
    'plural',
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


def _line(kind: PartKind, said: Reading) -> tuple[str, str, str]:
    """A part as (speaker, style, text), by its role."""
    role = kind.role
    match role:
        case 'system':
            return 'system', 'magenta', said.text
        case 'user':
            return 'user', 'bold cyan', f'{said.text} {media_note(said.media)}'.strip() if said.media else said.text
        case 'summary':
            return 'summary', 'bold yellow', said.text
        case 'compaction':
            return f'compaction{f" by {said.provider}" if said.provider else ""}', 'yellow', said.text
        case 'tool-return':
            outcome = '' if said.outcome == 'success' else f'({said.outcome}) '
            speaker = f'{"native" if kind.native else "tool"} {said.tool_name} ⇒'
            return speaker, 'green', outcome + one_line(said.value)
        case 'retry':
            return f'retry{f" {said.tool_name}" if said.tool_name else ""}', 'red', one_line(said.value)
        case 'assistant':
            return 'assistant', 'bold blue', said.text
        case 'thinking':
            return 'assistant (thinking)', 'dim blue', said.text
        case 'tool-call':
            return f'assistant →{" native" if kind.native else ""}', 'blue', call_text(said.tool_name, said.value)
        case 'file':
            return 'assistant file', 'blue', said.text
        case 'speech':
            return 'speech', 'cyan', said.text
        case 'other':
            return kind.name, 'dim', said.text
    assert_never(role)


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
            speaker, style, text = _line(*read_part(part, message))
            separator = ' ' if speaker.endswith(('→', '⇒')) else ': '
            yield Text.assemble((label, 'dim'), (speaker, style), separator, clip(text, full))


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


def plural(count: int, noun: str) -> str:
    """`1 message`, `2,048 messages`, `3 summaries`: a count and its noun, in the plural unless it is 1."""
    if count == 1:
        return f'{count:,} {noun}'
    return f'{count:,} {noun[:-1] + "ies" if noun.endswith("y") else noun + "s"}'


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
        f'Compacted {session_id!r}: summary {summary.number} folds in messages '
        f'{summary.covers_from}-{summary.covers_to - 1} ({summary.tokens} tokens); the window now starts at '
        f'{summary.covers_to}.'
    )
