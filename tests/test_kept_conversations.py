"""An agent's own summarizer on a conversation a `SessionStore` handed out compacts through pydantic-ai's compaction
protocol, wherever the load ran (in another task: `create_task`, `gather`, a task group; or another thread), so the
save of its run stores the summary as the next link of the conversation's chain, and the next load starts from it.

And only there: a `Session`'s run, which stores what its own summarizer makes, still summarizes after a load of its
conversation, and an agent's summarizer on a history no SessionStore handed out (built by hand, from pydantic-ai's
`InMemoryConversationStore`, or holding a message object the caller also saved) summarizes as it always did.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Awaitable, Callable
from copy import copy
from dataclasses import dataclass, field

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import InMemoryConversationStore
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import ContextManagerCapability, Summarization, SummarizationProcessor, summary_text
from processors.stored_conversations import keep_conversation, kept_by_store, unkept
from session_store import SessionStore
from testkit.scripted import RecordingSummarizer

# The PostgreSQL variants run in the slow tier: the refusal is no database code, and SQLite's run in the quick one.
pytestmark = pytest.mark.slow_on_postgresql


StoreFactory = Callable[..., SessionStore]
KINDS = ('Summarization', 'ContextManagerCapability')


@dataclass
class Assistant:
    """Answers each prompt `T<n> ...` with `answer to T<n>` after `lookups` calls of `lookup`, one at a time; every
    request kept. The turn's mark rides in the tool's arguments and returns, so a window cut before the prompt
    still answers it."""

    lookups: int = 0
    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        last = messages[-1]
        prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
        if isinstance(prompt, str):
            mark, done = prompt.split()[0], 0
        else:
            found = next(p.content for p in last.parts if isinstance(p, ToolReturnPart))
            mark, step = str(found).split()[0].split('-')
            done = int(step) + 1
        if done < self.lookups:
            return ModelResponse(parts=[ToolCallPart('lookup', {'q': f'{mark}-{done}'})])
        return ModelResponse(parts=[TextPart(f'answer to {mark}')])


def make_agent(assistant: Assistant, *capabilities: AbstractCapability[None]) -> Agent[None, str]:
    agent = Agent(FunctionModel(assistant), system_prompt='You look things up.', capabilities=list(capabilities))

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f'{q} found'

    return agent


def own_summarizer(kind: str, recorder: RecordingSummarizer) -> Summarization | ContextManagerCapability:
    """The agent's own summarizer of `kind`: a `ContextManagerCapability` asked to compact its next request."""
    if kind == 'Summarization':
        return Summarization(FunctionModel(recorder), trigger=('messages', 4), keep=('messages', 2))
    manager = ContextManagerCapability(summarization_model=FunctionModel(recorder))
    manager.request_compact()
    return manager


def summarizing(recorder: RecordingSummarizer) -> SummarizationProcessor:
    return SummarizationProcessor(FunctionModel(recorder), trigger=('messages', 8), keep=('messages', 4))


async def seed(store: SessionStore, turns: int = 2) -> list[ModelMessage]:
    """`turns` turns of conversation `c`, run through its session by an agent without a summarizer; the archive."""
    session = await store.session('c')
    for turn in range(turns):
        await session.run(make_agent(Assistant(lookups=1)), f'T{turn} look it up')
    return await store.history('c', limit=None)


Load = Callable[[SessionStore, str, str], Awaitable[Conversation | None]]
"""Loads a conversation from (a store on) the database, somewhere other than in the caller's task."""


async def in_a_task(store: SessionStore, url: str, cid: str) -> Conversation | None:
    return await asyncio.create_task(store.conversations.load(cid))


async def in_gather(store: SessionStore, url: str, cid: str) -> Conversation | None:
    loaded, _ = await asyncio.gather(store.conversations.load(cid), store.conversations.load('another'))
    return loaded


async def in_a_task_group(store: SessionStore, url: str, cid: str) -> Conversation | None:
    async with asyncio.TaskGroup() as group:
        task = group.create_task(store.conversations.load(cid))
    return task.result()


async def in_a_thread(store: SessionStore, url: str, cid: str) -> Conversation | None:
    """A worker thread with an event loop and a store of its own on the same database."""

    async def load_there() -> Conversation | None:
        async with SessionStore(url, processor=summarizing(RecordingSummarizer())) as there:
            return await there.conversations.load(cid)

    return await asyncio.to_thread(asyncio.run, load_there())


LOADS: dict[str, Load] = {
    'create_task': in_a_task,
    'gather': in_gather,
    'TaskGroup': in_a_task_group,
    'thread': in_a_thread,
}


def sent_summaries(requests: list[list[ModelMessage]]) -> list[str]:
    """The summary texts the model was sent, request by request."""
    return [text for request in requests for message in request if (text := summary_text(message)) is not None]


@pytest.mark.parametrize('where', LOADS)
@pytest.mark.parametrize('kind', KINDS)
async def test_an_agents_own_summarizer_is_stored_wherever_the_load_ran(
    store_factory: StoreFactory, db_url: str, where: str, kind: str
) -> None:
    store = store_factory(processor=summarizing(RecordingSummarizer()))
    archive = await seed(store)
    conversation = await LOADS[where](store, db_url, 'c')
    before = await store.summaries('c')  # with the one the load may have made
    assert conversation is not None and conversation.messages[-1] == archive[-1]
    assistant, recorder = Assistant(lookups=1), RecordingSummarizer()
    agent = make_agent(assistant, own_summarizer(kind, recorder))

    result = await agent.run('T9 look it up', conversation=conversation)
    await store.conversations.save(result)

    assert result.output == 'answer to T9'
    assert [c.reason for c in result.compactions] == ['threshold' if kind == 'Summarization' else 'manual']
    made = 'SUMMARY-1 of the conversation so far'
    assert recorder.inputs and made in sent_summaries(assistant.requests)
    # The archive gains the run's messages only; the summary is the chain's next link, and the next load opens on it.
    assert await store.history('c', limit=None) == [*archive, *result.new_messages()]
    chain = await store.summaries('c')
    assert [s.text for s in chain] == [*(s.text for s in before), made]
    reloaded = await store.conversations.load('c')
    assert reloaded is not None and sent_summaries([reloaded.messages]) == [made]


@pytest.mark.parametrize('kind', KINDS)
async def test_the_loaded_messages_passed_as_message_history_compact_through_the_framework_too(
    store_factory: StoreFactory, kind: str
) -> None:
    store = store_factory()
    await seed(store)
    conversation = await asyncio.create_task(store.conversations.load('c'))
    assert conversation is not None
    assistant, recorder = Assistant(), RecordingSummarizer()

    result = await make_agent(assistant, own_summarizer(kind, recorder)).run(
        'T9 look it up', message_history=conversation.messages
    )

    assert len(result.compactions) == 1 and len(recorder.inputs) == 1
    assert 'SUMMARY-1 of the conversation so far' in sent_summaries(assistant.requests)


@pytest.mark.parametrize('where', ['same task', 'child task', 'same task, run under another conversation id'])
@pytest.mark.parametrize('kind', ['SummarizationProcessor', 'ContextManagerCapability'])
async def test_a_session_still_runs_and_stores_its_summarizer_after_a_load_of_its_conversation(
    store_factory: StoreFactory, where: str, kind: str
) -> None:
    """The session runs its own copy of the processor and stores what it makes: a load of the same conversation,
    in its task or another, refuses nothing, though the run starts from the very message objects the load handed
    out and marked (the window kept in memory), and whatever conversation id the run is given."""
    recorder = RecordingSummarizer()
    processor = (
        summarizing(recorder)
        if kind == 'SummarizationProcessor'
        else ContextManagerCapability(summarization_model=FunctionModel(recorder), max_tokens=100_000)
    )
    store = store_factory(processor=processor)
    await seed(store)
    load = store.conversations.load('c')
    loaded = await (asyncio.create_task(load) if where == 'child task' else load)
    assert loaded is not None
    before = await store.summaries('c')  # the load may have compacted the window first, and stored that summary
    if isinstance(processor, ContextManagerCapability):
        processor.request_compact()
    assistant = Assistant(lookups=3)

    run_as = {'conversation_id': 'thread-7'} if 'another' in where else {}
    result = await (await store.session('c')).run(make_agent(assistant), 'T5 look it up', **run_as)

    assert result.output == 'answer to T5'
    summaries = await store.summaries('c')
    assert len(summaries) == len(before) + 1 and len(summaries) == len(recorder.inputs)
    made = summaries[-1].text
    assert made == f'SUMMARY-{len(recorder.inputs)} of the conversation so far'
    assert made in sent_summaries(assistant.requests)
    archive = await store.history('c', limit=None)
    assert archive[-len(result.new_messages()) :] == result.new_messages()


async def test_an_agents_own_summarizer_summarizes_a_history_built_by_hand(store_factory: StoreFactory) -> None:
    """Even under the id of a conversation loaded from the store in another task: the id alone marks nothing there."""
    store = store_factory(processor=summarizing(RecordingSummarizer()))
    await seed(store)
    assert await asyncio.create_task(store.conversations.load('c')) is not None
    history = (await make_agent(Assistant(lookups=1)).run('T0 look it up', conversation_id='c')).all_messages()
    assistant, recorder = Assistant(lookups=1), RecordingSummarizer()

    result = await make_agent(assistant, own_summarizer('Summarization', recorder)).run(
        'T1 look it up', message_history=history, conversation_id='c'
    )

    assert result.output == 'answer to T1'
    assert recorder.inputs and 'T0 look it up' in recorder.inputs[0]
    assert 'SUMMARY-1 of the conversation so far' in sent_summaries(assistant.requests)


@pytest.mark.parametrize('kind', KINDS)
async def test_an_agents_own_summarizer_summarizes_a_conversation_from_pydantic_ais_in_memory_store(
    store_factory: StoreFactory, kind: str
) -> None:
    store = store_factory()
    await seed(store)
    assert await asyncio.create_task(store.conversations.load('c')) is not None  # messages of the SQL store marked
    memory = InMemoryConversationStore()
    await memory.save(await make_agent(Assistant(lookups=1)).run('T0 look it up', conversation_id='c'))
    conversation = await asyncio.create_task(memory.load('c'))
    assert conversation is not None
    assistant, recorder = Assistant(lookups=1), RecordingSummarizer()

    result = await make_agent(assistant, own_summarizer(kind, recorder)).run('T1 look it up', conversation=conversation)

    assert result.output == 'answer to T1'
    assert recorder.inputs and 'T0 look it up' in recorder.inputs[0]
    assert 'SUMMARY-1 of the conversation so far' in sent_summaries(assistant.requests)
    await memory.save(result)
    stored = await memory.load('c')
    assert stored is not None and stored.messages == result.all_messages()
    assert isinstance(stored.messages[-1], ModelResponse) and stored.messages[-1].text == 'answer to T1'


async def test_a_message_the_caller_saved_stays_unmarked_by_later_loads(store_factory: StoreFactory) -> None:
    """The window the store keeps in memory after a save, which the next load hands out and marks, holds copies of
    the saved messages, never the caller's objects: another history holding the same object (a canned reply an
    app reuses) is not refused."""
    store = store_factory(processor=summarizing(RecordingSummarizer()))
    await seed(store)
    conversation = await store.conversations.load('c')
    assert conversation is not None
    canned = ModelResponse(parts=[TextPart('We open at nine.')])
    conversation.messages += [ModelRequest(parts=[UserPromptPart('T7 when do you open?')]), canned]
    await store.conversations.save(conversation)
    reloaded = await asyncio.create_task(store.conversations.load('c'))
    assert reloaded is not None and reloaded.messages[-1] == canned

    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart('T1 when do you open?')]), canned]
    assistant, recorder = Assistant(lookups=1), RecordingSummarizer()
    result = await make_agent(assistant, own_summarizer('Summarization', recorder)).run(
        'T2 look it up', message_history=history
    )

    assert result.output == 'answer to T2'
    assert recorder.inputs and 'We open at nine.' in recorder.inputs[0]
    assert 'SUMMARY-1 of the conversation so far' in sent_summaries(assistant.requests)


async def test_a_mark_is_on_that_object_only_and_holds_it_no_longer_than_its_users_do() -> None:
    message = ModelRequest(parts=[UserPromptPart('T0 hello')])
    keep_conversation('kept', [message])

    assert kept_by_store('elsewhere', [copy(message), message]) == 'kept'
    with unkept('kept'):
        assert kept_by_store('elsewhere', [message]) is None
    assert kept_by_store('elsewhere', [copy(message)]) is None  # equal, but not the object the store handed out

    held = weakref.ref(message)
    del message
    gc.collect()
    assert held() is None
