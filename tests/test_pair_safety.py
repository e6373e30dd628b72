"""Property: every window any processor emits is pair-safe and keeps the head's system prompt."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import ContextSize, SlidingWindowProcessor, SummarizationProcessor, safe_cut_points
from testkit.histories import SYSTEM, pair_violations, system_prompts

OUTCOMES: list[Literal['success', 'retried', 'failed']] = ['success', 'success', 'retried', 'failed']
"""A tool return's outcome, drawn: mostly success."""


@dataclass
class _Builder:
    """Builds a history the way pydantic-ai runs produce them, driven by hypothesis draws."""

    draw: st.DrawFn
    messages: list[ModelMessage] = field(default_factory=list[ModelMessage])
    open_calls: list[str] = field(default_factory=list[str])
    next_id: int = 0

    def new_id(self) -> str:
        self.next_id += 1
        return f'id{self.next_id}'

    def request(self, *, prompt: bool) -> None:
        parts: list[ModelRequestPart] = []
        if self.open_calls:
            # Answer some of the open calls (at least one unless a user turn starts): far-apart
            # returns, retries, and returns split over several requests all come from here.
            answered = self.draw(st.integers(min_value=0 if prompt else 1, max_value=len(self.open_calls)))
            for call_id in self.open_calls[:answered]:
                outcome = self.draw(st.sampled_from(OUTCOMES))
                parts.append(ToolReturnPart('tool', f'result of {call_id}', tool_call_id=call_id, outcome=outcome))
            del self.open_calls[:answered]
        if prompt or not parts:
            parts.append(UserPromptPart(f'prompt {len(self.messages)}'))
        self.messages.append(ModelRequest(parts=parts))

    def response(self) -> None:
        parts: list[ModelResponsePart] = []
        if self.draw(st.booleans()):
            native_id = self.new_id()
            parts.append(NativeToolCallPart('web_search', {'q': 'x'}, tool_call_id=native_id))
            parts.append(NativeToolReturnPart('web_search', 'found', tool_call_id=native_id))
        for _ in range(self.draw(st.integers(min_value=0, max_value=3))):
            call_id = self.new_id()
            parts.append(ToolCallPart('tool', {'n': call_id}, tool_call_id=call_id))
            self.open_calls.append(call_id)
        parts.append(TextPart('ok'))
        self.messages.append(ModelResponse(parts=parts))


@st.composite
def histories(draw: st.DrawFn) -> list[ModelMessage]:
    """Tool-using histories: parallel calls, far-apart and split returns, retries, native calls,
    calls pending approval at the end, and usually a system prompt at the head."""
    builder = _Builder(draw)
    steps = draw(st.integers(min_value=1, max_value=40))
    for step in range(steps):
        builder.request(prompt=step == 0 or draw(st.booleans()))
        builder.response()
    if len(builder.open_calls) > 0 and draw(st.booleans()):
        builder.request(prompt=False)  # answer some; otherwise the last response's calls stay pending
    messages = builder.messages
    if draw(st.booleans()):
        first = messages[0]
        assert isinstance(first, ModelRequest)
        messages[0] = ModelRequest(parts=[SystemPromptPart(SYSTEM), *first.parts])
    return messages


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


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), processor=processors(), incremental=st.booleans())
def test_every_window_is_pair_safe_and_keeps_the_system_prompt_quick(
    history: list[ModelMessage], processor: SlidingWindowProcessor | SummarizationProcessor, incremental: bool
) -> None:
    # The same property over fewer histories, for the quick tier; the run above covers 2,000.
    check_every_window(history, processor, incremental)


def _ids_in(messages: list[ModelMessage]) -> set[str]:
    ids = (getattr(part, 'tool_call_id', None) for message in messages for part in message.parts)
    return {tool_call_id for tool_call_id in ids if isinstance(tool_call_id, str)}


@given(history=histories())
@settings(max_examples=300, deadline=None)
def test_safe_cut_points_match_a_brute_force_check(history: list[ModelMessage]) -> None:
    # Safe: the window opens with a request and no tool call id has parts on both sides of the cut.
    brute = [
        i
        for i in range(1, len(history))
        if isinstance(history[i], ModelRequest) and not _ids_in(history[:i]) & _ids_in(history[i:])
    ]
    assert safe_cut_points(history) == brute


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
