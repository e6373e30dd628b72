"""Shared test helpers: building tool-using histories and checking windows."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
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
    """One user turn: a prompt, parallel tool calls (`call_0`, `call_1`, ...), their returns, and an answer."""
    ids = [f'call_{i}' for i in range(calls)]  # numbered afresh every response, as many servers do
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


def _is_answer(part: object) -> bool:
    """Whether `part` answers a tool call: a return (a retried call's too) or a native tool's result. A legacy
    `retry-prompt` row loads as a retried return, or as a `RetryFeedbackPart`, which answers no call."""
    return isinstance(part, BaseToolReturnPart)


def _id_of(part: object) -> str:
    return str(getattr(part, 'tool_call_id', ''))


def _calls(message: ModelMessage, tool_call_id: str) -> bool:
    return any(isinstance(part, BaseToolCallPart) and part.tool_call_id == tool_call_id for part in message.parts)


def answered_calls(history: Sequence[ModelMessage]) -> dict[int, int]:
    """For each answer part of `history` (by `id()`), the index of the message whose call it answers, or -1.

    Written to be obviously right rather than fast, as the oracle the processors' pairing is checked against:
    each answer scans back for the nearest message calling its id (its own response first, for a native
    tool's result), as pydantic-ai pairs them; ids may repeat across responses.
    """
    answers: dict[int, int] = {}
    for index, message in enumerate(history):
        for part in message.parts:
            if _is_answer(part):
                tool_call_id = _id_of(part)
                own = index if isinstance(message, ModelResponse) else index - 1
                answers[id(part)] = next((i for i in range(own, -1, -1) if _calls(history[i], tool_call_id)), -1)
    return answers


def pair_violations(window: Sequence[ModelMessage], source: Sequence[ModelMessage]) -> list[str]:
    """How `window` breaks pair safety relative to the `source` history it was made from, pairing by position.

    Window messages are traced to source messages by their parts (a processor copies a message to add its
    summary to it or to turn a lost answer into text, but keeps the other parts). An answer in the window needs
    the message holding its call; a call answered in `source` needs its answer in the window, unless it is in
    the window's final message (still pending).
    """
    owner = {id(part): index for index, message in enumerate(source) for part in message.parts}
    calls_of = answered_calls(source)
    present = {
        owner[id(part)]
        for message in window
        for part in message.parts
        if id(part) in owner and not isinstance(part, SystemPromptPart)
    }
    last = {owner[id(part)] for part in window[-1].parts if id(part) in owner} if window else set()
    shown = {id(part) for message in window for part in message.parts}
    problems = []
    for message in window:
        for part in message.parts:
            call = calls_of.get(id(part), -1)
            if call >= 0 and call not in present:
                problems.append(f'return {_id_of(part)} at {owner[id(part)]} without its call at {call}')
    for index, message in enumerate(source):
        for part in message.parts:
            call = calls_of.get(id(part), -1)
            if call in present and call not in last and id(part) not in shown:
                problems.append(f'call {_id_of(part)} at {call} without its return at {index}')
    if window and isinstance(window[0], ModelResponse):
        problems.append('the window opens with a model response')
    return problems


def system_prompts(messages: Sequence[ModelMessage]) -> list[str]:
    return [
        p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, SystemPromptPart)
    ]
