"""The messages the checks store: plain turns told apart by a label, and a history holding every part kind."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic_ai.messages import (
    AgentInstructionSource,
    BinaryContent,
    CapabilityLoadDeltaPart,
    CapabilityPartRendering,
    CompactionPart,
    FilePart,
    ImageUrl,
    InstructionBaselinePart,
    InstructionDeltaPart,
    InstructionId,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    OperatorSource,
    RetryFeedbackPart,
    RetryInfo,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownCapabilityPart,
    UserPromptPart,
)

__all__ = ('MOMENT', 'TURN_LENGTH', 'capability_parts', 'dumped', 'every_part_kind', 'faithful', 'turn')

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
    return bool(dumped(stored) == dumped(ModelMessagesTypeAdapter.validate_json(serialized)))


def every_part_kind() -> list[ModelMessage]:
    """A history holding a part of every public kind a request or response can carry, with tool call ids repeated
    across responses, as servers that number calls `call_0`, `call_1`, ... in every response write them."""
    return [
        ModelRequest(
            parts=[
                SystemPromptPart('Be brief.', timestamp=MOMENT),
                UserPromptPart(
                    [
                        'Is this the order?',
                        ImageUrl('https://example.com/order.png'),
                        BinaryContent(b'\x00\xff', media_type='application/octet-stream'),
                    ],
                    timestamp=MOMENT,
                ),
                CompactionPart('Earlier: the user asked about ORDER-1042.'),
                CompactionPart(None),
                SpeechPart(speaker='user', transcript='Where is it?'),
            ],
            instructions='Answer politely.',
            timestamp=MOMENT,
        ),
        ModelResponse(
            parts=[
                ThinkingPart('The user wants the order.', signature='sig'),
                TextPart('Let me look.'),
                ToolCallPart('lookup', {'order_id': 'ORDER-1042', 'lines': [1, 2]}, tool_call_id='call_0'),
                ToolCallPart('lookup', '{"order_id": "ORDER-1043"}', tool_call_id='call_1'),
                NativeToolCallPart('web_search', {'query': 'ORDER-1042'}, tool_call_id='n1', provider_name='openai'),
                NativeToolReturnPart('web_search', {'results': ['a', 'b']}, tool_call_id='n1', provider_name='openai'),
                FilePart(BinaryContent(b'\x89PNG', media_type='image/png')),
                CompactionPart(None, provider_name='openai', provider_details={'encrypted': 'xyz'}),
                SpeechPart(speaker='assistant', transcript=None),
            ],
            model_name='conformance',
            timestamp=MOMENT,
        ),
        ModelRequest(
            parts=[
                ToolReturnPart('lookup', {'status': 'shipped'}, tool_call_id='call_0', timestamp=MOMENT),
                ToolReturnPart(
                    'lookup', 'Unknown order id.', tool_call_id='call_1', outcome='retried', timestamp=MOMENT
                ),
                RetryFeedbackPart('Please answer in text.', retry=RetryInfo('no_output')),
                ToolAvailabilityDeltaPart(tools_added=['refund']),
                CapabilityLoadDeltaPart(loaded=['orders']),
                ModelSettingsDeltaPart(settings={'thinking': 'high'}),
                InstructionDeltaPart(id=InstructionId(AgentInstructionSource(), name='style'), content='In French.'),
                InstructionBaselinePart(instructions=[]),
                *capability_parts(),
            ],
            instructions='Answer politely.',
            timestamp=MOMENT,
        ),
        # The next response numbers its calls from call_0 again.
        ModelResponse(
            parts=[ToolCallPart('refund', {'order_id': 'ORDER-1042'}, tool_call_id='call_0')],
            model_name='conformance',
            timestamp=MOMENT,
        ),
        ModelRequest(
            parts=[ToolReturnPart('refund', 'Not allowed.', tool_call_id='call_0', outcome='denied', timestamp=MOMENT)],
            timestamp=MOMENT,
        ),
        ModelResponse(parts=[TextPart('It shipped; no refund.')], model_name='conformance', timestamp=MOMENT),
    ]


def capability_parts() -> list[ModelRequestPart]:
    """Capability parts as a process that doesn't define their kinds loads them: data with text, a file and an
    attribute, and a request-scoped instruction."""
    return [
        UnknownCapabilityPart(
            kind='conformance.progress',
            content=['3 of 5 steps done.', ImageUrl('https://example.com/chart.png')],
            source=OperatorSource(),
            rendering=CapabilityPartRendering(tag='progress_report', attributes=('task_id',)),
            data={'task_id': 't1'},
            timestamp=MOMENT,
            record_id='conformance-progress',
        ),
        UnknownCapabilityPart(
            kind='conformance.requests_left',
            content='2 model requests left.',
            source=OperatorSource(),
            scope='request',
            rendering=CapabilityPartRendering(voice='instruction'),
            data={'left': 2},
            timestamp=MOMENT,
            record_id='conformance-requests-left',
        ),
    ]
