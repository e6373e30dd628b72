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

A bare UI adapter on the store itself (no `dispatch_chat`) gets it wrong in both ways, and the store's save
refuses both results (`refuse_resent_prompt`, `refuse_summary_cut_away`) rather than store them: the model has
been called by then, but nothing is stored, and the error says what to use instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord, ConversationStore
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import CompactionPart, ModelRequest, ModelRequestPart, SystemPromptPart

from processors.stored_conversations import keep_conversation

from ._conversation_rows import window_entries
from ._db.database import Database
from ._history.branches import BeforePrompt, prompt_position
from ._history.records import LoadedWindow
from ._ui_ids import prompt_ui_id, with_ui_message_id

__all__ = ('ResubmittedPrompt', 'refuse_resent_prompt', 'refuse_summary_cut_away')


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
        self._bridge = window[-1] if window and before.window is not None and not before.window.entry_ids[-1] else None
        """The window's last entry when it is a bridge standing alone (the path before the prompt ends at its
        summary): no archived message, so the new turn goes where it stands."""

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
            if new_entries and self._bridge is not None:
                new_entries = [self._off_the_bridge(new_entries[0]), *new_entries[1:]]
        await self._store.write_record(record, new_entries=new_entries, expected_revision=expected_revision)

    def _off_the_bridge(self, first: ConversationEntry) -> ConversationEntry:
        """The new turn's first entry as the archive takes it after a bridge standing alone: following the message
        the bridge follows, and without the bridge's parts, which pydantic-ai merges into the new prompt (two
        requests in a row are one to it) and the next window adds again."""
        bridge = self._bridge
        assert bridge is not None and isinstance(bridge.message, ModelRequest)
        parent = bridge.parent_id if first.parent_id == bridge.id else first.parent_id
        message = first.message
        if parent == bridge.parent_id and isinstance(message, ModelRequest):
            carried = [_same(part) for part in bridge.message.parts]
            kept = [part for part in message.parts if _same(part) not in carried]
            if len(kept) == len(message.parts) - len(carried):
                message = replace(message, parts=kept)
        return replace(first, parent_id=parent, message=message)

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        return await self._store.read_records(scope=scope, limit=limit)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        return await self._store.read_entry(entry_id)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        await self._store.delete_record(conversation_id, expected_revision=expected_revision)


_USE_DISPATCH = (
    'Dispatch chat requests with session_store.dispatch_chat (or run on `store.conversations.resubmitting(...)`), '
    'which runs a turn sent again from the conversation as it stood before it.'
)


async def refuse_resent_prompt(
    database: Database, conversation_id: str, new_entries: Sequence[ConversationEntry]
) -> None:
    """Refuse to append, as a new message, a prompt whose UI message id the active path already holds: a UI
    adapter given only the loaded window appends an edit or regenerate of an older message so.

    Raises:
        UserError: The first new entry is such a prompt.
    """
    message_id = prompt_ui_id(new_entries[0].message) if new_entries else None
    if message_id is None or await prompt_position(database, conversation_id, message_id) is None:
        return
    raise UserError(
        f'Conversation {conversation_id!r}: message {message_id!r} was sent again (an edit or a regenerate), but it '
        'is older than the window the store loads, so the UI adapter appended it as a new message; the run was not '
        f'saved. {_USE_DISPATCH}'
    )


def refuse_summary_cut_away(saved: Conversation, window: LoadedWindow | None) -> None:
    """Refuse a conversation that sends the first prompt of `window` (the one it was loaded as) again without the
    summary riding in it: a UI adapter's edit or regenerate of that prompt cuts the window there, so its run was
    sent none of the turns before it.

    Raises:
        UserError: `saved` is such a conversation.
    """
    if saved.new_message_index is not None or window is None or window.summary_pk is None:
        return  # only a turn sent again is saved as a history rewritten from a message on
    if window.window_start <= window.head_end or len(window.messages) <= window.head_end:
        return
    first_prompt = prompt_ui_id(window.messages[window.head_end])
    for message in saved.messages:
        if any(isinstance(part, CompactionPart) for part in message.parts):
            return
        if first_prompt is not None and prompt_ui_id(message) == first_prompt:
            raise UserError(
                f'Conversation {saved.conversation_id!r}: message {first_prompt!r} was sent again (an edit or a '
                'regenerate) and run without the summary of the turns before it, which rides in that message in '
                f"the loaded window, so the UI adapter's cut dropped it; the run was not saved. {_USE_DISPATCH}"
            )


def _same(part: ModelRequestPart) -> object:
    """What makes a bridge's part the same part in a request it was merged into: a system prompt part by its text
    (pydantic-ai may make it afresh for the run), any other by equality."""
    return ('system', part.content) if isinstance(part, SystemPromptPart) else part
