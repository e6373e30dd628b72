"""The table of part kinds, and every kind as the command line lists it and as the web page shows it.

Every part class pydantic-ai can put in a request or a response has a row in the table. One conversation
holds a part of each row (and so of each role): both renderers are pinned on it line by line, so a row or a
role one of them doesn't lay out fails here, and so does any change to how a kind reads on either.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from datetime import UTC, datetime
from typing import Any, get_args

import pytest
from pydantic_ai.messages import (
    AgentInstructionSource,
    BinaryContent,
    CapabilityLoadDeltaPart,
    CompactionPart,
    DataCapabilityPart,
    FilePart,
    ImageUrl,
    InstructionBaselinePart,
    InstructionCapabilityPart,
    InstructionDeltaPart,
    InstructionId,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
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
    UserPromptPart,
)

from session_store._codec import stored_form
from session_store._parts import PART_KINDS, UPGRADES, Role, Side, read_part
from session_store.cli._messages import render_messages, role
from session_store.web._present import message_views

_AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@dataclass(kw_only=True)
class ProgressPart(DataCapabilityPart, namespace='orders', tag='progress_report', attributes=('task_id',)):
    """Data a capability tells the model, as an application defines a kind."""

    task_id: str


@dataclass(kw_only=True)
class RequestsLeftPart(InstructionCapabilityPart, namespace='budget'):
    """An instruction in the application's voice, for one request."""


def capability_parts() -> list[ModelRequestPart]:
    """A data part (text and an image) and an instruction part."""
    return [
        ProgressPart(
            content=['3 of 5 steps done.', ImageUrl('https://example.com/chart.png')],
            source=OperatorSource(),
            task_id='t1',
        ),
        RequestsLeftPart(content='2 model requests left.', source=OperatorSource(), scope='request'),
    ]


def conversation() -> list[ModelMessage]:
    """A request, a response and a request of tool returns, between them holding a part of every kind."""
    return [
        ModelRequest(
            parts=[
                SystemPromptPart('Be brief.'),
                UserPromptPart(['Is this the order?', ImageUrl('https://example.com/order.png')]),
                CompactionPart('Earlier: the user asked about ORDER-1042.'),
                CompactionPart(None),
                SpeechPart(speaker='user', transcript='Where is it?'),
            ],
            instructions='Answer politely.',
            timestamp=_AT,
        ),
        ModelResponse(
            parts=[
                ThinkingPart('The user wants the order.'),
                TextPart('Let me look.'),
                ToolCallPart('lookup', {'order_id': 'ORDER-1042', 'lines': [1, 2]}, tool_call_id='c1'),
                NativeToolCallPart('web_search', {'query': 'ORDER-1042'}, tool_call_id='n1', provider_name='openai'),
                NativeToolReturnPart('web_search', {'results': ['a', 'b']}, tool_call_id='n1', provider_name='openai'),
                FilePart(BinaryContent(b'\x89PNG', media_type='image/png')),
                CompactionPart(None, provider_name='openai', provider_details={'encrypted': 'xyz'}),
                CompactionPart('Provider summary.', provider_name='anthropic'),
                SpeechPart(speaker='assistant', transcript=None),
            ],
            model_name='test-model',
            timestamp=_AT,
        ),
        ModelRequest(
            parts=[
                ToolReturnPart('lookup', {'status': 'shipped'}, tool_call_id='c1'),
                ToolReturnPart('lookup', 'Unknown order id.', tool_call_id='c2', outcome='retried'),
                ToolReturnPart('refund', 'Not allowed.', tool_call_id='c3', outcome='denied'),
                ToolReturnPart(
                    'lookup',
                    'Give an order id.',
                    tool_call_id='c4',
                    outcome='retried',
                    retry=RetryInfo('model_retry', attempt=2, max_retries=3),
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
            timestamp=_AT,
        ),
    ]


def test_the_command_line_lists_every_part_kind() -> None:
    lines = [(line.plain, line.spans[1].style) for line in render_messages(stored_form(conversation()), [0, 1, 2])]
    assert lines == [
        ('[0] instructions: Answer politely.', 'magenta'),
        ('[0] system: Be brief.', 'magenta'),
        ('[0] user: Is this the order? [1 media item]', 'bold cyan'),
        ('[0] summary: Earlier: the user asked about ORDER-1042.', 'bold yellow'),
        ('[0] summary: (opaque to this store)', 'bold yellow'),
        ('[0] speech: Where is it?', 'cyan'),
        ('[1] assistant (thinking): The user wants the order.', 'dim blue'),
        ('[1] assistant: Let me look.', 'bold blue'),
        ("[1] assistant → lookup(order_id='ORDER-1042', lines=[1, 2])", 'blue'),
        ("[1] assistant → native: web_search(query='ORDER-1042')", 'blue'),
        ('[1] native web_search ⇒ {"results": ["a", "b"]}', 'green'),
        ('[1] assistant file: image/png', 'blue'),
        ('[1] compaction by openai: (opaque to this store)', 'yellow'),
        ('[1] compaction by anthropic: Provider summary.', 'yellow'),
        ('[1] speech: (audio)', 'cyan'),
        ('[2] tool lookup ⇒ {"status": "shipped"}', 'green'),
        ('[2] tool lookup ⇒ (retried) Unknown order id.', 'green'),
        ('[2] tool refund ⇒ (denied) Not allowed.', 'green'),
        # A retry as an agent run records it (why, which attempt) reads as one without that record.
        ('[2] tool lookup ⇒ (retried) Give an order id.', 'green'),
        ('[2] retry: Please answer in text.', 'red'),
        ('[2] tool-availability-delta: ', 'dim'),
        ('[2] capability-load-delta: ', 'dim'),
        ('[2] model-settings-delta: ', 'dim'),
        ('[2] instruction-delta: In French.', 'dim'),
        ('[2] instruction-baseline: ', 'dim'),
        ('[2] capability orders.progress: 3 of 5 steps done. [1 media item]', 'magenta'),
        ('[2] capability budget.requests_left: 2 model requests left.', 'magenta'),
    ]
    assert [role(message) for message in stored_form(conversation())] == ['user', 'assistant', 'tool']


def test_the_page_shows_every_part_kind() -> None:
    views = message_views(conversation(), [0, 1, 2])
    assert [(view.role, view.model_name, view.prompt) for view in views] == [
        ('user', None, 'Is this the order?\n[1 media item]'),
        ('assistant', 'test-model', None),
        ('tool', None, None),
    ]
    # (kind, label, text, preview, long, call_id)
    assert [[astuple(part) for part in view.parts] for view in views] == [
        [
            ('instructions', 'instructions', 'Answer politely.', 'Answer politely.', False, None),
            ('system', 'system prompt', 'Be brief.', 'Be brief.', False, None),
            ('user', 'user', 'Is this the order?\n[1 media item]', 'Is this the order? [1 media item]', False, None),
            ('summary', 'summary', *['Earlier: the user asked about ORDER-1042.'] * 2, False, None),
            ('summary', 'summary', '(opaque to this store)', '(opaque to this store)', False, None),
            ('other', 'speech', 'Where is it?', 'Where is it?', False, None),
        ],
        [
            ('thinking', 'thinking', 'The user wants the order.', 'The user wants the order.', False, None),
            ('assistant', 'assistant', 'Let me look.', 'Let me look.', False, None),
            (
                'tool-call',
                'lookup',
                '{\n  "order_id": "ORDER-1042",\n  "lines": [\n    1,\n    2\n  ]\n}',
                "lookup(order_id='ORDER-1042', lines=[1, 2])",
                True,
                'c1',
            ),
            (
                'tool-call',
                'native web_search',
                '{\n  "query": "ORDER-1042"\n}',
                "web_search(query='ORDER-1042')",
                False,
                'n1',
            ),
            (
                'tool-return',
                'native web_search',
                '{\n  "results": [\n    "a",\n    "b"\n  ]\n}',
                '{"results": ["a", "b"]}',
                True,
                'n1',
            ),
            ('file', 'file', 'image/png', 'image/png', False, None),
            ('summary', 'compaction by openai', '(opaque to this store)', '(opaque to this store)', False, None),
            ('summary', 'compaction by anthropic', 'Provider summary.', 'Provider summary.', False, None),
            ('other', 'speech', '(audio)', '(audio)', False, None),
        ],
        [
            ('tool-return', 'lookup', '{\n  "status": "shipped"\n}', '{"status": "shipped"}', False, 'c1'),
            ('retry', 'retry lookup', 'Unknown order id.', 'Unknown order id.', False, 'c2'),
            ('tool-return', 'refund (denied)', 'Not allowed.', 'Not allowed.', False, 'c3'),
            ('retry', 'retry lookup', 'Give an order id.', 'Give an order id.', False, 'c4'),
            ('retry', 'retry', 'Please answer in text.', 'Please answer in text.', False, None),
            ('other', 'tool-availability-delta', '', '', False, None),
            ('other', 'capability-load-delta', '', '', False, None),
            ('other', 'model-settings-delta', '', '', False, None),
            ('other', 'instruction-delta', 'In French.', 'In French.', False, None),
            ('other', 'instruction-baseline', '', '', False, None),
            (
                'system',
                'capability orders.progress',
                '3 of 5 steps done.\n[1 media item]',
                '3 of 5 steps done. [1 media item]',
                False,
                None,
            ),
            ('system', 'capability budget.requests_left', *['2 model requests left.'] * 2, False, None),
        ],
    ]


def part_classes(union: Any) -> set[type]:
    """The classes in one of pydantic-ai's discriminated unions of parts, each member unwrapped of `Annotated`."""
    members = get_args(union)
    if not members:
        return {union}
    return set().union(*(part_classes(member) for member in members if not _metadata(member)))


def _metadata(member: Any) -> bool:
    """An `Annotated` argument that is not a type: a pydantic `Tag`, `Discriminator` or validator."""
    return not isinstance(member, type) and not get_args(member)


@pytest.mark.parametrize(
    ('side', 'union', 'known'),
    [('request', ModelRequestPart, {UserPromptPart, ToolReturnPart}), ('response', ModelResponsePart, {TextPart})],
)
def test_every_part_class_pydantic_ai_stores_has_a_row(side: Side, union: Any, known: set[type]) -> None:
    classes = part_classes(union)
    assert known <= classes  # the union was unwrapped down to its classes
    upgraded = set(UPGRADES) if side == 'request' else set()
    read = {kind.name for kind in PART_KINDS if kind.side in (side, None)} | upgraded
    missing = sorted(cls.__name__ for cls in classes if _part_kind(cls) not in read)
    assert not missing, f'no row in session_store._parts.PART_KINDS for {side} parts: {missing}'


def _part_kind(cls: type) -> str:
    """The `part_kind` parts of class `cls` are stored under."""
    return str(next(field.default for field in fields(cls) if field.name == 'part_kind'))


def test_the_pinned_conversation_holds_every_row_and_every_role() -> None:
    rows = {read_part(part, message['kind'])[0] for message in stored_form(conversation()) for part in message['parts']}
    assert {kind.name for kind in PART_KINDS if kind not in rows} == set()
    assert {kind.role for kind in rows} == set(get_args(Role))


@dataclass
class FuturePart:
    """A part of a kind from a pydantic-ai newer than the table."""

    content: str
    part_kind: str = 'future-kind'


def test_a_part_of_a_kind_the_table_lacks_shows_what_it_carries() -> None:
    message = ModelRequest(parts=[FuturePart('from the future')])  # type: ignore[list-item]
    (line,) = render_messages(stored_form([message]), [7])
    assert (line.plain, line.spans[1].style) == ('[7] future-kind: from the future', 'dim')
    (view,) = message_views([message], [7])
    assert [astuple(part) for part in view.parts] == [
        ('other', 'future-kind', 'from the future', 'from the future', False, None)
    ]
    assert view.role == 'request'
