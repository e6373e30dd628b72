"""Histories as real models and runs produce them, drawn by hypothesis: every part kind, and ids that repeat.

Many OpenAI-compatible servers number tool calls `call_0`, `call_1`, ... afresh in every response, so the same
id comes back turn after turn; others issue unique ids. A drawn history uses either numbering, or a mix, and
holds every part kind pydantic-ai 2.78 writes: thinking (alone, too), native tool calls (with their result in
the same response or a later one), files, a provider's compaction, an app-written summary opening a window fed
back in, tool retries (`ToolReturnPart(outcome='retried')`, with or without the run's `RetryInfo`) answered by
the call made again, output validation feedback (`RetryFeedbackPart`), tool returns with media, parallel calls
answered out of order and over several requests, empty responses, and a final response whose calls still wait
(for approval, say).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hypothesis import strategies as st
from pydantic_ai.messages import (
    BinaryContent,
    CompactionPart,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolRetryCause,
    ToolReturnPart,
    UserPromptPart,
)

from testkit.histories import SYSTEM

__all__ = ('Numbering', 'histories')

Numbering = Literal['unique', 'per_response', 'mixed']
"""How tool call ids are issued: unique ids, `call_0`, `call_1`, ... afresh in every response, or each response
either way."""

OUTCOMES: list[Literal['success', 'retried', 'failed']] = ['success', 'success', 'retried', 'failed']
"""A tool return's outcome, drawn: mostly success."""

PNG = BinaryContent(data=b'\x89PNG\r\n\x1a\n' + bytes(24), media_type='image/png')


@dataclass
class _Call:
    tool_call_id: str
    tool_name: str


@dataclass
class _Builder:
    """Builds a history the way pydantic-ai runs produce them, driven by hypothesis draws."""

    draw: st.DrawFn
    numbering: Numbering
    messages: list[ModelMessage] = field(default_factory=list[ModelMessage])
    open_calls: list[_Call] = field(default_factory=list[_Call])
    retried: list[_Call] = field(default_factory=list[_Call])
    """Calls answered with a retry, which the next response makes again."""
    native_open: list[str] = field(default_factory=list[str])
    """Native calls whose result comes in a later response (as Anthropic's tool search can)."""
    serial: int = 0

    def _ids(self, count: int) -> list[str]:
        restart = self.numbering == 'per_response' or (self.numbering == 'mixed' and self.draw(st.booleans()))
        if restart:
            return [f'call_{i}' for i in range(count)]
        ids = [f'id{self.serial + i}' for i in range(count)]
        self.serial += count
        return ids

    def request(self, *, prompt: bool) -> None:
        parts: list[ModelRequestPart] = []
        if self.open_calls:
            # Answer some of the open calls (at least one unless a user turn starts), in any order: far-apart
            # returns, returns split over several requests and out-of-order parallel returns all come from here.
            answered = self.draw(st.integers(min_value=0 if prompt else 1, max_value=len(self.open_calls)))
            chosen = self.draw(st.permutations(range(len(self.open_calls))))[:answered]
            parts += [self._answer(self.open_calls[index]) for index in chosen]
            self.open_calls = [call for i, call in enumerate(self.open_calls) if i not in chosen]
        if self.draw(st.integers(0, 9)) == 0:
            feedback = RetryFeedbackPart('the output failed validation', retry=RetryInfo('validation_error'))
            parts.append(feedback)
        if prompt or not parts:
            parts.append(UserPromptPart(f'prompt {len(self.messages)}'))
        self.messages.append(ModelRequest(parts=parts))

    def _answer(self, call: _Call) -> ModelRequestPart:
        outcome = self.draw(st.sampled_from(OUTCOMES))
        if outcome == 'retried':
            self.retried.append(call)
            # An agent run records why and which attempt; a retry loaded from a legacy `retry-prompt` row, or
            # built by hand, carries none.
            retry: RetryInfo[ToolRetryCause] | None = (
                RetryInfo('model_retry', attempt=1, max_retries=3) if self.draw(st.booleans()) else None
            )
            return ToolReturnPart(
                call.tool_name, 'try again', tool_call_id=call.tool_call_id, outcome='retried', retry=retry
            )
        content: object = f'result of {call.tool_call_id}'
        if outcome == 'success' and self.draw(st.integers(0, 4)) == 0:
            content = [f'chart for {call.tool_call_id}', self.draw(st.sampled_from([PNG, ImageUrl('https://x/i.png')]))]
        return ToolReturnPart(call.tool_name, content, tool_call_id=call.tool_call_id, outcome=outcome)

    def response(self) -> None:
        # A native result left for later comes in the next response, as Anthropic continues a paused turn.
        parts: list[ModelResponsePart] = [
            NativeToolReturnPart('tool_search', 'found late', tool_call_id=tool_call_id)
            for tool_call_id in self.native_open
        ]
        self.native_open = []
        shape = self.draw(st.sampled_from(['full', 'full', 'full', 'empty', 'thinking only']))
        if shape == 'thinking only':
            parts.append(ThinkingPart(f'thinking {len(self.messages)}', signature='sig'))
        elif shape == 'full':
            if self.draw(st.booleans()):
                parts.append(ThinkingPart(f'thinking {len(self.messages)}', signature='sig'))
            parts += self._native_parts()
            again, self.retried = self.retried, []
            fresh = self.draw(st.integers(min_value=0, max_value=3))
            names = [call.tool_name for call in again] + ['tool'] * fresh
            ids = [call.tool_call_id for call in again] if self.numbering == 'unique' else []
            ids += self._ids(len(names) - len(ids))
            for tool_call_id, name in zip(ids, names, strict=True):
                parts.append(ToolCallPart(name, {'n': tool_call_id}, tool_call_id=tool_call_id))
                self.open_calls.append(_Call(tool_call_id, name))
            if self.draw(st.integers(0, 5)) == 0:
                parts.append(FilePart(PNG))
            if self.draw(st.integers(0, 7)) == 0:
                parts.append(CompactionPart(content=None, provider_name='openai', provider_details={'e': 'x'}))
            if self.draw(st.booleans()):
                parts.append(TextPart('ok'))
        self.messages.append(ModelResponse(parts=parts))

    def _native_parts(self) -> list[ModelResponsePart]:
        if not self.draw(st.booleans()):
            return []
        (tool_call_id,) = self._ids(1)
        call = NativeToolCallPart('web_search', {'q': 'x'}, tool_call_id=tool_call_id)
        if self.draw(st.integers(0, 4)) == 0:
            self.native_open.append(tool_call_id)
            return [call]
        return [call, NativeToolReturnPart('web_search', 'found', tool_call_id=tool_call_id)]


@st.composite
def histories(draw: st.DrawFn, *, max_steps: int = 40) -> list[ModelMessage]:
    """Tool-using histories with every part kind, and tool call ids unique, repeated in every response, or both.

    Usually with a system prompt at the head; sometimes opening as a window fed back in does, with an
    app-written summary after the system prompt.
    """
    builder = _Builder(draw, draw(st.sampled_from(['unique', 'per_response', 'mixed'])))
    if draw(st.integers(0, 5)) == 0:
        summary = CompactionPart(content='summary of what came before')
        builder.messages.append(ModelRequest(parts=[SystemPromptPart(SYSTEM), summary]))
    steps = draw(st.integers(min_value=1, max_value=max_steps))
    for step in range(steps):
        builder.request(prompt=step == 0 or draw(st.booleans()))
        builder.response()
    if len(builder.open_calls) > 0 and draw(st.booleans()):
        builder.request(prompt=False)  # answer some; otherwise the last response's calls stay pending
    messages = builder.messages
    first = messages[0]
    if draw(st.booleans()) and isinstance(first, ModelRequest) and not isinstance(first.parts[0], SystemPromptPart):
        messages[0] = ModelRequest(parts=[SystemPromptPart(SYSTEM), *first.parts])
    return messages
