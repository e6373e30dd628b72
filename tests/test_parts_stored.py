"""The part table's reading of the stored JSON form is pydantic-ai's reading of the loaded messages.

`session-store history` and `search` read messages as their rows hold them, without pydantic-ai; the web page,
`chat` and `context` read pydantic-ai's messages through the same table, dumped to that form. For a corpus of every
part kind (and the values pydantic-ai rebuilds or upgrades when it loads a row: files in tool results, the
deprecated `retry-prompt`), each stored part reads as the loaded one does: the text and media count token counting
and search read (`processors.text.part_text`), the tool values as the renderers write them, and every rendered line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CachePoint,
    CompactionPart,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SpeechPart,
    StructuredContent,
    TextContent,
    ToolCallPart,
    ToolReturnPart,
    UploadedFile,
    UserPromptPart,
    VideoUrl,
)

from processors.text import message_text, part_text
from session_store import _parts
from session_store._codec import dump_message, load_message, stored_form
from session_store._display import one_line
from session_store.cli._messages import render_messages
from session_store.conformance._messages import every_part_kind
from testkit.real_histories import histories
from tests.test_parts import conversation

PNG = BinaryContent(b'\x89PNG\r\n\x1a\n' + bytes(8), media_type='image/png')
WAV = BinaryContent(b'RIFF', media_type='audio/wav')
ERRORS: list[dict[str, Any]] = [
    {'type': 'missing', 'loc': ('order_id',), 'msg': 'Field required', 'input': {'id': 1}, 'ctx': {'a': 1}},
    {'type': 'int_type', 'loc': (), 'msg': 'Input should be an integer', 'input': {'id': 1}},
    {'type': 'int_type', 'loc': ('lines', 0), 'msg': 'Input should be an integer', 'input': 'x'},
]
"""Validation errors as a legacy retry stored them: a root error's input repeated, a validator's context."""


def values() -> list[ModelMessage]:
    """Messages holding the values a reading could get wrong: files in tool results (at the top, in lists, nested in
    mappings, and mappings merely shaped like files), every kind of user content, arguments of every shape."""
    return [
        ModelRequest(
            parts=[
                UserPromptPart(
                    [
                        'Look:',
                        TextContent('as text'),
                        StructuredContent({'order': 1042}),
                        CachePoint(),
                        PNG,
                        WAV,
                        ImageUrl('https://example.com/a.png'),
                        AudioUrl('https://example.com/a.mp3'),
                        DocumentUrl('https://example.com/a.pdf'),
                        VideoUrl('https://example.com/a.mp4'),
                        UploadedFile('file-1', 'openai'),
                        '',
                    ]
                ),
                ToolReturnPart('chart', ['a chart', PNG, ImageUrl('https://x/i.png', force_download=True)], 'c1'),
                ToolReturnPart('chart', {'image': PNG, 'n': 1.5e16, 'text': 'é'}, 'c2'),
                ToolReturnPart('chart', PNG, 'c3'),
                ToolReturnPart('chart', [UploadedFile('file-2', 'anthropic', media_type='image/png'), 7], 'c4'),
                # Mappings shaped like files, which stay mappings: a URL without its media type, a binary without data.
                ToolReturnPart('chart', {'kind': 'image-url', 'url': 'https://x/i.png'}, 'c5'),
                ToolReturnPart('chart', [{'kind': 'binary', 'label': 'x'}, {'kind': 'cache-point'}, [1, [2]]], 'c6'),
                ToolReturnPart('chart', None, 'c7', outcome='failed'),
                RetryFeedbackPart(ERRORS, retry=RetryInfo('validation_error')),  # type: ignore[arg-type]
                SpeechPart(speaker='user', transcript='Hello', audio=WAV),
            ]
        ),
        ModelResponse(
            parts=[
                ToolCallPart('lookup', '{"order_id": "ORDER-1042"}', 'c8'),
                ToolCallPart('lookup', '', 'c9'),
                ToolCallPart('lookup', None, 'c10'),
                ToolCallPart('lookup', {'nested': {'lines': [1.0, None, True]}}, 'c11'),
                NativeToolReturnPart('web_search', [PNG, 'found'], tool_call_id='n1', provider_name='openai'),
                CompactionPart(None, provider_name='openai', provider_details={'encrypted': ['x', 'y']}),
            ]
        ),
    ]


def _legacy_retries() -> str:
    """A row of legacy retries as a store wrote them with a pydantic-ai before 2.78 (`retry-prompt`, the deprecated
    `RetryPromptPart`, which now loads as the part it meant): answering a call or none, text or errors."""
    at = '2026-01-02T03:04:05Z'
    parts: list[dict[str, Any]] = [
        {'content': 'Try again.', 'tool_name': 'lookup', 'tool_call_id': 'c1'},
        {'content': ERRORS, 'tool_name': 'lookup', 'tool_call_id': 'c2'},
        {'content': 'Answer in text.', 'tool_name': None, 'tool_call_id': 'pyd_ai_1'},
        {'content': ERRORS, 'tool_name': None, 'tool_call_id': 'pyd_ai_2'},
    ]
    return json.dumps(
        {
            'parts': [{**part, 'timestamp': at, 'part_kind': 'retry-prompt'} for part in parts],
            'timestamp': None,
            'instructions': None,
            'kind': 'request',
            'run_id': None,
            'metadata': None,
        }
    )


def _unrecorded(message: ModelMessage) -> str:
    """`message`'s row as a store wrote it before tool results recorded their files (pydantic-ai < 2.6x)."""
    stored = json.loads(dump_message(message))
    for part in stored['parts']:
        part.pop('content_file_digests', None)
    return json.dumps(stored)


def corpus() -> Iterator[str]:
    """Rows (payloads) holding every part kind and the values above, in each way they may have been written."""
    for message in [*conversation(), *every_part_kind(), *values()]:
        yield dump_message(message)
    yield _legacy_retries()
    yield from (_unrecorded(message) for message in values())


def check(payload: str) -> None:
    """The stored row `payload` reads, part by part and line by line, as the message it loads as."""
    stored = json.loads(payload)
    loaded = load_message(payload)
    side: _parts.Side = stored['kind']
    assert len(stored['parts']) == len(loaded.parts)
    for raw, typed in zip(stored['parts'], loaded.parts, strict=True):
        assert _parts.part_text(raw) == part_text(typed), raw
        kind, said = _parts.read_part(raw, side)
        if kind.role in ('tool-return', 'tool-call', 'retry'):
            held = getattr(typed, 'args' if kind.role == 'tool-call' else 'content')
            # The renderers write values out as `_display.one_line` and the web's indented JSON do.
            assert one_line(said.value) == one_line(held), raw
            assert _indented(said.value) == _indented(held), raw
    assert _parts.message_text(stored) == message_text(loaded)
    assert _lines(stored) == _lines(stored_form([loaded])[0])


def _indented(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _lines(message: _parts.Message) -> list[str]:
    return [line.plain for line in render_messages([message], [0], full=True)]


def test_every_stored_part_reads_as_the_part_it_loads_as() -> None:
    for payload in corpus():
        check(payload)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(max_steps=20))
def test_drawn_histories_read_as_they_load(history: list[ModelMessage]) -> None:
    for message in history:
        check(dump_message(message))


def test_a_file_in_a_tool_result_is_written_as_the_item_it_loads_as() -> None:
    # What `one_line` prints for the loaded item (its repr) is pinned here, not only compared: a pydantic-ai that
    # changes it changes `history`'s output, which this says plainly.
    (tool_return,) = json.loads(dump_message(ModelRequest(parts=[ToolReturnPart('chart', [PNG], 'c1')])))['parts']
    _, said = _parts.read_part(tool_return, 'request')
    assert one_line(said.value) == json.dumps(
        [f"BinaryImage(data={PNG.data!r}, media_type='image/png', _identifier={PNG.identifier!r})"],
        ensure_ascii=False,
    )
