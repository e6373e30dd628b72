"""`SQLConversationStore`: pydantic-ai's `ConversationStore` over the session tables.

`agent.run(conversation=await store.load(id))` users and `Session` users share one archive: a
conversation is a `sessions` row and its entries are that session's `messages` rows, so
`SessionStore.history(id)` shows what `save` stored, and `load` sees what a `Session` ran.

The mapping:

- `ConversationRecord` <-> a `sessions` row: `conversation_id` is `session_id`, `revision` is the
  row's revision, and `head_id` is the `entry_id` of the last message on its active path (`None`
  while that path is empty), so the head is never stored twice and can't drift. `branches` is
  stored as the record gives it.
- `ConversationEntry` <-> a `messages` row: `id` is `entry_id`, `message` the decoded payload, and
  `parent_id` the `entry_id` before it on its path (`None` at position 0).

A conversation is a tree, as in pydantic-ai's own stores: a save whose history leaves the stored one
(an edit, a regenerate, a rewritten or truncated history) and `branch` move the head to the message
they continue from, and the path left stays stored, listed in `branches`, reachable by `branch`. In
`Session` terms the active path moves (`Session.branches()` shows the same tree), and each path keeps
its own summaries. A fork copies the kept messages into the new conversation rather than sharing
entries with the source, so deleting one conversation never touches another's messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from itertools import pairwise
from typing import Any

from pydantic_ai.agent import AgentRunResult
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationDetails, ConversationEntry, ConversationRecord, ConversationStore
from pydantic_ai.exceptions import UserError
from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from processors import SlidingWindowProcessor, TokenCounter, count_tokens
from processors.stored_conversations import keep_conversation

from ._codec import copied
from ._conversation_rows import (
    DEFERRED,
    RECORD,
    RecordRow,
    entries_query,
    entry_of,
    record_of,
    record_read,
    window_entries,
    written_row,
)
from ._conversation_writes import RETRY, advance, check_details, create, write_details
from ._history.archive import insert_messages, message_rows
from ._history.branches import before_prompt
from ._history.records import RunRecord
from ._history.runs import Runs, SessionHead
from ._history.tree import ENTRY_AT, on_path, spans_of, tip_entry_id
from ._history.turns import Compaction, compact_if_due
from ._history.window_cache import Recent
from ._history.windows import StoredRun, StoredWindow, WindowProcessor
from ._ids import check_id, new_token
from ._resubmitted import ResubmittedPrompt, refuse_resent_prompt, refuse_summary_cut_away
from ._telemetry import span
from ._upkeep.retention import delete_rows
from .errors import SessionConflict, SessionNotFound
from .rows import MessageRow, SegmentRow, SessionRow

__all__ = ('SQLConversationStore',)

_SESSION_OF = (
    select(SessionRow.session_id)
    .join(MessageRow, MessageRow.session_pk == SessionRow.pk)
    .where(MessageRow.entry_id == bindparam('entry_id'))
)
"""The id of the session an entry is stored in."""

_WHOLE = SlidingWindowProcessor(trigger=None)
"""Shapes the windows a store without a processor hands out once a compaction opened them: it never compacts, and
keeps the system prompt before the compaction, as pydantic-ai's wire trim does."""

_KEPT: ContextVar[RecordRow | None] = ContextVar('session_store_kept_record', default=None)
"""A record's row this task read a moment ago, which the next `read_record` of its conversation hands out once instead
of reading it again: in a load, the row the compaction check read, which pydantic-ai's `load` asks for next; in a
save, the row at the revision the conversation was loaded at, since the write checks that revision again."""


def _unstorable(conversation_id: str, detail: str) -> UserError:
    return UserError(
        f'Conversation {conversation_id!r} cannot be saved: {detail}. New entries must form one chain from '
        "an entry of the conversation (or from none), ending at the record's head, as `save` writes them."
    )


class SQLConversationStore(ConversationStore):
    """pydantic-ai's `ConversationStore` over a `SessionStore`'s SQL tables, sharing its archive.

    Use it as any conversation store:

    ```python
    conversations = store.conversations  # a SessionStore's
    conversation = await conversations.load(cid) or Conversation(conversation_id=cid)
    result = await agent.run('Hi', conversation=conversation)
    await conversations.save(result)
    ```

    What it stores, and how it differs from pydantic-ai's `InMemoryConversationStore`:

    - **Trees.** A save that diverges from the stored history, and `branch`, keep the path left
      as a branch, as pydantic-ai's stores do; `SessionStore` sees the same tree.
    - **Forks copy.** `fork` copies the kept messages (payload, text and token count, under new
      entry ids) into the new conversation, which then lives on its own.
    - **Delete erases.** `delete` removes the conversation's messages and summaries with it.
    - **Reads are single queries.** `read_history` reads the last `limit` messages in one
      SELECT, whatever the archive's size; `load` is that plus one SELECT for the record. With a
      processor, a load is one SELECT while the window kept in memory is the record's, and a save
      right after it one write.
    - **Token counts** of new messages are counted once, with the store's processor's
      `token_counter`, and kept, as for messages a `Session` stores.

    A conflicting save raises `SessionConflict`, a `ConversationConflict`.
    """

    def __init__(self, runs: Runs, token_counter: TokenCounter, processor: WindowProcessor | None = None) -> None:
        self._runs = runs
        self._database = runs.database
        self._token_counter = token_counter
        self._rows: Recent[str, RecordRow] = Recent()
        """The row each conversation had when its record was read last: a save right after (pydantic-ai's reads
        its record first) appends without reading it again, and a load reads the window kept at its revision."""
        self._tips: Recent[str, str] = Recent()
        """The conversation each recently read head entry is in (an entry never moves to another)."""
        self.processor = processor
        """The store's processor, if it was given one. With it, `load` hands back the window a `Session` would
        run from (compacting it first when the trigger holds, and storing that summary) and `read_history` of
        a conversation's head reads that window; without one, whole histories, as pydantic-ai's own stores."""

    async def load(
        self, conversation_id: str, *, limit: int | None = None, scope: str | None = None
    ) -> Conversation | None:
        """The conversation, or `None` if the store doesn't have it; see pydantic-ai's `ConversationStore.load`.

        With the store's processor it holds the window a `Session` would run from: the head (system prompt),
        the latest summary on the active path as a `CompactionPart`, and the kept tail. When the stored window
        has passed the processor's trigger, it is compacted first: the next summary of the chain, made from
        the last one and only the messages it newly evicts, is stored in its own transaction. The conversation
        is marked stored, so saving a run on it appends the run's messages after the stored ones, and kept
        (`keep_conversation`, its messages with it), so an agent carrying its own summarizer compacts it through
        pydantic-ai's compaction protocol, wherever this load ran, and a save of the run stores that summary as
        the chain's next link. `limit` keeps pydantic-ai's meaning: at most the last `limit` messages (of
        the window, with a processor).
        """
        check_id(conversation_id)
        with span('load_conversation', self._database.backend, conversation_id) as current:
            kept = _KEPT.set(None)
            try:
                if self.processor is not None and (row := await self._read_row(conversation_id)) is not None:
                    compaction = Compaction('no')
                    before = self._runs.windows.peek(conversation_id)
                    if scope in (None, row.scope):
                        compaction = await compact_if_due(
                            self._runs, conversation_id, scope, self.processor, revision=row.revision
                        )
                    current.set_attribute('session_store.window.compacted_now', compaction.done == 'yes')
                    if compaction.done == 'no':  # the row just read is the stored one: pydantic-ai's load takes it
                        _KEPT.set(row)
                    elif compaction.stored is not None:  # the compaction's write tells how it changed the row
                        _KEPT.set(self._keep_written(row, before, compaction.stored))
                loaded = await super().load(conversation_id, limit=limit, scope=scope)
            finally:
                _KEPT.reset(kept)
            head = self._head(conversation_id)
            # OpenTelemetry's GenAI conventions: the run will be sent compacted history (a summary, or a cut).
            current.set_attribute(
                'gen_ai.conversation.compacted', head is not None and head.window_start > head.head_end
            )
            # A window kept in memory at the record's revision is read without a `load_window` span of its own.
            current.set_attribute('session_store.window.messages', 0 if loaded is None else len(loaded.messages))
        keep_conversation(conversation_id, () if loaded is None else loaded.messages)
        return loaded

    async def save(
        self, conversation: Conversation | AgentRunResult[Any], *, scope: str | None = None
    ) -> list[ConversationEntry]:
        """Save the messages the store doesn't have yet; see pydantic-ai's `ConversationStore.save`.

        A conversation loaded here (or saved here last) at the revision still kept in memory is saved in one
        trip to the database: the write itself, which checks the revision.
        """
        saved = conversation.conversation if isinstance(conversation, AgentRunResult) else conversation
        row = self._rows.peek(saved.conversation_id)
        if row is not None and row.revision == saved.revision:
            self._check_summary_kept(saved)
        kept = _KEPT.set(row if row is not None and row.revision == saved.revision else None)
        try:
            return await super().save(conversation, scope=scope)
        finally:
            _KEPT.reset(kept)

    async def resubmitting(
        self, conversation_id: str, message_id: str, *, scope: str | None = None
    ) -> ConversationStore | None:
        """The store to run a user prompt of the conversation sent again on (an edit, a regenerate), or `None`
        when the conversation's active path holds no such prompt (it is a new message).

        `message_id` is the prompt's UI message id (the id a chat front end gave it), or its entry id. The store
        returned loads the conversation as it stood before that prompt: the window of the path up to it, with
        that path's own latest summary and nothing after, then the prompt itself, so a pydantic-ai UI adapter
        given it replaces that turn, however old, and the model is sent that window. Its save branches off the
        message before the prompt, and the turn replaced stays a branch. A save after the conversation changed
        (another run, a branch) is a conflict, as any save's. `session_store.dispatch_chat` uses it.
        """
        check_id(conversation_id)
        try:
            before = await before_prompt(self._database, conversation_id, scope, message_id, self.processor or _WHOLE)
        except SessionNotFound:
            return None
        return None if before is None else ResubmittedPrompt(self, conversation_id, message_id, before)

    def _check_summary_kept(self, saved: Conversation) -> None:
        """`refuse_summary_cut_away` against the window kept in memory at the revision the conversation was loaded
        at (a save of a conversation loaded elsewhere is not checked)."""
        row = self._rows.peek(saved.conversation_id)
        # Only a history saved as rewritten from a message on (no `new_message_index`) can have cut the summary away.
        if self.processor is not None and row is not None and saved.new_message_index is None:
            refuse_summary_cut_away(saved, self._runs.window_at(saved.conversation_id, row.revision, self.processor))

    # Reading

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's session row as a record, with its head, in one SELECT; `None` if there is none."""
        check_id(conversation_id)
        found = _KEPT.get()
        if found is not None and found.session_id == conversation_id:
            _KEPT.set(None)  # once: a second read in the same load or save (after a failed one) reads afresh
        elif (found := await self._read_row(conversation_id)) is None:
            return None
        return record_of(self._database.sealer, found, found.tip)

    async def _read_row(self, conversation_id: str) -> RecordRow | None:
        """The conversation's session row as `RECORD` reads it (one SELECT), kept for the load or save after it."""
        known = self._rows.peek(conversation_id)
        read = await self._database.glance(
            lambda db: db.execute(RECORD, record_read(conversation_id, known)).first(), session_id=conversation_id
        )
        found = None if read is None else RecordRow._make(read)
        self._rows.put(conversation_id, found)
        if found is not None and found.tip is not None:
            self._tips.put(found.tip, conversation_id)
        return found

    def _keep_written(
        self, row: RecordRow, before: StoredWindow | None, stored: StoredRun, added: Sequence[ConversationEntry] = ()
    ) -> RecordRow | None:
        """Keep `row` as this process's write of `stored` left it (`written_row`), for the next load's read and the
        next save; the row as it was stays kept when that can't be told, and is read again."""
        written = written_row(row, before, self._runs.windows.peek(row.session_id), stored, added)
        if written is not None:
            self._rows.put(row.session_id, written)
        return written

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        """The conversations (under `scope`, if given), most recently saved first, at most `limit`; one SELECT."""
        if scope is not None:
            check_id(scope, 'scope')
        # Ties keep creation order, as pydantic-ai's in-memory store's stable sort does.
        query = select(SessionRow, tip_entry_id()).order_by(SessionRow.updated_at.desc(), SessionRow.pk)
        if scope is not None:
            query = query.where(SessionRow.scope == scope)
        if limit is not None:
            query = query.limit(limit)
        async with self._database.read() as db:
            rows = (await db.execute(query)).all()
        return [record_of(self._database.sealer, row, head_id) for row, head_id in rows]

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id, with its parent, in one SELECT.

        Raises:
            LookupError: No message has this entry id.
        """
        async with self._database.read() as db:
            found = (await db.execute(entries_query().where(MessageRow.entry_id == entry_id))).first()
        if found is None:
            raise LookupError(f'No conversation entry {entry_id!r} in the store.')
        return entry_of(self._database.sealer, found)

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        """The entries up to and including `head_id`, oldest first, or only the last `limit`.

        The path to the head is read as one range scan per segment it crosses, on the (segment,
        position) unique index, so the cost is `limit` rows, not the archive. (The base class would
        call `read_entry` once per message.)

        Raises:
            LookupError: No message has the entry id `head_id`.
        """
        if head_id is None or limit == 0:
            return []
        if (window := await self._window_to(head_id)) is not None:
            return window if limit is None else window[-limit:]
        async with self._database.read() as db:
            # The head, with every segment of its session to find its path by: one SELECT.
            found = (
                await db.execute(
                    select(
                        MessageRow.segment_pk,
                        MessageRow.position,
                        SegmentRow.pk,
                        SegmentRow.parent_pk,
                        SegmentRow.starts_at,
                    )
                    .join(SegmentRow, SegmentRow.session_pk == MessageRow.session_pk)
                    .where(MessageRow.entry_id == head_id)
                )
            ).all()
            if not found:
                raise LookupError(f'No conversation entry {head_id!r} in the store.')
            segment_pk, position = found[0][:2]
            spans = spans_of(
                {pk: (parent, starts_at) for _, _, pk, parent, starts_at in found}, segment_pk, position + 1
            )
            start = 0 if limit is None else max(0, position + 1 - limit)
            rows = (await db.execute(on_path(entries_query(), spans, (start, position + 1)))).all()
        return [entry_of(self._database.sealer, row) for row in rows]

    async def _window_to(self, head_id: str) -> list[ConversationEntry] | None:
        """The stored window of the conversation whose active path ends at `head_id`, as entries; `None` when
        `head_id` is not such a head (an older entry, a branch's tip), whose path is read instead, and, in a store
        without a processor, while no compaction has opened the window past the start (pydantic-ai's own stores
        hand out whole histories; a provider's compaction means nothing before it is sent, so none is read)."""
        # The record read just before (as pydantic-ai's load and save do) names its head's conversation, and the
        # window kept at that record's revision needs no trip to the database.
        session_id = self._tips.get(head_id)
        head = None if session_id is None else self._head(session_id)
        processor = self.processor
        if processor is None:
            if head is None or head.window_start == 0:
                return None
            processor = _WHOLE
        if session_id is None:
            session_id = await self._database.statements(
                lambda db: db.execute(_SESSION_OF, {'entry_id': head_id}).scalar()
            )
            if session_id is None:
                raise LookupError(f'No conversation entry {head_id!r} in the store.')
        window = None if head is None else self._runs.kept(session_id, head.revision)
        if window is None:
            loaded = await self._runs.load_window(session_id, None, processor)
            window = self._runs.kept(session_id, loaded.revision)
        else:
            loaded = window.loaded(processor)
        if not loaded.entry_ids or loaded.entry_ids[-1] != head_id:
            return None
        parent: str | None = None
        if loaded.positions[0] > 0:  # a window with no head opens mid-path
            row = self._rows.peek(session_id)
            if row is not None and (row.revision, row.window_start) == (loaded.revision, loaded.positions[0]):
                parent = row.before_window  # read with the record, at this window's revision
            else:
                at = {'segment_pk': loaded.segment_pk, 'position': loaded.positions[0] - 1}
                parent = await self._database.statements(lambda db: db.execute(ENTRY_AT, at).scalar())
        # Copies: a caller changing a message in place changes nothing kept (`isolation`).
        messages = copied(loaded.messages) if window is None else window.handed_out(processor)
        return window_entries(loaded, parent, messages)

    def _head(self, conversation_id: str) -> SessionHead | None:
        """The `SessionHead` of the row the conversation's record was read from last, if it is kept."""
        row = self._rows.peek(conversation_id)
        return None if row is None else SessionHead._make(row[: len(SessionHead._fields)])

    # Writing

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store `record` and append `new_entries` to its archive, in one transaction, if `expected_revision` holds.

        With `expected_revision=None` the conversation must be new: its session row is inserted,
        and when `record.head_id` names another conversation's entry (a `fork`), that
        conversation's messages up to it are copied in first.

        Raises:
            SessionConflict: The stored revision isn't `expected_revision` (saved, deleted or created
                by someone else since it was read), or a forked-from entry is gone.
            UserError: The entries aren't one chain ending at `record.head_id`, or a new conversation's
                first entry continues another conversation's (fork that conversation instead).
            ValueError: The conversation id or scope isn't 1 to 255 printable characters.
        """
        conversation_id = check_id(record.conversation_id)
        if record.scope is not None:
            check_id(record.scope, 'scope')
        for previous, entry in pairwise(new_entries):
            if entry.parent_id != previous.id:
                raise _unstorable(conversation_id, f'entry {entry.id!r} does not follow the entry before it')
        if new_entries and record.head_id != new_entries[-1].id:
            raise _unstorable(conversation_id, "the record's head is not the newest of the entries it adds")
        if expected_revision is None and new_entries and new_entries[0].parent_id is not None:
            raise _unstorable(
                conversation_id,
                f'it is new, but its first message continues entry {new_entries[0].parent_id!r}; fork the '
                'conversation that entry belongs to, then save the fork',
            )
        # Counted before the transaction opens: a counter may be slow (a tokenizer, a remote call),
        # and the write lock shouldn't wait on it.
        tokens = [await count_tokens(self._token_counter, [entry.message]) for entry in new_entries]
        deferred = (
            None
            if record.deferred_tool_requests is None
            else DEFERRED.dump_python(record.deferred_tool_requests, mode='json')
        )
        if expected_revision is not None and new_entries:
            head = self._head(conversation_id)
            if head is None or head.revision != expected_revision or head.tip == new_entries[0].parent_id:
                await refuse_resent_prompt(self._database, conversation_id, new_entries)
            # Most saves append a run after the stored head: the run cycle's own write, as a Session's run.
            appended = RunRecord(
                # Copies, for the window kept in memory: the caller's own may sit in other histories too (a few-shot
                # example, a canned reply), whose runs no store feeds, and may be changed in place after the save.
                # Deep, as a shallow copy shares the parts; it decodes nothing.
                messages=copied([e.message for e in new_entries]),
                tokens=tokens,
                head_end=0,
                window_start=0,
                summaries=(),
                usage=record.usage,
                deferred_tool_requests=deferred,
                entry_ids=[e.id for e in new_entries],
            )
            after = new_entries[0].parent_id
            before = self._runs.kept(conversation_id, expected_revision)
            stored = await self._runs.append(
                conversation_id,
                after,
                appended,
                expected_revision=expected_revision,
                revision=record.revision,
                head=self._head(conversation_id),
            )
            if stored is not None:
                if (row := self._rows.peek(conversation_id)) is not None and row.revision == expected_revision:
                    self._keep_written(row, before, stored, new_entries)
                return

        # A write transaction (SQLite's write lock taken up front, a refused lock retried), finished even when the
        # saving task is cancelled: cancelled part-way, it held the lock until the connection was collected.
        async def write(db: AsyncSession) -> None:
            if expected_revision is None:
                session_pk, segment_pk, start = await create(db, self._database.sealer, record, new_entries)
            else:
                session_pk, segment_pk, start = await advance(db, record, new_entries, expected_revision)
            vault = self._database.sealer.vault(conversation_id, session_pk)
            if deferred is not None:
                # Sealed under the session's key, known only now: a paused run's requests take one more UPDATE.
                await db.execute(
                    update(SessionRow)
                    .where(SessionRow.pk == session_pk)
                    .values(deferred_tool_requests=vault.seal_json('deferred tool requests', deferred))
                )
            messages = [e.message for e in new_entries]
            entry_ids = [e.id for e in new_entries]
            await insert_messages(db, message_rows(vault, segment_pk, start, messages, tokens, entry_ids))

        await self._database.write(conversation_id, write)

    async def write_details(
        self,
        conversation_id: str,
        details: ConversationDetails,
        *,
        expected_revision: str,
        expected: ConversationDetails | None = None,
    ) -> ConversationRecord:
        """Replace the conversation's title or metadata (`update` calls it) if it is at `expected_revision` with the
        `expected` values, as the write itself checks (`_conversation_writes.write_details`); its revision and
        `updated_at` stay. The metadata is the session's (`SessionStore.sessions()`, `set_metadata`), `None` as `{}`.

        Raises:
            SessionConflict: No session with this id has this revision and these values (saved, deleted or updated
                since it was read); a `ConversationConflict`.
            ValueError: The title is not a string, or the metadata not a dict of JSON values.
            NotImplementedError: A key other than `title` and `metadata`.
        """
        check_id(conversation_id)
        check_details(conversation_id, details, expected)
        sealer, kept = self._database.sealer, self._rows.peek(conversation_id)
        row = await self._database.write(
            conversation_id,
            lambda db: write_details(db, sealer, conversation_id, details, expected_revision, expected or {}, kept),
        )
        self._rows.put(conversation_id, row)
        return record_of(sealer, row, row.tip)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the conversation, its messages and its summaries, if its revision is `expected_revision`.

        Messages are erased with it: forks hold copies, so no other conversation reaches them.

        Raises:
            SessionConflict: No session with this id has this revision.
        """
        check_id(conversation_id)

        async def delete(db: AsyncSession) -> None:
            # Claim the row first (the revision check and SQLite's write lock in one statement), so a
            # save racing this delete either lands before it and fails it, or fails itself.
            session_pk = await db.scalar(
                update(SessionRow)
                .where(SessionRow.session_id == conversation_id, SessionRow.revision == expected_revision)
                .values(revision=new_token())
                .returning(SessionRow.pk)
            )
            if session_pk is None:
                raise SessionConflict(conversation_id, 'was saved or deleted since it was loaded', advice=RETRY)
            await delete_rows(db, [session_pk])

        await self._database.write(conversation_id, delete)
        self._runs.forget([conversation_id])
