"""Incremental summarization: the next summary is made from the last one plus only what was evicted since.

Automatically, when a trigger fires, or on request: `process(messages, focus, force=True)`, or
`plan_compression` then `execute_plan` to act between the decision and the summarizer call.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import trace
from pydantic_ai.direct import model_request
from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart, TextPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.usage import RunUsage

from ._processor_base import WindowedProcessor, build_windowing
from ._window_engine import Compact, Compaction, Decision, Lineage, Outcome, Windowing
from .compression import CompressionPlan, SkipReason, SummarizationResult
from .specs import ContextSize
from .summary import SummarizationFailure, Summary, summary_request
from .text import format_messages
from .tokens import TokenCounter, count_tokens, count_tokens_approximately

__all__ = ('DEFAULT_SUMMARY_PROMPT', 'SummarizationProcessor')

_tracer = trace.get_tracer('processors')

DEFAULT_TRIGGER: ContextSize = ('tokens', 170_000)
DEFAULT_KEEP: ContextSize = ('messages', 20)

SUMMARIZER_INSTRUCTIONS = (
    'You maintain the running summary of a conversation between a user and an AI assistant that uses tools. '
    'The summary replaces the messages it covers, so keep every fact, decision, identifier, number and open '
    'question the assistant may need later. Reply with the summary only.'
)

DEFAULT_SUMMARY_PROMPT = (
    'Update the running summary of this conversation.\n\n'
    'If a previous summary is given, carry all of its still-relevant content forward and fold the new '
    'messages into it; otherwise summarize the new messages. Be concise but lose no facts, identifiers, '
    "numbers, decisions, tool results the assistant relied on, or the user's open requests.\n\n"
    '{messages}'
)
"""The default prompt; `{messages}` receives the previous summary and the newly evicted messages."""

FOCUS_BLOCK = (
    '\n\n<focus>\nThe user asked this summary to put first everything about: {focus}\n'
    'Keep those details in full.\n</focus>'
)
"""Appended to the summarizer prompt when a compaction is given a `focus`."""

SummaryCallback = Callable[[Summary], Awaitable[None] | None]
FailureCallback = Callable[[SummarizationFailure], Awaitable[None] | None]


async def _notify(callback: Callable[[Any], Awaitable[None] | None] | None, value: object) -> None:
    if callback is not None:
        result = callback(value)
        if inspect.isawaitable(result):
            await result


def summarizer_input(previous: str | None, evicted: Sequence[ModelMessage]) -> str:
    """What `{messages}` becomes: the previous summary whole, then the evicted messages."""
    previous_block = f'<previous_summary>\n{previous}\n</previous_summary>\n\n' if previous else ''
    return f'{previous_block}<new_messages>\n{format_messages(evicted)}\n</new_messages>'


@dataclass
class SummarizationProcessor(WindowedProcessor):
    """A history processor that replaces evicted messages with a summary, extended incrementally.

    When a trigger fires, the messages between the last summary and the new cut go to the
    summarizer together with the last summary's text (never trimmed), so over a conversation each
    message is read about once. The summary travels as a `CompactionPart` in the request that opens
    the window. At most one summarizer call is made per model request, and a window that would still
    be over a trigger after compacting is cut further so the next request doesn't summarize again.

    If the summarizer raises, times out, or returns empty or oversized text, that request goes out on
    the sliding window (the old summary plus the kept tail), nothing is used as a summary, the failure
    is logged and passed to `on_failure`, and the next trigger tries again.

    A compaction can also be asked for: `process(messages, focus, force=True)` makes one more
    incremental summary below any trigger, and `focus` (here or on `__call__`) names a topic the
    summary should put first. `plan_compression` and `execute_plan` split the decision from the
    summarizer call; `process` returns a `SummarizationResult` saying what happened.

    Args:
        model: The summarizer: any pydantic-ai model or model name.
        trigger: When to summarize: a `ContextSize` or a list of them (any fires). `None` never does.
        keep: How much of the tail to keep verbatim.
        token_counter: Counts a sequence of messages, sync or async. Called once per message.
        summary_prompt: The summarizer prompt; `{messages}` receives the previous summary and new messages.
        max_input_tokens: The context window that `("fraction", f)` sizes resolve against.
        trim_tokens_to_summarize: At most this many tokens of evicted messages go to one summarizer
            call; the rest stay in the window for the next one (nothing is silently dropped).
        keep_head: How many leading messages to keep verbatim; when unset, the system prompt alone is kept.
        keep_system_prompt: Re-inject the head's system prompt parts ahead of the summary.
        anchor_on_usage: Correct token counts by the input tokens the provider reported for the
            previous window, so dense content (base64, minified JSON) can't overflow unnoticed.
        context_window_from_model: Resolve fractions against the model's context window at request
            time, as the capabilities do.
        summarizer_timeout: Seconds the summarizer may take before the request falls back.
        max_summary_tokens: A summary larger than this is rejected as oversized. A summary that alone
            would fire a token trigger always is.
        on_summary: Called with each `Summary` made, to persist it.
        on_failure: Called with each `SummarizationFailure`.
        cut_before_responses: Let a cut open the kept tail with a model response, since the summary request
            stands before it: a compaction can then fall inside one long chain of tool calls, which has no
            request a cut could open with. Off by default: code that rebuilds windows from storage (the
            session store) opens the tail with a request and rides the summary in it.
    """

    model: Model | str
    trigger: ContextSize | Sequence[ContextSize] | None = DEFAULT_TRIGGER
    keep: ContextSize = DEFAULT_KEEP
    token_counter: TokenCounter = count_tokens_approximately
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    max_input_tokens: int | None = None
    trim_tokens_to_summarize: int | None = None
    keep_head: ContextSize | None = None
    keep_system_prompt: bool = True
    anchor_on_usage: bool = False
    context_window_from_model: bool = False
    summarizer_timeout: float | None = 120.0
    max_summary_tokens: int | None = None
    on_summary: SummaryCallback | None = None
    on_failure: FailureCallback | None = None
    cut_before_responses: bool = False
    usage: RunUsage = field(default_factory=RunUsage, init=False)
    """What every summarizer call so far has cost."""
    _windowing: Windowing = field(init=False, repr=False)

    async def __call__(self, messages: list[ModelMessage], focus: str | None = None) -> list[ModelMessage]:
        """The window to send for `messages`, as a pydantic-ai history processor; `focus` steers a summary made now."""
        return (await self.process(messages, focus)).messages

    async def process(
        self,
        messages: list[ModelMessage],
        focus: str | None = None,
        *,
        force: bool = False,
        context_window: int | None = None,
    ) -> SummarizationResult:
        """Compact `messages` if a trigger fires (or `force`), and say what happened.

        A forced compaction is one more incremental summary: the previous one plus what the cut newly
        evicts, pair-safe, counted in `usage` and passed to `on_summary` like an automatic one. `focus`
        is a topic the summary should put first. `context_window` is the serving model's, for fractions
        when `max_input_tokens` is unset.
        """
        context = self._windowing.context_window(context_window)
        outcome = await self._windowing.process(messages, context, self._compactor(focus, force), force=force)
        return _result(outcome)

    async def plan_compression(
        self, messages: list[ModelMessage], *, force: bool = False, context_window: int | None = None
    ) -> CompressionPlan | None:
        """Decide whether and where to compact `messages`, without calling the summarizer.

        `None` when no trigger fires (and not `force`) or there is nothing to evict. Hand the plan to
        `execute_plan`; a plan another compaction overtook in between evicts only what is left.
        """
        decision = await self._decide(messages, force=force, context_window=context_window)
        if decision is None or decision.cut is None:
            return None
        lineage = decision.lineage
        plan = CompressionPlan(
            cutoff_index=decision.cut,
            messages_to_summarize=lineage.messages[decision.start : decision.cut],
            preserved_messages=lineage.messages[decision.cut :],
            system_parts=[] if lineage.system_bridge is None else list(lineage.system_bridge.parts),  # type: ignore[arg-type]
            previous_summary=lineage.summary,
            forced=force,
            tokens=decision.tokens,
        )
        plan._decision = decision
        return plan

    async def execute_plan(self, plan: CompressionPlan, focus: str | None = None) -> SummarizationResult:
        """Carry out `plan` from `plan_compression`: one summarizer call at most, `focus` put first in the summary.

        A plan built by hand (not by `plan_compression`) is re-planned as a forced compaction of its messages.
        """
        decision = plan._decision
        if decision is None:
            decision = await self._decide(
                [*plan.messages_to_summarize, *plan.preserved_messages], force=True, context_window=None
            )
            if decision is None:
                return SummarizationResult(messages=[], summarized=False, skip_reason='cutoff_zero')
        outcome = await self._windowing.execute(decision, self._compactor(focus, decision.forced))
        return _result(outcome)

    async def _decide(
        self, messages: list[ModelMessage], *, force: bool, context_window: int | None
    ) -> Decision | None:
        decision = await self._windowing.decide(messages, self._windowing.context_window(context_window), force=force)
        if decision is None or decision.cut is None:
            return decision
        return replace(decision, cut=self._trimmed_cut(decision.lineage, decision.start, decision.cut))

    def _compactor(self, focus: str | None, forced: bool) -> Compact:
        async def compact(lineage: Lineage, cut: int, context_window: int | None) -> Compaction:
            return await self._compact(lineage, cut, context_window, focus=focus, forced=forced)

        return compact

    def __post_init__(self) -> None:
        if '{messages}' not in self.summary_prompt:
            raise ValueError('summary_prompt must contain {messages}, where the messages to summarize go.')
        for name in ('trim_tokens_to_summarize', 'max_summary_tokens'):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f'{name}={value!r}: it must be a whole number > 0, or None.')
        if self.summarizer_timeout is not None and self.summarizer_timeout <= 0:
            raise ValueError(f'summarizer_timeout={self.summarizer_timeout!r}: it must be > 0 seconds, or None.')
        self._windowing = build_windowing(self)

    async def _compact(
        self, lineage: Lineage, cut: int, context_window: int | None, *, focus: str | None = None, forced: bool = False
    ) -> Compaction:
        # A span per summarizer call, so a slow turn shows where its time went; a no-op without an SDK.
        with _tracer.start_as_current_span('processors.summarize') as current:
            cut = self._trimmed_cut(lineage, lineage.cut, cut)
            compaction = await self._summarize(lineage, cut, context_window, focus, forced)
            current.set_attribute('processors.summarize.outcome', 'summarized' if compaction.persist else 'failed')
            return compaction

    async def _summarize(
        self, lineage: Lineage, cut: int, context_window: int | None, focus: str | None, forced: bool
    ) -> Compaction:
        evicted = lineage.messages[lineage.cut : cut]
        previous = lineage.summary
        current = trace.get_current_span()
        current.set_attribute('processors.summarize.messages', len(evicted))
        current.set_attribute('processors.summarize.extends_summary', previous is not None)
        current.set_attribute('processors.summarize.forced', forced)
        prompt = self.summary_prompt.replace('{messages}', summarizer_input(previous, evicted))
        if focus:
            prompt += FOCUS_BLOCK.format(focus=focus)
        try:
            # One plain model request: no agent loop, so no retries that would read the messages again.
            request = ModelRequest(parts=[SystemPromptPart(SUMMARIZER_INSTRUCTIONS), UserPromptPart(prompt)])
            response = await asyncio.wait_for(model_request(self.model, [request]), self.summarizer_timeout)
        except TimeoutError:
            return await self._fail('timeout', f'no summary within {self.summarizer_timeout}s', len(evicted))
        except Exception as error:
            return await self._fail('error', f'{type(error).__name__}: {error}', len(evicted), error)
        usage = RunUsage(requests=1)
        usage.incr(response.usage)
        self.usage.incr(usage)
        text = ''.join(part.content for part in response.parts if isinstance(part, TextPart)).strip()
        if not text:
            return await self._fail('empty', 'the summarizer returned no text', len(evicted))
        system_parts = [] if lineage.system_bridge is None else list(lineage.system_bridge.parts)
        bridge = summary_request(system_parts, text)  # type: ignore[arg-type]
        tokens = await count_tokens(self._windowing.counter, [bridge])
        ceiling = self._windowing.token_ceiling(context_window)
        if (self.max_summary_tokens is not None and tokens > self.max_summary_tokens) or (
            ceiling is not None and tokens >= ceiling
        ):
            return await self._fail('oversized', f'the summary is {tokens} tokens', len(evicted))
        lineage.summary = text
        current.set_attribute('processors.summarize.summary_tokens', tokens)
        await _notify(
            self.on_summary,
            Summary(
                text=text,
                previous_text=previous,
                covered=tuple(evicted),
                tokens=tokens,
                model_name=response.model_name,
                usage=usage,
                focus=focus,
                forced=forced,
            ),
        )
        return Compaction(bridge=bridge, bridge_tokens=tokens, cut=cut)

    def _trimmed_cut(self, lineage: Lineage, start: int, cut: int) -> int:
        """The cut that keeps one summarizer call, reading from `start`, within `trim_tokens_to_summarize`."""
        limit = self.trim_tokens_to_summarize
        cum = lineage.cum_tokens
        if limit is None or cum[cut] - cum[start] <= limit:
            return cut
        responses = self.cut_before_responses
        best = lineage.cuts.first_at_or_after(start + 1, responses=responses)
        candidate = best
        while candidate is not None and candidate <= cut and cum[candidate] - cum[start] <= limit:
            best = candidate
            candidate = lineage.cuts.first_at_or_after(candidate + 1, responses=responses)
        return min(best, cut) if best is not None else cut

    async def _fail(self, reason: str, detail: str, pending: int, error: BaseException | None = None) -> Compaction:
        failure = SummarizationFailure(reason=reason, detail=detail, pending=pending, error=error)  # type: ignore[arg-type]
        trace.get_current_span().set_attribute('processors.summarize.failure', reason)
        await _notify(self.on_failure, failure)
        # The engine logs it, saying what the request is sent instead: that depends on whether a trigger holds.
        return Compaction(persist=False, failure=f'{reason}: {detail}')


def _result(outcome: Outcome) -> SummarizationResult:
    """What an attempt did, in `summarization-pydantic-ai`'s terms."""
    decision, compaction = outcome.decision, outcome.compaction
    if compaction is None:
        attempted = decision is not None and (decision.fired or decision.forced)
        reason: SkipReason = 'cutoff_zero' if attempted else 'not_triggered'
        return SummarizationResult(messages=outcome.window, summarized=False, skip_reason=reason, tokens=outcome.tokens)
    if compaction.bridge is None or decision is None or outcome.cut is None:
        return SummarizationResult(
            messages=outcome.window, summarized=False, skip_reason='failed', tokens=outcome.tokens
        )
    return SummarizationResult(
        messages=outcome.window,
        summarized=True,
        cutoff_index=outcome.cut,
        summary=decision.lineage.summary,
        tokens=outcome.tokens,
    )
