"""Manual compaction: plan, execute, force and focus on the incremental engine, and why an attempt made no summary."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import (
    CompressionPlan,
    SlidingWindowProcessor,
    SummarizationFailure,
    SummarizationProcessor,
    SummarizationResult,
    Summary,
    summary_text,
)
from processors.summary import find_summary
from testkit.histories import SYSTEM, pair_violations, system_prompts, tool_history
from testkit.real_histories import histories
from testkit.scripted import NEW_MESSAGES, PREVIOUS
from tests._hypothesis import examples


@dataclass
class Summarizer:
    """A FunctionModel summarizer that records each prompt and answers `SUMMARY-<n>`, or raises when told to."""

    prompts: list[str] = field(default_factory=list[str])
    fail: bool = False

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = messages[-1].parts[-1]
        assert isinstance(prompt, UserPromptPart) and isinstance(prompt.content, str)
        self.prompts.append(prompt.content)
        if self.fail:
            raise RuntimeError('summarizer down')
        return ModelResponse(parts=[TextPart(f'SUMMARY-{len(self.prompts)}')])


def processor(summarizer: Summarizer, made: list[Summary] | None = None, **kwargs: object) -> SummarizationProcessor:
    settings: dict[str, object] = {'trigger': ('messages', 1_000), 'keep': ('messages', 4), **kwargs}
    return SummarizationProcessor(
        FunctionModel(summarizer),
        on_summary=None if made is None else made.append,
        **settings,  # type: ignore[arg-type]
    )


async def test_a_forced_compaction_summarizes_a_short_history_far_below_its_trigger() -> None:
    summarizer, made = Summarizer(), list[Summary]()
    history = tool_history(3)  # 12 messages, the trigger is at 1,000
    compactor = processor(summarizer, made)
    assert (await compactor.process(history)).skip_reason == 'not_triggered'

    result = await compactor.process(history, force=True)

    assert result.summarized and result.skip_reason is None
    assert result.summary == 'SUMMARY-1'
    # The window: the system prompt and the summary in one request, then the last turn whole.
    assert system_prompts(result.messages[:1]) == [SYSTEM]
    assert summary_text(result.messages[0]) == 'SUMMARY-1'
    assert result.messages[1:] == history[result.cutoff_index :] == history[8:]
    assert pair_violations(result.messages, history) == []
    # Counted and reported like an automatic summary, marked as asked for.
    assert compactor.usage.requests == 1
    (summary,) = made
    assert summary.forced and summary.text == 'SUMMARY-1'
    assert list(summary.covered) == history[:8]
    assert 'question 0' in summarizer.prompts[0] and 'question 2' not in summarizer.prompts[0]
    # The next plain request on the grown history keeps that window: no second summary.
    grown = [*history, ModelRequest(parts=[UserPromptPart('question 3')])]
    window = await compactor(grown)
    assert summary_text(window[0]) == 'SUMMARY-1' and window[-1] is grown[-1]
    assert compactor.usage.requests == 1


async def test_a_second_forced_compaction_extends_the_first_with_only_the_newly_evicted_messages() -> None:
    summarizer, made = Summarizer(), list[Summary]()
    compactor = processor(summarizer, made)
    history = tool_history(6)
    await compactor.process(history[:12], force=True)
    result = await compactor.process(history, force=True)

    assert result.summary == 'SUMMARY-2'
    assert PREVIOUS.findall(summarizer.prompts[1]) == ['SUMMARY-1']
    (block,) = NEW_MESSAGES.findall(summarizer.prompts[1])
    assert 'question 2' in block and 'question 4' in block
    assert 'question 0' not in block and 'question 1' not in block  # read by the first summary, not again
    assert [s.previous_text for s in made] == [None, 'SUMMARY-1']
    assert set(map(id, made[0].covered)).isdisjoint(map(id, made[1].covered))
    assert list(made[0].covered) + list(made[1].covered) == history[: result.cutoff_index]


async def test_a_window_fed_back_in_is_extended_not_redone() -> None:
    # As summarization-pydantic-ai's users call it: the compacted messages, grown, passed in again.
    summarizer = Summarizer()
    compactor = processor(summarizer)
    history = tool_history(4)
    first = await compactor.process(history, force=True)
    grown = [*first.messages, *tool_history(8)[16:]]
    second = await compactor.process(grown, force=True)
    assert second.summarized
    assert PREVIOUS.findall(summarizer.prompts[1]) == ['SUMMARY-1']
    assert system_prompts(second.messages) == [SYSTEM]
    assert sum(isinstance(p, CompactionPart) for m in second.messages for p in m.parts) == 1


async def test_focus_reaches_the_summarizer_for_forced_automatic_and_planned_compactions() -> None:
    summarizer = Summarizer()
    history = tool_history(5)
    await processor(summarizer).process(history, 'the refund for order 42', force=True)
    await processor(summarizer, trigger=('messages', 10))(history, focus='shipping addresses')
    compactor = processor(summarizer)
    plan = await compactor.plan_compression(history, force=True)
    assert plan is not None
    await compactor.execute_plan(plan, focus='invoices')
    await processor(summarizer).process(history, force=True)

    assert '<focus>' in summarizer.prompts[0] and 'the refund for order 42' in summarizer.prompts[0]
    assert 'shipping addresses' in summarizer.prompts[1]
    assert 'invoices' in summarizer.prompts[2]
    assert '<focus>' not in summarizer.prompts[3]


async def test_skip_reasons_say_why_no_summary_was_made() -> None:
    summarizer = Summarizer()
    history = tool_history(2)  # 8 messages

    not_triggered = await processor(summarizer, trigger=('messages', 100)).process(history)
    # keep asks for more than there is: the history stays as it is, even though the trigger fired.
    cutoff_zero = await processor(summarizer, trigger=('messages', 5), keep=('messages', 10)).process(history)
    forced_zero = await processor(summarizer, keep=('messages', 10)).process(history, force=True)

    for result in (not_triggered, cutoff_zero, forced_zero):
        assert result == SummarizationResult(
            messages=history, summarized=False, skip_reason=result.skip_reason, tokens=result.tokens
        )
        assert result.messages is history
    assert [not_triggered.skip_reason, cutoff_zero.skip_reason, forced_zero.skip_reason] == [
        'not_triggered',
        'cutoff_zero',
        'cutoff_zero',
    ]
    assert summarizer.prompts == []
    assert await processor(summarizer, trigger=('messages', 5), keep=('messages', 10)).plan_compression(history) is None


async def test_a_failed_compaction_is_never_stored_and_the_next_one_tries_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer, made, failures = Summarizer(fail=True), list[Summary](), list[SummarizationFailure]()
    compactor = processor(summarizer, made, on_failure=failures.append)
    history = tool_history(4)

    with caplog.at_level(logging.WARNING, logger='processors'):
        forced = await compactor.process(history, force=True)
    # The warning says what happened: nothing, since no trigger holds; not that the request uses the sliding window.
    (warning,) = caplog.messages
    assert 'RuntimeError: summarizer down' in warning and 'the window stays as it was' in warning
    assert 'sliding window' not in warning
    caplog.clear()
    # Nothing fired: a forced compaction that failed sends the history as it was.
    assert (forced.summarized, forced.skip_reason, forced.summary, forced.cutoff_index) == (False, 'failed', None, 0)
    assert forced.messages is history
    assert made == [] and [f.reason for f in failures] == ['error']
    assert compactor.compaction_state(history) is None

    # A trigger that fires and a summarizer that fails: this request goes out on the sliding window.
    with caplog.at_level(logging.WARNING, logger='processors'):
        automatic = await processor(summarizer, trigger=('messages', 10), on_failure=failures.append).process(history)
    (warning,) = caplog.messages
    assert 'this request is sent the sliding window instead' in warning
    assert automatic.skip_reason == 'failed'
    assert len(automatic.messages) < len(history)
    assert not any(isinstance(p, CompactionPart) for m in automatic.messages for p in m.parts)
    assert pair_violations(automatic.messages, history) == []

    summarizer.fail = False
    retried = await compactor.process(history, force=True)
    assert retried.summarized and len(made) == 1 and made[0].previous_text is None


async def test_plan_then_execute_says_where_it_cuts_before_the_summarizer_runs() -> None:
    summarizer = Summarizer()
    compactor = processor(summarizer)
    history = tool_history(4)

    assert await compactor.plan_compression(history) is None  # no trigger, not forced
    plan = await compactor.plan_compression(history, force=True)
    assert isinstance(plan, CompressionPlan)
    assert summarizer.prompts == []
    assert plan.forced and plan.previous_summary is None and plan.tokens > 0
    assert plan.messages_to_summarize + plan.preserved_messages == history
    assert plan.preserved_messages == history[plan.cutoff_index :]
    assert [part.content for part in plan.system_parts] == [SYSTEM]

    result = await compactor.execute_plan(plan)
    assert result.summarized and result.cutoff_index == plan.cutoff_index
    assert result.messages[1:] == plan.preserved_messages

    # On the compacted history, a plan covers only what the last summary did not.
    grown = [*history, *tool_history(6)[16:]]
    again = await compactor.plan_compression(grown, force=True)
    assert again is not None and again.previous_summary == 'SUMMARY-1'
    assert again.messages_to_summarize == grown[plan.cutoff_index : again.cutoff_index]


async def test_a_plan_overtaken_by_another_compaction_evicts_nothing_twice() -> None:
    summarizer = Summarizer()
    compactor = processor(summarizer)
    history = tool_history(4)
    plan = await compactor.plan_compression(history, force=True)
    assert plan is not None
    await compactor.process(history, force=True)  # another caller compacts first
    stale = await compactor.execute_plan(plan)
    assert (stale.summarized, stale.skip_reason) == (False, 'cutoff_zero')
    assert len(summarizer.prompts) == 1


async def test_forced_cuts_never_split_parallel_calls_or_far_apart_returns() -> None:
    # Three parallel calls answered over two requests, and a call left waiting across a whole turn.
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart(SYSTEM), UserPromptPart('start')]),
        ModelResponse(parts=[ToolCallPart('lookup', {}, tool_call_id=f'p{i}') for i in range(3)]),
        ModelRequest(parts=[ToolReturnPart('lookup', 'r0', tool_call_id='p0')]),
        ModelResponse(parts=[ToolCallPart('approve', {}, tool_call_id='slow')]),
        ModelRequest(parts=[ToolReturnPart('lookup', f'r{i}', tool_call_id=f'p{i}') for i in (1, 2)]),
        ModelResponse(parts=[TextPart('waiting for approval')]),
        ModelRequest(parts=[UserPromptPart('anything else?')]),
        ModelResponse(parts=[TextPart('still waiting')]),
        ModelRequest(parts=[ToolReturnPart('approve', 'approved', tool_call_id='slow')]),
        ModelResponse(parts=[TextPart('done')]),
        ModelRequest(parts=[UserPromptPart('thanks')]),
    ]
    for keep in range(len(history)):
        result = await processor(Summarizer(), keep=('messages', keep)).process(history, force=True)
        assert pair_violations(result.messages, history) == [], keep
        if result.summarized:
            # The only safe cuts: where no call is open, here before 'thanks' (index 10).
            assert result.cutoff_index == 10
        else:
            assert result.skip_reason == 'cutoff_zero' and result.messages is history


forced_windows = given(
    history=histories(),
    keep=st.integers(min_value=0, max_value=12),
    head=st.integers(min_value=0, max_value=6),
    forced_at=st.sets(st.integers(min_value=0, max_value=80), max_size=6),
    before_responses=st.booleans(),
    failing=st.booleans(),
)


def check_forced_windows(
    history: list[ModelMessage], keep: int, head: int, forced_at: set[int], before_responses: bool, failing: bool
) -> None:
    """Request by request, some of them forced: every window is pair-safe, opens with the head, and a tail
    that opens with a response has a request before it."""
    compactor = processor(
        Summarizer(fail=failing),
        trigger=('messages', 14),
        keep=('messages', keep),
        keep_head=('messages', head),
        cut_before_responses=before_responses,
    )

    async def windows() -> list[tuple[list[ModelMessage], list[ModelMessage]]]:
        ends = [i + 1 for i, m in enumerate(history) if isinstance(m, ModelRequest)]
        made = []
        for number, end in enumerate(ends):
            result = await compactor.process(history[:end], force=number in forced_at)
            made.append((history[:end], result.messages))
        return made

    for source, window in asyncio.run(windows()):
        assert pair_violations(window, source) == []
        if head and find_summary(source[:1]) is None:
            # The head opens every window (it may be shorter than asked, never holding a call still waiting).
            assert window[0] is source[0]
        elif head:
            # A window fed back in opens with its summary, which a new one replaces, the system prompt kept.
            assert system_prompts(window[:1]) == system_prompts(source[:1])
        # The histories alternate requests and responses: a tail that opens with a response (a cut before
        # responses) must have a request, the summary or the system prompt, before it.
        for before, message in pairwise(window):
            if isinstance(message, ModelResponse):
                assert isinstance(before, ModelRequest)


@pytest.mark.slow
@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@forced_windows
def test_every_forced_window_is_pair_safe_with_any_keep_and_head(
    history: list[ModelMessage], keep: int, head: int, forced_at: set[int], before_responses: bool, failing: bool
) -> None:
    check_forced_windows(history, keep, head, forced_at, before_responses, failing)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@forced_windows
def test_every_forced_window_is_pair_safe_with_any_keep_and_head_quick(
    history: list[ModelMessage], keep: int, head: int, forced_at: set[int], before_responses: bool, failing: bool
) -> None:
    # The same property over fewer histories, for the quick tier.
    check_forced_windows(history, keep, head, forced_at, before_responses, failing)


def chain(calls: int, *, system: bool = True) -> list[ModelMessage]:
    """One prompt, then `calls` tool calls one after another, each answered: no request a cut could open with."""
    first: list[ModelRequestPart] = [SystemPromptPart(SYSTEM)] if system else []
    messages: list[ModelMessage] = [ModelRequest(parts=[*first, UserPromptPart('fix the build')])]
    for i in range(calls):
        messages.append(ModelResponse(parts=[ToolCallPart('run', {'step': i}, tool_call_id=f's{i}')]))
        messages.append(ModelRequest(parts=[ToolReturnPart('run', f'output {i}', tool_call_id=f's{i}')]))
    return messages


async def test_cutting_before_responses_compacts_inside_one_long_chain_of_tool_calls() -> None:
    history = chain(6)
    assert (await processor(Summarizer(), keep=('messages', 0)).process(history, force=True)).skip_reason == (
        'cutoff_zero'
    )
    result = await processor(Summarizer(), keep=('messages', 0), cut_before_responses=True).process(history, force=True)
    # The summary request, then the last call and its return: the call was the last place no pair spans.
    assert result.summarized and result.cutoff_index == len(history) - 2
    assert summary_text(result.messages[0]) == 'SUMMARY-1'
    assert result.messages[1:] == history[-2:]
    assert pair_violations(result.messages, history) == []


async def test_a_failed_summary_never_leaves_a_window_opening_with_a_response() -> None:
    # No system prompt and no summary yet: nothing could stand before a tail opening with a response.
    summarizer = Summarizer(fail=True)
    history = [
        *chain(4, system=False),
        ModelResponse(parts=[TextPart('built')]),
        ModelRequest(parts=[UserPromptPart('thanks')]),
    ]
    compactor = processor(summarizer, trigger=('messages', 8), keep=('messages', 0), cut_before_responses=True)
    result = await compactor.process(history)
    assert result.skip_reason == 'failed'
    assert result.messages == history[-1:]  # moved on to the next request a cut may open with
    stuck = await processor(
        summarizer, trigger=('messages', 8), keep=('messages', 0), cut_before_responses=True
    ).process(chain(4, system=False))
    assert stuck.skip_reason == 'failed' and len(stuck.messages) == 9  # no such request: sent as it was


async def test_keep_head_zero_is_no_head_and_a_head_grows_to_hold_a_whole_tool_exchange() -> None:
    history = tool_history(6)
    no_head = await SlidingWindowProcessor(trigger=('messages', 10), keep=('messages', 4), keep_head=('messages', 0))(
        history
    )
    default = await SlidingWindowProcessor(trigger=('messages', 10), keep=('messages', 4))(history)
    assert no_head == default
    assert system_prompts(no_head) == [SYSTEM]  # no head: the system prompt is re-injected as usual

    # keep_head=2 ends between a call and its return: the head grows to the return (a response follows it).
    window = await SlidingWindowProcessor(trigger=('messages', 10), keep=('messages', 4), keep_head=('messages', 2))(
        history
    )
    assert window[:3] == history[:3]
    assert window[3:] == history[-4:]


async def test_the_sliding_window_has_no_manual_compaction_but_keeps_its_process() -> None:
    history = tool_history(30)
    window = SlidingWindowProcessor(trigger=('messages', 100), keep=('messages', 20))
    assert await window.process(history) == await window(history) == await window.window(history)


@pytest.mark.parametrize('count', [1, 3])
async def test_summary_records_say_what_was_asked(count: int) -> None:
    made: list[Summary] = []
    compactor = processor(Summarizer(), made)
    history = tool_history(count + 2)
    await compactor.process(history, 'billing', force=True)
    (summary,) = made
    assert (summary.focus, summary.forced) == ('billing', True)
    assert find_summary((await compactor.process(history)).messages) == 0


def test_results_read_as_in_summarization_pydantic_ai() -> None:
    result = SummarizationResult(messages=[], summarized=False, skip_reason='not_triggered')
    assert (result.cutoff_index, result.summary) == (0, None)
    plan = CompressionPlan(cutoff_index=2, messages_to_summarize=[], preserved_messages=[], system_parts=[])
    assert plan.previous_summary is None and not plan.forced
