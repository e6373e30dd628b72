"""`ResubmittedPrompt`: the conversation store a prompt sent again (an edit, a regenerate) runs on.

A chat front end resends one of its user messages under the message's own id to edit or regenerate it, and
pydantic-ai's UI adapters replace that turn when the loaded conversation holds the message. A store with a
processor loads a window: it holds only the latest turns, and the summary rides in the window's first prompt. So
the adapter alone reaches no older prompt (it appends it as a new one), and cutting before the window's first one
cuts the summary away. This store is the stored conversation as it stood before that prompt: its load is the
window of the path before the prompt (that path's own latest summary, nothing after the prompt), then the prompt
itself, so the adapter's own cut leaves exactly that window; its save branches off the message before the prompt,
and the replaced turn stays a branch, only once the new turn's run has completed, as with pydantic-ai's own
resubmissions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord, ConversationStore

from processors.stored_conversations import keep_conversation

from ._conversation_rows import window_entries
from ._history.branches import BeforePrompt
from ._ui_ids import prompt_ui_id, with_ui_message_id

__all__ = ('ResubmittedPrompt',)


class ResubmittedPrompt(ConversationStore):
    """One conversation of `store` as it stood before the prompt `message_id`, for the run that sends it again;
    every other conversation, entry and history is `store`'s own."""

    def __init__(self, store: ConversationStore, conversation_id: str, message_id: str, before: BeforePrompt) -> None:
        self._store = store
        self._conversation_id = conversation_id
        self._before = before
        prompt = before.prompt
        if prompt_ui_id(prompt) != message_id:  # found by its entry id: the adapter cuts where the UI id matches
            prompt = with_ui_message_id(prompt, message_id)
        window = [] if before.window is None else window_entries(before.window, before.before_window)
        self._entries = [
            *window,
            ConversationEntry(id=before.prompt_id, parent_id=window[-1].id if window else None, message=prompt),
        ]
        """The window before the prompt, then the prompt: the history this store's record has for its head."""
        ids = [] if before.window is None else before.window.entry_ids
        self._bridges = {entry.id: entry.parent_id for entry, entry_id in zip(window, ids, strict=True) if not entry_id}
        """The entry id each bridge standing alone goes by (no archived message has it), and the entry it follows."""

    async def load(
        self, conversation_id: str, *, limit: int | None = None, scope: str | None = None
    ) -> Conversation | None:
        """The conversation as it stood before the prompt (see the class), marked stored as the store's own load
        marks it, so an agent carrying its own summarizer is refused a run on it."""
        loaded = await super().load(conversation_id, limit=limit, scope=scope)
        keep_conversation(conversation_id, () if loaded is None else loaded.messages)
        return loaded

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The stored record, its head the prompt, while it is at the revision the prompt was found at; a record
        changed since is given as it is, and the save's revision check refuses it."""
        record = await self._store.read_record(conversation_id)
        if conversation_id != self._conversation_id or record is None or record.revision != self._before.revision:
            return record
        return replace(record, head_id=self._before.prompt_id, deferred_tool_requests=None)

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        if head_id != self._before.prompt_id:
            return await self._store.read_history(head_id, limit=limit)
        return list(self._entries if limit is None else self._entries[len(self._entries) - limit :] if limit else [])

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Write through to the store; the path left (ending at the stored tip, not at the prompt this store gave
        as the head) becomes the newest branch, as pydantic-ai's `branch` lists it."""
        if record.conversation_id == self._conversation_id:
            tip = self._before.tip
            kept = [t for t in record.branches if t not in (self._before.prompt_id, tip)]
            record = replace(record, branches=kept if tip is None else [*kept, tip])
            if new_entries and (stands_for := self._bridges.get(new_entries[0].parent_id or '')) is not None:
                # The new turn follows a bridge standing alone (the path before the prompt ends at its summary):
                # in the archive it follows the message the bridge follows.
                new_entries = [replace(new_entries[0], parent_id=stands_for), *new_entries[1:]]
        await self._store.write_record(record, new_entries=new_entries, expected_revision=expected_revision)

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        return await self._store.read_records(scope=scope, limit=limit)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        return await self._store.read_entry(entry_id)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        await self._store.delete_record(conversation_id, expected_revision=expected_revision)
