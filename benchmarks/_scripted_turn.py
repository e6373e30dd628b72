"""A pydantic-ai agent whose every run is one of `_store_conversation`'s tool-using turns, on a scripted
`FunctionModel`: benchmarks/scale.py and benchmarks/conversations.py run it.

The prompt of turn N is `turn_text(N).question`; the model answers it with one `lookup_order` call (the turn's
call id and arguments), the tool returns the turn's result, and the model answers with the turn's answer. So a
run stores the 4 messages `our_turn(N)` holds, saying the same words as the peer's 4 items `peer_turn(N)`. Each
model request can wait `delay` seconds first, standing for a provider's latency; the tool answers at once.
"""

from __future__ import annotations

import asyncio

from _store_conversation import SYSTEM_PROMPT, turn_text
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

TOOL = 'lookup_order'
UNLIMITED = UsageLimits(request_limit=None)
"""pydantic-ai counts a stored conversation's usage against `request_limit` (50 by default): a long one passes it."""


def prompt(turn: int) -> str:
    """The user prompt of turn `turn`."""
    return turn_text(turn).question


def _turn_of(text: str) -> int:
    """The turn a prompt (`Question N: ...`) or a tool's result (`Result N: ...`) belongs to."""
    return int(text.split(maxsplit=2)[1].rstrip(':'))


def turn_agent(delay: float = 0.0) -> Agent[None, str]:
    """The agent: each of its 2 model requests per turn waits `delay` seconds, then answers as the script says."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if delay:
            await asyncio.sleep(delay)
        last = messages[-1]
        asked = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
        if isinstance(asked, str):
            text = turn_text(_turn_of(asked))
            return ModelResponse(parts=[ToolCallPart(TOOL, text.arguments, tool_call_id=text.call_id)])
        returned = next(p.content for p in last.parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart(turn_text(_turn_of(str(returned))).answer)])

    agent = Agent(FunctionModel(model), system_prompt=SYSTEM_PROMPT)

    @agent.tool_plain(name=TOOL)
    def lookup_order(order: str) -> str:
        return turn_text(int(order.removeprefix('A-'))).result

    return agent
