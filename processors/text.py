"""How message parts read as text: for token estimates and for the summarizer's input.

Every part kind has a reading here, so nothing a model is sent counts as zero tokens and nothing
evicted is hidden from the summarizer. Media (images, audio, documents, files) has no useful text;
it is counted at a fixed cost instead. `format_messages`, `message_text` and `part_text` are for
code of its own: a store's search index, a transcript, a prompt.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pydantic_core
from pydantic_ai.messages import (
    MULTI_MODAL_CONTENT_TYPES,
    BaseToolCallPart,
    BaseToolReturnPart,
    CachePoint,
    CompactionPart,
    FilePart,
    ModelMessage,
    ModelRequest,
    SpeechPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)

__all__ = ('format_messages', 'message_text', 'part_text')

_MEDIA_TYPES: tuple[type, ...] = (*MULTI_MODAL_CONTENT_TYPES, FilePart)


def render(value: Any) -> tuple[str, int]:
    """The text in `value` and how many media items it holds.

    Strings are taken as they are; media items are counted, not read; anything else is its JSON.
    """
    if isinstance(value, str):
        return value, 0
    if value is None or isinstance(value, CachePoint):
        return '', 0
    if isinstance(value, _MEDIA_TYPES):
        return '', 1
    if isinstance(value, TextContent):
        return value.content, 0
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        texts: list[str] = []
        media = 0
        for item in value:
            text, item_media = render(item)
            texts.append(text)
            media += item_media
        return '\n'.join(t for t in texts if t), media
    return pydantic_core.to_json(value, fallback=str, bytes_mode='base64').decode(), 0


def part_text(part: Any) -> tuple[str, int]:
    """The text a model reads for `part`, and its media count."""
    if isinstance(part, BaseToolCallPart):
        args, media = render(part.args)
        return f'{part.tool_name} {args}', media
    if isinstance(part, BaseToolReturnPart):
        content, media = render(part.content)
        return f'{part.tool_name} {content}', media
    if isinstance(part, SpeechPart):
        return part.transcript or '', 0 if part.audio is None else 1
    if isinstance(part, FilePart):
        return '', 1
    if isinstance(part, CompactionPart) and part.content is None and part.provider_details:
        # An opaque provider compaction (OpenAI's encrypted one) still costs its size on the wire.
        return render(part.provider_details)
    return render(getattr(part, 'content', None))


def message_texts(message: ModelMessage) -> Iterator[tuple[str, int]]:
    """`part_text` for each part of `message`, with the request's instructions first when it has them."""
    if isinstance(message, ModelRequest) and message.instructions:
        yield message.instructions, 0
    for part in message.parts:
        yield part_text(part)


def message_text(message: ModelMessage) -> str:
    """The text a message carries, its parts' readings joined by newlines: what a search should match."""
    return '\n'.join(text for text, _ in message_texts(message) if text)


def speaker(part: Any, message: ModelMessage) -> str:
    """Who says `part` in a transcript: `User`, `Assistant`, `Tool call <id>`, `Earlier summary`, ..."""
    if isinstance(part, SystemPromptPart):
        return 'System'
    if isinstance(part, UserPromptPart):
        return 'User'
    if isinstance(part, CompactionPart):
        return 'Earlier summary'
    if isinstance(part, BaseToolCallPart):
        return f'Tool call {part.tool_call_id}'
    if isinstance(part, BaseToolReturnPart):
        outcome = '' if part.outcome == 'success' else f' ({part.outcome})'
        return f'Tool result {part.tool_call_id}{outcome}'
    if isinstance(part, ThinkingPart):
        return 'Assistant (thinking)'
    if isinstance(part, TextPart) or not isinstance(message, ModelRequest):
        return 'Assistant'
    return 'Feedback' if 'retry' in getattr(part, 'part_kind', '') else 'Context'


def format_messages(messages: Sequence[ModelMessage], *, max_part_chars: int = 4_000) -> str:
    """`messages` as a transcript a summarizer can read: one line per part, long parts clipped in the middle.

    A summary written into a request is left out: the summarizer gets the previous summary whole, separately.
    """
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, CompactionPart) and isinstance(message, ModelRequest):
                continue
            text, media = part_text(part)
            if len(text) > max_part_chars:
                half = max_part_chars // 2
                text = f'{text[:half]} [... {len(text) - 2 * half} characters ...] {text[-half:]}'
            if media:
                text = f'{text} [{media} media item{"s" if media > 1 else ""}]'.strip()
            if text:
                lines.append(f'{speaker(part, message)}: {text}')
    return '\n'.join(lines)
