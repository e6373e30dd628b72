"""The conversation door's writes through the ORM: a new conversation's session row (a fork's history copied into
it), and a record moved on, onto another path when its entries continue another message than the stored head.
`SQLConversationStore.write_record` runs them in one write transaction, when a save is not a run appended after
the stored head (`Runs.append`, the hot path). And a record's title and metadata replaced (`write_details`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic_ai.conversation_store import ConversationDetails, ConversationEntry, ConversationRecord
from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from ._codec import now
from ._conversation_rows import RECORD, RecordRow, details_of, record_columns, record_read
from ._db.sealing import Sealer, Vault
from ._history.archive import add_root_segment, check_metadata, copy_path
from ._history.branches import move_head
from ._history.tree import entry_at, path_spans
from .errors import SessionConflict
from .rows import MessageRow, SessionRow

__all__ = ('RETRY', 'advance', 'check_details', 'create', 'write_details')

RETRY = 'Load the conversation again and retry.'
"""The advice of a conflicting save's `SessionConflict`."""


async def create(
    db: AsyncSession, sealer: Sealer, record: ConversationRecord, new_entries: Sequence[ConversationEntry]
) -> tuple[int, int, int]:
    """Insert a new conversation's session row, copying a fork's history; its pk, segment and next position."""
    conversation_id = record.conversation_id
    details: ConversationDetails = {'title': record.title, 'metadata': record.metadata}
    check_details(conversation_id, details)
    # The insert comes first so this transaction holds SQLite's write lock from its first
    # statement: a read first would start a snapshot that a concurrent commit makes stale.
    try:
        session_pk = await db.scalar(
            insert(SessionRow)
            .values(
                **record_columns(record),
                message_count=len(new_entries),
                head_end=0,
                window_start=0,
                metadata_={},
                created_at=now(),
            )
            .returning(SessionRow.pk)
        )
    except IntegrityError:
        raise SessionConflict(conversation_id, 'already exists', advice=RETRY) from None
    assert session_pk is not None
    if record.title is not None or record.metadata:  # sealed under the session's key, known only now
        sealed = _sealed_details(sealer.vault(conversation_id, session_pk), details)
        await db.execute(update(SessionRow).where(SessionRow.pk == session_pk).values(**sealed))
    segment_pk = await add_root_segment(db, session_pk)
    if new_entries or record.head_id is None:
        return session_pk, segment_pk, 0
    target = sealer.vault(conversation_id, session_pk)
    copied = await _copy_history(db, record.head_id, target, segment_pk)
    if copied == 0:
        # The forked-from entry was deleted (or never existed) since the fork read it.
        raise SessionConflict(conversation_id, f'was forked from entry {record.head_id!r}, which is gone', advice=RETRY)
    await db.execute(update(SessionRow).where(SessionRow.pk == session_pk).values(message_count=copied))
    return session_pk, segment_pk, copied


async def advance(
    db: AsyncSession,
    record: ConversationRecord,
    new_entries: Sequence[ConversationEntry],
    expected_revision: str,
) -> tuple[int, int, int]:
    """Move a session row to `record` if its revision is `expected_revision`; its pk, and where to append.

    New entries that continue another message than the stored head (a rewritten or truncated
    history saved, an edit, a regenerate), or a head moved without new entries (`branch`), make
    that message's path the active one first; the path left stays stored.
    """
    conversation_id = record.conversation_id
    # Optimistic concurrency: the revision check and the write are one statement, which also
    # takes the row's write lock, so no other writer can slip in before the entries are added.
    added = len(new_entries)
    claimed = (
        await db.execute(
            update(SessionRow)
            .where(SessionRow.session_id == conversation_id, SessionRow.revision == expected_revision)
            .values(**record_columns(record), message_count=SessionRow.message_count + added)
            .returning(SessionRow.pk, SessionRow.active_segment_pk, SessionRow.message_count)
        )
    ).first()
    if claimed is None:
        raise SessionConflict(conversation_id, 'was saved or deleted since it was loaded', advice=RETRY)
    session_pk, segment_pk, count = claimed
    assert segment_pk is not None
    length = count - added
    attach = new_entries[0].parent_id if new_entries else record.head_id
    if attach != await entry_at(db, segment_pk, length - 1):
        # Raising rolls the revision update back with everything else.
        at = await _locate(db, conversation_id, session_pk, attach)
        row = await db.get_one(SessionRow, session_pk)
        segment_pk, length = await move_head(db, row, at, length=length, continued=added > 0)
        if added:
            await db.execute(update(SessionRow).where(SessionRow.pk == session_pk).values(message_count=length + added))
    return session_pk, segment_pk, length


async def _copy_history(db: AsyncSession, head_id: str, target: Vault, segment_pk: int) -> int:
    """Copy the messages up to and including entry `head_id` into a session's segment; how many were copied."""
    head = (
        await db.execute(
            select(SessionRow.session_id, MessageRow.session_pk, MessageRow.segment_pk, MessageRow.position)
            .join(SessionRow, SessionRow.pk == MessageRow.session_pk)
            .where(MessageRow.entry_id == head_id)
        )
    ).first()
    if head is None:
        return 0
    spans = await path_spans(db, head.session_pk, head.segment_pk, head.position + 1)
    source = target.sealer.vault(head.session_id, head.session_pk)
    return await copy_path(db, spans, head.position + 1, source, target, segment_pk)


async def _locate(
    db: AsyncSession, conversation_id: str, session_pk: int, entry_id: str | None
) -> tuple[int, int] | None:
    """Where this conversation's entry `entry_id` is stored: (segment, position); `None` for no entry (the empty path).

    Raises:
        SessionConflict: The conversation has no such entry (deleted meanwhile, or another conversation's).
    """
    if entry_id is None:
        return None
    found = (
        await db.execute(
            select(MessageRow.segment_pk, MessageRow.position).where(
                MessageRow.entry_id == entry_id, MessageRow.session_pk == session_pk
            )
        )
    ).first()
    if found is None:
        raise SessionConflict(conversation_id, f'has no entry {entry_id!r} to continue from', advice=RETRY)
    return found.segment_pk, found.position


class _StoredDetails(NamedTuple):
    """A session row's title and metadata as stored (sealed or not), with its key."""

    pk: int
    title: str | None
    metadata_: Any


def check_details(
    conversation_id: str, details: ConversationDetails, expected: ConversationDetails | None = None
) -> None:
    """Refuse a title that is not a string, and metadata that is not a dict of JSON values (`None` is none).

    Raises:
        ValueError: Saying which.
        NotImplementedError: A key other than `title` and `metadata`, in `details` or `expected`.
    """
    unknown = sorted({*details, *(expected or {})} - {'title', 'metadata'})
    if unknown:
        raise NotImplementedError(f'SQLConversationStore stores no {", ".join(unknown)} of a conversation.')
    title = details.get('title')
    if title is not None and not isinstance(title, str):
        raise ValueError(f'Conversation {conversation_id!r}: a title is a string or None; got {title!r:.80}.')
    if details.get('metadata') is not None:
        check_metadata(details['metadata'])


def _sealed_details(vault: Vault, details: ConversationDetails) -> dict[str, Any]:
    """The session columns `details` writes, sealed under the session's key when the store encrypts (`None`
    metadata as `{}`, none)."""
    values: dict[str, Any] = {}
    if 'title' in details:
        title = details['title']
        values['title'] = None if title is None else vault.seal('title', title)
    if 'metadata' in details:
        values['metadata_'] = vault.seal_json('metadata', details['metadata'] or {})
    return values


async def write_details(
    db: AsyncSession,
    sealer: Sealer,
    conversation_id: str,
    details: ConversationDetails,
    expected_revision: str,
    expected: ConversationDetails,
    kept: RecordRow | None,
) -> RecordRow:
    """Write a conversation's `details` if it is at `expected_revision` with the `expected` values; the row as
    stored then.

    The check is the write's own: the `UPDATE` claims the row only at `expected_revision` and with the stored title
    the expected one was checked against (the stored value itself, sealed or not: `IS NOT DISTINCT FROM`), so a
    title changed since the check, with the revision left as it was, makes it write nothing. `kept`, the row the
    door read last, is checked against when it is at `expected_revision` (`update` has just read it), so most
    updates take that one statement, then a read of the record as stored; else the row is read first (locked, on
    PostgreSQL, while expected metadata is compared: a JSON column has no equality to claim it by).

    Raises:
        SessionConflict: It isn't (saved, deleted or updated since it was read); nothing was written.
    """
    conflict = SessionConflict(conversation_id, 'was saved, deleted or updated since it was read', advice=RETRY)
    usable = kept is not None and kept.revision == expected_revision and 'metadata' not in expected

    def matches(stored: _StoredDetails) -> bool:
        title, metadata = details_of(sealer, conversation_id, stored.pk, stored.title, stored.metadata_)
        if 'title' in expected and expected['title'] != title:
            return False
        return 'metadata' not in expected or (expected['metadata'] or None) == metadata

    stored = _StoredDetails(kept.pk, kept.title, kept.metadata_) if usable and kept is not None else None
    if stored is None or not matches(stored):
        read = select(SessionRow.pk, SessionRow.title, SessionRow.metadata_).where(
            SessionRow.session_id == conversation_id, SessionRow.revision == expected_revision
        )
        found = (await db.execute(read.with_for_update() if 'metadata' in expected else read)).first()
        stored = None if found is None else _StoredDetails(*found)
        if stored is None or not matches(stored):
            raise conflict
    # With nothing to write, the claim alone checks.
    values = _sealed_details(sealer.vault(conversation_id, stored.pk), details) or {'revision': expected_revision}
    claim = update(SessionRow).where(SessionRow.pk == stored.pk, SessionRow.revision == expected_revision)
    if 'title' in expected:
        claim = claim.where(SessionRow.title.is_not_distinct_from(stored.title))
    if await db.scalar(claim.values(**values).returning(SessionRow.pk)) is None:
        raise conflict
    return RecordRow._make((await db.execute(RECORD, record_read(conversation_id, kept))).one())
