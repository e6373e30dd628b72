"""The messages the checks store: plain turns told apart by a label, and a history holding every part kind."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from typing import Any

from pydantic_ai.messages import (
    AgentInstructionSource,
    BinaryContent,
    CapabilityLoadDeltaPart,
    CompactionPart,
    FilePart,
    ImageUrl,
    InstructionBaselinePart,
    InstructionDeltaPart,
    InstructionId,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = ('MOMENT', 'TURN_LENGTH', 'dumped', 'every_part_kind', 'faithful', 'turn')

MOMENT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
"""Every message's timestamp: equal turns must compare equal in both stores of the differential check."""


def turn(label: str, *, padding: int = 0) -> list[ModelMessage]:
    """A question, a tool call, its return and the answer, all carrying `label`, so a history shows whose turn
    each message is, and whether a turn was stored whole. `padding` characters make the answer that much larger."""
    return [
        ModelRequest(parts=[UserPromptPart(f'question {label}', timestamp=MOMENT)], timestamp=MOMENT),
        ModelResponse(
            parts=[ToolCallPart('lookup', {'label': label}, tool_call_id='call_0')],
            timestamp=MOMENT,
            model_name='conformance',
        ),
        ModelRequest(
            parts=[ToolReturnPart('lookup', f'found {label}', tool_call_id='call_0', timestamp=MOMENT)],
            timestamp=MOMENT,
        ),
        ModelResponse(
            parts=[TextPart(f'answer {label}'), *([TextPart('x' * padding)] if padding else [])],
            timestamp=MOMENT,
            model_name='conformance',
        ),
    ]


TURN_LENGTH = len(turn(''))
"""How many messages one `turn` holds."""


def dumped(messages: list[ModelMessage]) -> Any:
    """`messages` as plain Python data, every field included: what a faithful round trip must preserve (message
    `==` ignores some fields, such as a file's media type)."""
    return ModelMessagesTypeAdapter.dump_python(messages)


def faithful(stored: list[ModelMessage], saved: list[ModelMessage]) -> bool:
    """Whether `stored` is `saved`, every field, as held or as pydantic-ai's own serialization reads it back (a
    deprecated part, such as `RetryPromptPart`, loads as the part that replaced it)."""
    if dumped(stored) == dumped(saved):
        return True
    try:
        serialized = ModelMessagesTypeAdapter.dump_json(saved)
    except ValueError:  # text JSON can't hold (a lone surrogate): only the messages as held compare
        return False
    return dumped(stored) == dumped(ModelMessagesTypeAdapter.validate_json(serialized))
