"""Showing messages: a line per message part for people (through `_parts`' one table, from the messages' stored
JSON form, so `history` shows the archive without importing pydantic-ai), and the same JSON form for scripts
(`_codec.stored_form`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import assert_never

from rich.text import Text

from .._display import call_text, one_line, with_media
from .._parts import Message, PartKind, Reading, part_text, read_part, side_of
from .._parts import message_role as role  # under the name the commands import
from ._render import clip

__all__ = ('Said', 'render_messages', 'role', 'said_in')


@dataclass(frozen=True)
class Said:
    """One thing a message says, as `history` shows it: a request's instructions, or one of its parts."""

    speaker: str
    """`instructions`, `system`, `user`, `assistant →`, `tool lookup_order ⇒`, ..."""
    style: str
    text: str
    """What `history` shows of it."""
    indexed: str
    """Its text as the search index holds it (`_parts.message_text` is these, joined)."""

    @property
    def separator(self) -> str:
        return ' ' if self.speaker.endswith(('→', '⇒')) else ': '


def _line(kind: PartKind, said: Reading) -> tuple[str, str, str]:
    """A part as (speaker, style, text), by its role."""
    role = kind.role
    match role:
        case 'system':
            return 'system', 'magenta', said.text
        case 'user':
            return 'user', 'bold cyan', with_media(said.text, said.media)
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
        case 'capability':
            return f'capability {said.capability}', 'magenta', with_media(said.text, said.media)
        case 'other':
            return kind.name, 'dim', said.text
    assert_never(role)


def said_in(message: Message) -> tuple[Said | None, list[Said]]:
    """What `message` (in its stored form) says: its request's instructions, if it has them, and each part."""
    side = side_of(message)
    instructions = message.get('instructions') if side == 'request' else None
    parts = [Said(*_line(*read_part(part, side)), indexed=part_text(part)[0]) for part in message.get('parts', ())]
    return (Said('instructions', 'magenta', instructions, instructions) if instructions else None), parts


def render_messages(messages: Sequence[Message], positions: Sequence[int], *, full: bool = False) -> Iterator[Text]:
    """Each part of `messages` (in their stored form: see `_codec.stored_form`) as one line, `[position] speaker:
    text`; instructions only where they change."""
    shown: str | None = None
    for position, message in zip(positions, messages, strict=True):
        label = f'[{position}] '
        instructions, parts = said_in(message)
        if instructions is not None and instructions.text != shown:
            shown = instructions.text
            parts.insert(0, instructions)
        for said in parts:
            yield Text.assemble((label, 'dim'), (said.speaker, said.style), said.separator, clip(said.text, full))
