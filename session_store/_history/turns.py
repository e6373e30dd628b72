"""A turn on a stored session: the window it starts from, a fresh copy of the processor shaping it, and what
that copy made, stored back with the turn's messages in one transaction.

Both doors run a turn this way: `Session` (a run, or `compact`) and `SQLConversationStore` (the compaction a
load makes, and the append a save makes), so a window is read, compacted and stored one way whoever asks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic_ai import AgentRunResult
from pydantic_ai.messages import CompactionRecord, ModelMessage, ModelRequest
from pydantic_ai.usage import RunUsage

from processors import (
    ContextManagerCapability,
    SlidingWindow,
    Summarization,
    SummarizationFailure,
    SummarizationProcessor,
    Summary,
    count_tokens,
)
from processors.capabilities import as_capability

from ..errors import SessionConflict, SessionNotFound, StoreError
from .records import LoadedWindow, NewSummary, RunRecord
from .runs import Runs
from .windows import StoredRun, WindowEngine, WindowProcessor, window_engine

__all__ = ('Compacted', 'Compaction', 'Turn', 'compact_if_due')

_T = TypeVar('_T')


@dataclass
class Turn:
    """One turn in progress on a stored session: the window it started from, the capability shaping its
    requests, and the summaries and failures that capability reported."""

    runs: Runs
    session_id: str
    loaded: LoadedWindow
    capability: SlidingWindow | Summarization | ContextManagerCapability
    """A fresh copy of the session's processor for this turn, seeded with the stored window's token counts."""
    summaries: list[Summary] = field(default_factory=list[Summary])
    failures: list[SummarizationFailure] = field(default_factory=list[SummarizationFailure])
    owner: WindowEngine | None = None
    """The session's own processor (or its context manager's), which `capability` copies: the index the turn's
    history ends with is kept for that processor's next copy."""

    @classmethod
    async def start(
        cls,
        runs: Runs,
        session_id: str,
        scope: str | None,
        processor: WindowProcessor,
        *,
        loaded: LoadedWindow | None = None,
    ) -> Turn:
        """The turn that starts from the session's stored window, compressed with `processor`: `loaded`, when the
        caller holds it (kept in memory at the revision it read just now), else read."""
        loaded = loaded or await runs.load_window(session_id, scope, processor, for_run=True)
        summaries: list[Summary] = []
        failures: list[SummarizationFailure] = []
        capability: SlidingWindow | Summarization | ContextManagerCapability
        if isinstance(processor, ContextManagerCapability):
            capability = processor.fresh_engine(
                on_summary=_collecting(summaries, processor.on_summary),
                on_failure=_collecting(failures, processor.on_failure),
            )
        elif isinstance(processor, SummarizationProcessor):
            capability = as_capability(
                replace(
                    processor,
                    on_summary=_collecting(summaries, processor.on_summary),
                    on_failure=_collecting(failures, processor.on_failure),
                )
            )
        else:
            capability = as_capability(processor)
        turn = cls(runs, session_id, loaded, capability, summaries, failures, window_engine(processor))
        # The stored counts stand for the window's messages: each message is counted once, when stored. A window
        # kept in memory since the last run hands over how that run's processor indexed it, spared indexing again.
        await turn.engine.remember(loaded.messages, loaded.tokens, loaded.indexed)
        return turn

    @property
    def engine(self) -> WindowEngine:
        """Where the turn's window is decided and remembered: the capability, or a context manager's `processor`."""
        return window_engine(self.capability)

    def bounds(self, all_messages: Sequence[ModelMessage]) -> tuple[int, int]:
        """Where the window of `all_messages` (the turn's history, grown) stands in the archive: `(head_end,
        window_start)`, as the processor left it."""
        state = self.engine.compaction_state(all_messages)
        if state is None:
            return self.loaded.head_end, self.loaded.window_start
        head_end = self._position(state.head_end - 1) + 1 if state.head_end else 0
        return head_end, self._position(state.tail_start)

    def _position(self, index: int) -> int:
        """The archive position of the turn's message at `index` (a window's, or a new one's after it)."""
        loaded, known = self.loaded, len(self.loaded.messages)
        return loaded.positions[index] if index < known else loaded.message_count + index - known

    async def store_run(self, result: AgentRunResult[Any], deferred_tool_requests: dict[str, Any] | None) -> StoredRun:
        """Store the turn's finished agent run, compactions it kept included (see `compactions`)."""
        all_messages = result.all_messages()
        if result.compactions:
            # The run's history is the compacted one; its conversation holds every message, each compaction's
            # summary in line, which the store keeps as the next link of the chain.
            all_messages = result.conversation.messages
        new_messages = all_messages[len(self.loaded.messages) :]
        return await self.store(all_messages, new_messages, result.usage, deferred_tool_requests)

    async def take(self, compactions: Sequence[CompactionRecord]) -> None:
        """Keep the summaries of `compactions` that another handler made (a run's, or `Agent.compact_history`'s) as
        the turn's own, to be stored as the next links of the chain: the messages each summarized are its record's,
        by identity. One the turn's processor reported already is kept once."""
        reported = {summary.text for summary in self.summaries}
        for record in compactions:
            text = record.part.content if record.part.provider_name is None else None
            if not text or text in reported or record.summarized is None:
                continue
            tokens = await count_tokens(self.engine.token_counter, [ModelRequest(parts=[record.part])])
            # A record says nothing of what its handler spent: the run's usage counts it.
            self.summaries.append(Summary(text, None, tuple(record.summarized), tokens, record.model_name, RunUsage()))

    async def store(
        self,
        all_messages: Sequence[ModelMessage],
        new_messages: Sequence[ModelMessage],
        usage: RunUsage,
        deferred_tool_requests: dict[str, Any] | None,
        *,
        total_usage: RunUsage | None = None,
        entry_ids: Sequence[str] | None = None,
        revision: str | None = None,
    ) -> StoredRun:
        """Store what the turn added: its messages, the summaries made, and the window's new bounds.

        `usage` is what the turn spent, added to the session's; `total_usage` replaces the session's instead
        (pydantic-ai's conversations carry their own running total). `entry_ids` and `revision` are the
        caller's own, when it has them.
        """
        loaded = self.loaded
        known = len(loaded.messages)
        if len(all_messages) != known + len(new_messages):
            raise StoreError(
                f'Session {self.session_id!r}: the run returned {len(all_messages)} messages for a history of '
                f'{known} plus {len(new_messages)} new ones; a capability rewrote the run history, so nothing '
                'was stored.'
            )

        position = self._position
        head_end, window_start = self.bounds(all_messages)
        index_of = {id(message): index for index, message in enumerate(all_messages)}
        summaries: list[NewSummary] = []
        for summary in self.summaries:
            covered = [position(index_of[id(m)]) for m in summary.covered if id(m) in index_of]
            # Past what the window's own summary covers: a handler's account may count the kept head in.
            start = max([loaded.window_start, *(s.covers_to for s in summaries)])
            if covered and max(covered) + 1 > start:
                summaries.append(
                    NewSummary(
                        max(min(covered), start),
                        max(covered) + 1,
                        summary.text,
                        summary.tokens,
                        summary.model_name,
                        summary.usage,
                    )
                )
        # The window opens after the newest summary, wherever the processor (or another handler) left it.
        window_start = max([window_start, *(s.covers_to for s in summaries)])
        # The processor counted every message up to the run's last request; only the rest is counted here.
        counted = self.engine.token_counts(all_messages)[known:]
        counter = self.engine.token_counter
        tokens = [
            t if t is not None else await count_tokens(counter, [m]) for m, t in zip(new_messages, counted, strict=True)
        ]
        if total_usage is None:
            total_usage = replace(loaded.usage)
            total_usage.incr(usage)
        record = RunRecord(
            messages=new_messages,
            tokens=tokens,
            head_end=head_end,
            window_start=window_start,
            summaries=summaries,
            usage=total_usage,
            deferred_tool_requests=deferred_tool_requests,
            entry_ids=entry_ids,
        )
        indexed = self.engine.indexed(all_messages)
        kept = None if indexed is None or self.owner is None else (self.owner, indexed)
        return await self.runs.store(self.session_id, loaded, record, revision=revision, indexed=kept)


Compacted = Literal['no', 'yes', 'moved']
"""What `compact_if_due` did: nothing (the session as the caller read it), a compaction stored, or nothing because
another writer moved the session meanwhile (the caller's read of it is out of date either way but the first)."""


class Compaction(NamedTuple):
    """What `compact_if_due` did (`done`), and what a compaction of the window at the caller's revision stored."""

    done: Compacted
    stored: StoredRun | None = None
    """Set when `done` is 'yes' and the window compacted was the one at the revision the caller read: the session's
    row then differs from that read only by what this write changed."""


async def compact_if_due(
    runs: Runs, session_id: str, scope: str | None, processor: WindowProcessor, *, revision: str | None = None
) -> Compaction:
    """Compact the session's stored window now if `processor`'s trigger holds on it, as a run's first request
    would, and say what came of it. `revision`: the session's, as the caller read it just now (see `Turn.start`).

    The summary (made from the stored one and only the messages newly evicted) and the window's new bounds are
    stored in their own transaction. A run through pydantic-ai's own door runs without the store, so its load
    does this first. A summarizer that fails leaves the sliding window's cut, as in a run, and no summary.
    """
    window = None if revision is None else runs.kept(session_id, revision)
    if window is not None and window_engine(processor).below_every_trigger(window.length(processor)):
        return Compaction('no')  # what the processor's pass over the window would find, without making one
    kept = None if window is None else window.loaded(processor)
    try:
        turn = await Turn.start(runs, session_id, scope, processor, loaded=kept)
    except SessionNotFound:
        return Compaction('moved')
    loaded = turn.loaded
    await turn.engine.window(loaded.messages)
    if not turn.summaries and turn.bounds(loaded.messages) == (loaded.head_end, loaded.window_start):
        return Compaction('no' if revision in (None, loaded.revision) else 'moved')
    try:
        stored = await turn.store(loaded.messages, [], RunUsage(), loaded.deferred_tool_requests)
    except SessionConflict:
        return Compaction('moved')  # another writer moved the session meanwhile: the load reads what it stored
    return Compaction('yes', stored if revision == loaded.revision else None)


def _collecting(
    made: list[_T], callback: Callable[[_T], Awaitable[None] | None] | None
) -> Callable[[_T], Awaitable[None]]:
    """A callback that keeps what it is given in `made`, then passes it on to `callback`."""

    async def collect(item: _T) -> None:
        made.append(item)
        if callback is not None:
            result = callback(item)
            if result is not None:
                await result

    return collect
