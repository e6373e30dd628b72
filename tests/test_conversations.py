"""`SQLConversationStore`: pydantic-ai's `ConversationStore` over the session tables, on SQLite and PostgreSQL.

Real agents (`FunctionModel`) run through `agent.run(conversation=...)`; the tests check what the
store holds afterwards, through the conversation API and through `SessionStore`'s own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationRecord, ConversationStore
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from processors import SummarizationProcessor, count_tokens_approximately
from session_store import SessionConflict, SessionExport, SessionNotFound, SessionStore, SQLConversationStore
from session_store._conversation_rows import RECORD, RecordRow
from session_store._history.runs import SessionHead
from session_store.rows import MessageRow
from testkit.scripted import ParallelToolAssistant, scripted_agent
from tests._events import listening

StoreFactory = Callable[..., SessionStore]


def assistant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Each user turn: one `lookup` call for the prompt, then an answer quoting its result."""
    last = messages[-1]
    prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
    if isinstance(prompt, str):
        return ModelResponse(parts=[ToolCallPart('lookup', {'q': prompt})])
    found = next(p.content for p in last.parts if isinstance(p, ToolReturnPart))
    # How many messages the model saw, so a test can tell the stored history reached it.
    return ModelResponse(parts=[TextPart(f'{found} (seen {len(messages)})')])


def make_agent() -> Agent[None, str]:
    agent = Agent(FunctionModel(assistant))

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f'result for {q}'

    return agent


async def run_turn(
    conversations: SQLConversationStore, agent: Agent[None, Any], conversation_id: str, prompt: str, **kw: Any
) -> list[ModelMessage]:
    """Load (or start) the conversation, run one turn on it, save it; the run's new messages."""
    conversation = await conversations.load(conversation_id, scope=kw.get('scope'))
    if conversation is None:
        conversation = Conversation(conversation_id=conversation_id)
    result = await agent.run(prompt, conversation=conversation)
    await conversations.save(result, **kw)
    return result.new_messages()


def texts(messages: list[ModelMessage]) -> list[str]:
    """The text answers in `messages`, for asserting on content."""
    return [p.content for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, TextPart)]


@contextmanager
def statements(store: SessionStore) -> Iterator[list[str]]:
    """Every query the store's engine sends while the block runs (transaction control left out)."""
    sent: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if not statement.lstrip().upper().startswith(('BEGIN', 'COMMIT', 'ROLLBACK')):
            sent.append(statement)

    with listening(store, 'before_cursor_execute', record):
        yield sent


async def message_rows(store: SessionStore) -> int:
    async with AsyncSession(store.engine) as db:
        return int(await db.scalar(select(func.count()).select_from(MessageRow)) or 0)


async def test_runs_round_trip_and_share_the_session_archive(store_factory: StoreFactory) -> None:
    store = store_factory()
    conversations = store.conversations
    agent = make_agent()

    runs = [await run_turn(conversations, agent, 'support-1', f'order {n}') for n in range(3)]

    # Each run: prompt, tool call, tool return, answer; the model saw the stored turns before it.
    assert [len(run) for run in runs] == [4, 4, 4]
    assert texts(runs[2]) == ['result for order 2 (seen 11)']
    archive = [message for run in runs for message in run]
    # Stored once each, in order, and readable both ways: the archive is the one Session uses.
    assert await store.history('support-1', limit=None) == archive
    loaded = await conversations.load('support-1')
    assert loaded is not None
    assert loaded.messages == archive
    assert loaded.usage.requests == 6 and loaded.usage.tool_calls == 3
    entries = await conversations.load_entries('support-1')
    assert entries is not None
    assert [e.parent_id for e in entries] == [None, *(e.id for e in entries[:-1])]
    record = await conversations.read_record('support-1')
    assert record is not None and record.head_id == entries[-1].id and record.revision == loaded.revision
    # Token counts were counted once with the store's processor's counter, as for a Session's messages.
    exported = await store.export('support-1')
    assert exported.tokens == [count_tokens_approximately([m]) for m in archive]

    # A Session continues the same conversation, and the conversation API then sees its turn.
    session = await store.session('support-1')
    by_session = (await session.run(agent, 'order 3')).new_messages()
    assert texts(by_session) == ['result for order 3 (seen 15)']
    after = await run_turn(conversations, agent, 'support-1', 'order 4')
    assert texts(after) == ['result for order 4 (seen 19)']
    assert await store.history('support-1', limit=None) == [*archive, *by_session, *after]
    assert [info.message_count for info in await store.sessions()] == [20]


async def test_two_writers_on_one_revision_conflict(store_factory: StoreFactory) -> None:
    store = store_factory()
    conversations = store.conversations
    agent = make_agent()
    first_turn = await run_turn(conversations, agent, 'shared', 'first')

    one = await conversations.load('shared')
    two = await conversations.load('shared')
    assert one is not None and two is not None and one.revision == two.revision
    won = await agent.run('from one', conversation=one)
    lost = await agent.run('from two', conversation=two)
    await conversations.save(won)
    with pytest.raises(ConversationConflict) as raised:
        await conversations.save(lost)
    assert raised.value.conversation_id == 'shared'
    # The loser stored nothing: the archive is the first turn and the winner's.
    assert await store.history('shared', limit=None) == [*first_turn, *won.new_messages()]

    # `save` checks the revision it reads first; the write itself checks it again, atomically, for
    # the writer that read it just before the other one wrote.
    record = await conversations.read_record('shared')
    assert record is not None
    with pytest.raises(SessionConflict) as raised_by_write:
        await conversations.write_record(record, expected_revision=one.revision)
    assert isinstance(raised_by_write.value, ConversationConflict)
    assert len(await store.history('shared', limit=None)) == 8

    # Two saves racing from one revision: exactly one lands.
    three = await conversations.load('shared')
    four = await conversations.load('shared')
    assert three is not None and four is not None
    runs = [await agent.run(prompt, conversation=c) for prompt, c in (('three', three), ('four', four))]
    outcomes = await asyncio.gather(*(conversations.save(run) for run in runs), return_exceptions=True)
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failed) == 1 and isinstance(failed[0], ConversationConflict), outcomes
    landed = runs[outcomes.index(next(o for o in outcomes if not isinstance(o, BaseException)))]
    assert await store.history('shared', offset=8, limit=None) == landed.new_messages()

    # Starting a conversation under an id that is taken is a conflict too, not an overwrite.
    fresh = await agent.run('hello', conversation=Conversation(conversation_id='shared'))
    with pytest.raises(ConversationConflict):
        await conversations.save(fresh)
    assert len(await store.history('shared', limit=None)) == 12


async def test_reading_the_last_messages_is_one_query(store_factory: StoreFactory) -> None:
    store = store_factory()
    conversations = store.conversations
    agent = make_agent()
    for n in range(6):
        await run_turn(conversations, agent, 'long', f'question {n}')
    archive = await store.history('long', limit=None)
    assert len(archive) == 24

    with statements(store) as sent:
        loaded = await conversations.load('long', limit=3)
    assert loaded is not None
    assert loaded.messages == archive[-3:]
    # One SELECT for the record (the session row and its head entry id), one for the head's path
    # through the session's tree, one for the messages.
    assert len(sent) == 3, sent
    assert all(s.lstrip().upper().startswith('SELECT') for s in sent)
    assert 'FROM sessions' in sent[0]

    # The messages are two SELECTs (the path, then its rows) whatever the window, and a window is only its rows.
    record = await conversations.read_record('long')
    assert record is not None
    for limit in (1, 3, 24, None):
        with statements(store) as sent:
            window = await conversations.read_history(record.head_id, limit=limit)
        assert len(sent) == 2, sent
        assert [e.message for e in window] == archive[-limit if limit else 0 :]
    # Against the base class's default, which reads one entry per statement.
    with statements(store) as sent:
        slow = await ConversationStore.read_history(conversations, record.head_id, limit=5)
    assert len(sent) == 5
    assert slow == await conversations.read_history(record.head_id, limit=5)

    # The window's first entry still names its parent, which lies outside the window.
    entries = await conversations.load_entries('long', limit=2)
    everything = await conversations.load_entries('long')
    assert entries is not None and everything is not None
    assert entries[0].parent_id == everything[-3].id
    assert await conversations.read_entry(everything[0].id) == everything[0]
    with pytest.raises(LookupError):
        await conversations.read_entry('no-such-entry')
    with pytest.raises(LookupError):
        await conversations.read_history('no-such-entry')


async def test_scopes_isolate_conversations(store_factory: StoreFactory) -> None:
    store = store_factory()
    conversations = store.conversations
    agent = make_agent()
    alice = await run_turn(conversations, agent, 'chat', 'mine', scope='alice')
    await run_turn(conversations, agent, 'other', 'theirs', scope='bob')

    assert await conversations.load('chat', scope='bob') is None
    assert await conversations.load_entries('chat', scope='bob') is None
    assert [r.conversation_id for r in await conversations.list_conversations(scope='bob')] == ['other']
    assert [r.conversation_id for r in await conversations.list_conversations(scope='alice')] == ['chat']
    assert {r.conversation_id for r in await conversations.list_conversations()} == {'chat', 'other'}

    # Deleting or saving under another scope leaves alice's conversation as it was.
    await conversations.delete('chat', scope='bob')
    mine = await conversations.load('chat', scope='alice')
    assert mine is not None and mine.messages == alice
    result = await agent.run('intrude', conversation=mine)
    with pytest.raises(ConversationConflict):
        await conversations.save(result, scope='bob')
    assert await store.history('chat', scope='alice', limit=None) == alice
    with pytest.raises(SessionNotFound):
        await store.history('chat', scope='bob')
    record = await conversations.read_record('chat')
    assert record is not None and record.scope == 'alice'


async def test_fork_copies_the_kept_history(store_factory: StoreFactory) -> None:
    store = store_factory()
    conversations = store.conversations
    agent = make_agent()
    first = await run_turn(conversations, agent, 'source', 'first', scope='team')
    second = await run_turn(conversations, agent, 'source', 'second', scope='team')
    source_entries = await conversations.load_entries('source')
    assert source_entries is not None

    fork = await conversations.fork('source', at=4, new_conversation_id='alternative')
    assert fork.messages == first
    record = await conversations.read_record('alternative')
    assert record is not None
    assert (record.forked_from, record.forked_at, record.scope) == ('source', source_entries[3].id, 'team')
    fork_entries = await conversations.load_entries('alternative')
    assert fork_entries is not None
    # A copy: the same messages (and token counts) under new entry ids, linked among themselves.
    assert [e.message for e in fork_entries] == first
    assert not {e.id for e in fork_entries} & {e.id for e in source_entries}
    assert [e.parent_id for e in fork_entries] == [None, *(e.id for e in fork_entries[:-1])]
    assert record.head_id == fork_entries[-1].id
    tokens = (await store.export('alternative')).tokens
    assert tokens == (await store.export('source')).tokens[:4]

    # The fork and its source go their own ways, and the fork outlives the source.
    result = await agent.run('elsewhere', conversation=fork)
    await conversations.save(result)
    assert await store.history('source', limit=None) == [*first, *second]
    await conversations.delete('source')
    assert await store.history('alternative', limit=None) == [*first, *result.new_messages()]
    assert texts(result.new_messages()) == ['result for elsewhere (seen 7)']

    # Forking everything carries the usage; forking nothing starts empty.
    whole = await conversations.fork('alternative', new_conversation_id='whole')
    assert whole.messages == await store.history('alternative', limit=None)
    assert whole.usage == result.usage
    empty = await conversations.fork('alternative', at=0, new_conversation_id='empty')
    assert empty.messages == []
    assert await store.history('empty') == []

    # A fork's id must be free.
    with pytest.raises(ConversationConflict):
        await conversations.fork('whole', new_conversation_id='alternative')


async def test_delete_erases_the_conversation(store_factory: StoreFactory) -> None:
    store = store_factory()
    conversations = store.conversations
    agent = make_agent()
    await run_turn(conversations, agent, 'doomed', 'bye')
    kept = await run_turn(conversations, agent, 'kept', 'stay')
    stale = await conversations.load('doomed')
    record = await conversations.read_record('doomed')
    assert stale is not None and record is not None

    with pytest.raises(ConversationConflict):
        await conversations.delete_record('doomed', expected_revision='not-the-revision')
    assert await conversations.read_record('doomed') == record

    await conversations.delete('doomed')
    assert await conversations.load('doomed') is None
    assert [r.conversation_id for r in await conversations.list_conversations()] == ['kept']
    with pytest.raises(SessionNotFound):
        await store.history('doomed')
    assert await message_rows(store) == len(kept)
    with pytest.raises(ConversationConflict):
        await conversations.delete_record('doomed', expected_revision=record.revision)

    # A copy loaded before the delete can't resurrect the conversation over a new one.
    result = await agent.run('after the delete', conversation=stale)
    with pytest.raises(ConversationConflict):
        await conversations.save(result)
    assert await conversations.load('doomed') is None


async def test_paused_runs_keep_their_deferred_requests(store_factory: StoreFactory) -> None:
    store = store_factory()
    conversations = store.conversations
    agent = Agent(FunctionModel(assistant), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def lookup(q: str) -> str:
        return f'approved lookup of {q}'

    result = await agent.run('refund', conversation=Conversation(conversation_id='paused'))
    assert isinstance(result.output, DeferredToolRequests)
    await conversations.save(result)

    loaded = await conversations.load('paused')
    assert loaded is not None
    assert loaded.deferred_tool_requests == result.output
    [call] = loaded.deferred_tool_requests.approvals
    assert call.args == {'q': 'refund'}

    approved = await agent.run(
        conversation=loaded, deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True})
    )
    await conversations.save(approved)
    assert approved.output == 'approved lookup of refund (seen 3)'
    resumed = await conversations.load('paused')
    assert resumed is not None and resumed.deferred_tool_requests is None
    assert texts(await store.history('paused', limit=None)) == ['approved lookup of refund (seen 3)']


async def test_ids_are_checked(store_factory: StoreFactory) -> None:
    conversations = store_factory().conversations
    with pytest.raises(ValueError, match='session_id must be 1 to 255 printable characters'):
        await conversations.load('x' * 256)
    with pytest.raises(ValueError, match='scope must be 1 to 255 printable characters'):
        await conversations.save(Conversation(conversation_id='ok'), scope='')
    assert await conversations.list_conversations() == []


async def test_a_paused_conversation_exports_with_its_pending_calls(store_factory: StoreFactory) -> None:
    """An export is whole: the calls a paused run left waiting travel with it, and resume after import."""
    store = store_factory()
    agent = Agent(FunctionModel(assistant), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def lookup(q: str) -> str:
        return f'approved lookup of {q}'

    paused = await agent.run('refund', conversation=Conversation(conversation_id='paused'))
    await store.conversations.save(paused)
    document = SessionExport.from_json_lines((await store.export('paused')).to_json_lines())
    await store.import_(document, session_id='copy')

    copy = await store.conversations.load('copy')
    assert copy is not None and isinstance(paused.output, DeferredToolRequests)
    pending = copy.deferred_tool_requests
    assert pending is not None and pending == paused.output
    [call] = pending.approvals
    approved = await agent.run(
        conversation=copy, deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True})
    )
    assert approved.output == 'approved lookup of refund (seen 3)'


async def test_a_load_that_compacts_reads_the_session_row_once(store_factory: StoreFactory) -> None:
    """The compaction's own write says how the session's row changed: the load hands out the window it stored
    without reading the row again, the entries' parents and the save after it go by that row, and another store
    loads the same conversation."""

    async def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f'Summary of {len(messages)} requests')])

    processor = SummarizationProcessor(FunctionModel(summarize), trigger=('messages', 10), keep=('messages', 4))
    store, other = store_factory(processor=processor), store_factory(processor=processor)
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(1, 4):
        await run_turn(store.conversations, agent, 'c', f'Turn M{turn}')
    with statements(store) as sent:
        loaded = await store.conversations.load('c')  # 12 messages: compacted first
    assert loaded is not None and len(await store.summaries('c')) == 1
    reads = [s for s in sent if s.lstrip().upper().startswith('SELECT')]
    assert len(reads) == 1 and 'FROM sessions' in reads[0], reads
    elsewhere = await other.conversations.load_entries('c')
    record = await other.conversations.read_record('c')
    assert elsewhere is not None and record is not None
    assert loaded.revision == record.revision and loaded.usage == record.usage
    assert loaded.messages == [e.message for e in elsewhere]
    with statements(store) as sent:
        entries = await store.conversations.read_history(record.head_id)
    assert sent == [] and entries == elsewhere  # the window opens after the entry the row names

    with statements(store) as sent:
        await store.conversations.save(await agent.run('Turn M4', conversation=loaded))
    assert not [s for s in sent if s.lstrip().upper().startswith('SELECT')], sent
    assert len(await store.history('c', limit=None)) == 16
    again = await other.conversations.load('c')
    assert again is not None and again.messages[-4:] == (await store.history('c'))[-4:]
    assert [s.covers_to for s in await store.summaries('c')] == [8]


async def test_loads_at_one_revision_hand_out_lists_of_their_own(store_factory: StoreFactory) -> None:
    """The window kept in memory is handed out as the same entries while the revision holds, each load in a list
    of its own (and with a usage of its own): a caller changing one changes no other load's, and a save moves the
    entries on."""
    store = store_factory(processor=SummarizationProcessor(FunctionModel(assistant), trigger=('messages', 40)))
    agent = make_agent()
    for turn in range(3):
        await run_turn(store.conversations, agent, 'c', f'question {turn}')
    first = await store.conversations.load_entries('c')
    assert first is not None and len(first) == 12
    whole = list(first)
    first.clear()
    again = await store.conversations.load_entries('c')
    assert again == whole and again is not first
    await run_turn(store.conversations, agent, 'c', 'question 3')
    after = await store.conversations.load_entries('c')
    assert after is not None and after[:12] == whole and len(after) == 16
    assert [e.parent_id for e in after] == [None, *(e.id for e in after[:-1])]

    # So is the usage: each load's is its own to change.
    loaded = await store.conversations.load('c')
    assert loaded is not None and loaded.usage.requests == 8
    loaded.usage.requests += 100
    loaded.usage.details['changed'] = 1
    reloaded = await store.conversations.load('c')
    assert reloaded is not None and reloaded.usage.requests == 8 and 'changed' not in reloaded.usage.details
    saved = await agent.run('question 4', conversation=reloaded)
    await store.conversations.save(saved)
    saved.conversation.usage.requests += 100
    last = await store.conversations.load('c')
    assert last is not None and last.usage.requests == 10


async def test_a_load_that_compacts_writes_its_summary_with_the_window_or_nothing(store_factory: StoreFactory) -> None:
    """The summary a load makes and the window's move past it are one write (on PostgreSQL one statement: one trip,
    atomic on its own). A writer that moves the session while the summarizer works makes that write a conflict:
    nothing of it is stored, and the load hands out the other writer's turn."""
    other = store_factory()
    interfere: list[bool] = []

    async def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if interfere:
            interfere.clear()
            await run_turn(other.conversations, scripted_agent(ParallelToolAssistant()), 'c', 'Turn M99')
        return ModelResponse(parts=[TextPart(f'Summary of {len(messages)} requests')])

    processor = SummarizationProcessor(FunctionModel(summarize), trigger=('messages', 10), keep=('messages', 4))
    store = store_factory(processor=processor)
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(1, 4):
        await run_turn(store.conversations, agent, 'c', f'Turn M{turn}')
    with statements(store) as sent:
        assert await store.conversations.load('c') is not None  # 12 messages: compacted first
    assert len(await store.summaries('c')) == 1
    writes = [s for s in sent if 'summaries' in s and not s.lstrip().upper().startswith('SELECT')]
    if store.engine.dialect.name == 'postgresql':
        assert len(writes) == 1 and 'UPDATE sessions' in writes[0], writes  # the window's move and the summary
    else:
        assert [w.split('(')[0].strip() for w in writes] == ['INSERT INTO summaries'], writes
    interfere.append(True)
    for turn in range(4, 12):  # the loads of the next turns, until one compacts again
        chain = [s.covers_to for s in await store.summaries('c')]
        stored = len(await store.history('c'))
        loaded = await store.conversations.load('c')  # the other store's turn lands while this one summarizes
        if not interfere:
            break
        assert loaded is not None
        await store.conversations.save(await agent.run(f'Turn M{turn}', conversation=loaded))
    assert not interfere, 'no load compacted'
    assert loaded is not None and 'M99' in str(loaded.messages[-4:])
    assert [s.covers_to for s in await store.summaries('c')] == chain
    assert len(await store.history('c')) == stored + 4
    # The next load compacts from the stored chain, the other writer's turn included.
    await store.conversations.load('c')
    summaries = await store.summaries('c')
    assert len(summaries) == len(chain) + 1 and summaries[-1].covers_from == chain[-1]


def test_a_record_row_holds_the_record_query_s_columns_a_session_head_first() -> None:
    """`RecordRow` names `RECORD`'s columns in their order, and opens with a `SessionHead`'s fields, which the door
    reads a row's head as: the three are written apart (a `NamedTuple` can't extend another), so this holds them
    together."""
    assert RecordRow._fields == tuple(column.key for column in RECORD.selected_columns)
    assert RecordRow._fields[: len(SessionHead._fields)] == SessionHead._fields


# Titles and metadata (`update`, `write_details`)


async def test_titles_and_metadata_are_updated_and_kept_across_saves(store_factory: StoreFactory) -> None:
    store = store_factory()
    conversations = store.conversations
    agent = make_agent()
    await run_turn(conversations, agent, 'c1', 'order 1', scope='team')
    before = await conversations.read_record('c1')
    assert before is not None and (before.title, before.metadata) == (None, None)

    updated = await conversations.update('c1', title='Refund for ORD-1042', metadata={'model': 'gpt-5'})
    assert (updated.title, updated.metadata) == ('Refund for ORD-1042', {'model': 'gpt-5'})
    # An update keeps the revision and the time of the last save: it never makes a save conflict.
    assert (updated.revision, updated.updated_at, updated.head_id) == (
        before.revision,
        before.updated_at,
        before.head_id,
    )
    # A save of a conversation loaded before the update keeps it, as do a Session's runs.
    loaded = await conversations.load('c1')
    assert loaded is not None
    await conversations.update('c1', title='Refund for ORD-1043')
    await conversations.save(await agent.run('order 2', conversation=loaded), scope='team')
    await (await store.session('c1', scope='team')).run(agent, 'order 3')
    latest = await conversations.read_record('c1')
    assert latest is not None
    await conversations.branch('c1', at=4, expected_revision=latest.revision)
    for record in [await conversations.read_record('c1'), *await conversations.list_conversations(scope='team')]:
        assert record is not None and (record.title, record.metadata) == ('Refund for ORD-1043', {'model': 'gpt-5'})
    # The metadata is the session's: what `sessions()` lists and `set_metadata` replaces.
    [info] = await store.sessions()
    assert (info.title, info.metadata) == ('Refund for ORD-1043', {'model': 'gpt-5'})
    await store.set_metadata('c1', {'model': 'claude'})
    assert (await conversations.update('c1')).metadata == {'model': 'claude'}
    # Only what is passed changes; None clears (a session with no metadata lists `{}`).
    cleared = await conversations.update('c1', metadata=None)
    assert (cleared.title, cleared.metadata) == ('Refund for ORD-1043', None)
    assert [(i.title, i.metadata) for i in await store.sessions()] == [('Refund for ORD-1043', {})]
    assert (await conversations.update('c1', title=None)).title is None
    # Read by a store that never wrote them.
    await conversations.update('c1', title='Again', metadata={'n': [1, 2]})
    record = await store_factory().conversations.read_record('c1')
    assert record is not None and (record.title, record.metadata) == ('Again', {'n': [1, 2]})
    # A record's metadata is its caller's to change.
    assert record.metadata is not None
    record.metadata['n'].append(3)
    assert (await conversations.update('c1')).metadata == {'n': [1, 2]}

    # Another scope's conversation is not there to update; metadata must be JSON.
    with pytest.raises(UserError, match='not in the store'):
        await conversations.update('c1', title='Mine', scope='other')
    with pytest.raises(ValueError, match='metadata must be a dict'):
        await conversations.update('c1', metadata={'bad': float('nan')})
    assert (await conversations.update('c1')).title == 'Again'


async def test_a_new_conversation_s_record_stores_its_title_and_metadata(store_factory: StoreFactory) -> None:
    conversations = store_factory().conversations
    record = ConversationRecord(conversation_id='made', head_id=None, title='Made', metadata={'by': 'import'})
    await conversations.write_record(record, expected_revision=None)
    stored = await conversations.read_record('made')
    assert stored is not None and (stored.title, stored.metadata) == ('Made', {'by': 'import'})
    # A record written over a stored one keeps the stored title and metadata (a save never changes them).
    await conversations.write_record(
        ConversationRecord(conversation_id='made', head_id=None, title='Other', metadata={}),
        expected_revision=stored.revision,
    )
    again = await conversations.read_record('made')
    assert again is not None and (again.title, again.metadata) == ('Made', {'by': 'import'})


async def test_an_expected_title_is_checked_and_written_in_one_step(store_factory: StoreFactory) -> None:
    one, two = store_factory(), store_factory()
    agent = make_agent()
    await run_turn(one.conversations, agent, 'c1', 'order 1')
    # An agent titling after the first turn passes expected_title=None: a title set since is never replaced.
    assert (await one.conversations.update('c1', title='By the agent', expected_title=None)).title == 'By the agent'
    with pytest.raises(ConversationConflict, match="is titled 'By the agent', not None"):
        await two.conversations.update('c1', title='Late agent', expected_title=None)
    assert (await two.conversations.update('c1', title='By the user', expected_title='By the agent')).title == (
        'By the user'
    )

    # The check is made by the write itself: a store whose read is stale (the title changed since, the revision
    # not) writes nothing.
    stale = await one.conversations.read_record('c1')
    assert stale is not None and stale.title == 'By the user'
    await two.conversations.update('c1', title='Renamed')
    with pytest.raises(ConversationConflict):
        await one.conversations.write_details(
            'c1', {'title': 'Lost'}, expected_revision=stale.revision, expected={'title': 'By the user'}
        )
    with pytest.raises(ConversationConflict):
        await one.conversations.write_details(
            'c1', {'metadata': {'a': 1}}, expected_revision=stale.revision, expected={'metadata': {'b': 2}}
        )
    with pytest.raises(ConversationConflict):  # a revision saved over since
        await one.conversations.write_details('c1', {'title': 'Lost'}, expected_revision='not-the-revision')
    assert (await one.conversations.update('c1')).title == 'Renamed'
    written = await one.conversations.write_details(
        'c1', {'metadata': {'a': 1}}, expected_revision=stale.revision, expected={'title': 'Renamed', 'metadata': None}
    )
    assert (written.title, written.metadata) == ('Renamed', {'a': 1})

    # Two agents titling one conversation at once: exactly one title lands.
    await one.conversations.update('c1', title=None)
    outcomes = await asyncio.gather(
        *(s.conversations.update('c1', title=t, expected_title=None) for s, t in ((one, 'A'), (two, 'B'))),
        return_exceptions=True,
    )
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failed) == 1 and isinstance(failed[0], ConversationConflict), outcomes
    landed = next(o for o in outcomes if not isinstance(o, BaseException))
    assert (await two.conversations.update('c1')).title == landed.title
