"""What the store hands back: typed, read-only views of sessions, summaries, windows and search hits."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the review commands build these views' plain fields without pydantic-ai
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.usage import RunUsage

__all__ = (
    'Branch',
    'Numbered',
    'Removed',
    'Resealed',
    'SearchHit',
    'SessionInfo',
    'SessionWindow',
    'StoredSummary',
    'SummaryChain',
    'Vacuumed',
)


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
    branch_count: int = 1
    """How many branches its tree has (`Session.branches()` lists them); 1 until one is rewound or regenerated."""
    title: str | None = None
    """What it is about: its conversation's title, set with `store.conversations.update(id, title=...)`."""


class Numbered:
    """A link of a summary chain, which people know by its number."""

    index: int

    @property
    def number(self) -> int:
        """How every listing numbers it, and the summaries' own text does: 1 for the first of the chain."""
        return self.index + 1


@dataclass(frozen=True)
class StoredSummary(Numbered):
    """One link of a session's summary chain."""

    index: int
    """Its place in the chain, from 0: each extends the one before it. People see `number`."""
    covers_from: int
    """The first archive position this summary folded in."""
    covers_to: int
    """One past the last position it folded in; together with the earlier links it covers `[0, covers_to)`."""
    text: str
    tokens: int
    model_name: str | None
    usage: RunUsage
    created_at: datetime


class SummaryChain(list[StoredSummary]):
    """A session's summary chain, oldest first: the links its active path's window builds on, as a list.

    `elsewhere` counts the summaries the session stores besides them, on the branches a rewind, a regenerate
    or an edit left: after a rewind the chain may be short or empty while the session still holds many.
    """

    def __init__(self, links: Iterable[StoredSummary] = (), *, elsewhere: int = 0) -> None:
        super().__init__(links)
        self.elsewhere = elsewhere


@dataclass(frozen=True)
class SearchHit:
    """An archived message that matched a search."""

    session_id: str
    scope: str | None
    position: int
    message: ModelMessage
    text: str


@dataclass(frozen=True)
class SessionWindow:
    """What the next run of a session starts from (before its new prompt), as `SessionStore.window()` reads it."""

    messages: list[ModelMessage]
    """The head, then the kept tail, whose first request carries the latest summary (or the system prompt)."""
    positions: list[int]
    """Each message's position in the archive; a summary standing alone before a tail that opens with a response
    (as `ContextManagerCapability` cuts) takes the position of that response."""
    tokens: list[int | None]
    """Each message's stored token count; `None` for the one carrying the summary, which changed it."""
    message_count: int
    """How many messages the archive holds."""


@dataclass(frozen=True)
class Branch:
    """A path through a session's tree, as `Session.branches()` lists it."""

    tip: str
    """Opaque id of the branch, for `Session.switch` and `history(branch=...)`: what a script keeps."""
    number: int
    """The branch's number in its session, as a person reads it: 1, 2, 3 in the order the branches were made (the
    session's first path is 1). A branch keeps its number, and an export and import give the same ones. Only a
    rewind that nothing ran from leaves no branch behind (it held no message of its own): the next branch made
    takes its number."""
    active: bool
    """Whether this is the path runs continue."""
    message_count: int
    """How many messages the path holds, from the start of the session."""
    forked_at: int | None
    """The position where it leaves the path it branched from; `None` for the session's first path."""
    parent: str | None
    """The tip of the branch it forked from; `None` for the session's first path."""
    updated_at: datetime
    """When its last message was stored."""
    preview: str | None
    """The start of its last user prompt."""


@dataclass(frozen=True)
class Removed:
    """What a delete or a prune removed (or, dry run, would remove): whole sessions, with their contents."""

    sessions: list[str]
    """The ids of the sessions, sorted."""
    messages: int
    """Archived messages, every branch's."""
    summaries: int


@dataclass(frozen=True)
class Resealed:
    """What a `rekey()` or `encrypt()` pass did: values sealed again, and under which keys the store now is."""

    messages: int
    """Message payloads (with their search text) sealed under the current key in this pass."""
    summaries: int
    """Summaries sealed in this pass."""
    sessions: int
    """Sessions whose metadata, title or deferred tool requests were sealed in this pass."""
    by_key: dict[str, int]
    """Every stored value the pass read, by the id of the key it is sealed with now."""
    clear: int
    """Values it read that are still stored clear (none after `rekey()` or `encrypt()` completes)."""
    sealed_clear: int = 0
    """Values this pass sealed that were stored clear: a store that was not encrypted before is now, and can be
    read only with these keys."""


@dataclass(frozen=True)
class Vacuumed:
    """What a `vacuum()` did: whether the database's files now keep nothing of what was deleted, and if not, why."""

    skipped: list[str] = field(default_factory=list[str])
    """The store's tables PostgreSQL did not let this role vacuum (only their owner, the database's owner or a
    superuser may): what was deleted from them stays in their files until `owner` runs `vacuum()`. Empty when
    everything was reclaimed, and always on SQLite."""
    role: str | None = None
    """The role that ran it, on PostgreSQL."""
    owner: str | None = None
    """The role owning the skipped tables, which may vacuum them; `None` when none was skipped."""

    @property
    def reclaimed(self) -> bool:
        """Whether every table was rewritten, so the database's files keep nothing of what was deleted."""
        return not self.skipped
