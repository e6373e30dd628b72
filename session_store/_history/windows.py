"""A session's window as the archive holds it (`StoredWindow`), and how it becomes what a run starts from.

The processor a session compresses with decides the window's shape: where the bridge (summary or system
prompt) goes, and which of the head's system parts are kept.
"""

from __future__ import annotations

import pickle
from copy import copy
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, SystemPromptPart
from pydantic_ai.usage import RunUsage

from processors import ContextManagerCapability, SlidingWindowProcessor, SummarizationProcessor
from processors.state import Lineage
from processors.summary import summary_request

from .._codec import copied, load_usage, pickled
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
    indexed: tuple[WindowEngine, Lineage] | None = field(default=None, compare=False)
    """How the run that wrote this window indexed its history (the processor that run copied, and the index): the
    next run's copy of that processor takes it over, so only the messages new since are indexed."""
    shown: _Made = field(default_factory=lambda: _Made(), compare=False, repr=False)
    """The window as the last processor asked for it shapes it, made once (`handed_out` hands out copies of it)."""

    def after(
        self,
        revision: str,
        record: RunRecord,
        stored: StoredRun,
        indexed: tuple[WindowEngine, Lineage] | None = None,
    ) -> StoredWindow | None:
        """This window once `record` is stored under `revision` (with what the write made: `stored`, and how the
        run's processor indexed the history: `indexed`); `None` when only a read can tell which summary it starts
        from (a stored one further along the path comes within reach).
        """
        summary_pks, entry_ids, usage = stored.summary_pks, stored.entry_ids, stored.usage
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
        added = list(map(Entry, range(self.message_count, count), record.messages, record.tokens, entry_ids))
        head = head_read(record.head_end, record.window_start)
        entries = tuple(e for e in (*self.entries, *added) if e.position < head or e.position >= record.window_start)
        if len(entries) != head + count - record.window_start:
            return None  # the new head reaches messages this window did not hold
        bounds = (record.head_end, record.window_start, summary)
        same_opening = bounds == (self.head_end, self.window_start, self.summary)
        # The run's messages extend a tail whose first message (the one the bridge rides in) stays: the window shown
        # grows by them, made again only for another processor.
        grown = self.shown.grown(added, record.usage) if same_opening and self.holds_tail() else _Made()
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
            indexed=indexed if same_opening else None,
            shown=grown,
        )

    def holds_tail(self) -> bool:
        """Whether the window's tail holds a message: its first, which the bridge rides in, stays as messages are
        appended."""
        return self.message_count > max(self.window_start, self.head_end)

    def loaded(self, processor: WindowProcessor) -> LoadedWindow:
        """The window a run starts from: head, then the tail with the bridge riding in its first request
        (or standing before it, when the tail opens with a response)."""
        engine = window_engine(processor)
        shown = self._shown_by(engine)
        indexed = self.indexed[1] if self.indexed is not None and self.indexed[0] is engine else None
        return LoadedWindow(
            session_pk=self.session_pk,
            segment_pk=self.segment_pk,
            revision=self.revision,
            message_count=self.message_count,
            head_end=self.head_end,
            window_start=self.window_start,
            summary_pk=None if self.summary is None else self.summary[0],
            # Lists of the run's own; the messages in them are shared, as nobody changes a message in place.
            messages=list(shown.messages),
            positions=list(shown.positions),
            tokens=list(shown.tokens),
            entry_ids=list(shown.entry_ids),
            usage=copy(shown.usage),
            deferred_tool_requests=self.deferred_tool_requests,
            indexed=indexed,
        )

    def handed_out(self, processor: WindowProcessor) -> list[ModelMessage]:
        """Copies of the messages `loaded(processor)` holds, for a caller who may change them in place."""
        shown = self._shown_by(window_engine(processor))
        return shown.copies.of(shown.messages)

    def length(self, processor: WindowProcessor) -> int:
        """How many messages the window `loaded(processor)` hands out holds, without making it."""
        return len(self._shown_by(window_engine(processor)).messages)

    def _shown_by(self, engine: WindowEngine) -> _Window:
        shown = self.shown.get(engine)
        return self.shown.put(engine, self._shown(engine)) if shown is None else shown

    def _shown(self, engine: WindowEngine) -> _Window:
        """The window as `engine` shapes it, made once per window and processor."""
        first = [self.entries[0].message] if self.entries and self.entries[0].position == 0 else []
        head: list[_Shown] = [e for e in self.entries if e.position < self.head_end]
        tail: list[_Shown] = [
            e for e in self.entries if e.position >= self.window_start and e.position >= self.head_end
        ]
        system_parts = engine.kept_system_parts(first)
        if self.summary is not None or (system_parts and self.window_start > self.head_end):
            tail[:1] = self._bridged(tail[:1], system_parts)
        window = [*head, *tail]
        return _Window(
            messages=[m for _, m, _, _ in window],
            positions=[p for p, _, _, _ in window],
            tokens=[t for _, _, t, _ in window],
            entry_ids=[i for _, _, _, i in window],
            usage=load_usage(self.usage),
            copies=_Copies(),
        )

    def _bridged(self, opening: list[_Shown], system_parts: list[SystemPromptPart]) -> list[_Shown]:
        """The start of the tail (`opening`: its first message, if any) with the bridge (the summary, or the system
        prompt once its own message was cut) in it: riding in its first request, or standing before it."""
        parts: list[ModelRequestPart] = list(system_parts)
        if self.summary is not None:
            parts = list(summary_request(system_parts, self.summary[1]).parts)
        if not opening:
            # A path that ends at its summary (before a prompt sent again): the window is the bridge alone.
            return [(self.window_start, _stamped(ModelRequest(parts=parts)), None, None)]
        position, first, _, entry_id = opening[0]
        if isinstance(first, ModelRequest):
            # pydantic-ai merges consecutive requests, so the bridge rides in the tail's first request;
            # the run's history then lines up with the archive.
            return [(position, _stamped(replace(first, parts=[*parts, *first.parts])), None, entry_id)]
        # A processor that cuts before responses (ContextManagerCapability) left the tail opening with one: the
        # bridge stands alone before it, as that processor's own window has it.
        return [(position, _stamped(ModelRequest(parts=parts)), None, None), opening[0]]


def _stamped(request: ModelRequest) -> ModelRequest:
    """`request`, a window's opening with the bridge in it, with a timestamp: its own, else its first part's.

    pydantic-ai 2.78's UI adapters (their system prompt reinjector) save an opening request that has no timestamp,
    as archives imported or written by hand hold them, a second time after the new turn. A part's timestamp is
    stored with it, so every window made from the same messages opens with the same request.
    """
    if request.timestamp is not None:
        return request
    stamps = (getattr(part, 'timestamp', None) for part in request.parts)
    return replace(request, timestamp=next((stamp for stamp in stamps if isinstance(stamp, datetime)), None))


_Shown = tuple[int, ModelMessage, int | None, str | None]
"""A message of a window as a run is given it: position, message, token count and entry id (`None` where the
bridge changed the message, or stands alone)."""


class _Window(NamedTuple):
    """A window's columns as a processor shapes it (`StoredWindow._shown`)."""

    messages: list[ModelMessage]
    positions: list[int]
    tokens: list[int | None]
    entry_ids: list[str | None]
    usage: RunUsage
    copies: _Copies


class _Copies:
    """The pickled messages of a shown window, in the chunks they came in (the window as first shown, then each
    run's messages), each copy of the window loaded from them: a copy pickles only the messages new since the last
    one, and loading is about half of a pickle round trip."""

    def __init__(self, chunks: tuple[bytes, ...] = (), covered: int = 0) -> None:
        self._chunks = chunks
        self._covered = covered
        """How many of the window's messages the chunks hold: its first ones."""

    def of(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Copies of `messages`, the window's, which begin with those the chunks hold."""
        if self._covered < len(messages):
            # Many small chunks load slower than one: past a few, the window is pickled whole again.
            whole = len(self._chunks) >= _CHUNKS
            new = pickled(messages if whole else messages[self._covered :])
            if new is None:  # pickle can't take one of them: a deep copy each time
                return copied(messages)
            self._chunks = (new,) if whole else (*self._chunks, new)
            self._covered = len(messages)
        return [message for chunk in self._chunks for message in pickle.loads(chunk)]

    def grown(self) -> _Copies:
        """These chunks, for the window grown by more messages (which the next copy pickles)."""
        return _Copies(self._chunks, self._covered)


_CHUNKS = 6
"""Chunks a window's copies are loaded from before it is pickled whole again (`_Copies`)."""


class _Made:
    """The window a store holds as one processor shapes it, kept for that processor (the same object) only."""

    def __init__(self) -> None:
        self._made: tuple[WindowEngine, _Window] | None = None

    def get(self, engine: WindowEngine) -> _Window | None:
        return self._made[1] if self._made is not None and self._made[0] is engine else None

    def put(self, engine: WindowEngine, window: _Window) -> _Window:
        self._made = (engine, window)
        return window

    def grown(self, added: list[Entry], usage: RunUsage) -> _Made:
        """The window made here with `added` appended to its tail, and the session's usage now `usage`."""
        grown = _Made()
        if self._made is not None:
            engine, window = self._made
            grown.put(
                engine,
                _Window(
                    messages=[*window.messages, *(e.message for e in added)],
                    positions=[*window.positions, *(e.position for e in added)],
                    tokens=[*window.tokens, *(e.tokens for e in added)],
                    entry_ids=[*window.entry_ids, *(e.entry_id for e in added)],
                    usage=copy(usage),
                    copies=window.copies.grown(),
                ),
            )
        return grown


class StoredRun(NamedTuple):
    """What storing a run made: its summaries' keys, its messages' entry ids, its usage, the session's revision and
    the time it was updated at, as stored."""

    summary_pks: list[int]
    entry_ids: list[str]
    usage: dict[str, Any]
    revision: str
    updated_at: datetime


def head_read(head_end: int, window_start: int) -> int:
    """Where a window read's head scan ends: past the first message (its system prompt) unless the tail starts there."""
    return min(max(head_end, 1), window_start)
