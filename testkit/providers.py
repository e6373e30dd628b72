"""A `TurnScript` behind pydantic-ai's real provider models, over a mock HTTP transport that speaks each provider's API.

`provider_model(kind, script)` builds `OpenAIChatModel`, `OpenAIResponsesModel`, `AnthropicModel` or `GoogleModel` with
its real provider on an `httpx2.AsyncClient` whose `MockTransport` answers like that provider's endpoint: it reads the
request body pydantic-ai's own mapping wrote, checks it as the real API does (a malformed history gets HTTP 400 in that
provider's error shape, which pydantic-ai raises as `ModelHTTPError`), hands the provider-neutral view (`list[Seen]`) to
the script, and writes the script's `Reply` as the provider's response body, which pydantic-ai's own parser reads. So
the messages a door stores and windows are the ones pydantic-ai makes from each provider's wire format, not ones a test
constructed. Nothing leaves the process.

The mocks only translate: the script decides what is said, and which ids its calls carry (`call_0` in every response,
as many OpenAI-compatible servers number them, or unique ones). What each provider adds of its own is what the real
one sends beside the script's words: a reasoning item, a signed thinking block, a thought signature, usage.
"""

from __future__ import annotations

import base64
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
from pydantic_ai.models import Model

from testkit.doors import Reply, Seen, TurnScript

__all__ = ('PROVIDERS', 'ProviderKind', 'ProviderMock', 'mock_for', 'provider_model')

ProviderKind = Literal['openai_chat', 'openai_responses', 'anthropic', 'google']
PROVIDERS: tuple[ProviderKind, ...] = ('openai_chat', 'openai_responses', 'anthropic', 'google')

Json = dict[str, Any]


class Refused(Exception):
    """A request the real API would answer with HTTP 400: what it says, and where in the body (`param`)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def sign(text: str) -> str:
    """The signature a mock gives reasoning it sent, so it can tell its own back from an altered or made-up one."""
    return hashlib.sha256(f'mock-signature:{text}'.encode()).hexdigest()[:32]


def tokens(value: object) -> int:
    """A rough, deterministic token count for usage blocks: a token per four characters of JSON."""
    return max(1, len(json.dumps(value)) // 4)


@dataclass
class ProviderMock(ABC):
    """One provider's endpoint: reads and checks a request body, asks the script, writes the response body."""

    script: TurnScript
    refusals: list[str] = field(default_factory=list[str])
    """What every HTTP 400 said, in order."""
    answered: int = 0
    """Responses sent (each a distinct response id)."""

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body: Json = json.loads(request.content)
        try:
            if body.get('stream'):
                # The doors call `agent.run`; a streamed request here would mean the test no longer tests what it says.
                raise Refused('this mock answers non-streaming requests only', 'stream')
            seen = self.read(body)
            try:
                reply = self.script.respond(seen)
            except AssertionError as error:
                # As a 400, not an exception out of the transport: the SDKs would take that for a broken connection
                # and retry it, asking the script again.
                raise Refused(f'the script refused the request: {error}') from error
        except Refused as refusal:
            self.refusals.append(refusal.message)
            return httpx2.Response(400, json=self.error(refusal))
        self.answered += 1
        return httpx2.Response(200, json=self.render(reply, body))

    @abstractmethod
    def read(self, body: Json) -> list[Seen]:
        """The request as the model reads it, refusing (`Refused`) what the real API refuses."""

    @abstractmethod
    def render(self, reply: Reply, body: Json) -> Json:
        """`reply` as the provider's response body."""

    @abstractmethod
    def error(self, refusal: Refused) -> Json:
        """The provider's error body for a 400."""

    @abstractmethod
    def model(self) -> Model:
        """pydantic-ai's model class for this provider, its provider's HTTP client on this mock."""

    def client(self) -> httpx2.AsyncClient:
        # A real provider's long timeout (the Google provider warns at httpx's 5 seconds); nothing waits on it here.
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle), timeout=600)


def _text(content: object) -> str:
    """A message's text, whether the API took it as a string or as a list of text parts."""
    if content is None:
        return ''
    if isinstance(content, str):
        return content
    assert isinstance(content, list), content
    return ''.join(part['text'] for part in content if isinstance(part, dict) and 'text' in part)


def _user_texts(content: object) -> list[Seen]:
    """A user message's text as the model reads it: each text part on its own (pydantic-ai sends a summary and the
    prompt after it as two parts of one message where the API combines turns)."""
    if isinstance(content, list):
        texts = [part['text'] for part in content if isinstance(part, dict) and 'text' in part]
        return [Seen('user', text) for text in texts] or [Seen('user')]
    return [Seen('user', _text(content))]


def _append_results(seen: list[Seen], results: list[tuple[str, str]]) -> None:
    """Tool results as one tool message of the neutral view, consecutive ones together."""
    if not results:
        return
    if seen and seen[-1].role == 'tool':
        seen[-1].results.extend(results)
    else:
        seen.append(Seen('tool', results=list(results)))


# OpenAI Chat Completions (https://platform.openai.com/docs/api-reference/chat), as OpenAI-compatible servers speak it:
# `tool_calls` with the ids the server numbers (`call_0`, ...), and the reasoning in the message's `reasoning_content`,
# as DeepSeek, vLLM and others send it (pydantic-ai reads it into a `ThinkingPart` and sends it back in that field).


@dataclass
class OpenAIChatMock(ProviderMock):
    def model(self) -> Model:
        # Each model's SDK imports here, when a test builds one: at module level all three cost every test worker
        # seconds at collection, for the few quick-tier tests that use them.
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        return OpenAIChatModel('gpt-4o', provider=OpenAIProvider(api_key='test', http_client=self.client()))

    def read(self, body: Json) -> list[Seen]:
        messages: list[Json] = body['messages']
        seen: list[Seen] = []
        for index, message in enumerate(messages):
            role = message['role']
            if role in ('system', 'developer'):
                seen.append(Seen('system', _text(message['content'])))
            elif role == 'user':
                seen += _user_texts(message['content'])
            elif role == 'assistant':
                calls = [
                    (call['id'], call['function']['name'], json.loads(call['function']['arguments']))
                    for call in message.get('tool_calls') or []
                ]
                seen.append(Seen('assistant', _text(message.get('content')), calls))
                self._check_answered(messages, index, calls)
            elif role == 'tool':
                self._check_result(messages, index)
                _append_results(seen, [(message['tool_call_id'], _text(message['content']))])
            else:
                raise Refused(f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'tool'.")
        return seen

    @staticmethod
    def _check_result(messages: list[Json], index: int) -> None:
        """A tool message answers a call of the assistant message before it (other tool messages between)."""
        before = index - 1
        while before >= 0 and messages[before]['role'] == 'tool':
            before -= 1
        if before < 0 or not messages[before].get('tool_calls'):
            raise Refused(
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                "'tool_calls'.",
                f'messages.[{index}].role',
            )
        call_id = messages[index]['tool_call_id']
        if call_id not in {call['id'] for call in messages[before]['tool_calls']}:
            raise Refused(
                f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' of previous message.",
                f'messages.[{index}].tool_call_id',
            )

    @staticmethod
    def _check_answered(messages: list[Json], index: int, calls: list[tuple[str, str, Json]]) -> None:
        """Every call of an assistant message is answered by the tool messages right after it."""
        answered: set[str] = set()
        for after in messages[index + 1 :]:
            if after['role'] != 'tool':
                break
            answered.add(after['tool_call_id'])
        missing = [call_id for call_id, _, _ in calls if call_id not in answered]
        if missing:
            raise Refused(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(missing)}",
                f'messages.[{index}].role',
            )

    def render(self, reply: Reply, body: Json) -> Json:
        message: Json = {'role': 'assistant', 'content': reply.text, 'refusal': None}
        if reply.thinking is not None:
            message['reasoning_content'] = reply.thinking
        if reply.calls:
            message['tool_calls'] = [
                {'id': call_id, 'type': 'function', 'function': {'name': name, 'arguments': json.dumps(arguments)}}
                for call_id, name, arguments in reply.calls
            ]
        completion = tokens(message)
        return {
            'id': f'chatcmpl-mock{self.answered}',
            'object': 'chat.completion',
            'created': 1_760_000_000 + self.answered,
            'model': body['model'],
            'choices': [
                {
                    'index': 0,
                    'message': message,
                    'finish_reason': 'tool_calls' if reply.calls else 'stop',
                    'logprobs': None,
                }
            ],
            'usage': {
                'prompt_tokens': tokens(body['messages']),
                'completion_tokens': completion,
                'total_tokens': tokens(body['messages']) + completion,
                'completion_tokens_details': {'reasoning_tokens': tokens(reply.thinking or '')},
            },
        }

    def error(self, refusal: Refused) -> Json:
        return {
            'error': {'message': refusal.message, 'type': 'invalid_request_error', 'param': refusal.param, 'code': None}
        }


# OpenAI Responses (https://platform.openai.com/docs/api-reference/responses): output items, a `reasoning` item (its
# summary and `encrypted_content`, which pydantic-ai asks for and sends back) before the `function_call` items, each
# with the script's `call_id` and an item `id` of its own. The API refuses an output with no call of its `call_id`
# earlier in the input, a call with no output, a reasoning model's call item sent without the reasoning item it came
# with, an item twice, and reasoning whose encrypted content it did not issue.


@dataclass
class OpenAIResponsesMock(ProviderMock):
    reasoning_of: dict[str, str] = field(default_factory=dict[str, str])
    """The reasoning item id each `function_call` item id was issued with."""

    def model(self) -> Model:
        from pydantic_ai.models.openai import OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider

        return OpenAIResponsesModel('gpt-6.1-sol', provider=OpenAIProvider(api_key='test', http_client=self.client()))

    def read(self, body: Json) -> list[Seen]:
        items: list[Json] = body['input']
        seen: list[Seen] = [Seen('system', body['instructions'])] if body.get('instructions') else []
        self._check(items)
        for item in items:
            kind = item.get('type', 'message')
            if kind == 'message':
                role = item['role']
                if role in ('system', 'developer'):
                    seen.append(Seen('system', _text(item['content'])))
                elif role == 'user':
                    seen += _user_texts(item['content'])
                else:
                    self._assistant(seen).text += _text(item['content'])
            elif kind == 'reasoning':
                self._assistant(seen)
            elif kind == 'function_call':
                self._assistant(seen).calls.append((item['call_id'], item['name'], json.loads(item['arguments'])))
            elif kind == 'function_call_output':
                _append_results(seen, [(item['call_id'], _text(item['output']))])
            else:
                raise Refused(f"Invalid value: '{kind}'.", 'input')
        return seen

    @staticmethod
    def _assistant(seen: list[Seen]) -> Seen:
        """The assistant message that output items next to each other form: one response's items."""
        if not seen or seen[-1].role != 'assistant':
            seen.append(Seen('assistant'))
        return seen[-1]

    def _check(self, items: list[Json]) -> None:
        ids = [item['id'] for item in items if item.get('id')]
        for item_id in ids:
            if ids.count(item_id) > 1:
                raise Refused(f'Duplicate item found with id {item_id}. Remove the duplicate items from your input.')
        calls: set[str] = set()
        for index, item in enumerate(items):
            kind = item.get('type')
            if kind == 'reasoning' and item.get('encrypted_content') != sign(item['id']):
                raise Refused(f'The encrypted content for item {item["id"]} could not be verified.', 'input')
            if kind == 'function_call':
                calls.add(item['call_id'])
                required = self.reasoning_of.get(item.get('id') or '')
                group = self._response_items_before(items, index)
                if required is not None and required not in {
                    i.get('id') for i in group if i.get('type') == 'reasoning'
                }:
                    raise Refused(
                        f"Item '{item['id']}' of type 'function_call' was provided without its required 'reasoning' "
                        f"item: '{required}'.",
                        'input',
                    )
                if not any(
                    later.get('type') == 'function_call_output' and later['call_id'] == item['call_id']
                    for later in items[index + 1 :]
                ):
                    raise Refused(f'No tool output found for function call {item["call_id"]}.', 'input')
            if kind == 'function_call_output' and item['call_id'] not in calls:
                raise Refused(f'No tool call found for function call output with call_id {item["call_id"]}.', 'input')

    @staticmethod
    def _response_items_before(items: list[Json], index: int) -> Iterator[Json]:
        """The output items right before `items[index]`: the response it came in."""
        while index > 0 and items[index - 1].get('type') in ('reasoning', 'function_call'):
            index -= 1
            yield items[index]

    def render(self, reply: Reply, body: Json) -> Json:
        n = self.answered
        output: list[Json] = []
        if reply.thinking is not None:
            reasoning_id = f'rs_mock{n}'
            output.append(
                {
                    'type': 'reasoning',
                    'id': reasoning_id,
                    'summary': [{'type': 'summary_text', 'text': reply.thinking}],
                    'encrypted_content': sign(reasoning_id),
                }
            )
        for i, (call_id, name, arguments) in enumerate(reply.calls):
            item_id = f'fc_mock{n}_{i}'
            if reply.thinking is not None:
                self.reasoning_of[item_id] = f'rs_mock{n}'
            output.append(
                {
                    'type': 'function_call',
                    'id': item_id,
                    'call_id': call_id,
                    'name': name,
                    'arguments': json.dumps(arguments),
                    'status': 'completed',
                }
            )
        if reply.text is not None:
            output.append(
                {
                    'type': 'message',
                    'id': f'msg_mock{n}',
                    'role': 'assistant',
                    'status': 'completed',
                    'content': [{'type': 'output_text', 'text': reply.text, 'annotations': []}],
                }
            )
        completion = tokens(output)
        return {
            'id': f'resp_mock{n}',
            'object': 'response',
            'created_at': 1_760_000_000 + n,
            'status': 'completed',
            'model': body['model'],
            'output': output,
            'parallel_tool_calls': True,
            'tool_choice': 'auto',
            'tools': [],
            'usage': {
                'input_tokens': tokens(body['input']),
                'input_tokens_details': {'cached_tokens': 0},
                'output_tokens': completion,
                'output_tokens_details': {'reasoning_tokens': tokens(reply.thinking or '')},
                'total_tokens': tokens(body['input']) + completion,
            },
        }

    def error(self, refusal: Refused) -> Json:
        return {
            'error': {'message': refusal.message, 'type': 'invalid_request_error', 'param': refusal.param, 'code': None}
        }


# Anthropic Messages (https://docs.anthropic.com/en/api/messages): a `message` whose content is a `thinking` block with
# its signature, then `tool_use` blocks (ids as the script numbers them; Anthropic's own `toolu_...` are unique, as the
# script's unique numbering is) or a `text` block. The API combines consecutive turns of one role, then wants the first
# turn a user's, every `tool_use` answered by `tool_result` blocks at the start of the next turn, every `tool_result`
# answering a `tool_use` of the turn before, and each thinking block sent back with the signature it was issued.


@dataclass
class AnthropicMock(ProviderMock):
    def model(self) -> Model:
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        # `max_tokens` set: without it pydantic-ai asks for the model's maximum output, which the SDK streams.
        provider = AnthropicProvider(api_key='test', http_client=self.client())
        return AnthropicModel('claude-sonnet-5-5', provider=provider, settings={'max_tokens': 4096})

    def read(self, body: Json) -> list[Seen]:
        system = body.get('system')
        seen: list[Seen] = [Seen('system', _text(system))] if system else []
        messages: list[Json] = body['messages']
        self._check(messages)
        for message in messages:
            blocks = self._blocks(message)
            if message['role'] == 'system':
                seen.append(Seen('system', _text(blocks)))
            elif message['role'] == 'user':
                results = [
                    (block['tool_use_id'], _text(block.get('content')))
                    for block in blocks
                    if block['type'] == 'tool_result'
                ]
                _append_results(seen, results)
                texts = [block for block in blocks if block['type'] == 'text']
                if texts or not results:
                    seen += _user_texts(texts)
            else:
                calls = [(b['id'], b['name'], b['input']) for b in blocks if b['type'] == 'tool_use']
                seen.append(Seen('assistant', _text([b for b in blocks if b['type'] == 'text']), calls))
        return seen

    @staticmethod
    def _blocks(message: Json) -> list[Json]:
        content = message['content']
        return [{'type': 'text', 'text': content}] if isinstance(content, str) else list(content)

    def _check(self, messages: list[Json]) -> None:
        for index, message in enumerate(messages):
            for position, block in enumerate(self._blocks(message)):
                if block['type'] == 'thinking' and block.get('signature') != sign(block['thinking']):
                    raise Refused(f'messages.{index}.content.{position}: Invalid `signature` in `thinking` block')
        # Consecutive user or assistant turns are combined into one turn, as the API documents; a system entry
        # stands between turns.
        turns: list[tuple[int, str, list[Json]]] = []
        for index, message in enumerate(messages):
            if turns and message['role'] != 'system' and turns[-1][1] == message['role']:
                turns[-1][2].extend(self._blocks(message))
            else:
                turns.append((index, message['role'], self._blocks(message)))
        conversation = [turn for turn in turns if turn[1] != 'system']
        if not conversation or conversation[0][1] != 'user':
            raise Refused('messages: first message must use the "user" role', 'messages')
        for number, (index, role, blocks) in enumerate(turns):
            uses = [block['id'] for block in blocks if block['type'] == 'tool_use']
            if role == 'assistant' and uses and number + 1 < len(turns):
                next_index, next_role, next_blocks = turns[number + 1]
                leading: list[str] = []
                for block in next_blocks if next_role == 'user' else []:
                    if block['type'] != 'tool_result':
                        break
                    leading.append(block['tool_use_id'])
                missing = [use for use in uses if use not in leading]
                if missing:
                    raise Refused(
                        f'messages.{next_index}: `tool_use` ids were found without `tool_result` blocks immediately '
                        f'after: {", ".join(missing)}. Each `tool_use` block must have a corresponding `tool_result` '
                        'block in the next message.'
                    )
            if role != 'user':
                continue
            before = turns[number - 1] if number else None
            called = (
                {b['id'] for b in before[2] if b['type'] == 'tool_use'}
                if before and before[1] == 'assistant'
                else set()
            )
            for position, block in enumerate(blocks):
                if block['type'] == 'tool_result' and block['tool_use_id'] not in called:
                    raise Refused(
                        f'messages.{index}.content.{position}: unexpected `tool_use_id` found in `tool_result` blocks: '
                        f'{block["tool_use_id"]}. Each `tool_result` block must have a corresponding `tool_use` block '
                        'in the previous message.'
                    )

    def render(self, reply: Reply, body: Json) -> Json:
        content: list[Json] = []
        if reply.thinking is not None:
            content.append({'type': 'thinking', 'thinking': reply.thinking, 'signature': sign(reply.thinking)})
        content += [{'type': 'tool_use', 'id': i, 'name': name, 'input': args} for i, name, args in reply.calls]
        if reply.text is not None:
            content.append({'type': 'text', 'text': reply.text})
        return {
            'id': f'msg_mock{self.answered}',
            'type': 'message',
            'role': 'assistant',
            'model': body['model'],
            'content': content,
            'stop_reason': 'tool_use' if reply.calls else 'end_turn',
            'stop_sequence': None,
            'usage': {'input_tokens': tokens(body['messages']), 'output_tokens': tokens(content)},
        }

    def error(self, refusal: Refused) -> Json:
        return {
            'type': 'error',
            'error': {'type': 'invalid_request_error', 'message': refusal.message},
            'request_id': f'req_mock{len(self.refusals)}',
        }


# Google Gemini `generateContent` (https://ai.google.dev/api/generate-content): a candidate whose parts are a thought
# (`thought: true`) and `functionCall` parts, the first carrying the `thoughtSignature` Gemini 3 requires back, or a
# text part. Gemini may leave a call's `id` out, and does unless asked; pydantic-ai then makes one up (`pyd_ai_...`)
# and sends it back: the unique numbering sends no id, so that path runs; the others send the script's `call_0`... The
# API wants a function call turn right after a user or function response turn, answered by the next turn with as many
# function responses, and within the current turn each call turn's first call signed as it was issued.


@dataclass
class GoogleMock(ProviderMock):
    def model(self) -> Model:
        from pydantic_ai.models.google import GoogleModel
        from pydantic_ai.providers.google import GoogleProvider

        return GoogleModel('gemini-3.1-pro-preview', provider=GoogleProvider(api_key='test', http_client=self.client()))

    def read(self, body: Json) -> list[Seen]:
        instruction = body.get('systemInstruction')
        seen: list[Seen] = [Seen('system', _text(instruction['parts']))] if instruction else []
        contents: list[Json] = body['contents']
        self._check(contents)
        for content in contents:
            parts: list[Json] = content['parts']
            if content.get('role') == 'model':
                calls = [
                    (p['functionCall'].get('id') or '', p['functionCall']['name'], p['functionCall'].get('args') or {})
                    for p in parts
                    if 'functionCall' in p
                ]
                text = _text([p for p in parts if 'text' in p and not p.get('thought')])
                seen.append(Seen('assistant', text, calls))
                continue
            results = [
                (p['functionResponse'].get('id') or '', self._response_text(p['functionResponse']['response']))
                for p in parts
                if 'functionResponse' in p
            ]
            _append_results(seen, results)
            texts = [p for p in parts if 'text' in p]
            if texts or not results:
                seen += _user_texts(texts)
        return seen

    @staticmethod
    def _response_text(response: Json) -> str:
        """A function response's text: its `return_value`, `output` or `error`, as pydantic-ai wraps a tool's return."""
        for key in ('return_value', 'output', 'error'):
            if isinstance(response.get(key), str):
                return str(response[key])
        return json.dumps(response)

    def _check(self, contents: list[Json]) -> None:
        def calls(content: Json | None) -> list[Json]:
            if content is None or content.get('role') != 'model':
                return []
            return [part for part in content['parts'] if 'functionCall' in part]

        def responses(content: Json | None) -> list[Json]:
            return [] if content is None else [part for part in content['parts'] if 'functionResponse' in part]

        current = max((i for i, c in enumerate(contents) if c.get('role') != 'model' and not responses(c)), default=0)
        for index, content in enumerate(contents):
            before = contents[index - 1] if index else None
            after = contents[index + 1] if index + 1 < len(contents) else None
            if calls(content):
                if before is None or before.get('role') == 'model':
                    raise Refused(
                        'Please ensure that function call turn comes immediately after a user turn or after a function '
                        'response turn.'
                    )
                if after is not None and len(responses(after)) != len(calls(content)):
                    raise Refused(
                        'Please ensure that the number of function response parts is equal to the number of function '
                        'call parts of the function call turn.'
                    )
                first = calls(content)[0]
                if index > current and first.get('thoughtSignature') != self._signature(first['functionCall']):
                    raise Refused(
                        'Function call is missing a thought_signature in functionCall parts. This is required for '
                        f'tools to work correctly. Additional data, function call `{first["functionCall"]["name"]}`, '
                        f'position {index + 1}.'
                    )
            if responses(content) and not calls(before):
                raise Refused('Please ensure that function response turn comes immediately after a function call turn.')

    @staticmethod
    def _signature(call: Json) -> str:
        """The thought signature (bytes, base64 in JSON) a call turn's first call is issued with."""
        return base64.b64encode(sign(json.dumps([call['name'], call.get('args')], sort_keys=True)).encode()).decode()

    def render(self, reply: Reply, body: Json) -> Json:
        parts: list[Json] = [] if reply.thinking is None else [{'text': reply.thinking, 'thought': True}]
        for number, (call_id, name, arguments) in enumerate(reply.calls):
            call: Json = {'name': name, 'args': arguments}
            if self.script.numbering != 'unique':
                call['id'] = call_id
            part: Json = {'functionCall': call}
            if number == 0:
                part['thoughtSignature'] = self._signature(call)
            parts.append(part)
        if reply.text is not None:
            parts.append({'text': reply.text})
        prompt, candidates = tokens(body['contents']), tokens(parts)
        return {
            'candidates': [{'content': {'role': 'model', 'parts': parts}, 'finishReason': 'STOP', 'index': 0}],
            'usageMetadata': {
                'promptTokenCount': prompt,
                'candidatesTokenCount': candidates,
                'thoughtsTokenCount': tokens(reply.thinking or ''),
                'totalTokenCount': prompt + candidates,
            },
            'modelVersion': 'gemini-3.1-pro-preview',
            'responseId': f'mock{self.answered}',
        }

    def error(self, refusal: Refused) -> Json:
        return {'error': {'code': 400, 'message': refusal.message, 'status': 'INVALID_ARGUMENT'}}


MOCKS: dict[ProviderKind, type[ProviderMock]] = {
    'openai_chat': OpenAIChatMock,
    'openai_responses': OpenAIResponsesMock,
    'anthropic': AnthropicMock,
    'google': GoogleMock,
}


def mock_for(kind: ProviderKind, script: TurnScript) -> ProviderMock:
    """The endpoint of provider `kind`, answering as `script` says."""
    return MOCKS[kind](script)


def provider_model(kind: ProviderKind, script: TurnScript) -> Model:
    """pydantic-ai's own model class for provider `kind`, on a mock endpoint answering as `script` says."""
    return mock_for(kind, script).model()
