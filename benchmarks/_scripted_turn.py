"""A pydantic-ai agent whose every run is one scripted tool-using turn, on a `FunctionModel`: benchmarks/scale.py,
conversations.py, store.py (its append) and encryption.py run it.

A script gives turn N's 4 messages: by default `_store_conversation.our_turn(N)`, whose prompt is
`turn_text(N).question`. The model answers the prompt with the script's `lookup_order` call, the tool returns
the script's result, and the model answers with the script's answer. So a run stores the script's 4 messages
(with its own timestamps), for `our_turn` saying the same words as the peer's 4 items `peer_turn(N)`. Each
model request can wait `delay` seconds first, standing for a provider's latency; the tool answers at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from _store_conversation import SYSTEM_PROMPT, our_turn, turn_text
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

TOOL = 'lookup_order'
Script = Callable[[int], list[ModelMessage]]
"""Turn N's 4 messages: its prompt (`Question N...`), a response calling `TOOL` with `{"order": "A-<N>"}`, the
tool's return (`Result N...`) and the answer."""
UNLIMITED = UsageLimits(request_limit=None)
"""pydantic-ai counts a stored conversation's usage against `request_limit` (50 by default): a long one passes it."""


def prompt(turn: int) -> str:
    """The user prompt of turn `turn`."""
    return turn_text(turn).question


def _turn_of(text: str) -> int:
    """The turn a prompt (`Question N: ...`) or a tool's result (`Result N: ...`) belongs to."""
    return int(text.split(maxsplit=2)[1].rstrip(':'))


def _answer(scripted: ModelMessage) -> ModelResponse:
    """The model's answer, made anew (its own timestamp) with the parts of the script's response."""
    assert isinstance(scripted, ModelResponse), scripted
    return ModelResponse(parts=list(scripted.parts))


def turn_agent(
    delay: float = 0.0, script: Script = our_turn, system_prompt: str | None = SYSTEM_PROMPT
) -> Agent[None, str]:
    """The agent: each of its 2 model requests per turn waits `delay` seconds, then answers as `script` says."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if delay:
            await asyncio.sleep(delay)
        last = messages[-1]
        asked = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
        if isinstance(asked, str):
            return _answer(script(_turn_of(asked))[1])
        returned = next(p.content for p in last.parts if isinstance(p, ToolReturnPart))
        return _answer(script(_turn_of(str(returned)))[3])

    agent = Agent(FunctionModel(model), system_prompt=system_prompt or ())

    @agent.tool_plain(name=TOOL)
    def lookup_order(order: str) -> str:
        returned = script(int(order.removeprefix('A-')))[2].parts[0]
        assert isinstance(returned, ToolReturnPart), returned
        return str(returned.content)

    return agent
