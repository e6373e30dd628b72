"""Summaries as messages: the request that carries one, finding it in a history, and the records of making one.

A summary travels as pydantic-ai's `CompactionPart` inside a `ModelRequest`, after the system prompt
parts it keeps at the head of the window. Any request-side `CompactionPart` with text counts as an
earlier summary, so a window sent once can be fed back in and its summary is extended, not redone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from pydantic_ai.capabilities import CompactionResult
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, SystemPromptPart
from pydantic_ai.usage import RequestUsage, RunUsage

__all__ = (
    'SummarizationFailure',
    'Summary',
    'compaction_result',
    'find_summary',
    'split_added_request',
    'summary_request',
    'summary_text',
)

SUMMARY_MARK = 'session_store_summary'
"""The `CompactionPart.metadata` key marking summaries this package wrote."""


def summary_request(system_parts: Sequence[SystemPromptPart], text: str) -> ModelRequest:
    """The request that opens a compacted window: the head's system prompt parts, then the summary."""
    return ModelRequest(parts=[*system_parts, CompactionPart(content=text, metadata={SUMMARY_MARK: True})])


def _summary_part(message: ModelMessage) -> CompactionPart | None:
    if not isinstance(message, ModelRequest):
        return None
    for part in message.parts:
        # A provider's own compaction lives in a response and must go back to it untouched; only an
        # application-written summary, in a request, is ours to extend.
        if isinstance(part, CompactionPart) and part.content and part.provider_name is None:
            return part
    return None


def find_summary(messages: Sequence[ModelMessage]) -> int | None:
    """The index of the last request in `messages` that carries an application-written summary."""
    for index in range(len(messages) - 1, -1, -1):
        if _summary_part(messages[index]) is not None:
            return index
    return None


def summary_text(message: ModelMessage) -> str | None:
    """The summary text `message` carries, if it is a summary request."""
    part = _summary_part(message)
    return None if part is None else part.content


def split_added_request(messages: list[ModelMessage]) -> tuple[list[ModelMessage], list[ModelMessage]]:
    """`messages` as the history a compaction summarizes and keeps from, and the request pydantic-ai added after it
    to compact with (`Agent.compact_history()`'s, holding at most the system prompt), if it ends with one: a
    compaction keeps what its `keep` says of the conversation itself, not of that request."""
    last = messages[-1] if messages else None
    if isinstance(last, ModelRequest) and all(isinstance(part, SystemPromptPart) for part in last.parts):
        return messages[:-1], [last]
    return messages, []


def compaction_result(
    window: list[ModelMessage], handler: str, usage_before: RunUsage, usage_after: RunUsage
) -> CompactionResult | None:
    """What a `compact_history` hook answers for a `window` it just compacted, if the window opens with a summary
    request (the messages after it kept as they were); the summarizer's usage went from `usage_before` (a copy)
    to `usage_after`."""
    index = find_summary(window)
    if index is None:
        return None
    part = _summary_part(window[index])
    assert part is not None
    usage = RequestUsage(
        input_tokens=usage_after.input_tokens - usage_before.input_tokens,
        output_tokens=usage_after.output_tokens - usage_before.output_tokens,
    )
    return CompactionResult(messages=window, part=part, handler=handler, usage=usage, kept_from=index + 1)


def utc_now() -> datetime:
    """The time now, in UTC: a `Summary`'s `created_at` unless it is given."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Summary:
    """A summary a `SummarizationProcessor` made: the earlier summary it extends plus the messages it folded in."""

    text: str
    """The new summary."""
    previous_text: str | None
    """The summary this one extends, or `None` for the first."""
    covered: tuple[ModelMessage, ...]
    """The messages this summary folded in, in order: those evicted since the previous summary."""
    tokens: int
    """The summary's size as the processor's token counter measures it."""
    model_name: str | None
    """The summarizer model's name."""
    usage: RunUsage
    """What the summarizer call cost."""
    created_at: datetime = field(default_factory=utc_now)
    """When the summary was made."""
    focus: str | None = None
    """The topic the summary was asked to put first, if any."""
    forced: bool = False
    """Whether the compaction was asked for (`force=True`, `compact_conversation`) rather than fired by a trigger."""


@dataclass(frozen=True)
class SummarizationFailure:
    """Why a summarizer call produced no summary; the request went out on the sliding window instead."""

    reason: Literal['error', 'timeout', 'empty', 'oversized']
    detail: str
    """A readable account, for logs."""
    pending: int
    """How many evicted messages stayed unsummarized; the next trigger tries them again."""
    error: BaseException | None = None
    """The exception the summarizer raised, for `reason='error'`."""
