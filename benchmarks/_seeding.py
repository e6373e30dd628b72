"""Archives for the benchmarks, stored through the public API: a session's tree built in memory, then imported.

`Archive` is a `SessionExport` in the making: messages appended to the active path, summaries extending its
chain, rewinds leaving branches, each as a session's runs, compactions and `rewind` leave them. `store_in`
hands the document to `SessionStore.import_`, which writes the whole tree in one transaction, its messages in
batches: as fast as the store's bulk path, and nothing a user couldn't do. A session grows in place by
`Archive.exported` (its `SessionStore.export`), more appends, and `store_in` again, which replaces it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

from session_store import SessionExport, SessionNotFound, SessionStore
from session_store.exports import ExportedSegment, ExportedSummary, path_of

__all__ = ('Archive',)


def _root() -> list[ExportedSegment]:
    return [ExportedSegment(parent=None, starts_at=0, messages=[], tokens=[])]


@dataclass
class Archive:
    """A session's tree in memory: its segments, summaries, active path and that path's window."""

    session_id: str
    scope: str | None = None
    segments: list[ExportedSegment] = field(default_factory=_root)
    summaries: list[ExportedSummary] = field(default_factory=list[ExportedSummary])
    active: int = 0
    """The segment the active path ends in."""
    head_end: int = 0
    window_start: int = 0
    """Where the active path's window tail starts: past its latest summary, or where a sliding window cut."""
    branches: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    """The tip of each branch a rewind left, as (segment, position)."""
    exported: SessionExport | None = None
    """The document it was read from, if any: what it keeps of it (usage, metadata) goes back as it was."""

    @classmethod
    async def of(cls, store: SessionStore, session_id: str, scope: str | None = None) -> Archive:
        """The session as `store.export()` reads it, to grow; an empty archive if the store has no such session."""
        try:
            document = await store.export(session_id, scope=scope)
        except SessionNotFound:
            return cls(session_id, scope)
        return cls(
            session_id,
            document.scope,
            segments=list(document.segments),
            summaries=list(document.summaries),
            active=document.active_segment,
            head_end=document.head_end,
            window_start=document.window_start,
            branches=list(document.branches),
            exported=document,
        )

    @property
    def length(self) -> int:
        """Messages on the active path."""
        return self.segments[self.active].end

    def append(self, messages: Sequence[ModelMessage], tokens: Sequence[int]) -> None:
        """Add `messages`, with their token counts, at the end of the active path."""
        segment = self.segments[self.active]
        segment.messages.extend(messages)
        segment.tokens.extend(tokens)
        if segment.stored_at:  # read from an export, which dates every message: date the new ones too
            segment.stored_at.extend([datetime.now(UTC)] * len(messages))

    def summarize(self, cut: int, text: str, tokens: int, model_name: str) -> None:
        """A summary of the active path's `window_start..cut`, extending its latest; the window then starts at
        `cut`, as after a compaction."""
        self.summaries.append(
            ExportedSummary(
                index=len(self.summaries),
                covers_from=self.window_start,
                covers_to=cut,
                text=text,
                tokens=tokens,
                model_name=model_name,
                usage=RunUsage(),
                created_at=datetime.now(UTC),
                segment=self.active,
                previous=self._latest(self.length),
            )
        )
        self.window_start = cut

    def rewind(self, position: int) -> None:
        """What `Session.rewind(position)` does: the active path is cut after `position` messages, the rest kept
        as a branch, and the next message starts a new segment there; the window goes back to the path's latest
        summary that covers no further."""
        left = self.segments[self.active]
        self.segments[self.active] = dataclasses.replace(left, head_end=self.head_end, window_start=self.window_start)
        self.branches.append((self.active, self.length - 1))
        parent = next(key for key in self._path() if self.segments[key].starts_at < position)
        self.segments.append(ExportedSegment(parent=parent, starts_at=position, messages=[], tokens=[]))
        self.active = len(self.segments) - 1
        latest = self._latest(position)
        self.window_start = self.head_end if latest is None else self.summaries[latest].covers_to

    def _path(self) -> list[int]:
        """The active path's segments, from the active one back to the root."""
        keys = [self.active]
        while (parent := self.segments[keys[-1]].parent) is not None:
            keys.append(parent)
        return keys

    def _latest(self, limit: int) -> int | None:
        """The summary on the active path that covers furthest, up to `limit`."""
        path = self._path()
        # Each ancestor's messages are on the path only up to where its child on the path starts.
        ends = {key: self.segments[child].starts_at for child, key in itertools.pairwise(path)}
        on_path = [
            summary
            for summary in self.summaries
            if summary.segment in path and summary.covers_to <= min(limit, ends.get(summary.segment, limit))
        ]
        return max(on_path, key=lambda summary: (summary.covers_to, summary.index)).index if on_path else None

    def document(self) -> SessionExport:
        """The archive as `SessionStore.import_` takes it."""
        messages, tokens = path_of(self.segments, self.active)
        start = self.exported or SessionExport(self.session_id, self.scope, [], [], [])
        return dataclasses.replace(
            start,
            session_id=self.session_id,
            scope=self.scope,
            messages=messages,
            tokens=tokens,
            summaries=self.summaries,
            head_end=self.head_end,
            window_start=self.window_start,
            segments=self.segments,
            active_segment=self.active,
            branches=self.branches,
        )

    async def store_in(self, store: SessionStore) -> None:
        """Import the archive into `store`, in place of the session of its id there, if there is one."""
        with contextlib.suppress(SessionNotFound):
            await store.delete(self.session_id, scope=self.scope)
        await store.import_(self.document())
