"""Edit and regenerate any turn of a summarized chat through a UI adapter (issue 27).

A summarized 30-turn chat (`u<t>` the UI message id of turn t's prompt `T<t> ...`, at archive position 4t: prompt,
tool call, tool return, answer) through `dispatch_chat` with pydantic-ai's `VercelAIAdapter` and `AGUIAdapter`. A
turn sent again runs from the conversation as it stood before it: the model is sent that path's own window (its
latest summary, nothing after the turn), the replaced turn stays a branch that reads whole, and the new path's
window and summaries are its own.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationRecord
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.usage import RunUsage, UsageLimits
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from session_store import SessionStore, dispatch_chat, run_limits
from testkit.scripted import RecordingSummarizer

from .test_conversation_door import (
    ADAPTERS,
    Assistant,
    StoreFactory,
    adapter_app,
    compaction_texts,
    make_agent,
    marks,
    post,
    resubmit,
    sse,
    summarizing,
)

TURNS = 30
QUICK_ADAPTERS = [pytest.param(name, marks=() if name == 'vercel' else pytest.mark.slow) for name in ADAPTERS]
"""Both adapters run the same store code: AG-UI's 30-turn runs are in the slow tier, Vercel AI's in the quick."""


def chat_app(store: SessionStore, assistant: Assistant, adapter: str) -> Any:
    agent = make_agent(assistant)

    async def endpoint(request: Request) -> Response:
        return await dispatch_chat(ADAPTERS[adapter], request, agent=agent, store=store)

    return Starlette(routes=[Route('/chat', endpoint, methods=['POST'])])


def turns_in(messages: list[ModelMessage]) -> set[int]:
    """The turns a request mentions (in prompts, tool results, answers and summaries)."""
    return {int(mark[1:]) for mark in marks(messages)}


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str)
    ]


async def summarized_chat(
    store_factory: StoreFactory, adapter: str
) -> tuple[SessionStore, Assistant, RecordingSummarizer, Any]:
    recorder, assistant = RecordingSummarizer(), Assistant()
    store = store_factory(processor=summarizing(recorder))
    app = chat_app(store, assistant, adapter)
    for turn in range(TURNS):
        await post(app, resubmit(adapter, 'c', f'u{turn}', f'T{turn} please look this up'))
    assert len(await store.summaries('c')) >= 3
    return store, assistant, recorder, app


async def check_branched_at(store: SessionStore, turn: int, new_prompt: str) -> None:
    """The active path is the turns before `turn`, then the new one; the path replaced is a branch, whole."""
    active = await store.history('c', limit=None)
    assert len(active) == 4 * turn + 4
    assert compaction_texts(active) == []  # the archive holds messages as sent, never a summary merged in
    assert prompts(active) == [*(f'T{t} please look this up' for t in range(turn)), new_prompt]
    session = await store.session('c')
    replaced = [b for b in await session.branches() if not b.active and b.message_count == 4 * TURNS]
    assert len(replaced) == 1
    whole = await store.history('c', branch=replaced[0].tip, limit=None)
    assert prompts(whole) == [f'T{t} please look this up' for t in range(TURNS)]
    # The new path's window and summary chain are its own: nothing from the turns it replaced.
    chain = await store.summaries('c')
    assert all(summary.covers_to <= 4 * turn for summary in chain)
    assert all(max(turns_in([_text_request(s.text)]), default=-1) < turn for s in chain)
    window = await session.context()
    assert max(turns_in(window) - {int(new_prompt.split()[0][1:])}, default=-1) < turn


def _text_request(text: str) -> ModelMessage:
    return ModelRequest(parts=[UserPromptPart(text)])


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize('adapter', QUICK_ADAPTERS)
async def test_editing_the_windows_first_prompt_sends_the_summary_before_it(
    store_factory: StoreFactory, adapter: str
) -> None:
    store, assistant, recorder, app = await summarized_chat(store_factory, adapter)
    loaded = await store.conversations.load('c')
    assert loaded is not None
    first = prompts(loaded.messages)[0]
    turn = int(first.split()[0][1:])
    latest = (await store.summaries('c'))[-1]
    assert latest.covers_to == 4 * turn  # the window opens with this turn's prompt, its summary riding in it

    sent, summarized = len(assistant.requests), len(recorder.inputs)
    await post(app, resubmit(adapter, 'c', f'u{turn}', 'T77 edited'))
    request = assistant.requests[sent]
    # The model is sent the summary of everything before the edited turn, and nothing from that turn on.
    assert latest.text in ''.join(t or '' for t in compaction_texts(request))
    assert turns_in(request) - {77} <= set(range(turn)) and prompts(request) == ['T77 edited']
    await check_branched_at(store, turn, 'T77 edited')
    # The branch resumes from that summary: loading it summarizes nothing again.
    await store.conversations.load('c')
    assert len(recorder.inputs) == summarized


@pytest.mark.slow  # the quick tier edits an old turn through serve --chat's endpoint (tests/test_web_edit.py)
@pytest.mark.parametrize('adapter', ADAPTERS)
async def test_an_old_summarized_turn_is_edited_where_it_stands(store_factory: StoreFactory, adapter: str) -> None:
    store, assistant, _, app = await summarized_chat(store_factory, adapter)
    sent = len(assistant.requests)
    await post(app, resubmit(adapter, 'c', 'u5', 'T55 edited old'))
    for request in assistant.requests[sent:]:
        assert turns_in(request) - {55} <= set(range(5))
    await check_branched_at(store, 5, 'T55 edited old')

    # The edited path goes on, and is summarized on its own.
    for turn in range(56, 66):
        await post(app, resubmit(adapter, 'c', f'e{turn}', f'T{turn} on the edited branch'))
    assert all(not turns_in(r) & set(range(5, 30)) for r in assistant.requests[sent:])
    chain = await store.summaries('c')
    assert chain and chain[-1].covers_to > 4 * 5
    assert not turns_in([_text_request(s.text) for s in chain]) & set(range(5, 30))


@pytest.mark.slow  # the quick tier regenerates an old turn through serve --chat's endpoint (tests/test_web_edit.py)
async def test_regenerating_an_old_turn_answers_it_again_from_before_it(store_factory: StoreFactory) -> None:
    store, assistant, _, app = await summarized_chat(store_factory, 'vercel')
    sent = len(assistant.requests)
    await post(app, resubmit('vercel', 'c', 'u3', 'T3 please look this up', regenerate=True))
    for request in assistant.requests[sent:]:
        assert turns_in(request) <= set(range(4))
    await check_branched_at(store, 3, 'T3 please look this up')


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same store code
async def test_a_prompt_stored_without_a_ui_id_is_edited_by_its_entry_id(store_factory: StoreFactory) -> None:
    """Messages a `Session` ran carry no UI message id; a front end names them by entry id."""
    assistant = Assistant()
    store = store_factory()
    session = await store.session('c')
    agent = make_agent(assistant)
    for turn in range(4):
        await session.run(agent, f'T{turn} please look this up')
    entries = await store.conversations.load_entries('c')
    assert entries is not None
    second = entries[4]  # turn 1's prompt
    assert prompts([second.message]) == ['T1 please look this up']
    sent = len(assistant.requests)
    await post(chat_app(store, assistant, 'vercel'), resubmit('vercel', 'c', second.id, 'T11 edited'))
    assert turns_in(assistant.requests[sent]) == {0, 11}
    active = await store.history('c', limit=None)
    assert prompts(active) == ['T0 please look this up', 'T11 edited']


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same store code
async def test_a_resubmission_after_another_save_is_a_conflict_and_stores_nothing(
    store_factory: StoreFactory,
) -> None:
    store, assistant = store_factory(), Assistant()
    agent = make_agent(assistant)
    app = chat_app(store, assistant, 'vercel')
    for turn in range(3):
        await post(app, resubmit('vercel', 'c', f'u{turn}', f'T{turn} please look this up'))
    resubmitted = await store.conversations.resubmitting('c', 'u1')
    assert resubmitted is not None
    conversation = await resubmitted.load('c')
    assert conversation is not None and prompts(conversation.messages) == [
        'T0 please look this up',
        'T1 please look this up',
    ]
    await post(app, resubmit('vercel', 'c', 'u3', 'T3 please look this up'))  # another turn lands meanwhile
    before = await store.history('c', limit=None)
    result = await agent.run(
        'T9 edited',
        conversation=Conversation(
            messages=conversation.messages[:-1],
            usage=conversation.usage,
            conversation_id='c',
            revision=conversation.revision,
        ),
    )
    with pytest.raises(Exception, match='saved or deleted since it was loaded'):
        await resubmitted.save(result)
    assert await store.history('c', limit=None) == before


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same store code
async def test_a_new_message_or_another_conversation_is_no_resubmission(store_factory: StoreFactory) -> None:
    store, assistant = store_factory(), Assistant()
    app = chat_app(store, assistant, 'vercel')
    await post(app, resubmit('vercel', 'c', 'u0', 'T0 please look this up'))
    assert await store.conversations.resubmitting('c', 'u1') is None
    assert await store.conversations.resubmitting('nobody', 'u0') is None
    assert await store.conversations.resubmitting('c', 'u0') is not None


def test_run_limits_give_each_run_its_own_budget() -> None:
    used = RunUsage(requests=120, tool_calls=60, input_tokens=9_000, output_tokens=800)
    record = ConversationRecord(conversation_id='c', head_id=None, usage=used)
    limits = run_limits(record)
    assert limits.request_limit == 170 and limits.tool_calls_limit is None
    tight = run_limits(
        Conversation(usage=used),
        UsageLimits(request_limit=5, tool_calls_limit=3, input_tokens_limit=100, total_tokens_limit=1_000),
    )
    assert (tight.request_limit, tight.tool_calls_limit, tight.input_tokens_limit) == (125, 63, 9_100)
    assert tight.total_tokens_limit == 9_800 + 1_000 and tight.output_tokens_limit is None
    assert run_limits(None).request_limit == UsageLimits().request_limit


async def post_refused(app: Any, body: dict[str, Any]) -> str:
    """The error the adapter streams for `body`: its text."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://test') as client:
        response = await client.post('/chat', json=body, headers={'accept': 'text/event-stream'})
    errors = [e for e in sse(response.text) if e.get('type') in ('error', 'RUN_ERROR')]
    assert errors, response.text
    return str(errors[0].get('errorText') or errors[0].get('message'))


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize('adapter', QUICK_ADAPTERS)
async def test_the_bare_adapter_never_appends_a_turn_sent_again_nor_drops_its_summary(
    store_factory: StoreFactory, adapter: str
) -> None:
    """Without `dispatch_chat`, pydantic-ai's adapter reaches only the loaded window: an older message sent again
    would be appended as a new one, and the window's first prompt sent again would run without its summary. The
    store refuses to save either, names what to use, and stores nothing."""
    store, assistant, _, _ = await summarized_chat(store_factory, adapter)
    bare = adapter_app(store, make_agent(assistant), ADAPTERS[adapter])
    before = await store.history('c', limit=None)
    branches = await (await store.session('c')).branches()
    loaded = await store.conversations.load('c')
    assert loaded is not None
    first = int(prompts(loaded.messages)[0].split()[0][1:])
    for body in (
        resubmit(adapter, 'c', 'u5', 'T55 edited old'),
        resubmit(adapter, 'c', f'u{first}', 'T77 edited'),
    ):
        error = await post_refused(bare, body)
        assert 'was sent again' in error and 'dispatch_chat' in error, error
        assert await store.history('c', limit=None) == before
        assert await (await store.session('c')).branches() == branches
    if adapter == 'vercel':  # pydantic-ai's adapter refuses a regenerate it can't find before calling the model
        sent = len(assistant.requests)
        await post_refused(bare, resubmit(adapter, 'c', 'u3', 'T3 please look this up', regenerate=True))
        assert len(assistant.requests) == sent and await store.history('c', limit=None) == before
    # A new message still goes on the path, and an edit of a later prompt of the window still branches.
    await post(bare, resubmit(adapter, 'c', 'u30', 'T30 please look this up'))
    assert len(await store.history('c', limit=None)) == len(before) + 4


async def test_a_chat_id_the_store_cannot_hold_is_the_adapters_to_refuse(store_factory: StoreFactory) -> None:
    app = chat_app(store_factory(), Assistant(), 'vercel')
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://test') as client:
        response = await client.post('/chat', json=resubmit('vercel', 'x' * 300, 'u0', 'T0 hello'))
    # pydantic-ai's own answer to a store that can't read the conversation: a 500 that says so, no traceback.
    assert response.status_code == 500 and 'could not be loaded' in response.json()['detail']
