"""pydantic-ai's own door into a store with a summarizing processor: `agent.run(conversation=...)` + `save`, and the
`VercelAIAdapter` and `AGUIAdapter` with `conversation_store=store.conversations`, over 60 tool-using turns.

Each door must get the whole mission: the raw archive complete and linear, windows that stay small, summaries
stored and extended incrementally (no message summarized twice, each summary built on the last), and a restart
that resumes from the stored summary without calling the summarizer.
"""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_ai.ui.ag_ui import AGUIAdapter
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.usage import UsageLimits
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from processors import ContextManagerCapability, SlidingWindowProcessor, Summarization, SummarizationProcessor
from session_store import SessionStore
from testkit.scripted import NEW_MESSAGES, PREVIOUS, RecordingSummarizer

StoreFactory = Callable[..., SessionStore]
TRIGGER, KEEP, TURNS = 20, 6, 60
UNLIMITED = UsageLimits(request_limit=None)
"""pydantic-ai counts a stored conversation's usage against `request_limit`: a long chat passes the default 50."""
_MARK = re.compile(r'\bT\d+\b')


@dataclass
class Assistant:
    """Each user turn `T<n> ...`: one `lookup` call, then an answer quoting its result; every request kept."""

    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        last = messages[-1]
        prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
        if isinstance(prompt, str):
            return ModelResponse(parts=[ToolCallPart('lookup', {'q': prompt.split()[0]})])
        found = next(p.content for p in last.parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart(f'answer: {found}')])

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        """The same answers, streamed, as the UI adapters run them."""
        (part,) = self(messages, info).parts
        if isinstance(part, ToolCallPart):
            yield {0: DeltaToolCall(name=part.tool_name, json_args=part.args_as_json_str())}
        else:
            assert isinstance(part, TextPart)
            yield part.content


def make_agent(assistant: Assistant) -> Agent[None, str]:
    agent = Agent(
        FunctionModel(assistant, stream_function=assistant.stream), system_prompt='You are the test assistant.'
    )

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f'{q} looked up'

    return agent


def summarizing(recorder: RecordingSummarizer) -> SummarizationProcessor:
    return SummarizationProcessor(FunctionModel(recorder), trigger=('messages', TRIGGER), keep=('messages', KEEP))


Door = Callable[[SessionStore, Agent[None, str], str, str, str], Awaitable[list[str]]]
"""One turn through a door: (store, agent, conversation id, UI message id, prompt) -> the saved entries' ids."""


async def through_agent_run(
    store: SessionStore, agent: Agent[None, str], cid: str, _uid: str, prompt: str
) -> list[str]:
    conversations = store.conversations
    conversation = await conversations.load(cid) or Conversation(conversation_id=cid)
    loads.append(len(conversation.messages))
    result = await agent.run(prompt, conversation=conversation, usage_limits=UNLIMITED)
    return [entry.id for entry in await conversations.save(result)]


loads: list[int] = []
"""How many messages each `load` of the agent-run door handed back."""


Adapter = type[VercelAIAdapter[Any, Any]] | type[AGUIAdapter[Any, Any]]


def adapter_app(store: SessionStore, agent: Agent[None, str], adapter: Adapter) -> Any:
    async def endpoint(request: Request) -> Response:
        return await adapter.dispatch_request(
            request, agent=agent, conversation_store=store.conversations, usage_limits=UNLIMITED
        )

    return Starlette(routes=[Route('/chat', endpoint, methods=['POST'])])


ADAPTERS: dict[str, Adapter] = {
    'vercel': VercelAIAdapter,
    'ag-ui': AGUIAdapter,
}


def sse(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith('data: {')]


async def post(app: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://test') as client:
        response = await client.post('/chat', json=body, headers={'accept': 'text/event-stream'})
    assert response.status_code == 200, response.text
    events = sse(response.text)
    assert not [e for e in events if e.get('type') in ('error', 'RUN_ERROR')], events
    return events


def saved_ids(events: list[dict[str, Any]]) -> list[str]:
    """The entry ids the adapter's "saved" event announced."""
    (saved,) = [
        e.get('data') or e.get('value')
        for e in events
        if e.get('type') == 'data-conversation-saved' or e.get('name') == 'pydantic_ai_conversation_saved'
    ]
    assert saved is not None
    return list(saved['entry_ids'])


def vercel_body(cid: str, uid: str, prompt: str, trigger: str = 'submit-message') -> dict[str, Any]:
    return {
        'trigger': trigger,
        'id': cid,
        'messages': [{'id': uid, 'role': 'user', 'parts': [{'type': 'text', 'text': prompt}]}],
    }


def agui_body(cid: str, uid: str, prompt: str) -> dict[str, Any]:
    return {
        'threadId': cid,
        'runId': f'run-{uid}',
        'state': None,
        'messages': [{'id': uid, 'role': 'user', 'content': prompt}],
        'tools': [],
        'context': [],
        'forwardedProps': {},
    }


async def through_vercel(store: SessionStore, agent: Agent[None, str], cid: str, uid: str, prompt: str) -> list[str]:
    return saved_ids(await post(adapter_app(store, agent, VercelAIAdapter), vercel_body(cid, uid, prompt)))


async def through_agui(store: SessionStore, agent: Agent[None, str], cid: str, uid: str, prompt: str) -> list[str]:
    return saved_ids(await post(adapter_app(store, agent, AGUIAdapter), agui_body(cid, uid, prompt)))


DOORS: dict[str, Door] = {'agent.run': through_agent_run, 'vercel': through_vercel, 'ag-ui': through_agui}


def compaction_texts(messages: list[ModelMessage]) -> list[str | None]:
    return [
        p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, CompactionPart)
    ]


@pytest.mark.slow
@pytest.mark.parametrize('door', DOORS)
async def test_sixty_turns_through_the_door_are_archived_whole_and_summarized_incrementally(
    store_factory: StoreFactory, door: str
) -> None:
    recorder, assistant = RecordingSummarizer(), Assistant()
    store, agent = store_factory(processor=summarizing(recorder)), make_agent(Assistant())
    agent = make_agent(assistant)
    loads.clear()
    saved: list[str] = []
    for turn in range(TURNS):
        saved += await DOORS[door](store, agent, 'c', f'u{turn}', f'T{turn} please look this up')

    archive = await store.history('c', limit=None)
    assert len(archive) == 4 * TURNS
    assert [m for m in archive if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)]
    prompts = [p.content for m in archive for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == [f'T{turn} please look this up' for turn in range(TURNS)]
    assert len(await (await store.session('c')).branches()) == 1
    # The entries the doors reported saving are the archive's, each once.
    entries = await store.conversations.load_entries('c')
    assert entries is not None and len(saved) == 4 * TURNS == len(set(saved))
    assert [entry.id for entry in entries][-4:] == saved[-4:], 'the saved ids are not the stored entries'

    summaries = await store.summaries('c')
    assert len(summaries) >= 5
    assert len(recorder.inputs) <= 2 * len(summaries)
    summarized = [set(_MARK.findall(block)) for prompt in recorder.inputs for block in NEW_MESSAGES.findall(prompt)]
    assert all(not (a & b) for i, a in enumerate(summarized) for b in summarized[i + 1 :]), 'a turn summarized twice'
    for index, prompt in enumerate(recorder.inputs[1:], start=1):
        (previous,) = PREVIOUS.findall(prompt)
        assert f'SUMMARY-{index} ' in previous, 'a summary that does not build on the one before'
    assert max(len(request) for request in assistant.requests) <= 30
    assert not loads or max(loads) <= 30

    # The window a Session opens on the id is the one the door hands out.
    conversation = await store.conversations.load('c')
    assert conversation is not None
    assert conversation.messages == await (await store.session('c')).context()

    # A new store on the same database: the first request holds the last stored summary; no summarizer call
    # unless the stored window has reached the trigger again.
    calls, window = len(recorder.inputs), await store.window('c')
    await store.close()
    restarted_assistant = Assistant()
    restarted = store_factory(processor=summarizing(recorder))
    await DOORS[door](restarted, make_agent(restarted_assistant), 'c', 'u-after', f'T{TURNS} and after the restart')
    first = restarted_assistant.requests[0]
    assert summaries[-1].text in compaction_texts(first) or len(recorder.inputs) > calls
    if len(window.messages) < TRIGGER:
        assert len(recorder.inputs) == calls
        assert compaction_texts(first) == [(await restarted.summaries('c'))[-1].text]


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize('door', DOORS)
@pytest.mark.parametrize('kind', ['Summarization', 'ContextManagerCapability'])
@pytest.mark.parametrize('store_processor', [False, True])
async def test_an_agent_carrying_its_own_summarizer_has_its_summaries_stored(
    store_factory: StoreFactory, door: str, kind: str, store_processor: bool
) -> None:
    """The summarizer on the agent, as pydantic-ai's docs show: on a conversation the store keeps, it compacts
    through pydantic-ai's compaction protocol, and each summary it makes is stored once, as the next link of the
    conversation's chain, never as a message; the model is sent it, and every message is archived once, in order."""
    recorder, assistant = RecordingSummarizer(), Assistant()
    own = (
        # Below the store's trigger, when it has one: else its load compacts first, and the agent's has nothing to do.
        Summarization(FunctionModel(recorder), trigger=('messages', TRIGGER // 2), keep=('messages', KEEP))
        if kind == 'Summarization'
        else ContextManagerCapability(summarization_model=FunctionModel(recorder), max_tokens=150)
    )
    agent = Agent(FunctionModel(assistant, stream_function=assistant.stream), capabilities=[own])
    store = store_factory(processor=summarizing(RecordingSummarizer()) if store_processor else None)
    turn = 0
    while not recorder.inputs and turn < TURNS:
        await DOORS[door](store, agent, 'c', f'u{turn}', f'T{turn} please look this up')
        turn += 1
    assert recorder.inputs, 'the agent never summarized'
    made = [f'SUMMARY-{n} of the conversation so far' for n in range(1, len(recorder.inputs) + 1)]
    chain = [s.text for s in await store.summaries('c')]
    assert chain[-len(made) :] == made
    assert made[-1] in compaction_texts(assistant.requests[-1])
    archive = await store.history('c', limit=None)
    assert sorted(marks(archive), key=lambda m: int(m[1:])) == [f'T{t}' for t in range(turn)]
    assert not compaction_texts(archive)


def resubmit(adapter: str, cid: str, uid: str, prompt: str, *, regenerate: bool = False) -> dict[str, Any]:
    """What a front end sends to answer its message `uid` again (Vercel AI's Regenerate), or with new text (an
    edit): AG-UI has no trigger, and resubmits the message under its own id."""
    if adapter == 'vercel':
        return vercel_body(cid, uid, prompt, 'regenerate-message' if regenerate else 'submit-message')
    return agui_body(cid, uid, prompt)


def marks(messages: list[ModelMessage]) -> set[str]:
    return {mark for message in messages for part in message.parts for mark in _MARK.findall(str(part))}


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize('adapter', ADAPTERS)
async def test_regenerate_and_edit_in_a_summarized_conversation_keep_branches_that_never_leak(
    store_factory: StoreFactory, adapter: str
) -> None:
    recorder, assistant = RecordingSummarizer(), Assistant()
    store, agent = store_factory(processor=summarizing(recorder)), make_agent(assistant)
    app = adapter_app(store, agent, ADAPTERS[adapter])
    for turn in range(30):
        await post(app, resubmit(adapter, 'c', f'u{turn}', f'T{turn} please look this up'))
    before = len(await store.summaries('c'))
    assert before >= 3

    # Regenerate the last answer, then edit the last prompt: each replaced turn stays stored as a branch.
    regenerated = await post(app, resubmit(adapter, 'c', 'u29', 'T29 please look this up', regenerate=True))
    assert saved_ids(regenerated)
    await post(app, resubmit(adapter, 'c', 'u29', 'T90 instead, edited'))
    branches = await (await store.session('c')).branches()
    assert len(branches) == 3 and sum(b.active for b in branches) == 1
    archive = await store.history('c', limit=None)
    assert len(archive) == 4 * 30 and marks(archive[-4:]) == {'T90'}
    replaced = [b for b in branches if not b.active]
    for branch in replaced:
        kept = await store.history('c', branch=branch.tip, limit=None)
        assert marks(kept[-4:]) == {'T29'}

    # The edited branch goes on, summarized on its own: no request and no summary input holds the replaced turns.
    sent_before, inputs_before = len(assistant.requests), len(recorder.inputs)
    for turn in range(91, 101):
        await post(app, resubmit(adapter, 'c', f'e{turn}', f'T{turn} on the edited branch'))
    after = assistant.requests[sent_before:]
    assert all('T29' not in marks(request) for request in after)
    assert all('T29' not in prompt for prompt in recorder.inputs[inputs_before:])
    assert len(await store.summaries('c')) > before
    assert max(len(request) for request in assistant.requests) <= 30
    conversation = await store.conversations.load('c')
    assert conversation is not None and conversation.messages == await (await store.session('c')).context()
    # Each replaced branch still reads whole, with the summaries made on its path.
    for branch in replaced:
        assert len(await store.history('c', branch=branch.tip, limit=None)) == 4 * 30


@pytest.mark.slow_on_postgresql
async def test_a_tool_call_waiting_for_approval_survives_a_compaction_and_is_answered(
    store_factory: StoreFactory,
) -> None:
    """The run pauses on a call that needs approval; the next load compacts the window, which must keep the
    call; the approval then runs the tool, whose return pairs with the call the model sees."""
    recorder, assistant = RecordingSummarizer(), Assistant()
    trigger = 18  # windows grow 4 messages a turn: the paused turn's 2 reach it
    store = store_factory(
        processor=SummarizationProcessor(
            FunctionModel(recorder), trigger=('messages', trigger), keep=('messages', KEEP)
        )
    )

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), '')
        if isinstance(prompt, str) and prompt.startswith('refund'):
            return ModelResponse(parts=[ToolCallPart('refund', {'order': 'ORDER-7'}, tool_call_id='refund-1')])
        return assistant(messages, info)

    agent = Agent(FunctionModel(model), output_type=[str, DeferredToolRequests], system_prompt='Test.')

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f'{q} looked up'

    @agent.tool_plain(requires_approval=True)
    def refund(order: str) -> str:
        return f'{order} refunded'

    conversations = store.conversations
    # Turns until the paused one (two more messages) takes the stored window to the trigger, after a summary.
    turn = 0
    await store.session('c')
    while not await store.summaries('c') or len((await store.window('c')).messages) != trigger - 2:
        conversation = await conversations.load('c') or Conversation(conversation_id='c')
        await conversations.save(await agent.run(f'T{turn} please', conversation=conversation, usage_limits=UNLIMITED))
        turn += 1
    loaded = await conversations.load('c')
    assert loaded is not None
    paused = await agent.run('refund ORDER-7', conversation=loaded, usage_limits=UNLIMITED)
    assert isinstance(paused.output, DeferredToolRequests)
    await conversations.save(paused)
    calls = len(recorder.inputs)

    resumed = await conversations.load('c')
    assert resumed is not None and len(recorder.inputs) > calls, 'the load compacted the window'
    assert resumed.deferred_tool_requests is not None
    assert [c.tool_call_id for c in resumed.deferred_tool_requests.approvals] == ['refund-1']
    shown = [p for m in resumed.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert 'refund-1' in [p.tool_call_id for p in shown], 'the pending call stays in the window'
    answered = await agent.run(
        conversation=resumed,
        deferred_tool_results=DeferredToolResults(approvals={'refund-1': True}),
        usage_limits=UNLIMITED,
    )
    await conversations.save(answered)
    returns = [p for m in answered.new_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [(r.tool_call_id, r.content) for r in returns] == [('refund-1', 'ORDER-7 refunded')]
    archive = await store.history('c', limit=None)
    assert sum(isinstance(p, ToolReturnPart) and p.tool_call_id == 'refund-1' for m in archive for p in m.parts) == 1
    assert (await conversations.load('c')).deferred_tool_requests is None  # type: ignore[union-attr]


async def test_a_save_after_another_store_saved_is_a_conflict_and_stores_nothing(store_factory: StoreFactory) -> None:
    """One store's door keeps the record it loaded, to save without reading it again; the write checks the
    revision itself, so a save on a conversation another process saved since is still refused whole."""
    mine, theirs = (store_factory(processor=summarizing(RecordingSummarizer())) for _ in range(2))
    assert mine.conversations is mine.conversations  # one door per store: what it keeps serves every caller
    agent = make_agent(Assistant())
    await mine.session('shared')
    first = await mine.conversations.load('shared')
    assert first is not None
    await mine.conversations.save(await agent.run('Turn M1', conversation=first))

    stale = await mine.conversations.load('shared')
    fresh = await theirs.conversations.load('shared')
    assert stale is not None and fresh is not None and stale.revision == fresh.revision
    await theirs.conversations.save(await agent.run('Turn M2 from the other process', conversation=fresh))
    with pytest.raises(ConversationConflict):
        await mine.conversations.save(await agent.run('Turn M3 on a stale load', conversation=stale))

    async def prompts(store: SessionStore) -> list[Any]:
        history = await store.history('shared')
        return [part.content for message in history for part in message.parts if isinstance(part, UserPromptPart)]

    assert await prompts(mine) == ['Turn M1', 'Turn M2 from the other process']
    # The next load sees the other store's turn, and a save on it goes through.
    reloaded = await mine.conversations.load('shared')
    assert reloaded is not None and reloaded.revision != stale.revision
    await mine.conversations.save(await agent.run('Turn M3 again', conversation=reloaded))
    assert await prompts(theirs) == ['Turn M1', 'Turn M2 from the other process', 'Turn M3 again']


async def test_two_stores_taking_turns_each_load_what_a_fresh_store_loads(store_factory: StoreFactory) -> None:
    """A door passes what it knows of the row it read or wrote last (its tip, the entry before its window) with the
    next read, which the database takes only at that row's revision. Two stores taking turns on one conversation,
    through compactions that move the window, each read the record and load the window a store that knows nothing
    reads and loads, and the archive stays one chain."""
    stores = [store_factory(processor=summarizing(RecordingSummarizer())) for _ in range(2)]
    agent = make_agent(Assistant())
    await stores[0].session('shared')
    turn = 0
    for _ in range(4):
        for store in stores:  # each store takes three turns in a row, then hands over
            for _ in range(3):
                conversation = await store.conversations.load('shared')
                assert conversation is not None
                fresh = store_factory()
                assert await store.conversations.read_record('shared') == await fresh.conversations.read_record(
                    'shared'
                )
                reloaded = await fresh.conversations.load('shared')
                assert reloaded is not None and conversation.messages == reloaded.messages
                # each entry's parent too: the first follows the entry before the window
                assert await store.conversations.load_entries('shared') == await fresh.conversations.load_entries(
                    'shared'
                )
                await store.conversations.save(
                    await agent.run(f'T{turn} please', conversation=conversation, usage_limits=UNLIMITED)
                )
                turn += 1

    history = await stores[1].history('shared')
    prompts = [p.content for m in history for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == [f'T{n} please' for n in range(turn)]
    record = await stores[0].conversations.read_record('shared')
    assert record is not None and record.head_id is not None
    chain: list[str] = []  # from the head back to the root, through each entry's parent
    entry_id: str | None = record.head_id
    while entry_id is not None:
        chain.append(entry_id)
        entry_id = (await stores[0].conversations.read_entry(entry_id)).parent_id
    assert len(chain) == len(history)


async def test_a_tool_return_pickle_cannot_take_is_kept_and_handed_out_as_copies(store_factory: StoreFactory) -> None:
    """The door copies what it keeps and hands out through pickle, and through `deepcopy` what pickle can't take (a
    class defined in a function): the caller changing its return after the save, or a load's, changes no load."""

    @dataclass
    class Found:
        items: list[str]

    found = Found(['ORD-1'])
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(found)
    store = store_factory(processor=summarizing(RecordingSummarizer()))
    await store.session('c')
    loaded = await store.conversations.load('c')
    assert loaded is not None
    turn: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart('T0 find my order')]),
        ModelResponse(parts=[ToolCallPart('lookup', {'q': 'T0'}, tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart('lookup', found, tool_call_id='c1')]),
        ModelResponse(parts=[TextPart('answer: ORD-1')]),
    ]
    await store.conversations.save(replace(loaded, messages=[*loaded.messages, *turn]))
    found.items.append('changed by the caller')

    def returned(conversation: Conversation | None) -> Any:
        assert conversation is not None
        (content,) = [p.content for m in conversation.messages for p in m.parts if isinstance(p, ToolReturnPart)]
        return content

    first = returned(await store.conversations.load('c'))
    assert first.items == ['ORD-1']
    first.items.append('changed by a reader')
    assert returned(await store.conversations.load('c')).items == ['ORD-1']


async def test_loads_between_compactions_hand_out_the_stored_window_as_copies(store_factory: StoreFactory) -> None:
    """A window kept in memory grows by each saved turn, and each load hands out copies of it, made from what the
    loads before it copied: over more turns than it keeps apart, every load equals a fresh store's, and a caller
    changing a loaded message in place (a part added, a tool's arguments changed) changes no later load."""
    processor = SummarizationProcessor(
        FunctionModel(RecordingSummarizer()), trigger=('messages', 200), keep=('messages', KEEP)
    )
    store = store_factory(processor=processor)
    agent = make_agent(Assistant())
    await store.session('long')
    for turn in range(15):
        conversation = await store.conversations.load('long')
        assert conversation is not None
        reloaded = await store_factory(processor=processor).conversations.load('long')
        assert reloaded is not None and conversation.messages == reloaded.messages
        assert len(conversation.messages) == 4 * turn
        for message in conversation.messages:  # what a careless caller might do to what it loaded
            if isinstance(message, ModelResponse) and isinstance(message.parts[0], ToolCallPart):
                message.parts[0].args = {'q': 'changed'}
            assert isinstance(message.parts, list)  # a list, as pydantic-ai makes them
            message.parts.append(TextPart('added by the caller'))
        conversation = await store.conversations.load('long')
        assert conversation is not None and conversation.messages == reloaded.messages
        await store.conversations.save(
            await agent.run(f'T{turn} please', conversation=conversation, usage_limits=UNLIMITED)
        )
    assert not await store.summaries('long')


def untimed_turns(turns: int) -> list[ModelMessage]:
    """`turns` turns as `Assistant` answers them, built by hand as an import or an older pydantic-ai leaves them:
    no request carries a timestamp. The first opens with the agent's system prompt."""
    messages: list[ModelMessage] = []
    for turn in range(turns):
        opening = [SystemPromptPart('You are the test assistant.')] if turn == 0 else []
        messages += [
            ModelRequest(parts=[*opening, UserPromptPart(f'T{turn} please look this up')]),
            ModelResponse(parts=[ToolCallPart('lookup', {'q': f'T{turn}'}, tool_call_id='call_0')]),
            ModelRequest(parts=[ToolReturnPart('lookup', f'T{turn} looked up', tool_call_id='call_0')]),
            ModelResponse(parts=[TextPart(f'answer: T{turn} looked up')]),
        ]
    assert all(m.timestamp is None for m in messages if isinstance(m, ModelRequest))
    return messages


@pytest.mark.parametrize('door', ['vercel', 'ag-ui'])
@pytest.mark.parametrize('windowing', ['summarizing', 'sliding'])
async def test_a_turn_on_a_history_without_timestamps_stores_the_turn_alone(
    store_factory: StoreFactory, door: str, windowing: str
) -> None:
    """The UI adapters' system prompt reinjector (pydantic-ai 2.78) saves the history's opening request a second
    time, after the new turn, when that request has no timestamp. The opening of a window the store built (the
    summary, or the system prompt bridged past a cut) is its own request, and carries one."""
    processor = (
        summarizing(RecordingSummarizer())
        if windowing == 'summarizing'
        else SlidingWindowProcessor(trigger=('messages', TRIGGER), keep=('messages', KEEP))
    )
    store = store_factory(processor=processor)
    history = untimed_turns(8)
    await store.conversations.save(Conversation(conversation_id='c', messages=history))
    assistant = Assistant()
    await DOORS[door](store, make_agent(assistant), 'c', 'u8', 'T8 please look this up')

    (sent, *_) = assistant.requests
    assert len(sent) < len(history), 'the door ran on the whole history, not a window'
    archive = await store.history('c', limit=None)
    assert ModelMessagesTypeAdapter.dump_python(archive[: len(history)]) == ModelMessagesTypeAdapter.dump_python(
        history
    )
    added = archive[len(history) :]
    prompts = [
        p.content for m in added if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)
    ]
    assert (len(added), prompts, compaction_texts(added)) == (4, ['T8 please look this up'], [])
