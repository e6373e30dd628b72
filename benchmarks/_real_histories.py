"""Histories shaped as real models and servers produce them, and a brute-force check of pair safety by position.

`real_history(n, seed)` is the first `n` messages of an endless conversation, the same for the same seed. What
it holds is what synthetic histories with unique ids leave out and real ones are full of:

- tool call ids numbered afresh in every response, `call_0`, `call_1`, ..., as many OpenAI-compatible servers
  do, so the same id comes back turn after turn; native (builtin) calls share that numbering;
- parallel calls whose returns come back out of order, some with an image (`BinaryContent`) in them;
- retried calls: a `ToolReturnPart(outcome='retried')`, then the same tool called again (as `call_0` again);
- output validation retries (`RetryFeedbackPart`), after a bad answer, an empty response or a response that
  is only thinking;
- `ThinkingPart`s, `NativeToolCallPart`/`NativeToolReturnPart` pairs, answers carrying a `FilePart`;
- runs that end on a call waiting for approval, answered at the start of the next run;
- a system prompt at the head, and a user prompt opening every turn.

`PairOracle` pairs a history's calls and returns by position, as the providers do: a return answers the call
with its id in the nearest preceding response. It knows nothing of the processors' code, so it can judge it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Generator, Iterator, Sequence
from itertools import islice

from _bench_util import sentence
from pydantic_ai.messages import (
    BaseToolCallPart,
    BinaryContent,
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackCause,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolRetryCause,
    ToolReturnContent,
    ToolReturnPart,
    UserPromptPart,
)

DEFAULT_SEED = 20_260_426

SYSTEM_PROMPT = (
    'You are an operations assistant for an e-commerce company. Use the tools to look up orders, invoices, '
    'customers and shipments; search the web only for carriers and public holidays; never guess an identifier; '
    'ask before anything that cannot be undone; answer concisely.'
)
_TOOLS = ('search_orders', 'get_invoice', 'lookup_customer', 'track_shipment', 'query_metrics', 'screenshot_page')
_APPROVAL_TOOLS = ('refund_order', 'cancel_order', 'delete_customer')
"""Tools that wait for a person's approval: the run ends on the call, and the next run opens with its answer."""
_VOCABULARY = (
    'order customer invoice shipment warehouse refund status account balance report carrier delay region error '
    'timeout retry schema table column query result request response summary estimate forecast ticket priority '
    'owner deadline review draft approve update create search filter page limit token session'
)
_WORDS = tuple(_VOCABULARY.split())
_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'

_STEPS = (*['tools'] * 8, 'native', 'native', 'bad output', 'empty', 'thinking only')
"""What a model does between a turn's request and its final response, drawn with these weights."""
_FINALS = ('answer', 'answer', 'answer', 'thinking answer', 'file', 'native answer', 'awaits approval')
"""How a turn's final response looks."""


class _Material:
    """Texts and images of realistic sizes, made up front so that building 100k messages stays fast."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._texts = [sentence(rng, _WORDS, rng.randint(40, 1_200)) for _ in range(2_048)]
        self._images = [_PNG_SIGNATURE + rng.randbytes(rng.randint(1_000, 6_000)) for _ in range(16)]

    def text(self, most: int = 1_200) -> str:
        return self.rng.choice(self._texts)[:most]

    def image(self) -> BinaryContent:
        return BinaryContent(data=self.rng.choice(self._images), media_type='image/png')

    def args(self) -> str | dict[str, object]:
        """A call's arguments: a JSON string, as OpenAI-compatible servers send them, or a dict."""
        args: dict[str, object] = {'query': self.text(80), 'limit': self.rng.choice((10, 25, 50))}
        return json.dumps(args) if self.rng.random() < 0.7 else args


def _thinking(material: _Material) -> ThinkingPart:
    return ThinkingPart(content=material.text(), signature=f'sig-{material.rng.getrandbits(64):016x}')


class _Conversation:
    """The endless conversation: its messages alternate requests and responses, starting with a request."""

    def __init__(self, seed: int) -> None:
        self.material = _Material(random.Random(seed))
        self.rng = self.material.rng

    def messages(self) -> Iterator[ModelMessage]:
        waiting: list[ToolCallPart] = []
        first = True
        while True:
            parts: list[ModelRequestPart] = [SystemPromptPart(content=SYSTEM_PROMPT)] if first else []
            parts += [self._answer(call, 'success') for call in waiting]
            parts.append(self._prompt())
            yield ModelRequest(parts=parts)
            first = False
            waiting = yield from self._run()

    def _prompt(self) -> UserPromptPart:
        if self.rng.random() < 0.05:
            return UserPromptPart(content=[self.material.text(300), self.material.image()])
        return UserPromptPart(content=self.material.text(400))

    def _run(self) -> Generator[ModelMessage, None, list[ToolCallPart]]:
        """A run's responses and the requests between them; returns the calls its last response left waiting."""
        retried: list[ToolCallPart] = []
        for _ in range(self.rng.choice((0, 1, 1, 2, 2, 3, 4))):
            retried = yield from self._step(self.rng.choice(_STEPS), retried)
        while retried:  # a retried call is made again before the model answers
            retried = yield from self._step('tools', retried)
        response = self._final(self.rng.choice(_FINALS))
        yield response
        return [part for part in response.parts if isinstance(part, ToolCallPart)]

    def _step(self, kind: str, retried: list[ToolCallPart]) -> Generator[ModelMessage, None, list[ToolCallPart]]:
        """One response that isn't the run's last, and the request answering it; returns the calls retried."""
        if kind == 'tools' or retried:
            response = self._tool_calls([call.tool_name for call in retried])
            yield response
            calls = [part for part in response.parts if isinstance(part, ToolCallPart)]
            outcomes = ['retried' if self.rng.random() < 0.1 else 'success' for _ in calls]
            answers = [self._answer(call, outcome) for call, outcome in zip(calls, outcomes, strict=True)]
            self.rng.shuffle(answers)  # parallel calls finish in any order
            yield ModelRequest(parts=answers)
            return [call for call, outcome in zip(calls, outcomes, strict=True) if outcome == 'retried']
        if kind == 'native':
            call = self._tool_call(1, self.rng.choice(_TOOLS))
            yield ModelResponse(parts=[*self._native(0), call], model_name='openai-compatible')
            yield ModelRequest(parts=[self._answer(call, 'success')])
            return []
        if kind == 'bad output':
            yield ModelResponse(parts=[TextPart(content=self.material.text(200))], model_name='openai-compatible')
            retry = RetryInfo[RetryFeedbackCause](cause='validation_error', attempt=1, max_retries=3)
        else:
            parts: list[ModelResponsePart] = [] if kind == 'empty' else [_thinking(self.material)]
            yield ModelResponse(parts=parts, model_name='openai-compatible')
            retry = RetryInfo[RetryFeedbackCause](cause='no_output', attempt=1, max_retries=3)
        yield ModelRequest(parts=[RetryFeedbackPart(content=f'Please try again: {retry.cause}.', retry=retry)])
        return []

    def _tool_calls(self, again: list[str]) -> ModelResponse:
        """A response with parallel calls numbered from `call_0`: the tools retried, or 1-3 new ones."""
        parts: list[ModelResponsePart] = [_thinking(self.material)] if self.rng.random() < 0.4 else []
        if self.rng.random() < 0.3:
            parts.append(TextPart(content=self.material.text(150)))
        names = again or [self.rng.choice(_TOOLS) for _ in range(self.rng.choice((1, 1, 2, 2, 3)))]
        parts += [self._tool_call(number, name) for number, name in enumerate(names)]
        return ModelResponse(parts=parts, model_name='openai-compatible')

    def _tool_call(self, number: int, name: str) -> ToolCallPart:
        return ToolCallPart(tool_name=name, args=self.material.args(), tool_call_id=f'call_{number}')

    def _native(self, number: int) -> list[ModelResponsePart]:
        """A builtin web search: the provider runs it, so its call and return sit in the same response."""
        call_id = f'call_{number}'
        return [
            NativeToolCallPart(tool_name='web_search', args={'query': self.material.text(60)}, tool_call_id=call_id),
            NativeToolReturnPart(tool_name='web_search', content=self.material.text(), tool_call_id=call_id),
        ]

    def _answer(self, call: ToolCallPart, outcome: str) -> ToolReturnPart:
        if outcome == 'retried':
            return ToolReturnPart(
                tool_name=call.tool_name,
                content=f'Validation error in the arguments: {self.material.text(120)}',
                tool_call_id=call.tool_call_id,
                outcome='retried',
                retry=RetryInfo[ToolRetryCause](cause='validation_error', attempt=1, max_retries=3),
            )
        content: ToolReturnContent = self.material.text()
        if call.tool_name == 'screenshot_page' or self.rng.random() < 0.05:
            content = [self.material.text(200), self.material.image()]
        return ToolReturnPart(tool_name=call.tool_name, content=content, tool_call_id=call.tool_call_id)

    def _final(self, kind: str) -> ModelResponse:
        text = TextPart(content=self.material.text())
        parts: list[ModelResponsePart]
        match kind:
            case 'thinking answer':
                parts = [_thinking(self.material), text]
            case 'file':
                parts = [text, FilePart(content=self.material.image())]
            case 'native answer':
                parts = [*self._native(0), text]
            case 'awaits approval':
                parts = [text, self._tool_call(0, self.rng.choice(_APPROVAL_TOOLS))]
            case _:
                parts = [text]
        return ModelResponse(parts=parts, model_name='openai-compatible')


def real_history(length: int, seed: int = DEFAULT_SEED) -> list[ModelMessage]:
    """The first `length` messages of the conversation `seed` makes: a prefix of any longer one."""
    return list(islice(_Conversation(seed).messages(), length))


def _answered_id(part: object) -> str | None:
    """The id a part answers: a tool return or retry of any kind (what isn't a call but names one)."""
    tool_call_id = getattr(part, 'tool_call_id', None)
    return tool_call_id if isinstance(tool_call_id, str) and not isinstance(part, BaseToolCallPart) else None


class PairOracle:
    """Every call and return of one history, paired by position, by brute force.

    An answer's call is the last call with its id in the nearest response at or before it (a native return
    follows its call in the same response). A window is judged by the identity of its parts: a processor
    keeps the history's own part objects, and adds only parts that name no tool call (summary, system prompt,
    answers turned into text).
    """

    def __init__(self, history: Sequence[ModelMessage]) -> None:
        self._call_of: dict[int, BaseToolCallPart] = {}
        self._answers: dict[int, list[tuple[int, ModelRequestPart | ModelResponsePart]]] = {}
        self._tool_parts: set[int] = set()
        for index, message in enumerate(history):
            for position, part in enumerate(message.parts):
                if getattr(part, 'tool_call_id', None) is not None:
                    self._tool_parts.add(id(part))
                tool_call_id = _answered_id(part)
                call = None if tool_call_id is None else _call_before(history, index, position, tool_call_id)
                if call is not None:
                    self._call_of[id(part)] = call
                    self._answers.setdefault(id(call), []).append((index, part))

    def problems(self, window: Sequence[ModelMessage], source_length: int) -> list[str]:
        """How `window`, made from the history's first `source_length` messages, breaks pair safety.

        A return's call must be in the window; a call answered in the source must have its answers in the
        window, unless the call is in the window's last message. A window never opens with a response.
        """
        if not window:
            return ['an empty window']
        found = ['the window opens with a model response'] if isinstance(window[0], ModelResponse) else []
        present = {id(part) for message in window for part in message.parts}
        last = {id(part) for part in window[-1].parts}
        for message in window:
            for part in message.parts:
                tool_call_id = getattr(part, 'tool_call_id', None)
                if tool_call_id is not None and id(part) not in self._tool_parts:
                    found.append(f'a {type(part).__name__} ({tool_call_id}) that is not in the history')
                call = self._call_of.get(id(part))
                if call is not None and id(call) not in present:
                    found.append(f'a {type(part).__name__} to {tool_call_id} without its call')
                missing = [
                    answer
                    for index, answer in self._answers.get(id(part), [])
                    if index < source_length and id(answer) not in present
                ]
                if missing and id(part) not in last:
                    found.append(f'a {type(part).__name__} ({tool_call_id}) without its answer')
        return found


def _call_before(
    history: Sequence[ModelMessage], index: int, position: int, tool_call_id: str
) -> BaseToolCallPart | None:
    """The call that the part at `history[index].parts[position]` answers, if the history holds one."""
    for at in range(index, -1, -1):
        message = history[at]
        if not isinstance(message, ModelResponse):
            continue
        parts = message.parts[:position] if at == index else message.parts
        calls = [part for part in parts if isinstance(part, BaseToolCallPart) and part.tool_call_id == tool_call_id]
        if calls:
            return calls[-1]
    return None
