"""What the store hands back: typed, read-only views of sessions, summaries and search hits."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

__all__ = ('SearchHit', 'SessionInfo', 'StoredSummary')


@dataclass(frozen=True)
class SessionInfo:
    """A stored session, as `SessionStore.sessions()` lists it."""

    session_id: str
    scope: str | None
    message_count: int
    summary_count: int
    usage: RunUsage
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])


@dataclass(frozen=True)
class StoredSummary:
    """One link of a session's summary chain."""

    index: int
    """0 for the first summary; each extends the one before it."""
    covers_from: int
    """The first archive position this summary folded in."""
    covers_to: int
    """One past the last position it folded in; together with the earlier links it covers `[0, covers_to)`."""
    text: str
    tokens: int
    model_name: str | None
    usage: RunUsage
    created_at: datetime


@dataclass(frozen=True)
class SearchHit:
    """An archived message that matched a search."""

    session_id: str
    scope: str | None
    position: int
    message: ModelMessage
    text: str
