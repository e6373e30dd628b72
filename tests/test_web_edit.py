"""Edit and Regenerate any user message of a summarized chat in the web app (issue 27), without a browser.

A 30-turn chat through `POST /api/chat` (turn t's prompt `T<t> ...` under the UI message id `u<t>`, at archive
position 2t, its answer at 2t + 1), summarized as `serve --chat MODEL --summarizer test --trigger 10 --keep 4`
summarizes, on SQLite and PostgreSQL. The chat model is a `FunctionModel` that records every request it is sent.
A message sent again from the page (the id its buttons carry: its UI message id, else its entry id) branches at
that message: the model is sent the path before it with that path's own summary and nothing after, the turns it
replaced stay a branch that reads whole, and the new path's summaries and window are its own. What the page's
note reads back after the request (the session's branches, as `GET /api/sessions/ID` gives them) says so.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from html import unescape
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls, FunctionModel
from pydantic_ai.usage import UsageLimits

from session_store import SessionStore
from session_store.cli._summarizer import summarizing
from session_store.web import create_app
from tests._web import SAME_ORIGIN, sse_chunks, ui_message

StoreFactory = Callable[..., SessionStore]

TURNS = 30
MARK = re.compile(r'\bT(\d+)\b')


def prompt(turn: int) -> str:
    return f'T{turn} where is ORDER-{1000 + turn}?'


@dataclass
class Recorder:
    """The chat model's script: answers each prompt by its mark, and keeps every request it was sent."""

    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    def answer(self, messages: list[ModelMessage]) -> str:
        self.requests.append(list(messages))
        said = [p.content for p in messages[-1].parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)]
        return f'Answering {said[-1].split()[0] if said else "nothing"}: it ships tomorrow.'

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(self.answer(messages))])

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        for word in self.answer(messages).split(' '):
            yield f'{word} '


def turns_in(messages: list[ModelMessage]) -> set[int]:
    """The turns the messages mention: in prompts, answers and summaries."""
    return {int(mark) for message in messages for part in message.parts for mark in MARK.findall(str(part))}


def turns_of(text: str) -> set[int]:
    return {int(mark) for mark in MARK.findall(text)}


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str)
    ]


def compactions(messages: list[ModelMessage]) -> list[str]:
    """The summaries the messages carry."""
    return [p.content or '' for m in messages for p in m.parts if isinstance(p, CompactionPart)]


@dataclass
class Chat:
    store: SessionStore
    client: httpx.AsyncClient
    model: Recorder

    async def send(self, body: dict[str, Any]) -> str:
        """Post a chat request as the page's script does; the answer, after checking the run was stored."""
        response = await self.client.post('/api/chat', json=body, headers=SAME_ORIGIN)
        assert response.status_code == 200, response.text
        chunks = sse_chunks(response.text)
        assert not [c for c in chunks if c['type'] == 'error'], chunks
        assert any(c['type'] == 'data-conversation-saved' for c in chunks), chunks
        return ''.join(c['delta'] for c in chunks if c['type'] == 'text-delta')

    async def turn(self, message_id: str, text: str, *, regenerate: bool = False) -> str:
        trigger = 'regenerate-message' if regenerate else 'submit-message'
        return await self.send({'trigger': trigger, 'id': 's', 'messages': [ui_message(message_id, text)]})

    async def buttons(self, position: int) -> tuple[str, str]:
        """What the Edit and Regenerate buttons of the message at `position` resend: its message id and prompt."""
        html = (await self.client.get(f'/sessions/s?at={position}')).text
        article = re.search(rf'<article [^>]*id="m{position}".*?</article>', html, re.S)
        assert article is not None, html
        actions = re.search(r'class="actions" data-message-id="([^"]*)" data-prompt="([^"]*)"', article.group(0))
        assert actions is not None, article.group(0)
        assert 'class="link edit"' in article.group(0) and 'class="link regenerate"' in article.group(0)
        return unescape(actions.group(1)), unescape(actions.group(2))

    async def read_back(self) -> dict[str, Any]:
        """What the page's note is told from: the session as `GET /api/sessions/s?limit=1` gives it."""
        response = await self.client.get('/api/sessions/s?limit=1')
        assert response.status_code == 200, response.text
        page: dict[str, Any] = response.json()
        return page


@asynccontextmanager
async def chat(store_factory: StoreFactory, *, turns: int = TURNS, run_first: int = 0) -> AsyncIterator[Chat]:
    """The app with a summarizing store, after `turns` turns: the first `run_first` by `Session.run` (no UI ids),
    the rest through `POST /api/chat`."""
    model = Recorder()
    agent = Agent(FunctionModel(model.respond, stream_function=model.stream))
    store = store_factory(processor=summarizing('test', 10, 4))
    session = await store.session('s')
    for turn in range(run_first):
        await session.run(agent, prompt(turn))
    app = create_app(store, chat_model=agent)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://127.0.0.1') as client:
        opened = Chat(store, client, model)
        for turn in range(run_first, turns):
            assert await opened.turn(f'u{turn}', prompt(turn)) == f'Answering T{turn}: it ships tomorrow. '
        yield opened


async def check_branched_at(chat: Chat, turn: int, new_prompt: str, before: list[ModelMessage]) -> None:
    """The active path is the turns before `turn`, then the new one, read whole; the path it replaced is a
    branch holding exactly what the active path held before; the new path's summaries and window are its own."""
    store, position = chat.store, 2 * turn
    new_turn = turns_of(new_prompt)
    active = await store.history('s')
    assert prompts(active) == [*(prompt(t) for t in range(turn)), new_prompt]
    assert active[:position] == before[:position] and len(active) == position + 2
    assert isinstance(active[-1], ModelResponse)
    session = await store.session('s')
    branches = await session.branches()
    (new,) = [b for b in branches if b.active]
    (left,) = [b for b in branches if not b.active and b.message_count == len(before)]
    assert new.forked_at == (position if position else None) and new.message_count == position + 2
    assert await store.history('s', branch=left.tip) == before
    # The new path's summaries cover only messages before the turn, and hold nothing of the turns it replaced.
    chain = await store.summaries('s')
    assert chain and all(s.covers_to <= position for s in chain)
    assert all(turns_of(s.text) <= set(range(turn)) for s in chain)
    assert turns_in(await session.context()) <= set(range(turn)) | new_turn
    # What the page's note reads back: the new branch is active, forks at the message, and the one left is whole.
    page = await chat.read_back()
    assert page['message_count'] == position + 2
    shown = {b['tip']: b for b in page['branches']}
    assert shown[new.tip]['active'] and shown[new.tip]['forked_at'] == new.forked_at
    assert shown[left.tip]['message_count'] == len(before) and not shown[left.tip]['active']


def sent_since(chat: Chat, count: int) -> list[list[ModelMessage]]:
    sent = chat.model.requests[count:]
    assert sent
    return sent


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same store code
async def test_editing_an_old_summarized_turn_branches_at_it(store_factory: StoreFactory) -> None:
    async with chat(store_factory) as c:
        before = await c.store.history('s')
        old_chain = await c.store.summaries('s')
        assert len(old_chain) >= 3 and old_chain[0].covers_from == 0
        message_id, shown = await c.buttons(10)
        assert (message_id, shown) == ('u5', prompt(5))
        count = len(c.model.requests)
        assert await c.turn(message_id, 'T95 edited: where is ORDER-1095?') == 'Answering T95: it ships tomorrow. '
        (request,) = sent_since(c, count)
        # The model was sent the path before the edited turn: that path's latest summary, nothing after the turn.
        assert turns_in(request) <= set(range(5)) | {95} and prompts(request)[-1].startswith('T95')
        own = max((s for s in old_chain if s.covers_to <= 10), key=lambda s: s.covers_to)
        assert compactions(request) == [own.text]
        await check_branched_at(c, 5, 'T95 edited: where is ORDER-1095?', before)
        html = (await c.client.get('/sessions/s')).text
        assert 'T95 edited: where is ORDER-1095?' in html and 'Answering T95: it ships tomorrow.' in html
        assert 'T6 where is' not in html


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same store code
async def test_regenerating_an_old_summarized_turn_branches_at_it(store_factory: StoreFactory) -> None:
    async with chat(store_factory) as c:
        before = await c.store.history('s')
        message_id, shown = await c.buttons(6)
        assert (message_id, shown) == ('u3', prompt(3))
        count = len(c.model.requests)
        assert await c.turn(message_id, shown, regenerate=True) == 'Answering T3: it ships tomorrow. '
        (request,) = sent_since(c, count)
        assert turns_in(request) <= set(range(4)) and prompts(request) == [prompt(3)]
        await check_branched_at(c, 3, prompt(3), before)


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same store code
async def test_a_prompt_stored_by_session_run_is_edited_by_its_entry_id(store_factory: StoreFactory) -> None:
    """Session.run stores no UI message id: the page's buttons carry the prompt's entry id, and the store finds
    it by that, summarized or not."""
    async with chat(store_factory, run_first=12) as c:
        before = await c.store.history('s')
        api = (await c.client.get('/api/sessions/s?offset=0&limit=30')).json()
        stored = api['messages'][8]
        assert stored['ui_message_id'] is None and stored['entry_id'] and stored['message_id'] == stored['entry_id']
        message_id, shown = await c.buttons(8)
        assert (message_id, shown) == (stored['entry_id'], prompt(4))
        count = len(c.model.requests)
        await c.turn(message_id, 'T94 edited')
        (request,) = sent_since(c, count)
        assert turns_in(request) <= set(range(4)) | {94} and prompts(request)[-1] == 'T94 edited'
        await check_branched_at(c, 4, 'T94 edited', before)
        # Regenerated by entry id too, from the new path: the first prompt, before which there is nothing.
        before = await c.store.history('s')
        first_id, first = await c.buttons(0)
        assert (
            first == prompt(0) and first_id == (await c.client.get('/api/sessions/s')).json()['messages'][0]['entry_id']
        )
        count = len(c.model.requests)
        await c.turn(first_id, first, regenerate=True)
        (request,) = sent_since(c, count)
        assert len(request) == 1 and prompts(request) == [prompt(0)]
        active = await c.store.history('s')
        assert prompts(active) == [prompt(0)] and len(active) == 2
        assert len(await (await c.store.session('s')).branches()) == 3


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same store code
@pytest.mark.parametrize('regenerate', [False, True], ids=['edit', 'regenerate'])
async def test_a_prompt_resubmitted_right_after_a_summary_is_archived_as_sent(
    store_factory: StoreFactory, regenerate: bool
) -> None:
    """Turn 3's prompt (position 6) is where the chain's first summary ends: the path before it is that summary
    alone. The model is sent the summary and the prompt; the archive must hold the prompt as the page sent it,
    and the new path's window must carry the summary once."""
    async with chat(store_factory, turns=12) as c:
        first = (await c.store.summaries('s'))[0]
        assert (first.covers_from, first.covers_to) == (0, 6)
        count = len(c.model.requests)
        text = prompt(3) if regenerate else 'T93 edited'
        await c.turn('u3', text, regenerate=regenerate)
        (request,) = sent_since(c, count)
        assert len(compactions(request)) == 1 and prompts(request) == [text]
        stored = (await c.store.history('s'))[6]
        window = await (await c.store.session('s')).context()
    assert [type(p) for p in stored.parts] == [UserPromptPart], stored.parts
    assert len(compactions(window)) == 1, compactions(window)


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same store code
async def test_a_message_no_longer_on_the_active_path_is_appended_and_the_read_back_says_so(
    store_factory: StoreFactory,
) -> None:
    """A page left open while the session moved resends a message of a path no longer active: the store appends
    it (nothing to replace), and the session read back shows the same active branch, longer, no new one."""
    async with chat(store_factory, turns=6) as c:
        await c.turn('u2', 'T92 edited')
        first = await c.read_back()
        await c.turn('u4', 'T94 resent from a stale page')
        then = await c.read_back()
    assert then['message_count'] == first['message_count'] + 2 == 8
    assert [(b['tip'], b['active']) for b in then['branches']] == [(b['tip'], b['active']) for b in first['branches']]
    assert prompts(await c.store.history('s'))[-2:] == ['T92 edited', 'T94 resent from a stale page']


@pytest.mark.slow  # long chats: the quick tier edits and regenerates shorter ones
async def test_sixty_turns_chat_past_the_default_request_limit(store_factory: StoreFactory) -> None:
    """pydantic-ai counts a run's requests from the stored usage; each run through the app has its own budget."""
    limit = UsageLimits().request_limit
    assert limit is not None and limit < 60
    async with chat(store_factory, turns=60) as c:
        await c.turn('u3', 'T93 edited after sixty turns')
        (info,) = await c.store.sessions()
    assert info.usage.requests == 61 and info.message_count == 8


@pytest.mark.slow  # long chats: the quick tier edits and regenerates shorter ones
async def test_every_message_of_a_page_carries_its_entry_id(store_factory: StoreFactory) -> None:
    """On any page of the active path or of a branch, each message's `entry_id` is the archive's id of that very
    message; only user messages have a `message_id`, their UI message id when they have one."""
    async with chat(store_factory, turns=70, run_first=40) as c:
        await c.turn('u50', 'T95 edited')  # a branch at #100, off the page boundary
        (left,) = [b['tip'] for b in (await c.read_back())['branches'] if not b['active']]
        for query in ('offset=0&limit=60', 'offset=90&limit=20', f'offset=95&branch={left}'):
            api = (await c.client.get(f'/api/sessions/s?{query}')).json()
            assert api['messages']
            for item in api['messages']:
                entry = await c.store.conversations.read_entry(item['entry_id'])
                assert entry.message.parts == item_message(item).parts, item['position']
                user = item['role'] == 'user'
                assert item['message_id'] == ((item['ui_message_id'] or item['entry_id']) if user else None)
            ui_ids = {item['ui_message_id'] for item in api['messages'] if item['role'] == 'user'}
            assert (None in ui_ids) == (api['offset'] < 80)  # Session.run's prompts (the first 40 turns) have none


def item_message(item: dict[str, Any]) -> ModelMessage:
    """A message of the page's JSON, loaded as pydantic-ai loads it."""
    (message,) = ModelMessagesTypeAdapter.validate_python([item['message']])
    return message


async def test_a_page_read_while_the_session_moves_is_read_again(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer moves the active path between the page's read of its messages and of their entry ids: the
    page is read again, so no button carries the id of a message other than the one it shows."""
    async with chat(store_factory, turns=0, run_first=4) as c:
        history = c.store.history
        moved: list[str] = []

        async def then_edit(*args: Any, **kwargs: Any) -> list[ModelMessage]:
            read = await history(*args, **kwargs)
            if not moved:
                session = await c.store.session('s')
                await session.edit(Agent(FunctionModel(c.model.respond)), 2, 'T91 from another writer')
                moved.append('edited')
            return read

        monkeypatch.setattr(c.store, 'history', then_edit)
        api = (await c.client.get('/api/sessions/s?offset=0')).json()
    assert moved and api['message_count'] == 4 and len(api['branches']) == 2
    assert prompts([item_message(item) for item in api['messages']]) == [prompt(0), 'T91 from another writer']
    for item in api['messages']:
        assert (await c.store.conversations.read_entry(item['entry_id'])).message.parts == item_message(item).parts
