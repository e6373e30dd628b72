"""Long tool-using conversations through each door, scripted as real models send them, and what each request held.

A `TurnScript` is the model's side of the conversation, written once over a provider-neutral view of a request
(`Seen`): each turn it calls `lookup` (with ids numbered as the server under test numbers them: unique, `call_0`
every turn, or `call_0`/`call_1` in every response), thinks first, fumbles the arguments every 7th turn so
pydantic-ai sends a retry, and answers once every result came back. It checks every request as a strict
provider would, and records what it found: a tool result that is not the tool's real output, or not right after
its call, or a result moved into user text, is a problem; so is a turn that needs more requests than the script.

`function_model(script)` is that script as a pydantic-ai `FunctionModel`; testkit's provider mocks give the same
script behind pydantic-ai's real provider models. `run_door` drives 40 turns through one door:

- `sliding_window` / `summarization`: the capabilities on a plain agent, the history carried by hand;
- `session`: `Session.run` on a store whose processor summarizes;
- `conversations`: `store.conversations.load` + `agent.run(conversation=)` + `save`.

Each turn runs under a wall-clock guard, so a door that spins fails instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import faulthandler
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    BaseToolCallPart,
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from processors import ContextSize, SlidingWindow, SummarizationProcessor
from processors.capabilities import as_capability
from session_store import SessionStore
from testkit.scripted import NEW_MESSAGES, RecordingSummarizer

__all__ = (
    'DOORS',
    'NUMBERINGS',
    'Door',
    'DoorReport',
    'Numbering',
    'Reply',
    'Seen',
    'TurnScript',
    'function_model',
    'run_door',
)

Numbering = Literal['unique', 'call_0', 'call_0_call_1']
"""How the server numbers tool calls: unique ids, `call_0` in every response, or `call_0` and `call_1` (two
parallel calls) in every response."""
NUMBERINGS: tuple[Numbering, ...] = ('unique', 'call_0', 'call_0_call_1')

Door = Literal['sliding_window', 'summarization', 'session', 'conversations']
DOORS: tuple[Door, ...] = ('sliding_window', 'summarization', 'session', 'conversations')

TRIGGER = 20
"""Messages in a window that fire a compaction, in every door."""
KEEP = 6
"""Messages the compaction keeps."""
MAX_WINDOW = 30
"""No request may hold more messages once a compaction is due."""
SYSTEM = 'You look orders up with the lookup tool, then answer.'
PROMPT = re.compile(r'^turn (\d+)$')
TURN_TIMEOUT = 30.0
"""Seconds one turn may take before the door is taken to spin: ample on a loaded machine (a turn takes
milliseconds), and no assertion on speed."""


@dataclass
class Seen:
    """One message of a request as the model reads it, whatever the provider's format."""

    role: Literal['system', 'user', 'assistant', 'tool']
    text: str = ''
    """What a system or user message says (a summary rides as user text), or an assistant's answer."""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list[tuple[str, str, dict[str, Any]]])
    """An assistant message's tool calls: id, tool name, arguments."""
    results: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    """A tool message's results, in order: the id of the call each answers, and the result as text."""


@dataclass
class Reply:
    """What the model answers a request with."""

    thinking: str | None = None
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list[tuple[str, str, dict[str, Any]]])
    text: str | None = None


def tool_output(q: str) -> str:
    """What the `lookup` tool returns for `q`: a test knows the real output when it sees it."""
    return f'found {q}'


@dataclass
class TurnScript:
    """The model's side of a long conversation: a tool call each turn, a retry every `retry_every`-th."""

    numbering: Numbering
    retry_every: int = 7
    requests: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    """(turn, messages in the request) for every request the model got."""
    problems: list[str] = field(default_factory=list[str])
    _made: int = 0
    _turn: int = -1
    _this_turn: int = 0

    def respond(self, request: Sequence[Seen]) -> Reply:
        self._check(request)
        # The message the model answers: a system notice pydantic-ai places after the prompt (the framing
        # announcement a real provider's request carries once a summary's tags are in it) is not what it answers.
        last = next((seen for seen in reversed(request) if seen.role != 'system'), request[-1])
        prompt = PROMPT.match(last.text) if last.role == 'user' else None
        if prompt is not None:
            self._turn, self._this_turn = int(prompt.group(1)), 0
        self._this_turn += 1
        self.requests.append((self._turn, len(request)))
        if self._this_turn > (3 if self._turn % self.retry_every == 0 else 2):
            # A model that loops: fail the turn at once rather than wait for the request limit.
            raise AssertionError(f'turn {self._turn}: request {self._this_turn}, more than the script needs')
        thinking = f'Turn {self._turn}: look the order up, then answer.'
        if prompt is not None:
            fumble = self._turn % self.retry_every == 0
            args = [{'order': 'x'} if fumble and i == 0 else {'q': f't{self._turn}-{i}'} for i in range(self.width)]
            return Reply(thinking, self._calls(args))
        results = last.results if last.role == 'tool' else []
        again = [text for _, text in results if not text.startswith('found ')]
        if again:
            return Reply(thinking, self._calls([{'q': f't{self._turn}-again{i}'} for i in range(len(again))]))
        return Reply(thinking, text=f'Answer {self._turn}: ' + '; '.join(text for _, text in results))

    @property
    def width(self) -> int:
        """How many calls a turn's first response makes."""
        return 2 if self.numbering == 'call_0_call_1' else 1

    def _calls(self, args: Sequence[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
        """Calls to `lookup` with `args`, numbered as the server numbers them."""
        if self.numbering == 'unique':
            ids = [f'toolu_{self._made + i:04d}' for i in range(len(args))]
            self._made += len(args)
        else:
            ids = [f'call_{i}' for i in range(len(args))]
        return [(call_id, 'lookup', arguments) for call_id, arguments in zip(ids, args, strict=True)]

    def _check(self, request: Sequence[Seen]) -> None:
        """Record what a strict provider would refuse, or what would mislead the model."""
        for index, seen in enumerate(request):
            if seen.role == 'user' and ('found ' in seen.text or 'interrupted' in seen.text.lower()):
                self.problems.append(f'turn {self._turn}: a tool result sent as user text: {seen.text[:80]!r}')
            if seen.role != 'tool':
                continue
            before = request[index - 1] if index else None
            called = {call_id for call_id, _, _ in before.calls} if before is not None else set()
            for call_id, text in seen.results:
                if call_id not in called:
                    self.problems.append(f'turn {self._turn}: result {call_id} not right after its call')
                if not text.startswith('found ') and 'required' not in text.lower():
                    self.problems.append(f'turn {self._turn}: result {call_id} is not the tool output: {text[:80]!r}')


def seen_from_messages(messages: Sequence[ModelMessage]) -> list[Seen]:
    """A pydantic-ai history as the model reads it (what a `FunctionModel` is handed)."""
    seen: list[Seen] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            calls = [
                (p.tool_call_id, p.tool_name, p.args_as_dict()) for p in message.parts if isinstance(p, ToolCallPart)
            ]
            text = ''.join(p.content for p in message.parts if isinstance(p, TextPart))
            seen.append(Seen('assistant', text=text, calls=calls))
            continue
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                seen.append(Seen('system', part.content))
            elif isinstance(part, UserPromptPart):
                seen.append(Seen('user', str(part.content)))
            elif isinstance(part, CompactionPart):
                seen.append(Seen('user', part.content or ''))
            elif isinstance(part, ToolReturnPart):
                if not seen or seen[-1].role != 'tool':
                    seen.append(Seen('tool'))
                seen[-1].results.append((part.tool_call_id, part.model_response_str()))
    return seen


def function_model(script: TurnScript) -> FunctionModel:
    """`script` as a pydantic-ai model: it reads the messages a run sends, and answers with pydantic-ai's parts."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        reply = script.respond(seen_from_messages(messages))
        parts: list[Any] = [] if reply.thinking is None else [ThinkingPart(reply.thinking)]
        parts += [ToolCallPart(name, args, tool_call_id=call_id) for call_id, name, args in reply.calls]
        if reply.text is not None:
            parts.append(TextPart(reply.text))
        return ModelResponse(parts=parts)

    return FunctionModel(respond)


@dataclass
class DoorReport:
    """What 40 turns through a door did."""

    turns: int
    """Turns that ended with the model's answer."""
    history: list[ModelMessage]
    """Every message the turns produced, in order: the runs' own."""
    archive: list[ModelMessage] | None
    """What the store archived, for the doors with one."""
    summaries: list[str]
    """What the summarizer was asked to fold in, each call's new messages."""


def agent_on(model: Model, capabilities: Sequence[Any] = ()) -> Agent[None, str]:
    agent = Agent(model, system_prompt=SYSTEM, capabilities=list(capabilities))

    @agent.tool_plain
    def lookup(q: str) -> str:
        return tool_output(q)

    return agent


async def run_door(door: Door, model: Model, *, url: str | None = None, turns: int = 40) -> DoorReport:
    """`turns` turns through `door`, the agent on `model`; a summarizing door records its summarizer's inputs.
    The doors with a store need `url`, a new database's."""
    summarizer = RecordingSummarizer()
    trigger: ContextSize = ('messages', TRIGGER)
    keep: ContextSize = ('messages', KEEP)
    summarizing = SummarizationProcessor(FunctionModel(summarizer), trigger=trigger, keep=keep)
    history: list[ModelMessage] = []
    archive: list[ModelMessage] | None = None
    done = 0
    if door in ('sliding_window', 'summarization'):
        window = SlidingWindow(trigger=trigger, keep=keep)
        capability = window if door == 'sliding_window' else as_capability(summarizing)
        agent = agent_on(model, [capability])
        for turn in range(turns):
            result = await _guarded(agent.run(f'turn {turn}', message_history=history))
            history, done = result.all_messages(), done + 1
    else:
        assert url is not None, 'a door with a store needs a database'
        async with SessionStore(url, processor=summarizing) as store:
            agent = agent_on(model)
            session = await store.session('door')
            conversations = store.conversations
            for turn in range(turns):
                if door == 'session':
                    result = await _guarded(session.run(agent, f'turn {turn}'))
                else:
                    loaded = await conversations.load('door') or Conversation(conversation_id='door')
                    # The conversation's own usage counts against the limit: 40 turns pass pydantic-ai's 50.
                    limits = UsageLimits(request_limit=None)
                    result = await _guarded(agent.run(f'turn {turn}', conversation=loaded, usage_limits=limits))
                    await conversations.save(result)
                history, done = history + result.new_messages(), done + 1
            archive = await store.history('door')
    return DoorReport(
        done, history, archive, [block for text in summarizer.inputs for block in NEW_MESSAGES.findall(text)]
    )


async def _guarded(run: Any) -> Any:
    """`run`, failed if it takes over `TURN_TIMEOUT`; one spinning without awaiting (a loop in a processor) can't
    be cancelled, so a watchdog thread dumps every stack and ends the process then, failing the test."""
    faulthandler.dump_traceback_later(2 * TURN_TIMEOUT, exit=True)
    try:
        return await asyncio.wait_for(run, TURN_TIMEOUT)
    finally:
        faulthandler.cancel_dump_traceback_later()


def same_messages(a: Sequence[ModelMessage], b: Sequence[ModelMessage]) -> bool:
    """Whether two histories are the same messages, as stored: compared in their JSON."""
    return ModelMessagesTypeAdapter.dump_json(list(a)) == ModelMessagesTypeAdapter.dump_json(list(b))


def prompts_in(blocks: Sequence[str]) -> list[int]:
    """The turns whose prompts the summarizer blocks hold, once per block that holds each."""
    return [int(turn) for block in blocks for turn in re.findall(r'^User: turn (\d+)$', block, re.M)]


def check_report(report: DoorReport, script: TurnScript, door: Door, turns: int = 40) -> None:
    """Every acceptance point of issue 26 for one door: every turn, no extra request, every result real and
    right after its call, windows bounded, at least 4 summaries, no prompt summarized twice, nothing lost."""
    assert report.turns == turns
    assert script.problems == []
    per_turn: dict[int, int] = {}
    for turn, _ in script.requests:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    assert per_turn == {t: 3 if t % script.retry_every == 0 else 2 for t in range(turns)}
    assert max(size for _, size in script.requests) <= MAX_WINDOW
    if door != 'sliding_window':
        assert len(report.summaries) >= 4
        summarized = prompts_in(report.summaries)
        assert len(summarized) == len(set(summarized)), 'a prompt summarized twice'
    if report.archive is not None:
        assert same_messages(report.archive, report.history)
    prompts = [p.content for m in report.history for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == [f'turn {t}' for t in range(turns)]
    calls = [p for m in report.history for p in m.parts if isinstance(p, BaseToolCallPart)]
    assert len(calls) == sum(script.width + (t % script.retry_every == 0) for t in range(turns))
