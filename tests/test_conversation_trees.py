"""`SQLConversationStore` as a tree: rewritten saves, `branch`, and agreement with pydantic-ai's in-memory store.

pydantic-ai's UI adapters turn a Regenerate or Edit button into a save of a history that leaves the
stored one; `branch` moves the head by hand. Both keep the path left as a branch. The random test
drives our store and `InMemoryConversationStore` through the same operations and compares what each
holds after every one: entry ids are each store's own, so paths are compared by their messages.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.usage import RunUsage

from session_store import SessionStore

from .test_conversations import make_agent, run_turn, texts

StoreFactory = Callable[..., SessionStore]

_MOMENT = datetime(2026, 11, 30, tzinfo=UTC)


async def test_rewritten_saves_and_branch_keep_every_path(store_factory: StoreFactory) -> None:
    store = store_factory()
    conversations = store.conversations
    agent = make_agent()
    await run_turn(conversations, agent, 'c', 'one')
    await run_turn(conversations, agent, 'c', 'two')
    first = await conversations.read_record('c')
    assert first is not None and first.branches == []
    original = await store.history('c', limit=None)

    # An edit of the second question, as a UI adapter saves it: the whole history, rewritten from there.
    loaded = await conversations.load('c')
    assert loaded is not None
    edited = Conversation(conversation_id='c', messages=loaded.messages[:4], revision=loaded.revision)
    result = await agent.run('two, reworded', conversation=edited)
    await conversations.save(result)
    record = await conversations.read_record('c')
    assert record is not None
    assert record.branches == [first.head_id]
    assert [e.message for e in await conversations.read_history(first.head_id)] == original
    assert await store.history('c', limit=None) == [*original[:4], *result.new_messages()]
    assert texts(result.new_messages()) == ['result for two, reworded (seen 7)']
    # The entry the edit continues from is the one before the question it replaced.
    path = await conversations.read_history(record.head_id)
    assert path[4].parent_id == path[3].id == (await conversations.read_history(first.head_id))[3].id

    # `Session` sees the same tree: two branches, the edited one active.
    session = await store.session('c')
    listed = await session.branches()
    assert sorted((b.message_count, b.active) for b in listed) == [(8, False), (8, True)]

    # Back to the original by an entry of its line; the edited path is now the branch.
    back = await conversations.branch('c', from_entry=first.head_id, expected_revision=record.revision)
    assert back.messages == original
    after_back = await conversations.read_record('c')
    assert after_back is not None and after_back.branches == [record.head_id]
    assert await store.history('c', limit=None) == original

    # A stale revision is a conflict, and changes nothing.
    with pytest.raises(ConversationConflict):
        await conversations.branch('c', at=4, expected_revision=record.revision)

    # Branch after the first turn, then carry on there: a third path.
    kept = await conversations.branch('c', at=4, expected_revision=after_back.revision)
    assert kept.messages == original[:4]
    three = await agent.run('three', conversation=kept)
    await conversations.save(three)
    assert await store.history('c', limit=None) == [*original[:4], *three.new_messages()]
    third = await conversations.read_record('c')
    assert third is not None and third.branches == [record.head_id, first.head_id]
    assert len(await session.branches()) == 3

    # A save of a strict prefix moves the head back and keeps what it cut off.
    loaded = await conversations.load('c')
    assert loaded is not None
    await conversations.save(Conversation(conversation_id='c', messages=loaded.messages[:4], revision=loaded.revision))
    cut = await conversations.read_record('c')
    assert cut is not None and cut.branches == [record.head_id, first.head_id, third.head_id]
    assert await store.history('c', limit=None) == original[:4]

    # Editing the very first question starts a second root.
    loaded = await conversations.load('c')
    assert loaded is not None
    fresh = await agent.run('zero', conversation=Conversation(conversation_id='c', revision=loaded.revision))
    await conversations.save(fresh)
    root = await conversations.read_record('c')
    assert root is not None and root.head_id is not None
    new_path = await conversations.read_history(root.head_id)
    assert new_path[0].parent_id is None and [e.message for e in new_path] == fresh.new_messages()
    assert root.branches == [record.head_id, first.head_id, third.head_id, cut.head_id]

    # Every path stays whole after a restart, and a session run continues the active one.
    await store.close()
    reopened = store_factory()
    for tip, messages in [(first.head_id, original), (third.head_id, [*original[:4], *three.new_messages()])]:
        assert [e.message for e in await reopened.conversations.read_history(tip)] == messages
    session = await reopened.session('c')
    more = await session.run(agent, 'after')
    assert await reopened.history('c', limit=None) == [*fresh.new_messages(), *more.new_messages()]


async def test_new_entries_must_chain_to_the_head(store_factory: StoreFactory) -> None:
    """What `save` never writes is refused whole: entries out of chain, or a head that isn't their last."""
    conversations = store_factory().conversations
    await conversations.save(Conversation(conversation_id='c', messages=_turn(0)))
    record = await conversations.read_record('c')
    assert record is not None
    loose = [
        ConversationEntry(parent_id=record.head_id, message=_turn(1)[0]),
        ConversationEntry(parent_id=None, message=_turn(1)[1]),
    ]
    with pytest.raises(UserError, match='does not follow the entry before it'):
        await conversations.write_record(
            ConversationRecord(conversation_id='c', head_id=loose[1].id),
            new_entries=loose,
            expected_revision=record.revision,
        )
    elsewhere = ConversationEntry(parent_id='no-such-entry', message=_turn(1)[0])
    with pytest.raises(ConversationConflict, match="has no entry 'no-such-entry'"):
        await conversations.write_record(
            ConversationRecord(conversation_id='c', head_id=elsewhere.id),
            new_entries=[elsewhere],
            expected_revision=record.revision,
        )
    assert await conversations.read_record('c') == record


def _turn(n: int) -> list[ModelMessage]:
    """A question and its answer, with fixed timestamps so equal turns compare equal in either store."""
    return [
        ModelRequest(parts=[UserPromptPart(f'question {n}', timestamp=_MOMENT)], timestamp=_MOMENT),
        ModelResponse(parts=[TextPart(f'answer {n}')], timestamp=_MOMENT, model_name='scripted'),
    ]


class _Both:
    """One operation applied to both stores, with whatever each raised."""

    def __init__(self, ours: ConversationStore, theirs: ConversationStore, rng: random.Random) -> None:
        self.stores = (ours, theirs)
        self.rng = rng
        self.turns = 0
        self.log: list[str] = []

    async def each(self, operation: Callable[[ConversationStore], Any]) -> None:
        outcomes: list[str] = []
        for store in self.stores:
            try:
                await operation(store)
                outcomes.append('done')
            except ConversationConflict:  # ours raises its subclass, SessionConflict
                outcomes.append('conflict')
            except UserError:
                outcomes.append('refused')
        assert outcomes[0] == outcomes[1], f'{self.log}: ours {outcomes[0]}, in-memory {outcomes[1]}'

    async def step(self, ids: list[str]) -> None:
        cid = self.rng.choice(ids)
        kind = self.rng.choice(
            ['append', 'append', 'append', 'rewrite', 'truncate', 'branch_at', 'branch_from', 'fork', 'stale', 'delete']
        )
        self.turns += 1
        fresh = _turn(self.turns)
        usage = RunUsage(requests=self.turns)
        # Random choices that depend on a store's state are drawn once, from our store's view, and the
        # same numbers used on both: the two must agree on lengths and branch lists anyway.
        ours = await self.stores[0].load(cid)
        length = 0 if ours is None else len(ours.messages)
        record = await self.stores[0].read_record(cid)
        cut = self.rng.randint(0, length)
        branch_index = self.rng.randrange(len(record.branches)) if record and record.branches else None
        depth = self.rng.randint(0, 3)
        self.log.append(f'{kind} {cid} cut={cut} branch={branch_index} depth={depth}')

        async def operate(store: ConversationStore) -> None:
            loaded = await store.load(cid)
            if kind == 'append':
                conversation = loaded or Conversation(conversation_id=cid)
                conversation.messages.extend(fresh)
                conversation.usage = usage
                await store.save(conversation)
            elif kind in ('rewrite', 'truncate') and loaded is not None:
                tail = fresh if kind == 'rewrite' else []
                messages = [*loaded.messages[:cut], *tail]
                await store.save(Conversation(conversation_id=cid, messages=messages, revision=loaded.revision))
            elif kind == 'branch_at' and loaded is not None:
                assert loaded.revision is not None
                await store.branch(cid, at=cut, expected_revision=loaded.revision)
            elif kind == 'branch_from' and loaded is not None and branch_index is not None:
                mine = await store.read_record(cid)
                assert mine is not None and loaded.revision is not None
                line = await store.read_history(mine.branches[branch_index])
                entry = line[max(0, len(line) - 1 - depth)]
                await store.branch(cid, from_entry=entry.id, expected_revision=loaded.revision)
            elif kind == 'fork':
                await store.fork(cid, at=None if cut == length else cut, new_conversation_id=f'{cid}-{self.turns}')
            elif kind == 'stale' and loaded is not None:
                await store.save(Conversation(conversation_id=cid, messages=[*loaded.messages, *fresh], revision='old'))
            elif kind == 'delete':
                await store.delete(cid)

        await self.each(operate)
        if kind == 'fork' and f'{cid}-{self.turns}' not in ids:
            ids.append(f'{cid}-{self.turns}')

    async def agree(self, ids: list[str]) -> None:
        listed = [[r.conversation_id for r in await store.list_conversations()] for store in self.stores]
        assert listed[0] == listed[1], self.log
        for cid in ids:
            views = [await _view(store, cid) for store in self.stores]
            assert views[0] == views[1], f'{cid} after {self.log}'


async def _view(store: ConversationStore, cid: str) -> Any:
    """What a conversation holds, without the store's own ids: its path, usage, branches' paths and fork origin."""
    record = await store.read_record(cid)
    if record is None:
        return None
    loaded = await store.load(cid)
    assert loaded is not None
    branches = [[e.message for e in await store.read_history(tip)] for tip in record.branches]
    return loaded.messages, loaded.usage, branches, record.forked_from, record.forked_at is None


QUICK_SEEDS = 2
"""The quick tier runs this many seeds of the property run on SQLite; the slow tier runs all six, on both backends."""


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize(
    'seed', [seed if seed < QUICK_SEEDS else pytest.param(seed, marks=pytest.mark.slow) for seed in range(6)]
)
async def test_random_operations_agree_with_the_in_memory_store(store_factory: StoreFactory, seed: int) -> None:
    both = _Both(store_factory().conversations, InMemoryConversationStore(), random.Random(seed))
    ids = ['a', 'b']
    for _ in range(40):
        await both.step(ids)
        await both.agree(ids)
