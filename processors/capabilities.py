"""The processors as pydantic-ai capabilities: they shape each request and leave the run's history raw.

A capability here replaces only `request_context.messages`, the copy sent to the model, so
`result.new_messages()` and `all_messages()` keep every message the run produced: the archive
stays complete while the model sees the window. Fractions resolve against the serving model's
`context_window` unless `max_input_tokens` is given.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, overload

from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering, CompactionRequest, CompactionResult
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import RunContext

from ._processor_base import WindowedProcessor
from .context_manager import ContextManagerCapability
from .limit_warner import LimitWarnerProcessor
from .sliding_window import SlidingWindowProcessor
from .stored_conversations import kept_by_store
from .summarization import SummarizationProcessor
from .summary import compaction_result, split_added_request

__all__ = (
    'SUMMARIZATION_HANDLER',
    'LimitWarnerCapability',
    'SlidingWindow',
    'Summarization',
    'as_capability',
)


class _WindowsRequests(AbstractCapability[Any]):
    """Sends each model request through the processor this capability also is."""

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        assert isinstance(self, WindowedProcessor)
        context_window = request_context.model.context_window
        if isinstance(self, SummarizationProcessor) and kept_by_store(ctx.conversation_id, ctx.messages):
            # The store shaped this window and keeps the conversation's summaries: one made here has to stand in the
            # run's conversation, where the store finds it, so the framework is asked to compact.
            if await self.plan_compression(request_context.messages, context_window=context_window) is not None:
                ctx.request_compaction(reason='threshold')
            return request_context
        request_context.messages = await self.window(request_context.messages, context_window=context_window)
        return request_context

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # Configured with callables (counters, models), so not spec-serializable.


SUMMARIZATION_HANDLER = 'session-store-summarization'
"""The stable id `Summarization` reports its compactions under (`CompactionRecord.handler`)."""


@dataclass
class SlidingWindow(SlidingWindowProcessor, _WindowsRequests):
    """`SlidingWindowProcessor` as a capability: `Agent(model, capabilities=[SlidingWindow(...)])`."""

    context_window_from_model: bool = True


@dataclass
class Summarization(SummarizationProcessor, _WindowsRequests):
    """`SummarizationProcessor` as a capability: `Agent(model, capabilities=[Summarization(model=...)])`.

    Besides shaping each request, it is the run's compaction handler (pydantic-ai's `compact_history` hook), for
    every reason the framework asks: `run(..., compact=...)` and `Agent.compact_history()` (`'manual'`, with a
    focus), `RunContext.request_compaction()`, a model that rejected the request as too long (`'context_overflow'`,
    compacted and sent once more), a model switch. Each is one more incremental summary, made as its trigger's
    are: the previous summary plus the messages evicted since, cut pair-safe.
    """

    context_window_from_model: bool = True

    async def compact_history(self, ctx: RunContext[Any], request: CompactionRequest) -> CompactionResult | None:
        """One more summary of `request.messages`, its focus put first; `None` (no compaction) when the summarizer
        failed or nothing is left to evict, so nothing but a summary is ever kept as one."""
        usage_before = replace(self.usage)
        history, added = split_added_request(request.messages)
        result = await self.process(
            history, request.focus, force=True, context_window=request.conversation_request.model.context_window
        )
        if not result.summarized:
            return None
        return compaction_result([*result.messages, *added], SUMMARIZATION_HANDLER, usage_before, self.usage)


@dataclass
class LimitWarnerCapability(LimitWarnerProcessor, AbstractCapability[Any]):
    """`LimitWarnerProcessor` as a capability: each request goes out with a warning turn when a limit is near.

    It changes only `request_context.messages`, so warnings never enter the run's history, and it runs
    after the window capabilities (`Summarization`, `SlidingWindow`, `ContextManagerCapability`), so
    the context it measures is the window actually sent, and theirs never holds a warning.
    """

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        request_context.messages = await self(ctx, request_context.messages)
        return request_context

    def get_ordering(self) -> CapabilityOrdering | None:
        return CapabilityOrdering(wrapped_by=(_WindowsRequests, ContextManagerCapability))

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return 'LimitWarnerCapability'


@overload
def as_capability(processor: SummarizationProcessor) -> Summarization: ...


@overload
def as_capability(processor: SlidingWindowProcessor) -> SlidingWindow: ...
def as_capability(processor: SlidingWindowProcessor | SummarizationProcessor) -> SlidingWindow | Summarization:
    """A fresh capability configured like `processor`, with none of its remembered histories."""
    capability = Summarization if isinstance(processor, SummarizationProcessor) else SlidingWindow
    settings = {f.name: getattr(processor, f.name) for f in fields(processor) if f.init}
    settings['context_window_from_model'] = True
    return capability(**settings)
