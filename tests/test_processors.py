"""Sliding window and summarization behaviour on plain histories: cuts, heads, failures, anchoring."""

from __future__ import annotations

import asyncio
import logging

import pytest
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from processors import SlidingWindowProcessor, SummarizationFailure, SummarizationProcessor, Summary, summary_text
from processors.compat import create_sliding_window_processor, create_summarization_processor
from processors.cut_points import is_turn_start
from processors.summary import find_summary
from testkit.histories import SYSTEM, pair_violations, system_prompts, tool_history


async def test_sliding_window_keeps_the_tail_from_a_turn_start_and_the_system_prompt() -> None:
    history = tool_history(40)  # 160 messages
    window = await SlidingWindowProcessor(trigger=('messages', 100), keep=('messages', 50))(history)
    assert system_prompts(window) == [SYSTEM]
    assert window[0].parts == [*window[0].parts[:1]]  # the bridge holds the system prompt alone
    tail = window[1:]
    assert tail == history[-len(tail) :]
    assert 25 <= len(tail) <= 50
    assert is_turn_start(tail[0])
    assert pair_violations(window, history) == []


async def test_below_the_trigger_the_history_passes_through_untouched() -> None:
    history = tool_history(5)
    processor = SlidingWindowProcessor(trigger=('messages', 100), keep=('messages', 10))
    assert await processor(history) is history


async def test_keep_system_prompt_false_drops_it_and_keep_head_keeps_leading_messages() -> None:
    history = tool_history(40)
    window = await SlidingWindowProcessor(trigger=('messages', 50), keep=('messages', 20), keep_system_prompt=False)(
        history
    )
    assert system_prompts(window) == []
    window = await create_sliding_window_processor(
        trigger=('messages', 50), keep=('messages', 20), keep_head=('messages', 2)
    )(history)
    # Two messages asked for; the second is a response whose calls are answered by the third, so three.
    assert window[:3] == history[:3]
    assert pair_violations(window, history) == []


async def test_the_window_stays_bounded_as_the_conversation_grows() -> None:
    history = tool_history(100)
    processor = SlidingWindowProcessor(trigger=('messages', 40), keep=('messages', 20))
    sizes = []
    for end in range(1, len(history) + 1):
        if isinstance(history[end - 1], ModelRequest):
            window = await processor(history[:end])
            sizes.append(len(window))
            assert pair_violations(window, history[:end]) == []
    assert max(sizes) <= 40
    assert min(sizes[50:]) >= 10


async def test_tokens_keep_and_fraction_trigger() -> None:
    history = tool_history(60)
    processor = SlidingWindowProcessor(trigger=('fraction', 0.5), keep=('tokens', 300), max_input_tokens=2_000)
    window = await processor(history)
    tail_tokens = sum(processor.token_counter([m]) for m in window[1:])  # type: ignore[misc]
    assert tail_tokens <= 300
    assert pair_violations(window, history) == []


def _summarizer(reply: str | Exception | None, calls: list[str]) -> FunctionModel:
    async def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = messages[-1].parts[-1]
        assert isinstance(prompt, UserPromptPart), prompt
        calls.append(str(prompt.content))
        if isinstance(reply, Exception):
            raise reply
        if reply is None:
            await asyncio.sleep(30)
        return ModelResponse(parts=[TextPart(reply or '')])

    return FunctionModel(summarize)


@pytest.mark.parametrize(
    ('reply', 'reason'),
    [
        (RuntimeError('provider down'), 'error'),
        (None, 'timeout'),
        ('   ', 'empty'),
        ('word ' * 5_000, 'oversized'),
    ],
)
async def test_summarizer_failure_falls_back_to_the_sliding_window_and_retries_next_time(
    reply: str | Exception | None, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    failures: list[SummarizationFailure] = []
    made: list[Summary] = []
    processor = SummarizationProcessor(
        _summarizer(reply, calls),
        trigger=[('messages', 30), ('tokens', 3_000)],
        keep=('messages', 10),
        summarizer_timeout=0.2,
        on_failure=failures.append,
        on_summary=made.append,
    )
    history = tool_history(20)
    with caplog.at_level(logging.WARNING):
        window = await processor(history[:-1])
    assert [f.reason for f in failures] == [reason]
    assert failures[0].pending > 0
    assert made == []
    assert not any(isinstance(p, CompactionPart) for m in window for p in m.parts)
    assert len(window) <= 11 and window[-1] is history[-2]
    assert pair_violations(window, history) == []
    assert reason in caplog.text
    # Nothing was stored as a summary, so the next request tries again.
    await processor(history)
    assert len(calls) == 2 and len(failures) == 2


async def test_summaries_extend_and_record_usage() -> None:
    calls: list[str] = []
    made: list[Summary] = []
    processor = create_summarization_processor(
        model=_summarizer('the gist', calls), trigger=('messages', 20), keep=('messages', 8)
    )
    processor.on_summary = made.append
    history = tool_history(30)
    for end in range(1, len(history) + 1):
        if isinstance(history[end - 1], ModelRequest):
            window = await processor(history[:end])
    assert len(made) >= 3
    assert summary_text(window[0]) == 'the gist'
    assert find_summary(window) == 0
    assert processor.usage.requests == len(made)
    covered = [m for s in made for m in s.covered]
    assert len(covered) == len({id(m) for m in covered})  # nothing summarized twice
    assert covered == history[1 : len(covered) + 1] or covered == history[: len(covered)]


async def test_trim_tokens_to_summarize_leaves_the_rest_for_the_next_call() -> None:
    calls: list[str] = []
    made: list[Summary] = []
    processor = SummarizationProcessor(
        _summarizer('gist', calls),
        trigger=('messages', 60),
        keep=('messages', 4),
        trim_tokens_to_summarize=200,
        on_summary=made.append,
    )
    history = tool_history(30)
    window = await processor(history[:-1])
    covered = sum(processor.token_counter([m]) for m in made[0].covered)  # type: ignore[misc]
    assert covered <= 200
    assert len(window) > 5  # what was not summarized is still sent
    assert pair_violations(window, history) == []


async def test_anchoring_on_reported_input_tokens_catches_token_dense_content() -> None:
    # A base64 blob reads as few tokens at four characters a token but the provider reported far more.
    history = tool_history(3)
    history[-1] = ModelResponse(parts=[TextPart('answer 2')], usage=RequestUsage(input_tokens=50_000))
    history.append(ModelRequest(parts=[UserPromptPart('next question')]))
    for anchored, fires in ((False, False), (True, True)):
        processor = SlidingWindowProcessor(trigger=('tokens', 8_000), keep=('messages', 2), anchor_on_usage=anchored)
        await processor(history[:-2])  # the window the provider answered
        window = await processor(history)
        assert (len(window) < len(history)) is fires


async def test_an_answer_to_a_call_cut_while_pending_arrives_as_text() -> None:
    # A call left open (awaiting approval) is cut away; when its result arrives later the window
    # must not carry a return whose call it lacks, yet the model should still learn the result.
    history = tool_history(6)
    history.insert(2, ModelResponse(parts=[ToolCallPart('approve', {}, tool_call_id='pending')]))
    history.insert(3, ModelRequest(parts=[UserPromptPart('while we wait')]))
    processor = SlidingWindowProcessor(trigger=('messages', 10), keep=('messages', 4))
    await processor(history)
    history += [
        ModelResponse(parts=[TextPart('noted')]),
        ModelRequest(parts=[ToolReturnPart('approve', 'approved by Ann', tool_call_id='pending')]),
    ]
    window = await processor(history)
    assert pair_violations(window, history) == []
    last = window[-1]
    assert isinstance(last.parts[0], UserPromptPart)
    assert 'approved by Ann' in str(last.parts[0].content)
