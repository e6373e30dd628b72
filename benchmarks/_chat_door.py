"""benchmarks/chat.py's contenders: a chat front end's request (Vercel AI) through `session_store.dispatch_chat`
and through pydantic-ai's stock `VercelAIAdapter.dispatch_request(..., conversation_store=store.conversations)`,
on one store and one archive, each measure leaving the active path as it found it. See chat.py's docstring for
the protocol.

Import this only after `_bench_env.ensure_environment()`.

The archives are seeded through the public API only (`_seeding.Archive`, `SessionStore.import_`); each seeded
prompt gets its UI message id from pydantic-ai's public `VercelAIAdapter.load_messages`, which turns a front end's
user message into the request the adapters store, its id in the request's metadata.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from _seeding import Archive
from _store_conversation import SUMMARY_TEXT, SYSTEM_PROMPT, Summarizer, our_turn, token_counts, turn_text
from _store_measuring import Measure
from pydantic_ai import Agent
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.request_types import TextUIPart, UIMessage
from pydantic_ai.usage import UsageLimits
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from session_store import Session, SessionStore, dispatch_chat

CHAT = 'chat'
"""The conversation every archive holds."""
TRIGGER = 40
"""Messages in the window at which the store's processor summarizes, keeping `WINDOW`."""
WINDOW = 20
"""Messages after the latest summary where every measure starts, as a compaction at the trigger leaves them: no
timed request compacts (a compaction costs both doors the same, in the store's load)."""
SUMMARY_EVERY = 80
"""Messages each summary of a seeded archive's chain covers."""
RECENT = 3
"""An edit of a recent turn sends again the prompt this many turns back from the newest: inside the window."""
TOOL = 'lookup_order'
UNLIMITED = UsageLimits(request_limit=None)
"""The stock door's limits: pydantic-ai counts a stored conversation's usage against `request_limit` (50 by
default), which a long one has passed."""


def ui_id(turn: int) -> str:
    """The UI message id the front end gave turn `turn`'s prompt."""
    return f'u{turn}'


def edited(turn: int) -> str:
    """A new text for turn `turn`'s prompt: the script answers it as that turn."""
    return f'Question {turn}: edited, {turn_text(turn).question.split(": ", 1)[1]}'


# --- the archive ---------------------------------------------------------------------------------


def summary_cuts(size: int) -> list[int]:
    """Where each summary of a seeded archive's chain ends: the last `WINDOW` from the end, one every
    `SUMMARY_EVERY` before it."""
    return sorted(range(size - WINDOW, 0, -SUMMARY_EVERY))


def old_turn(size: int) -> int:
    """The old turn an edit or a regenerate sends again: about half the archive back, `WINDOW` messages after a
    summary's end, so that the path before it has a window of `WINDOW` messages, as every measure starts with."""
    cut = min(summary_cuts(size), key=lambda cut: abs(cut + WINDOW - size // 2))
    return (cut + WINDOW) // 4


def ui_prompt(turn: int) -> ModelRequest:
    """Turn `turn`'s prompt as a UI adapter stores it: made from the front end's user message, its id kept; the
    conversation's first also opens with the system prompt, as a run's does."""
    sent = UIMessage(id=ui_id(turn), role='user', parts=[TextUIPart(text=turn_text(turn).question)])
    (prompt,) = VercelAIAdapter.load_messages([sent])
    assert isinstance(prompt, ModelRequest), prompt
    if turn == 0:
        prompt = replace(prompt, parts=[SystemPromptPart(SYSTEM_PROMPT), *prompt.parts])
    return prompt


def chat_archive(size: int) -> list[ModelMessage]:
    """The first `size` messages of the chat: tool-using turns of 4 messages (`our_turn`'s), each prompt carrying
    its UI message id as the adapters store it (`ui_prompt`)."""
    messages: list[ModelMessage] = []
    for turn in range(size // 4):
        _, *rest = our_turn(turn)
        messages += [ui_prompt(turn), *rest]
    return messages


async def seed(store: SessionStore, size: int) -> None:
    """The conversation `CHAT` of `size` messages with its summary chain (`summary_cuts`), imported whole
    (`_seeding.Archive`), far faster than runs."""
    messages = chat_archive(size)
    archive = Archive(CHAT)
    archive.append(messages, token_counts(messages))
    for cut in summary_cuts(size):
        text = f'{SUMMARY_TEXT} [{cut}]'
        archive.summarize(cut, text, len(text) // 4, 'bench-summarizer')
    await archive.store_in(store)


# --- the agent and its summarizer ----------------------------------------------------------------


def _turn_of(text: str) -> int:
    """The turn a prompt (`Question N: ...`) or a tool's result (`Result N: ...`) belongs to."""
    return int(text.split(maxsplit=2)[1].rstrip(':'))


@dataclass
class Assistant:
    """The scripted model: each prompt `Question N: ...` gets turn N's `lookup_order` call, its result turn N's
    answer, streamed as the adapters run it. It keeps the prompts of the first request of the latest run."""

    prompts: list[str] = field(default_factory=list[str])
    sent: int = 0
    """How many messages that request held."""
    summaries: int = 0
    """How many summaries it carried."""

    def answer(self, messages: list[ModelMessage]) -> ModelResponse:
        last = messages[-1]
        asked = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
        if isinstance(asked, str):
            self.prompts = [p.content for p in _parts(messages, UserPromptPart) if isinstance(p.content, str)]
            self.sent, self.summaries = len(messages), len(_parts(messages, CompactionPart))
            text = turn_text(_turn_of(asked))
            return ModelResponse(parts=[ToolCallPart(TOOL, text.arguments, tool_call_id=text.call_id)])
        returned = next(p.content for p in last.parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart(turn_text(_turn_of(str(returned))).answer)])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return self.answer(messages)

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        (part,) = self.answer(messages).parts
        if isinstance(part, ToolCallPart):
            call = DeltaToolCall(name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id=part.tool_call_id)
            yield {0: call}
        else:
            assert isinstance(part, TextPart)
            yield part.content

    def agent(self) -> Agent[None, str]:
        agent = Agent(FunctionModel(self, stream_function=self.stream), system_prompt=SYSTEM_PROMPT)

        @agent.tool_plain(name=TOOL)
        def lookup_order(order: str) -> str:
            return turn_text(int(order.removeprefix('A-'))).result

        return agent


def _parts(messages: Sequence[ModelMessage], kind: type[Any]) -> list[Any]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, kind)]


# --- the doors -----------------------------------------------------------------------------------


def chat_app(store: SessionStore, agent: Agent[None, str]) -> Starlette:
    """`/ours` answers through `dispatch_chat`, `/stock` through pydantic-ai's own door on the same store."""

    async def ours(request: Request) -> Response:
        return await dispatch_chat(VercelAIAdapter, request, agent=agent, store=store)

    async def stock(request: Request) -> Response:
        return await VercelAIAdapter.dispatch_request(
            request, agent=agent, conversation_store=store.conversations, usage_limits=UNLIMITED
        )

    return Starlette(routes=[Route('/ours', ours, methods=['POST']), Route('/stock', stock, methods=['POST'])])


def vercel_body(uid: str, prompt: str, trigger: str = 'submit-message') -> dict[str, Any]:
    """What Vercel AI's `useChat` sends: a new message, an edit (a message sent again under its id with a new text)
    or a regenerate (`regenerate-message`, the message as it was)."""
    return {
        'trigger': trigger,
        'id': CHAT,
        'messages': [{'id': uid, 'role': 'user', 'parts': [{'type': 'text', 'text': prompt}]}],
    }


def _events(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith('data: {')]


@dataclass
class Chat:
    """One archive of `size` messages on one store, both doors on it, the measures that run on it."""

    store: SessionStore
    session: Session
    client: httpx.AsyncClient
    assistant: Assistant
    summarizer: Summarizer
    size: int
    turns: itertools.count[int]
    requests: int = 0

    async def post(self, door: str, body: dict[str, Any]) -> float:
        """One request through `door`, its whole response read: the seconds it took, after checking it answered."""
        start = time.perf_counter()
        response = await self.client.post(f'/{door}', json=body, headers={'accept': 'text/event-stream'})
        spent = time.perf_counter() - start
        assert response.status_code == 200, (door, response.status_code, response.text[-2_000:])
        events = _events(response.text)
        assert not [e for e in events if e.get('type') == 'error'], (door, events)
        assert any(e.get('type') == 'data-conversation-saved' for e in events), (door, events)
        self.requests += 1
        return spent

    async def settled(self) -> None:
        """The active path is the archive's `size` messages again, its window as seeded; then a load (untimed), as a
        chat's next turn finds the window its last turn kept in memory."""
        assert (await self.store.window(CHAT)).message_count == self.size
        conversation = await self.store.conversations.load(CHAT)
        assert conversation is not None
        assert len(conversation.messages) == WINDOW, len(conversation.messages)

    async def active_tip(self) -> str:
        (active,) = [branch for branch in await self.session.branches() if branch.active]
        assert active.message_count == self.size, active
        return active.tip

    def check_sent(self, turn: int, messages: int) -> None:
        """The model was sent `messages` messages: the window before turn `turn`'s prompt, its summary riding in
        the first, then the prompt; nothing from a later turn."""
        sent = [_turn_of(prompt) for prompt in self.assistant.prompts]
        assert sent[-1] == turn and max(sent[:-1]) < turn, (turn, sent)
        assert (self.assistant.sent, self.assistant.summaries) == (messages, 1), (turn, self.assistant)

    def new_turn(self, door: str) -> Measure:
        """A new turn through `door`: the seconds it took."""

        async def measure() -> float:
            turn = next(self.turns)
            spent = await self.post(door, vercel_body(ui_id(turn), turn_text(turn).question))
            assert (await self.store.window(CHAT)).message_count == self.size + 4
            self.check_sent(turn, WINDOW + 1)
            # Back to `size` messages (untimed): the archive's last turn regenerated through `dispatch_chat`, which
            # branches off before it and finds it among the newest requests; the turn just made stays a branch.
            # (A rewind would check the whole path for pair safety, decoding it: seconds at 100k messages.)
            last = self.size // 4 - 1
            await self.post('ours', vercel_body(ui_id(last), turn_text(last).question, 'regenerate-message'))
            await self.settled()
            return spent

        return measure

    def resubmit(self, door: str, turn: int, *, regenerate: bool = False) -> Measure:
        """Turn `turn`'s prompt sent again through `door`, edited (a new text) or regenerated: the seconds it took.
        The model must have been sent the path before it, with its summary, and the turn itself, nothing after."""

        async def measure() -> float:
            tip = await self.active_tip()
            if regenerate:
                body = vercel_body(ui_id(turn), turn_text(turn).question, 'regenerate-message')
            else:
                body = vercel_body(ui_id(turn), edited(turn))
            spent = await self.post(door, body)
            assert (await self.store.window(CHAT)).message_count == 4 * turn + 4
            prompt_at = 4 * turn
            self.check_sent(turn, prompt_at - max(c for c in summary_cuts(self.size) if c < prompt_at) + 1)
            await self.session.switch(tip)  # back to the path the turn was sent on (untimed): a branch again
            await self.settled()
            return spent

        return measure

    def measures(self) -> dict[str, Measure]:
        """Every measure of this archive, by label; each starts and ends at the archive as seeded."""
        recent, old = self.size // 4 - RECENT, old_turn(self.size)
        return {
            'new turn (ours)': self.new_turn('ours'),
            'new turn (stock)': self.new_turn('stock'),
            'edit recent (ours)': self.resubmit('ours', recent),
            'edit recent (stock)': self.resubmit('stock', recent),
            'edit old (ours)': self.resubmit('ours', old),
            'regenerate old (ours)': self.resubmit('ours', old, regenerate=True),
        }

    def check(self) -> None:
        """No request compacted (each found the window as a compaction leaves it), so no summary failed."""
        assert (self.summarizer.calls, self.summarizer.failures) == (0, []), self.summarizer


async def open_chat(
    store: SessionStore, client: httpx.AsyncClient, assistant: Assistant, summarizer: Summarizer, size: int
) -> Chat:
    """The chat on a seeded store, its window loaded once."""
    chat = Chat(store, await store.session(CHAT), client, assistant, summarizer, size, itertools.count(size // 4))
    conversation = await store.conversations.load(CHAT)
    assert conversation is not None and len(conversation.messages) == WINDOW, conversation
    return chat
