"""Shared test helpers: building tool-using histories and checking windows."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import (
    BaseToolCallPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

SYSTEM = 'You are a careful support agent.'


def tool_turn(turn: int, calls: int = 3) -> list[ModelMessage]:
    """One user turn: a prompt, parallel tool calls, their returns, and an answer."""
    ids = [f'call-{turn}-{i}' for i in range(calls)]
    return [
        ModelRequest(parts=[UserPromptPart(f'question {turn}')]),
        ModelResponse(parts=[ToolCallPart('lookup', {'q': f'q{turn}-{i}'}, tool_call_id=ids[i]) for i in range(calls)]),
        ModelRequest(parts=[ToolReturnPart('lookup', f'result {turn}-{i}', tool_call_id=ids[i]) for i in range(calls)]),
        ModelResponse(parts=[TextPart(f'answer {turn}')]),
    ]


def tool_history(turns: int, calls: int = 3) -> list[ModelMessage]:
    """A conversation of `turns` tool-using turns, opening with a system prompt."""
    messages: list[ModelMessage] = []
    for turn in range(turns):
        messages += tool_turn(turn, calls)
    first = messages[0]
    assert isinstance(first, ModelRequest)
    messages[0] = ModelRequest(parts=[SystemPromptPart(SYSTEM), *first.parts])
    return messages


def _ids(messages: Sequence[ModelMessage]) -> tuple[set[str], set[str]]:
    """The tool call ids that `messages` call, and those they answer (returns, retries)."""
    calls: set[str] = set()
    answers: set[str] = set()
    for message in messages:
        for part in message.parts:
            tool_call_id = getattr(part, 'tool_call_id', None)
            if isinstance(tool_call_id, str):
                (calls if isinstance(part, BaseToolCallPart) else answers).add(tool_call_id)
    return calls, answers


def pair_violations(window: Sequence[ModelMessage], source: Sequence[ModelMessage]) -> list[str]:
    """How `window` breaks pair safety relative to the `source` history it was made from.

    A return whose call is in `source` must have that call in `window`; a call answered in `source`
    must have its answer in `window`, unless it is in the window's final message (still pending).
    """
    source_calls, source_answers = _ids(source)
    window_calls, window_answers = _ids(window)
    final_calls, _ = _ids(window[-1:])
    problems = [f'return {i} without its call' for i in window_answers & source_calls - window_calls]
    problems += [f'call {i} without its return' for i in (window_calls & source_answers) - window_answers - final_calls]
    if window and isinstance(window[0], ModelResponse):
        problems.append('the window opens with a model response')
    return problems


def system_prompts(messages: Sequence[ModelMessage]) -> list[str]:
    return [
        p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, SystemPromptPart)
    ]
