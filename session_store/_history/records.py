"""What one run reads from the store (`LoadedWindow`) and writes back (`RunRecord`, `NewSummary`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

from processors.state import Lineage

__all__ = ('Entry', 'LoadedWindow', 'NewSummary', 'RunRecord')


@dataclass
class LoadedWindow:
    """What a run starts from: the stored window and the revision it was read at."""

    session_pk: int
    segment_pk: int
    """The segment the session's active path ends in, where the run's messages go."""
    revision: str
    message_count: int
    head_end: int
    window_start: int
    summary_pk: int | None
    messages: list[ModelMessage]
    """The head, then the tail, whose first request carries the bridge (summary or system prompt)."""
    positions: list[int]
    """Each message's archive position; a bridge standing alone before a tail that opens with a response has no
    row of its own, and takes the position of that response."""
    tokens: list[int | None]
    """Each message's stored token count; `None` for the one that carries the bridge, which changed it."""
    entry_ids: list[str | None]
    """Each message's entry id (its id as a pydantic-ai `ConversationEntry`); `None` for a bridge standing alone."""
    usage: RunUsage
    deferred_tool_requests: dict[str, Any] | None = None
    """The tool calls the session's last run left waiting for approval or results, as stored."""
    indexed: Lineage | None = None
    """How the run that wrote this window indexed `messages` (all but those it added last), when it ran with a copy
    of the processor this window was loaded for: that processor's next copy takes it over (`remember`)."""


class NewSummary(NamedTuple):
    """A summary to store: the archive range it newly covers, and what made it."""

    covers_from: int
    covers_to: int
    text: str
    tokens: int
    model_name: str | None
    usage: RunUsage


@dataclass
class RunRecord:
    """What one run adds to a session, written in one transaction."""

    messages: Sequence[ModelMessage]
    tokens: Sequence[int]
    head_end: int
    window_start: int
    summaries: Sequence[NewSummary]
    """Each summary the run made, oldest first."""
    usage: RunUsage
    deferred_tool_requests: dict[str, Any] | None
    entry_ids: Sequence[str] | None = None
    """The messages' entry ids, when the caller has them (pydantic-ai's `ConversationEntry` ids); else new ones."""


class Entry(NamedTuple):
    """An archived message a window holds."""

    position: int
    message: ModelMessage
    tokens: int
    entry_id: str
