"""benchmarks/store.py's conversation, in both libraries' formats: tool-using turns of 4 messages (items).

A turn is a user request, a response calling a tool, the request returning its result and a text answer:
4 pydantic-ai messages for ours, 4 OpenAI Responses input items for the peer (a user message, a
`function_call`, a `function_call_output`, an assistant message), saying the same words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from processors import SummarizationFailure, SummarizationProcessor, count_tokens_approximately

if TYPE_CHECKING:
    from agents.items import TResponseInputItem as PeerItem

TAIL = 20
"""Messages after the latest summary: the kept tail of a summarizing session, and the peer's `limit`."""
TRIGGER = 100
"""Messages at which the sliding window of parts 1 and 4 slides, keeping `TAIL`."""
SYSTEM_PROMPT = 'You are a careful support agent. Use the tools; never guess an order number.'
_FILLER = (
    'The customer asked about the status of an order placed last week and whether the refund for the '
    'damaged item was processed; the warehouse confirmed the shipment left on Tuesday and the invoice '
    'was reissued with the corrected address, so the balance on the account is now zero and nothing '
    'else is pending apart from the survey the customer may answer at their convenience later on. '
) * 2
SUMMARY_TEXT = ('Summary of the conversation so far: ' + _FILLER * 3)[:1_500]
"""The text of every summary in an archive's chain (each ends with `[covers_to]`)."""


@dataclass(frozen=True)
class TurnText:
    """What one tool-using turn says, whichever library stores it."""

    question: str
    call_id: str
    arguments: str
    result: str
    answer: str


def turn_text(turn: int) -> TurnText:
    return TurnText(
        question=f'Question {turn}: {_FILLER[:120]}',
        call_id=f'call_{turn:07d}',
        arguments=f'{{"order": "A-{turn:07d}"}}',
        result=f'Result {turn}: {_FILLER[:400]}',
        answer=f'Answer {turn}: {_FILLER[:250]}',
    )


def our_turn(turn: int) -> list[ModelMessage]:
    """The turn as pydantic-ai messages; the conversation's first request opens with the system prompt."""
    text = turn_text(turn)
    opening = [SystemPromptPart(SYSTEM_PROMPT)] if turn == 0 else []
    return [
        ModelRequest(parts=[*opening, UserPromptPart(text.question)]),
        ModelResponse(parts=[ToolCallPart('lookup_order', text.arguments, tool_call_id=text.call_id)]),
        ModelRequest(parts=[ToolReturnPart('lookup_order', text.result, tool_call_id=text.call_id)]),
        ModelResponse(parts=[TextPart(text.answer)]),
    ]


def peer_turn(turn: int) -> list[PeerItem]:
    """The same turn as OpenAI Responses input items."""
    text = turn_text(turn)
    return [
        {'role': 'user', 'content': text.question},
        {
            'type': 'function_call',
            'id': f'fc_{turn:07d}',
            'call_id': text.call_id,
            'name': 'lookup_order',
            'arguments': text.arguments,
            'status': 'completed',
        },
        {'type': 'function_call_output', 'call_id': text.call_id, 'output': text.result},
        {
            'type': 'message',
            'id': f'msg_{turn:07d}',
            'role': 'assistant',
            'status': 'completed',
            'content': [{'type': 'output_text', 'text': text.answer, 'annotations': []}],
        },
    ]


def our_archive(size: int) -> list[ModelMessage]:
    """The conversation's first `size` messages (`size` a multiple of 4)."""
    return [message for turn in range(size // 4) for message in our_turn(turn)]


def peer_archive(size: int) -> list[PeerItem]:
    """The conversation's first `size` items (`size` a multiple of 4)."""
    return [item for turn in range(size // 4) for item in peer_turn(turn)]


def token_counts(messages: Sequence[ModelMessage]) -> list[int]:
    """Each message's token count, as a run stores it."""
    return [count_tokens_approximately([message]) for message in messages]


def _summary_usage() -> RequestUsage:
    """What the scripted summarizer reports it spent (new each time: a run adds it into its own): a window of about
    20 turn messages in, a summary out."""
    return RequestUsage(input_tokens=2_000, output_tokens=len(SUMMARY_TEXT) // 4)


@dataclass
class Summarizer:
    """The scripted summarizer: a summary of `SUMMARY_TEXT`'s length, numbered, made at once, with the usage a
    provider reports.

    It is a coroutine and reports usage so that the model costs what a provider's answer costs the caller, not what
    `FunctionModel`'s stand-ins do: a plain function is run on an executor thread, and a response without usage gets
    pydantic-ai's test estimate over the whole prompt; the two took about 0.9 ms a summary on this machine, which
    the benchmarks would have charged to the store.
    """

    calls: int = 0
    failures: list[SummarizationFailure] = field(default_factory=list[SummarizationFailure])

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        return ModelResponse(parts=[TextPart(f'{SUMMARY_TEXT} [summary {self.calls}]')], usage=_summary_usage())

    def processor(self, trigger: int, keep: int) -> SummarizationProcessor:
        """A summarizing processor on this summarizer: at `trigger` messages in the window, down to `keep`."""

        async def failed(failure: SummarizationFailure) -> None:
            self.failures.append(failure)

        return SummarizationProcessor(
            FunctionModel(self), trigger=('messages', trigger), keep=('messages', keep), on_failure=failed
        )
