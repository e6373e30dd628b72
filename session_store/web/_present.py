"""Stored messages as what a page shows: one view per message part, with its whole text and a one-line preview.

Pure functions over pydantic-ai messages, no I/O and no HTML: each part is read, in its stored JSON form
(`_codec.stored_form`), through `_parts`' table and laid out by its role. The templates escape every string they
are given, so nothing here ever needs to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse

from .._codec import stored_form
from .._display import call_text, one_line, with_media
from .._parts import Part, Side, message_role, read_part
from .._ui_ids import ui_message_id

__all__ = ('PREVIEW', 'MessageView', 'PartView', 'message_view', 'message_views', 'preview', 'snippet')

PREVIEW = 160
"""How many characters of a part its one-line preview shows."""
LONG = 240
"""Parts longer than this (or over 4 lines) start collapsed."""


@dataclass(frozen=True)
class PartView:
    """One message part as a page shows it."""

    kind: str
    """`system`, `instructions`, `user`, `assistant`, `thinking`, `tool-call`, `tool-return`, `retry`, `summary`,
    `file` or `other`: the CSS class and the template branch."""
    label: str
    """Who or what: `user`, `assistant`, a tool's name, `retry lookup_order`, ..."""
    text: str
    """The whole content as text (tool arguments and results as indented JSON)."""
    preview: str
    """One line, clipped at `PREVIEW` characters."""
    long: bool
    """Shown collapsed until expanded."""
    call_id: str | None = None
    """A tool call's or return's id, linking the two."""


@dataclass(frozen=True)
class MessageView:
    """One archived message: its position, who it is from, and its parts."""

    position: int
    role: str
    """`user`, `assistant`, `tool` (tool returns) or `request` (anything else sent to the model)."""
    parts: list[PartView]
    timestamp: str | None
    """ISO time, for the page's local-time display."""
    model_name: str | None
    """The model that wrote a response."""
    ui_message_id: str | None
    """The id a chat front end gave a user message, if one did."""
    prompt: str | None
    """A user message's prompt text, for Edit to start from."""
    entry_id: str | None = None
    """The message's id in the archive (pydantic-ai's `ConversationEntry.id`), where the page read it."""

    @property
    def message_id(self) -> str | None:
        """What Edit and Regenerate resubmit a user message under: its UI message id if it has one (what a front end
        knows it by), else its entry id (a message stored without one, by `Session.run`); `None` for other
        messages. The store finds the prompt by either (`SQLConversationStore.resubmitting`)."""
        if self.role != 'user':
            return None
        return self.ui_message_id or self.entry_id


def preview(text: str, limit: int = PREVIEW) -> str:
    """`text` on one line, cut at `limit` characters with an ellipsis."""
    flat = ' '.join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + '…'


def _is_long(text: str) -> bool:
    return len(text) > LONG or text.count('\n') > 4


def _json(value: Any) -> str:
    """Tool arguments and results as readable text: strings as they are, anything else as indented JSON."""
    if isinstance(value, str):
        if not value.strip().startswith(('{', '[')):
            return value
        try:
            value = json.loads(text := value)
        except ValueError:
            return text
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _view(kind: str, label: str, text: str, *, call_id: str | None = None, line: str | None = None) -> PartView:
    return PartView(
        kind=kind,
        label=label,
        text=text,
        preview=preview(text if line is None else line),
        long=_is_long(text),
        call_id=call_id,
    )


def _part(part: Part, side: Side) -> PartView:
    """A part's view (the part in its stored form, on `side`), by its role."""
    kind, said = read_part(part, side)
    native = 'native ' if kind.native else ''
    role = kind.role
    match role:
        case 'system':
            return _view('system', 'system prompt', said.text)
        case 'user':
            return _view('user', 'user', with_media(said.text, said.media, between='\n'))
        case 'summary':
            return _view('summary', 'summary', said.text)
        case 'compaction':
            return _view('summary', f'compaction{f" by {said.provider}" if said.provider else ""}', said.text)
        case 'tool-return':
            content = _json(said.value)
            if said.outcome == 'retried':
                return _view('retry', f'retry {said.tool_name}', content, call_id=said.call_id)
            label = f'{native}{said.tool_name}{"" if said.outcome == "success" else f" ({said.outcome})"}'
            return _view('tool-return', label, content, call_id=said.call_id, line=one_line(said.value))
        case 'retry':
            label = f'retry{f" {said.tool_name}" if said.tool_name else ""}'
            return _view('retry', label, _json(said.value), call_id=said.call_id)
        case 'assistant':
            return _view('assistant', 'assistant', said.text)
        case 'thinking':
            return _view('thinking', 'thinking', said.text)
        case 'tool-call':
            line = call_text(said.tool_name, said.value)
            return _view('tool-call', f'{native}{said.tool_name}', _json(said.value), call_id=said.call_id, line=line)
        case 'file':
            return _view('file', 'file', said.text)
        case 'speech':
            return _view('other', 'speech', said.text)
        case 'capability':
            return _view('system', f'capability {said.capability}', with_media(said.text, said.media, between='\n'))
        case 'other':
            return _view('other', kind.name, said.text)
    assert_never(role)


def message_view(
    position: int, message: ModelMessage, instructions: str | None = None, entry_id: str | None = None
) -> MessageView:
    """A message as the page shows it; its instructions lead its parts when they differ from `instructions`."""
    parts: list[PartView] = []
    if isinstance(message, ModelRequest) and message.instructions and message.instructions != instructions:
        parts.append(_view('instructions', 'instructions', message.instructions))
    (stored,) = stored_form([message])
    parts.extend(_part(part, message.kind) for part in stored['parts'])
    role = message_role(stored)
    prompt = None
    if role == 'user':
        prompt = '\n'.join(part.text for part in parts if part.kind == 'user')
    timestamp = getattr(message, 'timestamp', None)
    return MessageView(
        position=position,
        role=role,
        parts=parts,
        timestamp=None if timestamp is None else timestamp.isoformat(),
        model_name=message.model_name if isinstance(message, ModelResponse) else None,
        ui_message_id=ui_message_id(message),
        prompt=prompt,
        entry_id=entry_id,
    )


def message_views(
    messages: Sequence[ModelMessage], positions: Sequence[int], entry_ids: Mapping[int, str] | None = None
) -> list[MessageView]:
    """Each message's view, with its entry id from `entry_ids` (by position) if given; a request's instructions
    are shown where they first appear or change."""
    views: list[MessageView] = []
    instructions: str | None = None
    found = entry_ids or {}
    for position, message in zip(positions, messages, strict=True):
        views.append(message_view(position, message, instructions, found.get(position)))
        if isinstance(message, ModelRequest) and message.instructions:
            instructions = message.instructions
    return views


def snippet(text: str, query: str, around: int = 80) -> tuple[str, str, str]:
    """The part of `text` around the first case-insensitive occurrence of `query`: (before, match, after).

    Without an occurrence (a full-text match on stemmed words), the start of `text` as `before`.
    """
    flat = ' '.join(text.split())
    at = flat.lower().find(query.lower()) if query else -1
    if at < 0:
        return preview(flat, 2 * around), '', ''
    start, end = max(0, at - around), min(len(flat), at + len(query) + around)
    before = ('…' if start else '') + flat[start:at]
    after = flat[at + len(query) : end] + ('…' if end < len(flat) else '')
    return before, flat[at : at + len(query)], after
