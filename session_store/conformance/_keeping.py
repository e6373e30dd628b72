"""The checks of what a store keeps, and of what it keeps to itself: nothing of a save refused as a conflict
(`orphans`), no object a caller holds shared with what it stores (`isolation`), nothing of a deleted conversation
left readable, when the backend declares that it erases (`erasure`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.messages import ModelMessage, ToolCallPart
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RunUsage

from ._diff import difference, shown
from ._harness import Harness, append_turns, loaded_conversation, messages_of, rewritten, snapshot
from ._messages import TURN_LENGTH, dumped, every_part_kind, turn

__all__ = ('erasure', 'isolation', 'orphans')


# --- 2b. orphans --------------------------------------------------------------------------------------------


def _chain(after: str | None, messages: Sequence[ModelMessage]) -> list[ConversationEntry]:
    """`messages` as the new entries a save appends after the entry `after`."""
    entries: list[ConversationEntry] = []
    for message in messages:
        entries.append(ConversationEntry(parent_id=entries[-1].id if entries else after, message=message))
    return entries


async def orphans(h: Harness) -> None:
    """A write that conflicts stores nothing: `write_record` with new entries and a revision another save
    replaced, with the revision of a conversation deleted since, or with none for a conversation the store has,
    raises `ConversationConflict`, and none of its entries is readable after (`read_entry`, `read_history`),
    nor any record changed. The entries' ids are the check's own, so it can ask for them: a `save` that loses
    makes this very write. (A write that lands instead is the `revisions` check's failure, not this one's.)"""
    async with h.stores(2) as (a, b):
        writes: list[tuple[str, str, ConversationRecord, list[ConversationEntry], str | None]] = []
        for n, what in enumerate(('on a revision another save replaced', 'on a conversation deleted since')):
            conversation_id = f'o{n}'
            await a.save(Conversation(conversation_id=conversation_id, messages=turn('base')))
            stale = await a.read_record(conversation_id)
            assert stale is not None
            if n == 0:
                await append_turns(a, conversation_id, ['winner'])
            else:
                await a.delete(conversation_id)
            entries = _chain(stale.head_id, turn(f'loser {n}'))
            record = dataclasses.replace(rewritten(stale), head_id=entries[-1].id)
            writes.append((what, conversation_id, record, entries, stale.revision))
        await a.save(Conversation(conversation_id='o2', messages=turn('base')))
        entries = _chain(None, turn('loser 2'))
        record = ConversationRecord(conversation_id='o2', head_id=entries[-1].id)
        writes.append(('as new (expected_revision=None) over a stored conversation', 'o2', record, entries, None))
        before = await snapshot(a)
        for what, conversation_id, record, entries, expected in writes:
            try:
                await b.write_record(record, new_entries=entries, expected_revision=expected)
            except ConversationConflict:
                pass
            else:
                continue  # it landed: the revisions check names that
            where = f'a write_record of {conversation_id!r} {what} raised a conflict'
            for reader in (a, b):
                for entry in entries:
                    await _gone(reader, entry.id, f'{where}, and its new entry {entry.id!r}')
                after = await snapshot(reader)
                assert after == before, f'{where}, and the records changed: {difference(after, before, _AFTER)}'


_AFTER = ('after', 'before')


async def _gone(store: ConversationStore, entry_id: str, what: str) -> None:
    """No read finds the entry `entry_id`: `read_entry` raises `LookupError` (pydantic-ai's `load` takes that for
    an entry a concurrent delete released), and `read_history` of it raises it or finds nothing."""
    try:
        found: object = await store.read_entry(entry_id)
    except LookupError:
        pass
    except Exception as error:  # anything else is not how the protocol says an entry is missing
        raise AssertionError(f'{what}: read_entry raised {error!r}, not a LookupError') from error
    else:
        raise AssertionError(f'{what} is still stored: read_entry gives {shown(found)}')
    for limit in (None, 1):
        try:
            found = await store.read_history(entry_id, limit=limit)
        except LookupError:
            continue
        assert not found, f'{what} is still stored: read_history(limit={limit}) gives {shown(found)}'


# --- 2c. isolation ------------------------------------------------------------------------------------------

_TEXT_FIELDS = frozenset({'content', 'model_name', 'tool_name', 'instructions', 'title', 'transcript'})
"""The text fields `_tamper` changes: text a caller edits (not a kind or a state, which name the type)."""


def _tamper(value: object, seen: set[int] | None = None) -> None:
    """Change `value` in place wherever a caller could: text fields edited, counts raised, lists grown by their
    last item again, dicts given a key, through every dataclass, list and dict it holds (frozen ones aside)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, list):
        for item in list(value):
            _tamper(item, seen)
        if value:
            value.append(value[-1])
    elif isinstance(value, dict):
        for item in list(value.values()):
            _tamper(item, seen)
        value['tampered'] = 1
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        frozen = type(value).__dataclass_params__.frozen  # type: ignore[attr-defined]
        for field in dataclasses.fields(value):
            current = getattr(value, field.name)
            if frozen:
                pass
            elif isinstance(current, str) and field.name in _TEXT_FIELDS:
                setattr(value, field.name, f'{current} (changed)')
                continue
            elif isinstance(current, int) and not isinstance(current, bool):
                setattr(value, field.name, current + 1)
                continue
            _tamper(current, seen)


async def _held(store: ConversationStore) -> Any:
    """Everything the store holds, as every read finds it: `snapshot`, and each conversation as it loads."""
    loads = []
    for record in await store.list_conversations():
        loaded = await loaded_conversation(store, record.conversation_id)
        entries = await store.load_entries(record.conversation_id)
        loads.append(
            (
                loaded.conversation_id,
                dumped(loaded.messages),
                loaded.usage,
                loaded.deferred_tool_requests,
                loaded.revision,
                None if entries is None else [(e.id, e.parent_id, dumped([e.message])) for e in entries],
            )
        )
    return [await snapshot(store), loads]


async def isolation(h: Harness) -> None:
    """What a store hands out and what it is handed are the caller's own: a conversation changed in place after
    its save or its load, and whatever a read or a change returned (records, entries, histories, a save's
    entries, a branch, a fork) changed in place, without a save, leaves every read as it was."""
    async with h.open() as store:
        # Every part kind in three messages, and a turn appended after: seven, fewer than a store with a
        # processor (a window of eight, say) compacts at, so no read changes what it holds.
        conversation = Conversation(
            conversation_id='i', messages=every_part_kind()[:3], usage=RunUsage(requests=2, input_tokens=7)
        )
        conversation.deferred_tool_requests = DeferredToolRequests(
            calls=[ToolCallPart('approve', {'amount': 5}, tool_call_id='call_9')]
        )
        saved = await store.save(conversation, scope='s')
        held = await _held(store)

        async def unchanged(changed: str) -> None:
            now = await _held(store)
            if now != held:
                raise AssertionError(
                    f'{changed} in place, without a save, and what the store holds changed: '
                    f'{difference(now, held, _AFTER)}'
                )

        _tamper(conversation)
        _tamper(saved)
        await unchanged('the conversation saved new, and the entries its save returned, were changed')
        _tamper(await store.load('i'))
        await unchanged('a loaded conversation was changed')
        appended = await loaded_conversation(store, 'i')
        appended.messages.extend(turn('more'))
        saved = await store.save(appended)
        held = await _held(store)
        _tamper(appended)
        _tamper(saved)
        await unchanged('a conversation saved with a turn appended, and the entries its save returned, were changed')
        if 'limit' in h.capabilities.supported:
            _tamper(await store.load('i', limit=2))
            await unchanged('a conversation loaded with limit=2 was changed')
        _tamper(await store.load_entries('i'))
        await unchanged('the entries load_entries returned were changed')
        record = await store.read_record('i')
        assert record is not None
        _tamper(record)
        await unchanged('the record read_record returned was changed')
        _tamper(await store.read_records())
        _tamper(await store.list_conversations(scope='s'))
        await unchanged('the records read_records and list_conversations returned were changed')
        record = await store.read_record('i')
        assert record is not None and record.head_id is not None
        _tamper(await store.read_entry(record.head_id))
        _tamper(await store.read_history(record.head_id))
        _tamper(await store.read_history(record.head_id, limit=2))
        await unchanged('the entries read_entry and read_history returned were changed')
        # A record handed to `write_record` itself (a save builds its own, out of the caller's reach).
        written = rewritten(record)
        await store.write_record(written, expected_revision=record.revision)
        held = await _held(store)
        _tamper(written)
        await unchanged('the record handed to write_record was changed after the write')
        if 'trees' in h.capabilities.supported:
            branched = await store.branch('i', at=2, expected_revision=written.revision)
            held = await _held(store)
            _tamper(branched)
            await unchanged('the conversation branch returned was changed')
        if 'fork' in h.capabilities.supported:
            forked = await store.fork('i', at=2, new_conversation_id='i-fork')
            held = await _held(store)
            _tamper(forked)
            await unchanged('the conversation fork returned was changed')


# --- 2d. erasure --------------------------------------------------------------------------------------------


async def _reached(store: ConversationStore) -> set[str]:
    """The ids of every entry a stored conversation's history or branches reach."""
    reached: set[str] = set()
    for record in await store.read_records():
        for tip in [record.head_id, *record.branches]:
            reached.update(entry.id for entry in await store.read_history(tip))
    return reached


async def erasure(h: Harness) -> None:
    """A delete erases, as the backend declares (`erases=True`): every entry of the deleted conversation's
    history and of the branches it left that no remaining conversation reaches is gone for every read
    (`read_entry`, `read_history`, `load`, `load_entries`, `read_record`, `read_records`), through this store and
    a second one over the same data; the conversations left, a fork of it among them, read as before."""
    async with h.stores(2) as (store, other):
        await store.save(Conversation(conversation_id='e', messages=[*turn('one'), *turn('two')]))
        if 'trees' in h.capabilities.supported:
            loaded = await loaded_conversation(store, 'e')
            await store.branch('e', at=TURN_LENGTH, expected_revision=loaded.revision)
            await append_turns(store, 'e', ['three'])
        if 'fork' in h.capabilities.supported:
            await store.fork('e', at=TURN_LENGTH, new_conversation_id='e-fork')
        await store.save(Conversation(conversation_id='kept', messages=turn('kept')))
        record = await store.read_record('e')
        assert record is not None
        entries = {entry.id for tip in [record.head_id, *record.branches] for entry in await store.read_history(tip)}
        left = {r.conversation_id: await messages_of(store, r.conversation_id) for r in await store.read_records()}
        del left['e']
        await store.delete('e')
        for reader in (store, other):
            assert await reader.read_record('e') is None, 'a deleted conversation still has its record'
            assert await reader.load('e') is None, 'a deleted conversation still loads'
            assert await reader.load_entries('e') is None, 'a deleted conversation still loads its entries'
            assert 'e' not in {r.conversation_id for r in await reader.read_records()}, 'it is still listed'
            for entry_id in sorted(entries - await _reached(reader)):
                await _gone(reader, entry_id, f"the deleted conversation's entry {entry_id!r}")
            for conversation_id, history in left.items():
                assert await messages_of(reader, conversation_id) == history, f'{conversation_id!r} changed'
