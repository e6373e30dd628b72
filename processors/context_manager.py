"""`ContextManagerCapability`: one capability for the whole job of keeping a run inside its context window.

It compacts through a `SummarizationProcessor` (the incremental engine: each summary extends the last,
cuts are pair-safe, one summarizer call per request at most, failures never stored), shortens large
tool outputs in what the model sees, reports usage, and lets the agent or the application ask for a
compaction, with a focus. Constructed as in `summarization-pydantic-ai`.

Everything it changes is `request_context.messages`, the copy sent to the model: the run's history
(`result.all_messages()`) keeps every message whole, tool outputs included.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from pydantic_ai.capabilities import AbstractCapability, CompactionRequest, CompactionResult
from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from ._truncation import ToolOutputLimit
from .specs import ContextSize
from .stored_conversations import kept_by_store
from .summarization import DEFAULT_SUMMARY_PROMPT, FailureCallback, SummarizationProcessor, SummaryCallback
from .summary import compaction_result, find_summary, split_added_request, summary_text
from .tokens import TokenCounter, count_tokens_approximately

__all__ = ('CONTEXT_MANAGER_HANDLER', 'CONTEXT_MANAGER_ID', 'DEFAULT_MAX_TOKENS', 'ContextManagerCapability')

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 200_000
"""The context budget when neither `max_tokens` nor the model's profile gives one."""

CONTEXT_MANAGER_ID = 'context_manager'
"""The capability `id` a `ContextManagerCapability` has unless given another: an agent has one context manager,
so one passed to a run (`agent.run(..., capabilities=[...])`) stands in for the agent's own, as pydantic-ai
replaces an agent-level capability with the run-level one of the same `id`."""

CONTEXT_MANAGER_HANDLER = 'session-store-context-manager'
"""The stable id a `ContextManagerCapability` reports its compactions under (`CompactionRecord.handler`)."""

UsageCallback = Callable[[float, int, int], object]
"""`on_usage_update(share, tokens, max_tokens)`: the window's share of the budget, its tokens, the budget."""
BeforeCompressCallback = Callable[[list[ModelMessage], int], object]
"""`on_before_compress(messages, cutoff_index)`: called before the summarizer, with where the tail will start."""
AfterCompressCallback = Callable[[list[ModelMessage], bool, 'str | None'], 'str | None']
"""`on_after_compress(messages, summarized, summary)`: may return text to keep as a system prompt part next to
the summary in every later window."""

_REINJECTED = 64


@dataclass
class _Shared:
    """What a capability shares with the copies `fresh_engine` makes of it."""

    requested: dict[str | None, str | None] = field(default_factory=dict[str | None, str | None])
    """Compactions asked for, by run id (`None`: by `request_compact`, for the next request of any run)."""
    reinjected: OrderedDict[str, str] = field(default_factory=OrderedDict[str, str])
    """Text `on_after_compress` returned, by the summary it was returned for."""
    compressions: int = 0
    model_window: int | None = None
    """The serving model's context window, once a request has shown it."""


COMPACT_TOOL_DESCRIPTION = (
    'Compact the conversation history to free context space: earlier messages are replaced by a summary '
    'before your next request. Use it when the conversation is long and you want to keep what matters while '
    'using fewer tokens. Optionally name a focus topic the summary should put first.'
)


@dataclass
class ContextManagerCapability(AbstractCapability[Any]):
    """Keeps an agent's requests within a token budget: compaction, tool-output truncation, usage reports.

    Before each model request it measures the window, compacts it once it reaches `compress_threshold`
    of the budget (or when a compaction was asked for), shortens tool outputs over
    `max_tool_output_tokens` in what the model sees, and calls `on_usage_update`. The budget is
    `max_tokens`, else the serving model's context window, else `DEFAULT_MAX_TOKENS`.

    Args:
        max_tokens: The token budget; `None` reads the serving model's context window.
        compress_threshold: The share of the budget, in (0, 1], at which the window is compacted.
        keep: How much of the tail to keep verbatim; the default keeps only the request in flight.
        summarization_model: The summarizer: any pydantic-ai model or model name.
        token_counter: Counts a sequence of messages, sync or async; called once per message.
        summary_prompt: The summarizer prompt; `{messages}` receives the previous summary and new messages.
        max_tool_output_tokens: Tool outputs over this many tokens (at four characters a token) reach the
            model shortened to their first and last lines; `None` sends them whole.
        tool_output_head_lines: Lines kept from the start of a shortened output.
        tool_output_tail_lines: Lines kept from its end.
        on_usage_update: Called each request with the window's share of the budget, its tokens, the budget,
            and again after a compaction.
        on_before_compress: Called before the summarizer with the history and where its kept tail starts.
        on_after_compress: Called after with the window, whether a summary was made, and its text; text it
            returns is kept as a system prompt part beside the summary.
        include_compact_tool: Give the agent a `compact_conversation(focus)` tool; the compaction it asks
            for happens before its next request.
        summarizer_timeout: Seconds the summarizer may take before the request falls back.
        on_summary: Called with each `Summary` made, to persist it.
        on_failure: Called with each `SummarizationFailure`.
        id: Its pydantic-ai capability id, `CONTEXT_MANAGER_ID` unless given.
    """

    max_tokens: int | None = None
    compress_threshold: float = 0.9
    keep: ContextSize = ('messages', 0)
    summarization_model: Model | str = 'openai:gpt-4.1-mini'
    token_counter: TokenCounter = count_tokens_approximately
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    max_tool_output_tokens: int | None = None
    tool_output_head_lines: int = 5
    tool_output_tail_lines: int = 5
    on_usage_update: UsageCallback | None = None
    on_before_compress: BeforeCompressCallback | None = None
    on_after_compress: AfterCompressCallback | None = None
    include_compact_tool: bool = False
    summarizer_timeout: float | None = 120.0
    on_summary: SummaryCallback | None = None
    on_failure: FailureCallback | None = None
    id: str | None = field(default=CONTEXT_MANAGER_ID, kw_only=True)
    """Its pydantic-ai capability id: a run-level `ContextManagerCapability` with the same one replaces the
    agent's for that run (see `CONTEXT_MANAGER_ID`)."""
    processor: SummarizationProcessor = field(init=False, repr=False)
    """The engine that compacts: its `usage` totals the summarizer's cost."""
    _limit: ToolOutputLimit | None = field(default=None, init=False, repr=False)
    _shared: _Shared = field(default_factory=_Shared, init=False, repr=False)

    def __post_init__(self) -> None:
        threshold = self.compress_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1:
            raise ValueError(
                f'compress_threshold={threshold!r}: compress_threshold must be between 0 and 1, got {threshold!r} '
                '(a share of the token budget, 0 excluded).'
            )
        for name in ('max_tool_output_tokens', 'max_tokens'):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f'{name}={value!r}: it must be a whole number > 0, or None.')
        for name in ('tool_output_head_lines', 'tool_output_tail_lines'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f'{name}={value!r}: it must be a whole number >= 0.')
        counter = self.token_counter
        if self.max_tool_output_tokens is not None:
            self._limit = ToolOutputLimit(
                self.max_tool_output_tokens, self.tool_output_head_lines, self.tool_output_tail_lines
            )
            counter = self._limit.counter(counter)
        self.processor = SummarizationProcessor(
            model=self.summarization_model,
            trigger=('fraction', threshold),
            keep=self.keep,
            token_counter=counter,
            summary_prompt=self.summary_prompt,
            max_input_tokens=self.max_tokens,
            context_window_from_model=True,
            summarizer_timeout=self.summarizer_timeout,
            on_summary=self.on_summary,
            on_failure=self.on_failure,
            # A run that is one long chain of tool calls can still be compacted: the summary opens the window.
            cut_before_responses=True,
        )

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return 'ContextManagerCapability'

    @property
    def compression_count(self) -> int:
        """How many compactions made a summary."""
        return self._shared.compressions

    def request_compact(self, focus: str | None = None) -> None:
        """Compact before the next model request (of any run using this capability), putting `focus` first."""
        self._shared.requested[None] = focus

    async def compact(self, messages: list[ModelMessage], focus: str | None = None) -> list[ModelMessage]:
        """Compact `messages` now, outside a run: a forced, incremental compaction with the same callbacks.

        Returns the window (the history itself when there is nothing to evict or the summarizer failed).
        """
        return await self._compress(messages, focus, force=True, budget=self._budget(None))

    def fresh_engine(
        self, *, on_summary: SummaryCallback | None, on_failure: FailureCallback | None
    ) -> ContextManagerCapability:
        """This capability with an engine of its own that has seen no history yet, reporting each summary to
        `on_summary` and each failure to `on_failure` instead of this one's callbacks.

        For code that rebuilds every run's history from storage and stores what the run summarized (the
        session store). The copy has these settings and `id`, and shares this capability's compaction
        requests (`request_compact`, `compact_conversation`), `compression_count`, `processor.usage` and the
        text `on_after_compress` returned; what it remembers of histories is its own.
        """
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        copy = type(self)(**{**settings, 'on_summary': on_summary, 'on_failure': on_failure})
        copy._shared = self._shared
        copy.processor.usage = self.processor.usage
        return copy

    def get_toolset(self) -> AbstractToolset[Any] | None:
        """The `compact_conversation` tool, when `include_compact_tool`."""
        if not self.include_compact_tool:
            return None
        toolset: FunctionToolset[Any] = FunctionToolset(id='context-compact')
        requested = self._shared.requested

        @toolset.tool(description=COMPACT_TOOL_DESCRIPTION)
        async def compact_conversation(ctx: RunContext[Any], focus: str | None = None) -> str:
            """Compact the conversation history before the next request.

            Args:
                focus: A topic the summary should put first.
            """
            requested[ctx.run_id] = focus
            about = f' Focus: {focus}.' if focus else ''
            return f'Conversation compaction requested.{about} It will be applied before your next request.'

        return toolset

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        budget = self._budget(request_context.model)
        # Asked for by this run's compact_conversation call, or by request_compact() for whichever run is next.
        requested = self._shared.requested
        asked = [requested.pop(key) for key in dict.fromkeys((ctx.run_id, None)) if key in requested]
        focus = next((topic for topic in asked if topic), None)
        if kept_by_store(ctx.conversation_id, ctx.messages):
            # The store shaped this window and keeps the conversation's summaries: one made here has to stand in the
            # run's conversation, where the store finds it, so the framework is asked to compact.
            window = request_context.messages
            if asked or await self.processor.plan_compression(window, context_window=budget) is not None:
                ctx.request_compaction(reason='manual' if asked else 'threshold', focus=focus)
        else:
            window = await self._compress(request_context.messages, focus, force=bool(asked), budget=budget)
        request_context.messages = self._limit.messages(window) if self._limit is not None else window
        return request_context

    async def compact_history(self, ctx: RunContext[Any], request: CompactionRequest) -> CompactionResult | None:
        """One more summary of `request.messages` (pydantic-ai's compaction hook, for every reason it asks), with
        every callback called; `None` (no compaction) when the summarizer failed or nothing is left to evict."""
        compressions, usage_before = self.compression_count, replace(self.processor.usage)
        budget = self._budget(request.conversation_request.model)
        history, added = split_added_request(request.messages)
        window = await self._compress(history, request.focus, force=True, budget=budget)
        if self.compression_count == compressions:
            return None
        return compaction_result([*window, *added], CONTEXT_MANAGER_HANDLER, usage_before, self.processor.usage)

    def _budget(self, model: Model | None) -> int:
        if model is not None and model.context_window:
            self._shared.model_window = model.context_window
        return self.max_tokens or self._shared.model_window or DEFAULT_MAX_TOKENS

    def _report(self, tokens: int, budget: int) -> None:
        if self.on_usage_update is not None:
            self.on_usage_update(tokens / budget, tokens, budget)

    async def _compress(
        self, messages: list[ModelMessage], focus: str | None, *, force: bool, budget: int
    ) -> list[ModelMessage]:
        """The window for `messages`: compacted if over the threshold or `force`, with every callback called."""
        plan = await self.processor.plan_compression(messages, force=force, context_window=budget)
        if plan is None:
            result = await self.processor.process(messages, context_window=budget)
            self._report(result.tokens, budget)
            return self._with_reinjected(result.messages)
        self._report(plan.tokens, budget)
        if self.on_before_compress is not None:
            self.on_before_compress(messages, plan.cutoff_index)
        result = await self.processor.execute_plan(plan, focus)
        if result.summarized:
            self._shared.compressions += 1
        if self.on_after_compress is not None:
            text = self.on_after_compress(result.messages, result.summarized, result.summary)
            if result.summarized and result.summary is not None and isinstance(text, str):
                reinjected = self._shared.reinjected
                reinjected[result.summary] = text
                while len(reinjected) > _REINJECTED:
                    reinjected.popitem(last=False)
        self._report(result.tokens, budget)
        return self._with_reinjected(result.messages)

    def _with_reinjected(self, window: Sequence[ModelMessage]) -> list[ModelMessage]:
        """`window`, its summary request carrying the text `on_after_compress` returned for that summary."""
        window = list(window)
        reinjected = self._shared.reinjected
        at = find_summary(window) if reinjected else None
        if at is not None:
            text = reinjected.get(summary_text(window[at]) or '')
            carrier = window[at]
            if text is not None and isinstance(carrier, ModelRequest):
                # After the leading system prompt parts: pydantic-ai sends a system part that follows other
                # parts as user text.
                lead = next((i for i, p in enumerate(carrier.parts) if not isinstance(p, SystemPromptPart)), 0)
                parts = [*carrier.parts[:lead], SystemPromptPart(text), *carrier.parts[lead:]]
                window[at] = replace(carrier, parts=parts)
        return window
