"""Property: every window any processor emits is pair-safe and keeps the head's system prompt."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    BaseToolCallPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import ContextSize, SlidingWindowProcessor, SummarizationProcessor
from processors.cut_points import safe_cut_points
from testkit.histories import answered_calls, pair_violations, system_prompts
from testkit.real_histories import histories
from tests._hypothesis import examples


def _summarizer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart('summary so far')])


MESSAGES: Literal['messages'] = 'messages'
TOKENS: Literal['tokens'] = 'tokens'
FRACTION: Literal['fraction'] = 'fraction'

sizes: st.SearchStrategy[ContextSize] = st.one_of(
    st.tuples(st.just(MESSAGES), st.integers(min_value=1, max_value=30)),
    st.tuples(st.just(TOKENS), st.integers(min_value=1, max_value=600)),
    st.tuples(st.just(FRACTION), st.floats(min_value=0.01, max_value=1.0)),
)


@st.composite
def processors(draw: st.DrawFn) -> SlidingWindowProcessor | SummarizationProcessor:
    trigger = draw(st.one_of(sizes, st.lists(sizes, min_size=1, max_size=3)))
    keep = draw(sizes)
    if draw(st.booleans()):
        return SlidingWindowProcessor(trigger=trigger, keep=keep, max_input_tokens=1_000)
    return SummarizationProcessor(FunctionModel(_summarizer), trigger=trigger, keep=keep, max_input_tokens=1_000)


def check_every_window(
    history: list[ModelMessage], processor: SlidingWindowProcessor | SummarizationProcessor, incremental: bool
) -> None:
    """Every window `processor` makes of `history` (whole, or request by request) is pair-safe and keeps the head."""

    async def windows() -> list[tuple[list[ModelMessage], list[ModelMessage]]]:
        # Incrementally: one call per request, as an agent run makes them; else once, whole.
        ends = [i + 1 for i, m in enumerate(history) if isinstance(m, ModelRequest)] if incremental else [len(history)]
        return [(history[:end], await processor(history[:end])) for end in ends]

    for source, window in asyncio.run(windows()):
        assert pair_violations(window, source) == []
        # The request in flight is always sent (its answers to calls cut while pending as text).
        assert window[-1] is source[-1] or len(window[-1].parts) == len(source[-1].parts)
        assert system_prompts(window)[:1] == system_prompts(source)[:1]


@pytest.mark.slow
@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), processor=processors(), incremental=st.booleans())
def test_every_window_is_pair_safe_and_keeps_the_system_prompt(
    history: list[ModelMessage], processor: SlidingWindowProcessor | SummarizationProcessor, incremental: bool
) -> None:
    check_every_window(history, processor, incremental)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), processor=processors(), incremental=st.booleans())
def test_every_window_is_pair_safe_and_keeps_the_system_prompt_quick(
    history: list[ModelMessage], processor: SlidingWindowProcessor | SummarizationProcessor, incremental: bool
) -> None:
    # The same property over fewer histories, for the quick tier; the slow one covers 2,000.
    check_every_window(history, processor, incremental)


def check_cut_points(history: list[ModelMessage]) -> None:
    """`safe_cut_points` against a brute-force check of every index."""
    # Safe: the window opens with a request, no answer is on the other side of the cut from its call (the call
    # with its id in the nearest preceding response: ids repeat across responses), and the message before it
    # leaves no call waiting (a native tool's result may still come in the next response).
    calls = answered_calls(history)
    pairs = [(calls.get(id(part), -1), i) for i, message in enumerate(history) for part in message.parts]
    brute = [
        i
        for i in range(1, len(history))
        if isinstance(history[i], ModelRequest)
        and not any(0 <= call < i <= answer for call, answer in pairs)
        and not _leaves_a_call_waiting(history[i - 1], history[i])
    ]
    assert safe_cut_points(history) == brute


@pytest.mark.slow
@given(history=histories())
@settings(max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_safe_cut_points_match_a_brute_force_check(history: list[ModelMessage]) -> None:
    check_cut_points(history)


@given(history=histories())
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_safe_cut_points_match_a_brute_force_check_quick(history: list[ModelMessage]) -> None:
    # The same property over fewer histories, for the quick tier.
    check_cut_points(history)


def _leaves_a_call_waiting(message: ModelMessage, after: ModelMessage) -> bool:
    """Whether `message` makes a call that neither its own later parts nor the message `after` it answer."""
    for index, part in enumerate(message.parts):
        if isinstance(part, BaseToolCallPart):
            later = [*message.parts[index + 1 :], *after.parts]
            if not any(
                not isinstance(p, BaseToolCallPart) and getattr(p, 'tool_call_id', None) == part.tool_call_id
                for p in later
            ):
                return True
    return False


def test_legacy_retry_prompt_parts_from_stored_json_pair_with_their_calls() -> None:
    stored = [
        {'kind': 'request', 'parts': [{'part_kind': 'user-prompt', 'content': 'go'}]},
        {
            'kind': 'response',
            'parts': [{'part_kind': 'tool-call', 'tool_name': 't', 'args': '{}', 'tool_call_id': 'a'}],
        },
        {'kind': 'request', 'parts': [{'part_kind': 'user-prompt', 'content': 'meanwhile'}]},
        {'kind': 'response', 'parts': [{'part_kind': 'text', 'content': 'thinking'}]},
        {
            'kind': 'request',
            'parts': [{'part_kind': 'retry-prompt', 'content': 'bad args', 'tool_name': 't', 'tool_call_id': 'a'}],
        },
        {'kind': 'response', 'parts': [{'part_kind': 'text', 'content': 'done'}]},
    ]
    history = ModelMessagesTypeAdapter.validate_python(stored)
    retry = history[4].parts[0]
    assert isinstance(retry, ToolReturnPart) and retry.outcome == 'retried'
    # The retry answers call 'a', so no cut may fall between them, however far apart.
    assert safe_cut_points(history) == []
