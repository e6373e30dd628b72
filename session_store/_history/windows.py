"""A session's window as the archive holds it (`StoredWindow`), and how it becomes what a run starts from.

The processor a session compresses with decides the window's shape: where the bridge (summary or system
prompt) goes, and which of the head's system parts are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart

from processors import ContextManagerCapability, SlidingWindowProcessor, SummarizationProcessor, summary_request

from .._codec import load_usage
from .records import Entry, LoadedWindow, RunRecord

__all__ = ('StoredRun', 'StoredWindow', 'WindowEngine', 'WindowProcessor', 'head_read', 'window_engine')

WindowProcessor = SlidingWindowProcessor | SummarizationProcessor | ContextManagerCapability
"""How a session compresses what the model sees; the store keeps every message either way."""

WindowEngine = SlidingWindowProcessor | SummarizationProcessor
"""Where a session's window is decided: the processor itself, or a `ContextManagerCapability`'s `processor`."""


def window_engine(processor: WindowProcessor) -> WindowEngine:
    """The processor whose windows `processor` sends, and a store rebuilds."""
    return processor.processor if isinstance(processor, ContextManagerCapability) else processor


@dataclass(frozen=True)
class StoredWindow:
    """A session's window as the archive holds it, before the bridge (summary or system prompt) is merged in.

    `entries` are exactly the rows a read of the window takes: the head (at least the first message, for
    its system prompt) and the tail from `window_start` on.
    """

    session_pk: int
    segment_pk: int
    revision: str
    message_count: int
    head_end: int
    window_start: int
    summary: tuple[int, str] | None
    """The summary the window starts from: its key and text."""
    next_summary_at: int | None
    """Where the first summary on the path past `window_start` ends, if any: moving the start there reaches it."""
    entries: tuple[Entry, ...]
    usage: dict[str, Any]
    deferred_tool_requests: dict[str, Any] | None

    def after(self, revision: str, record: RunRecord, stored: StoredRun) -> StoredWindow | None:
        """This window once `record` is stored under `revision` (with what the write made: `stored`); `None`
        when only a read can tell which summary it starts from (a stored one further along the path comes
        within reach).
        """
        summary_pks, entry_ids, usage = stored
        beyond = self.next_summary_at is not None and self.next_summary_at <= record.window_start
        if record.summaries:
            made = record.summaries[-1]
            if made.covers_to != record.window_start or beyond:
                return None
            summary: tuple[int, str] | None = (summary_pks[-1], made.text)
        elif beyond:
            return None
        else:
            summary = self.summary
        count = self.message_count + len(record.messages)
        added = map(Entry, range(self.message_count, count), record.messages, record.tokens, entry_ids)
        head = head_read(record.head_end, record.window_start)
        entries = tuple(e for e in (*self.entries, *added) if e.position < head or e.position >= record.window_start)
        if len(entries) != head + count - record.window_start:
            return None  # the new head reaches messages this window did not hold
        return StoredWindow(
            session_pk=self.session_pk,
            segment_pk=self.segment_pk,
            revision=revision,
            message_count=count,
            head_end=record.head_end,
            window_start=record.window_start,
            summary=summary,
            next_summary_at=self.next_summary_at,
            entries=entries,
            usage=usage,
            deferred_tool_requests=record.deferred_tool_requests,
        )

    def loaded(self, processor: WindowProcessor) -> LoadedWindow:
        """The window a run starts from: head, then the tail with the bridge riding in its first request
        (or standing before it, when the tail opens with a response)."""
        engine = window_engine(processor)
        first = [self.entries[0].message] if self.entries and self.entries[0].position == 0 else []
        head: list[_Shown] = [e for e in self.entries if e.position < self.head_end]
        tail: list[_Shown] = [
            e for e in self.entries if e.position >= self.window_start and e.position >= self.head_end
        ]
        parts: list[ModelRequestPart] = []
        if self.summary is not None:
            parts = list(summary_request(engine.kept_system_parts(first), self.summary[1]).parts)
        elif self.window_start > self.head_end:  # the system prompt's own message was cut
            parts = list(engine.kept_system_parts(first))
        if parts and not tail:
            # A path that ends at its summary (before a prompt sent again): the window is the bridge alone.
            tail = [(self.window_start, ModelRequest(parts=parts), None, None)]
        elif parts:
            position, opening, _, entry_id = tail[0]
            if isinstance(opening, ModelRequest):
                # pydantic-ai merges consecutive requests, so the bridge rides in the tail's first request;
                # the run's history then lines up with the archive.
                tail[0] = (position, replace(opening, parts=[*parts, *opening.parts]), None, entry_id)
            else:
                # A processor that cuts before responses (ContextManagerCapability) left the tail opening with
                # one: the bridge stands alone before it, as that processor's own window has it.
                tail.insert(0, (position, ModelRequest(parts=parts), None, None))
        window = [*head, *tail]
        return LoadedWindow(
            session_pk=self.session_pk,
            segment_pk=self.segment_pk,
            revision=self.revision,
            message_count=self.message_count,
            head_end=self.head_end,
            window_start=self.window_start,
            summary_pk=None if self.summary is None else self.summary[0],
            messages=[m for _, m, _, _ in window],
            positions=[p for p, _, _, _ in window],
            tokens=[t for _, _, t, _ in window],
            entry_ids=[i for _, _, _, i in window],
            usage=load_usage(self.usage),
            deferred_tool_requests=self.deferred_tool_requests,
        )


_Shown = tuple[int, ModelMessage, int | None, str | None]
"""A message of a window as a run is given it: position, message, token count and entry id (`None` where the
bridge changed the message, or stands alone)."""


class StoredRun(NamedTuple):
    """What storing a run made: its summaries' keys, its messages' entry ids, and its usage as stored."""

    summary_pks: list[int]
    entry_ids: list[str]
    usage: dict[str, Any]


def head_read(head_end: int, window_start: int) -> int:
    """Where a window read's head scan ends: past the first message (its system prompt) unless the tail starts there."""
    return min(max(head_end, 1), window_start)
