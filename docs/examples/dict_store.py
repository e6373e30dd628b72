"""A pydantic-ai `ConversationStore` over two dicts, written as a backend author would
write one: records and entries kept as JSON bytes (what a database or a key-value store
would hold), the five storage primitives and nothing else, and the one declaration the
conformance suite needs. `pytest -p session_store.conformance dict_store.py` runs it
(docs/testing-your-store.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import TypeAdapter
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)

from session_store.conformance import conformance_backend

RECORD = TypeAdapter(ConversationRecord)
ENTRY = TypeAdapter(ConversationEntry)


class DictConversationStore(ConversationStore):
    """Conversations in memory, serialized.

    `records` by conversation id, `entries` by entry id.
    """

    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}
        self.entries: dict[str, bytes] = {}

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        raw = self.records.get(conversation_id)
        return None if raw is None else RECORD.validate_json(raw)

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        records = [RECORD.validate_json(raw) for raw in self.records.values()]
        records = [
            record for record in records if scope is None or record.scope == scope
        ]
        # stable: ties keep the dict's order
        records.sort(key=lambda record: record.updated_at, reverse=True)
        return records[:limit]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        stored = await self.read_record(record.conversation_id)
        if (None if stored is None else stored.revision) != expected_revision:
            raise ConversationConflict(record.conversation_id)
        known = self.entries.keys() | {entry.id for entry in new_entries}
        if record.head_id is not None and record.head_id not in known:
            # a delete released the entry a fork points at
            raise ConversationConflict(record.conversation_id)
        for entry in new_entries:
            self.entries[entry.id] = ENTRY.dump_json(entry)
        self.records[record.conversation_id] = RECORD.dump_json(record)

    async def delete_record(
        self, conversation_id: str, *, expected_revision: str
    ) -> None:
        stored = await self.read_record(conversation_id)
        if stored is None or stored.revision != expected_revision:
            raise ConversationConflict(conversation_id)
        # its entries stay: a fork's history may share them
        del self.records[conversation_id]

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        # a missing id is a KeyError, a LookupError
        return ENTRY.validate_json(self.entries[entry_id])


@conformance_backend()
def dict_store(folder: Path) -> DictConversationStore:
    """The conformance suite's factory: a fresh store.

    It keeps nothing in `folder`, so it is not persistent.
    """
    return DictConversationStore()
