"""The sliding window: keep the most recent messages, drop the rest, no model call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic_ai.messages import ModelMessage

from ._processor_base import WindowedProcessor, build_windowing
from ._window_engine import Compaction, Lineage, Windowing
from .specs import ContextSize
from .tokens import TokenCounter, count_tokens_approximately

__all__ = ('SlidingWindowProcessor',)

DEFAULT_TRIGGER: ContextSize = ('messages', 100)
DEFAULT_KEEP: ContextSize = ('messages', 50)


@dataclass
class SlidingWindowProcessor(WindowedProcessor):
    """A history processor that keeps the most recent messages once a trigger fires.

    Call it with a history (`await processor(messages)`) to get the window to send, or hand it to
    pydantic-ai as `ProcessHistory(processor)`; the `SlidingWindow` capability applies it to each
    model request without touching the run's stored history. Cuts never separate a tool call from
    its return, and the head's system prompt survives unless `keep_system_prompt=False`.

    Args:
        trigger: When to trim: a `ContextSize` or a list of them (any fires). `None` never trims.
        keep: How much of the tail to keep when trimming.
        keep_head: How many leading messages to keep verbatim; when unset, the system prompt alone is kept.
        token_counter: Counts a sequence of messages, sync or async. Called once per message.
        max_input_tokens: The context window that `("fraction", f)` sizes resolve against.
        keep_system_prompt: Re-inject the head's system prompt parts after a cut.
        anchor_on_usage: Correct token counts by the input tokens the provider reported for the
            previous window, so dense content (base64, minified JSON) can't overflow unnoticed.
        context_window_from_model: Resolve fractions against the model's context window, passed to
            `process` at request time, as the capabilities do. A plain call sees no model, so without
            this a fraction needs `max_input_tokens`.
    """

    trigger: ContextSize | Sequence[ContextSize] | None = DEFAULT_TRIGGER
    keep: ContextSize = DEFAULT_KEEP
    keep_head: ContextSize | None = None
    token_counter: TokenCounter = count_tokens_approximately
    max_input_tokens: int | None = None
    keep_system_prompt: bool = True
    anchor_on_usage: bool = False
    context_window_from_model: bool = False
    _windowing: Windowing = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._windowing = build_windowing(self)

    async def process(self, messages: list[ModelMessage], *, context_window: int | None = None) -> list[ModelMessage]:
        """The window to send for `messages`: the same as `window`, kept under the name earlier releases used."""
        return await self.window(messages, context_window=context_window)

    async def _compact(self, lineage: Lineage, cut: int, context_window: int | None) -> Compaction:
        return Compaction()  # the evicted messages are simply dropped
