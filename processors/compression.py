"""Manual compaction's records: a plan made before the summarizer runs, and what a compaction attempt did.

`SummarizationProcessor.plan_compression` decides whether and where to cut without calling the
summarizer; `execute_plan` carries the plan out; `process` does both. These are the types they
exchange, named and shaped as in `summarization-pydantic-ai`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from pydantic_ai.messages import ModelMessage, SystemPromptPart

from ._window_engine import Decision

__all__ = ('CompressionPlan', 'SkipReason', 'SummarizationResult')

SkipReason: TypeAlias = Literal['not_triggered', 'cutoff_zero', 'failed']
"""Why a compaction attempt made no summary.

- `'not_triggered'`: no trigger fired, and the compaction was not forced.
- `'cutoff_zero'`: there was nothing to evict: `keep` (and the head) cover everything not yet summarized.
- `'failed'`: the summarizer raised, timed out, or returned empty or oversized text; nothing was stored.
"""


@dataclass
class CompressionPlan:
    """A compaction decided but not yet run: where the history is cut and what the summarizer will read."""

    cutoff_index: int
    """Where the kept tail starts in the history the plan was made for."""
    messages_to_summarize: list[ModelMessage]
    """The messages the summary will fold in: those evicted since the previous summary (all of them
    before `cutoff_index` on a history never compacted, less a kept head)."""
    preserved_messages: list[ModelMessage]
    """The tail kept verbatim: `history[cutoff_index:]`."""
    system_parts: list[SystemPromptPart]
    """The system prompt parts the compacted window re-injects ahead of the summary."""
    previous_summary: str | None = None
    """The summary this compaction extends, or `None` for the first."""
    forced: bool = False
    """Whether the compaction was asked for (`force=True`) rather than fired by a trigger."""
    tokens: int = 0
    """The window's token estimate before compacting, as the processor counts (learned provider overhead included)."""
    _decision: Decision | None = field(default=None, init=False, repr=False, compare=False)


@dataclass
class SummarizationResult:
    """What one compaction attempt did: the window that goes out, and whether a summary made it."""

    messages: list[ModelMessage]
    """The window: the history itself, or its head, the summary and the kept tail. When no summary was
    made it is the window as it stood, or, if a trigger fired and the summarizer failed, the sliding window."""
    summarized: bool
    """Whether a new summary was made and applied."""
    cutoff_index: int = 0
    """Where the kept tail starts in the history, when `summarized`; else `0`."""
    summary: str | None = None
    """The new summary's text, when `summarized`."""
    skip_reason: SkipReason | None = None
    """Why no summary was made; `None` when `summarized`."""
    tokens: int = 0
    """The token estimate of `messages`, as the processor counts (provider overhead learned included)."""
