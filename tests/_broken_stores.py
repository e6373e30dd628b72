"""Backends broken on purpose, one defect each, to show the conformance suite names it: each is the docs page's
`DictConversationStore` with one thing done wrong. A class attribute `without` or `erases` is what the store is
declared with (`tests/test_conformance_bites.py` reads them): `KeepsEntries` is the dict store declared as erasing."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry, ConversationRecord

from docs.examples.dict_store import ENTRY, RECORD, DictConversationStore

Entries = Sequence[ConversationEntry]


class _Broken(DictConversationStore):
    """`write_record` goes through `write`, which each broken store overrides."""

    async def write_record(
        self, record: ConversationRecord, *, new_entries: Entries = (), expected_revision: str | None
    ) -> None:
        await self.write(record, new_entries, expected_revision)

    async def write(self, record: ConversationRecord, new_entries: Entries, expected_revision: str | None) -> None:
        await super().write_record(record, new_entries=new_entries, expected_revision=expected_revision)


class IgnoresRevisions(_Broken):
    """Writes over whatever is stored, whichever revision the writer loaded."""

    async def write(self, record: ConversationRecord, new_entries: Entries, expected_revision: str | None) -> None:
        stored = await self.read_record(record.conversation_id)
        await super().write(record, new_entries, None if stored is None else stored.revision)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        stored = await self.read_record(conversation_id)
        current = expected_revision if stored is None else stored.revision
        await super().delete_record(conversation_id, expected_revision=current)


class DropsEntries(_Broken):
    """Rewrites its entries copy-on-write across an await: entries other writers stored meanwhile are lost."""

    async def write(self, record: ConversationRecord, new_entries: Entries, expected_revision: str | None) -> None:
        before = dict(self.entries)
        await super().write(record, new_entries, expected_revision)
        await asyncio.sleep(0)  # a flush, say; a cancellation here leaves everything written
        self.entries = {**before, **{entry.id: self.entries[entry.id] for entry in new_entries}}


class LeaksScopes(DictConversationStore):
    """Loads and deletes a conversation whatever scope the caller names."""

    async def load(
        self, conversation_id: str, *, limit: int | None = None, scope: str | None = None
    ) -> Conversation | None:
        return await super().load(conversation_id, limit=limit)

    async def delete(self, conversation_id: str, *, scope: str | None = None) -> None:
        await super().delete(conversation_id)


class _Locked(_Broken):
    """Takes a lock in every primitive, so no other task ever sees a write part-way (a cancelled one stays so)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = asyncio.Lock()

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        async with self.lock:
            return await super().read_record(conversation_id)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        async with self.lock:
            return await super().read_entry(entry_id)


class HalfWrites(_Locked):
    """Stores a save's entries one at a time, moving the record's head along with each, under the lock: a
    cancelled save stays part-way."""

    async def write(self, record: ConversationRecord, new_entries: Entries, expected_revision: str | None) -> None:
        if not new_entries:
            await super().write(record, new_entries, expected_revision)
            return
        async with self.lock:
            stored = await DictConversationStore.read_record(self, record.conversation_id)
            if (None if stored is None else stored.revision) != expected_revision:
                raise ConversationConflict(record.conversation_id)
            for entry in new_entries:
                self.entries[entry.id] = ENTRY.dump_json(entry)
                partial = dataclasses.replace(record, head_id=entry.id)
                self.records[record.conversation_id] = RECORD.dump_json(partial)
                await asyncio.sleep(0)


class ForgetsBranches(_Broken):
    """Keeps only the active path: the branches a rewrite or `branch` leaves are not recorded."""

    async def write(self, record: ConversationRecord, new_entries: Entries, expected_revision: str | None) -> None:
        await super().write(dataclasses.replace(record, branches=[]), new_entries, expected_revision)


class DropsNul(_Broken):
    """Strips NUL characters from what it stores, as a C-string field would, silently."""

    async def write(self, record: ConversationRecord, new_entries: Entries, expected_revision: str | None) -> None:
        await super().write(record, new_entries, expected_revision)
        for entry in new_entries:
            self.entries[entry.id] = self.entries[entry.id].replace(b'\\u0000', b'')


class IgnoresRevisionsWithoutFork(IgnoresRevisions):
    """`IgnoresRevisions` declared without `fork` (`without = ('fork',)`): only a fork onto a stored id reached
    its `write_record` without pydantic-ai's own revision check first, so nothing else showed the defect."""

    without = ('fork',)


class KeepsLosersEntries(_Broken):
    """Stores a write's entries, then checks the revision: a write that conflicts leaves its entries stored, read
    by their ids though no record reaches them (rows inserted before the revision check's UPDATE, say)."""

    async def write(self, record: ConversationRecord, new_entries: Entries, expected_revision: str | None) -> None:
        for entry in new_entries:
            self.entries[entry.id] = ENTRY.dump_json(entry)
        await super().write(record, new_entries, expected_revision)


class SharesMessages(DictConversationStore):
    """Decodes each entry once and hands out that very object on every read after (a cache of decoded entries):
    a caller changing a loaded message in place, without saving, changes what the next load returns."""

    def __init__(self) -> None:
        super().__init__()
        self.decoded: dict[str, ConversationEntry] = {}

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        found = self.decoded.get(entry_id)
        if found is None:
            found = self.decoded[entry_id] = await super().read_entry(entry_id)
        return found


class KeepsEntries(DictConversationStore):
    """Declares that its delete erases (`erases = True`), and keeps the deleted conversation's entries, as the dict
    store does: `read_entry` of its head still answers."""

    erases = True


class KeepsBranches(DictConversationStore):
    """Declares that its delete erases (`erases = True`), and erases the entries of the deleted conversation's
    active path that no remaining conversation reaches, but not those of the branches it left."""

    erases = True

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        stored = await self.read_record(conversation_id)
        await super().delete_record(conversation_id, expected_revision=expected_revision)
        assert stored is not None
        reached = {
            entry.id
            for record in await self.read_records()
            for tip in [record.head_id, *record.branches]
            for entry in await self.read_history(tip)
        }
        for entry in await self.read_history(stored.head_id):
            if entry.id not in reached:
                del self.entries[entry.id]


class RecordFirst(_Locked):
    """Stores the record, then the save's entries a moment later, under the lock: a save cancelled between leaves a
    record whose head is no stored entry, so its conversation no longer loads (a dict's bare `KeyError`)."""

    async def write(self, record: ConversationRecord, new_entries: Entries, expected_revision: str | None) -> None:
        if not new_entries:
            await super().write(record, new_entries, expected_revision)
            return
        async with self.lock:
            stored = await DictConversationStore.read_record(self, record.conversation_id)
            if (None if stored is None else stored.revision) != expected_revision:
                raise ConversationConflict(record.conversation_id)
            entries = [(entry.id, ENTRY.dump_json(entry)) for entry in new_entries]  # a refusal stores nothing
            self.records[record.conversation_id] = RECORD.dump_json(record)
            await asyncio.sleep(0)
            self.entries.update(entries)
