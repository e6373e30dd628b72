"""Scripted models for tests: an assistant that calls tools every turn, and a summarizer that records its inputs.

Every message the assistant produces or receives carries a marker (`M<turn>...`), so a test can
tell which messages reached the summarizer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from testkit.histories import SYSTEM

MARKER = re.compile(r'\bM\d+(?:-\w+)?\b')
NEW_MESSAGES = re.compile(r'<new_messages>\n(.*?)\n</new_messages>', re.S)
PREVIOUS = re.compile(r'<previous_summary>\n(.*?)\n</previous_summary>', re.S)


class Stop(Exception):
    """Raised by a model told to fail mid-run."""


@dataclass
class ParallelToolAssistant:
    """Each user turn: three parallel tool calls, then an answer."""

    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    fail_after: int | None = None
    """Raise `Stop` once this many requests were received."""

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        if self.fail_after is not None and len(self.requests) >= self.fail_after:
            raise Stop('the model failed mid-run')
        last = messages[-1]
        prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
        if isinstance(prompt, str):
            turn = prompt.split()[1]
            # Numbered call_0, call_1, call_2 in every response, as many OpenAI-compatible servers number them.
            calls = [ToolCallPart('lookup', {'q': f'{turn}-c{i}'}, tool_call_id=f'call_{i}') for i in range(3)]
            return ModelResponse(parts=calls)
        answer = next(p.content for p in last.parts if isinstance(p, ToolReturnPart))
        assert isinstance(answer, str), answer
        turn = answer.split('-')[0]
        return ModelResponse(parts=[TextPart(f'Answer {turn}-a done')])


@dataclass
class RecordingSummarizer:
    inputs: list[str] = field(default_factory=list[str])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        request = messages[-1].parts[-1]
        assert isinstance(request, UserPromptPart) and isinstance(request.content, str), request
        prompt = request.content
        self.inputs.append(prompt)
        return ModelResponse(parts=[TextPart(f'SUMMARY-{len(self.inputs)} of the conversation so far')])


def scripted_agent(assistant: ParallelToolAssistant, **kwargs: Any) -> Agent[None, str]:
    """An agent on `assistant` with the `lookup` tool and the test system prompt."""
    agent = Agent(FunctionModel(assistant), system_prompt=SYSTEM, **kwargs)

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f'{q.replace("-c", "-r")} found'

    return agent


def summarized_markers(inputs: list[str]) -> list[set[str]]:
    """The markers of the new messages each summarizer input held."""
    return [set(MARKER.findall(block)) for prompt in inputs for block in NEW_MESSAGES.findall(prompt)]


def shape(messages: list[ModelMessage]) -> list[list[tuple[str, str]]]:
    """What a model was sent, without timestamps and generated ids: each part's kind and content."""
    return [
        [(part.part_kind, str(getattr(part, 'content', None) or getattr(part, 'args', None))) for part in message.parts]
        for message in messages
    ]
