"""The 40-turn door tests through pydantic-ai's real provider models: the messages come out of pydantic-ai's parsers.

`tests/test_real_histories.py` drives each door with a `FunctionModel`, whose messages a test builds. Here the same
script answers behind `OpenAIChatModel`, `OpenAIResponsesModel`, `AnthropicModel` and `GoogleModel`, over a mock HTTP
transport that reads and writes each provider's wire format and answers HTTP 400, as the real API does, to a request
whose tool calls and results do not pair (`testkit/providers.py`). Every door must give what the FunctionModel doors
give (`check_report`), and the history must be pydantic-ai's reading of the provider's responses: each response
stamped with the provider, its usage recorded, its thinking kept.

The quick tier runs the hardest numbering (`call_0` and `call_1` in every response) per provider and door, on SQLite
where a door has a store; the other numberings and PostgreSQL are in the slow tier.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from testkit.doors import NUMBERINGS, Door, DoorReport, Numbering, TurnScript, agent_on, check_report, run_door
from testkit.providers import PROVIDERS, ProviderKind, mock_for, sign

PROVIDER_NAMES: dict[ProviderKind, str] = {
    'openai_chat': 'openai',
    'openai_responses': 'openai',
    'anthropic': 'anthropic',
    'google': 'google',
}


def _runs(*doors: Door) -> list[Any]:
    """Each provider through each of `doors` with each numbering, in the slow tier: each provider's SDK costs seconds
    to import and a run, and the quick tier runs every door with the same script as a `FunctionModel`."""
    return [
        pytest.param(kind, door, numbering, marks=pytest.mark.slow)
        for kind in PROVIDERS
        for door in doors
        for numbering in NUMBERINGS
    ]


def check_parsed(report: DoorReport, kind: ProviderKind) -> None:
    """Every response is pydantic-ai's reading of the provider's body: stamped with it, its usage and thinking kept."""
    responses = [m for m in report.history if isinstance(m, ModelResponse)]
    assert responses
    for response in responses:
        assert response.provider_name == PROVIDER_NAMES[kind]
        assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
        assert any(isinstance(part, ThinkingPart) and part.content for part in response.parts)


@pytest.mark.parametrize(('kind', 'door', 'numbering'), _runs('sliding_window', 'summarization'))
async def test_a_capability_on_a_plain_agent(kind: ProviderKind, door: Door, numbering: Numbering) -> None:
    script = TurnScript(numbering)
    mock = mock_for(kind, script)
    report = await run_door(door, mock.model())
    assert mock.refusals == []
    check_report(report, script, door)
    check_parsed(report, kind)


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize(('kind', 'door', 'numbering'), _runs('session', 'conversations'))
async def test_a_store_door(kind: ProviderKind, door: Door, numbering: Numbering, db_url: str) -> None:
    script = TurnScript(numbering)
    mock = mock_for(kind, script)
    report = await run_door(door, mock.model(), url=db_url)
    assert mock.refusals == []
    check_report(report, script, door)
    check_parsed(report, kind)


# Each mock refuses what its API refuses. A body is what pydantic-ai would send, cut down to the fields read.

CALL = {'id': 'call_0', 'type': 'function', 'function': {'name': 'lookup', 'arguments': '{"q": "a"}'}}
USE = {'type': 'tool_use', 'id': 'call_0', 'name': 'lookup', 'input': {'q': 'a'}}
RESULT = {'type': 'tool_result', 'tool_use_id': 'call_0', 'content': [{'type': 'text', 'text': 'found a'}]}
FUNCTION_CALL = {'type': 'function_call', 'call_id': 'call_0', 'name': 'lookup', 'arguments': '{"q": "a"}'}
OUTPUT = {'type': 'function_call_output', 'call_id': 'call_0', 'output': 'found a'}
USER = {'role': 'user', 'content': 'turn 0'}
SIGNED = sign('hmm')


def _gemini_call(signed: bool = True) -> dict[str, Any]:
    call = {'name': 'lookup', 'args': {'q': 'a'}, 'id': 'call_0'}
    part: dict[str, Any] = {'functionCall': call}
    if signed:
        part['thoughtSignature'] = mock_for('google', TurnScript('call_0'))._signature(call)  # type: ignore[attr-defined]
    return {'role': 'model', 'parts': [part]}


GEMINI_USER = {'role': 'user', 'parts': [{'text': 'turn 0'}]}
GEMINI_RESPONSE = {
    'role': 'user',
    'parts': [{'functionResponse': {'id': 'call_0', 'name': 'lookup', 'response': {'return_value': 'found a'}}}],
}

BAD: list[tuple[ProviderKind, str, dict[str, Any], str]] = [
    (
        'openai_chat',
        'a tool result with no call before it',
        {'model': 'gpt-4o', 'messages': [USER, {'role': 'tool', 'tool_call_id': 'call_0', 'content': 'found a'}]},
        "must be a response to a preceeding message with 'tool_calls'",
    ),
    (
        'openai_chat',
        "a tool result for a call the assistant message before it didn't make",
        {
            'model': 'gpt-4o',
            'messages': [
                USER,
                {'role': 'assistant', 'content': None, 'tool_calls': [CALL]},
                {'role': 'tool', 'tool_call_id': 'call_0', 'content': 'found a'},
                {'role': 'tool', 'tool_call_id': 'call_1', 'content': 'found a'},
            ],
        },
        "'tool_call_id' of 'call_1' not found",
    ),
    (
        'openai_chat',
        'a call not answered in the next message',
        {'model': 'gpt-4o', 'messages': [USER, {'role': 'assistant', 'content': None, 'tool_calls': [CALL]}, USER]},
        'did not have response messages: call_0',
    ),
    (
        'openai_responses',
        'an output with no call of its call_id earlier',
        {'model': 'gpt-6.1-sol', 'input': [USER, OUTPUT]},
        'No tool call found for function call output with call_id call_0',
    ),
    (
        'openai_responses',
        'a call with no output',
        {'model': 'gpt-6.1-sol', 'input': [USER, FUNCTION_CALL, USER]},
        'No tool output found for function call call_0',
    ),
    (
        'openai_responses',
        'reasoning whose encrypted content was not issued',
        {
            'model': 'gpt-6.1-sol',
            'input': [USER, {'type': 'reasoning', 'id': 'rs_1', 'summary': [], 'encrypted_content': 'forged'}],
        },
        'could not be verified',
    ),
    (
        'openai_responses',
        'an item twice',
        {
            'model': 'gpt-6.1-sol',
            'input': [USER, {**FUNCTION_CALL, 'id': 'fc_1'}, OUTPUT, {**FUNCTION_CALL, 'id': 'fc_1'}],
        },
        'Duplicate item found with id fc_1',
    ),
    (
        'anthropic',
        'a first message that is not a user turn',
        {'model': 'claude-sonnet-5-5', 'messages': [{'role': 'assistant', 'content': 'hi'}, USER]},
        'first message must use the "user" role',
    ),
    (
        'anthropic',
        'a tool result for no tool use in the turn before',
        {'model': 'claude-sonnet-5-5', 'messages': [{'role': 'user', 'content': [RESULT]}]},
        'unexpected `tool_use_id` found in `tool_result` blocks: call_0',
    ),
    (
        'anthropic',
        'a tool use not answered in the next turn',
        {'model': 'claude-sonnet-5-5', 'messages': [USER, {'role': 'assistant', 'content': [USE]}, USER]},
        '`tool_use` ids were found without `tool_result` blocks immediately after: call_0',
    ),
    (
        'anthropic',
        'text before the tool results',
        {
            'model': 'claude-sonnet-5-5',
            'messages': [
                USER,
                {'role': 'assistant', 'content': [USE]},
                {'role': 'user', 'content': [{'type': 'text', 'text': 'note'}, RESULT]},
            ],
        },
        '`tool_use` ids were found without `tool_result` blocks immediately after: call_0',
    ),
    (
        'anthropic',
        'a thinking block with a signature it was not issued',
        {
            'model': 'claude-sonnet-5-5',
            'messages': [
                USER,
                {'role': 'assistant', 'content': [{'type': 'thinking', 'thinking': 'hmm', 'signature': 'forged'}, USE]},
                {'role': 'user', 'content': [RESULT]},
            ],
        },
        'Invalid `signature` in `thinking` block',
    ),
    (
        'google',
        'a function response with no call turn before it',
        {'contents': [GEMINI_USER, {'role': 'model', 'parts': [{'text': 'hi'}]}, GEMINI_RESPONSE]},
        'function response turn comes immediately after a function call turn',
    ),
    (
        'google',
        'fewer function responses than calls',
        {'contents': [GEMINI_USER, _gemini_call(), GEMINI_USER]},
        'number of function response parts is equal to the number of function call parts',
    ),
    (
        'google',
        'a call turn right after a model turn',
        {'contents': [GEMINI_USER, {'role': 'model', 'parts': [{'text': 'hi'}]}, _gemini_call(), GEMINI_RESPONSE]},
        'function call turn comes immediately after a user turn or after a function response turn',
    ),
    (
        'google',
        'a call of the current turn without the thought signature it was issued',
        {'contents': [GEMINI_USER, _gemini_call(signed=False), GEMINI_RESPONSE]},
        'missing a thought_signature',
    ),
]

GOOD: list[tuple[ProviderKind, str, dict[str, Any]]] = [
    (
        'openai_chat',
        'a call and its result',
        {
            'model': 'gpt-4o',
            'messages': [
                {'role': 'system', 'content': 'sys'},
                USER,
                {'role': 'assistant', 'content': None, 'tool_calls': [CALL]},
                {'role': 'tool', 'tool_call_id': 'call_0', 'content': 'found a'},
            ],
        },
    ),
    ('openai_responses', 'a call and its output', {'model': 'gpt-6.1-sol', 'input': [USER, FUNCTION_CALL, OUTPUT]}),
    (
        'anthropic',
        'consecutive user turns, which the API combines, and a signed thinking block',
        {
            'model': 'claude-sonnet-5-5',
            'messages': [
                {'role': 'user', 'content': 'summary'},
                USER,
                {
                    'role': 'assistant',
                    'content': [{'type': 'thinking', 'thinking': 'hmm', 'signature': sign('hmm')}, USE],
                },
                {'role': 'user', 'content': [RESULT]},
            ],
        },
    ),
    (
        'google',
        "an earlier turn's call without a signature, which only the current turn needs",
        {'contents': [GEMINI_USER, _gemini_call(signed=False), GEMINI_RESPONSE, GEMINI_USER]},
    ),
]


def _post(kind: ProviderKind, body: dict[str, Any]) -> httpx2.Response:
    return mock_for(kind, TurnScript('call_0')).handle(httpx2.Request('POST', 'https://mock.test/', json=body))


def _error_message(kind: ProviderKind, response: httpx2.Response) -> str:
    """The message of a provider's error body, checking the body has that provider's shape."""
    body = response.json()
    if kind == 'anthropic':
        assert body['type'] == 'error' and body['error']['type'] == 'invalid_request_error'
    elif kind == 'google':
        assert body['error']['code'] == 400 and body['error']['status'] == 'INVALID_ARGUMENT'
    else:
        assert body['error']['type'] == 'invalid_request_error' and 'param' in body['error']
    return str(body['error']['message'])


@pytest.mark.parametrize(('kind', 'case', 'body', 'says'), BAD, ids=[f'{kind}: {case}' for kind, case, _, _ in BAD])
def test_a_mock_refuses_what_its_api_refuses(kind: ProviderKind, case: str, body: dict[str, Any], says: str) -> None:
    response = _post(kind, body)
    assert response.status_code == 400
    assert says in _error_message(kind, response)


@pytest.mark.parametrize(('kind', 'case', 'body'), GOOD, ids=[f'{kind}: {case}' for kind, case, _ in GOOD])
def test_a_mock_answers_what_its_api_accepts(kind: ProviderKind, case: str, body: dict[str, Any]) -> None:
    assert _post(kind, body).status_code == 200


def test_a_function_call_item_sent_without_the_reasoning_item_it_came_with_is_refused() -> None:
    mock = mock_for('openai_responses', TurnScript('call_0'))
    issued = mock.handle(
        httpx2.Request('POST', 'https://mock.test/', json={'model': 'gpt-6.1-sol', 'input': [USER]})
    ).json()
    reasoning, call = issued['output']
    assert reasoning['type'] == 'reasoning' and call['type'] == 'function_call'
    output = {**OUTPUT, 'call_id': call['call_id']}
    replay = {'model': 'gpt-6.1-sol', 'input': [USER, call, output]}
    response = mock.handle(httpx2.Request('POST', 'https://mock.test/', json=replay))
    assert response.status_code == 400
    assert f"without its required 'reasoning' item: '{reasoning['id']}'" in _error_message('openai_responses', response)
    whole = {'model': 'gpt-6.1-sol', 'input': [USER, reasoning, call, output]}
    assert mock.handle(httpx2.Request('POST', 'https://mock.test/', json=whole)).status_code == 200


def _malformed(kind: ProviderKind) -> list[ModelMessage]:
    """A history pydantic-ai sends as it is and the provider refuses.

    pydantic-ai itself answers a call left without its result and drops a result whose id no call has, but pairs by
    id: a second result for `call_0` passes it. Chat Completions, Anthropic and Gemini refuse that result, which no
    call right before it asked for; Responses checks only that a call of that `call_id` came earlier, so there the
    history carries reasoning whose encrypted content no response issued.
    """
    if kind == 'openai_responses':
        thinking = ThinkingPart('hmm', id='rs_forged', signature='forged', provider_name='openai')
        return [
            ModelRequest(parts=[UserPromptPart('turn 0')]),
            ModelResponse(parts=[thinking, TextPart('Answer 0')], provider_name='openai', canonical_system='openai'),
        ]
    return [
        ModelRequest(parts=[UserPromptPart('turn 0')]),
        ModelResponse(parts=[ToolCallPart('lookup', {'q': 'a'}, tool_call_id='call_0')]),
        ModelRequest(parts=[ToolReturnPart('lookup', 'found a', tool_call_id='call_0')]),
        ModelResponse(parts=[TextPart('Answer 0')]),
        ModelRequest(parts=[ToolReturnPart('lookup', 'found a', tool_call_id='call_0')]),
        ModelResponse(parts=[TextPart('Answer 0 again')]),
    ]


@pytest.mark.slow  # pydantic-ai's real model classes, whose SDKs cost seconds to import
@pytest.mark.parametrize('kind', PROVIDERS)
async def test_pydantic_ai_raises_the_mocks_refusal_as_the_providers_http_error(kind: ProviderKind) -> None:
    """Through pydantic-ai's own model, the mock's 400 reaches the caller as `ModelHTTPError`, before the script."""
    mock = mock_for(kind, TurnScript('call_0'))
    with pytest.raises(ModelHTTPError) as raised:
        await agent_on(mock.model()).run('turn 1', message_history=_malformed(kind))
    assert raised.value.status_code == 400
    assert len(mock.refusals) == 1 and mock.answered == 0
