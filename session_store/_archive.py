"""The archive's writes and the run cycle: sessions made and deleted, messages appended, windows loaded and moved.

Every function takes the `Database` it works on; `SessionStore`, `Session` and `SQLConversationStore`
all write through here, so a message is stored one way whoever stores it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic_ai.messages import ModelMessage
from sqlalchemy import Insert, String, bindparam, cast, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from processors import message_text

from ._codec import dump_message, dump_usage, now
from ._database import Database
from ._driver import fetch_row
from ._ids import new_token
from ._run_state import NewSummary
from ._tree import Span, on_path
from .errors import SessionConflict
from .rows import Base, MessageRow, SegmentRow, SessionRow, SummaryRow

__all__ = (
    'MESSAGE_INSERT',
    'SUMMARY_INSERT',
    'add_root_segment',
    'copy_path',
    'insert_messages',
    'insert_segment',
    'insert_summary',
    'message_rows',
    'new_session_row',
    'open_session',
    'summary_row',
)


def new_session_row(
    session_id: str,
    scope: str | None,
    *,
    message_count: int = 0,
    head_end: int = 0,
    window_start: int = 0,
    usage: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> SessionRow:
    moment = now()
    return SessionRow(
        session_id=session_id,
        scope=scope,
        revision=new_token(),
        message_count=message_count,
        head_end=head_end,
        window_start=window_start,
        usage=usage or {},
        branches=[],
        metadata_=metadata or {},
        created_at=moment,
        updated_at=moment,
    )


async def add_root_segment(db: AsyncSession, session_pk: int) -> int:
    """Give a new session its first segment, the one its active path ends in; the segment's key."""
    segment_pk = await insert_segment(db, session_pk, None, 0)
    await db.execute(update(SessionRow).where(SessionRow.pk == session_pk).values(active_segment_pk=segment_pk))
    return segment_pk


async def insert_segment(
    db: AsyncSession,
    session_pk: int,
    parent_pk: int | None,
    starts_at: int,
    *,
    head_end: int | None = None,
    window_start: int | None = None,
) -> int:
    """Add a segment to a session's tree, leaving its parent's path at `starts_at`, with a saved window; its key."""
    segment_pk = await db.scalar(
        insert(SegmentRow)
        .values(
            session_pk=session_pk,
            parent_pk=parent_pk,
            starts_at=starts_at,
            head_end=head_end,
            window_start=window_start,
            created_at=now(),
        )
        .returning(SegmentRow.pk)
    )
    assert segment_pk is not None
    return int(segment_pk)


_SCOPE = select(SessionRow.__table__.c.scope).where(SessionRow.__table__.c.session_id == bindparam('session_id'))
"""A session's scope, if it exists: what opening it checks."""


async def open_session(database: Database, session_id: str, scope: str | None) -> None:
    """Make sure the session exists, creating it if new; `SessionConflict` if its id is taken under another scope."""

    async def stored_scope(db: AsyncSession) -> tuple[bool, str | None]:
        found = (await db.execute(_SCOPE, {'session_id': session_id})).first()
        return (False, None) if found is None else (True, found[0])

    async def create(db: AsyncSession) -> tuple[bool, str | None]:
        try:
            async with db.begin_nested():
                row = new_session_row(session_id, scope)
                db.add(row)
            await add_root_segment(db, row.pk)
            return True, scope
        except IntegrityError:  # created by a concurrent writer just now
            return await stored_scope(db)

    # Most opens find the session: one row read straight from the driver, and a write only to create one.
    await database.ready()
    found = await fetch_row(database.engine, _SCOPE, {'session_id': session_id})
    exists, stored = (False, None) if found is None else (True, found[0])
    if not exists:
        exists, stored = await database.write(session_id, create)
    if scope is not None and stored != scope:
        # Say no more than that the id is taken: another scope's sessions stay invisible.
        raise SessionConflict(
            session_id, 'is already in use as an id', advice='Choose another session id for this scope.'
        )


def message_rows(
    session_pk: int,
    segment_pk: int,
    start: int,
    messages: Sequence[ModelMessage],
    tokens: Sequence[int],
    entry_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """`messages` as rows at positions `start..` of a segment, with new entry ids unless the caller's have them."""
    moment = now()
    return [
        {
            'session_pk': session_pk,
            'segment_pk': segment_pk,
            'position': start + offset,
            'entry_id': entry_ids[offset] if entry_ids is not None else new_token(),
            'run_id': getattr(message, 'run_id', None),
            'kind': message.kind,
            'payload': dump_message(message),
            # PostgreSQL text can't hold NUL; the JSON payload keeps it, escaped.
            'text': message_text(message).replace('\x00', ''),
            'tokens': count,
            'created_at': moment,
        }
        for offset, (message, count) in enumerate(zip(messages, tokens, strict=True))
    ]


def summary_row(
    session_pk: int, segment_pk: int, previous: int | None, summary: NewSummary, created_at: datetime
) -> dict[str, Any]:
    """`summary`, made on the segment's path, as the row linking after `previous`."""
    return {
        'session_pk': session_pk,
        'segment_pk': segment_pk,
        'previous_pk': previous,
        'covers_from': summary.covers_from,
        'covers_to': summary.covers_to,
        'text': summary.text,
        'tokens': summary.tokens,
        'model_name': summary.model_name,
        'usage': dump_usage(summary.usage),
        'created_at': created_at,
    }


def _insert_of(row: type[Base], columns: Sequence[str]) -> Insert:
    return insert(row).values({name: bindparam(name) for name in columns})


MESSAGE_INSERT = _insert_of(
    MessageRow,
    ('session_pk', 'segment_pk', 'position', 'entry_id', 'run_id', 'kind', 'payload', 'text', 'tokens', 'created_at'),
)
"""A row of `message_rows`, inserted."""
SUMMARY_INSERT = _insert_of(
    SummaryRow,
    (
        'session_pk',
        'segment_pk',
        'previous_pk',
        'covers_from',
        'covers_to',
        'text',
        'tokens',
        'model_name',
        'usage',
        'created_at',
    ),
).returning(SummaryRow.pk)
"""A `summary_row`, inserted; returns its key."""


async def insert_messages(db: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Insert `message_rows(...)`: each message once, with its text for search and its token count."""
    if rows:
        await db.execute(MESSAGE_INSERT, rows)


async def insert_summary(
    db: AsyncSession,
    session_pk: int,
    segment_pk: int,
    previous: int | None,
    summary: NewSummary,
    created_at: datetime,
) -> int:
    """Store `summary`, made on the segment's path, as the link after `previous`; its primary key."""
    pk = await db.scalar(SUMMARY_INSERT, summary_row(session_pk, segment_pk, previous, summary, created_at))
    assert pk is not None
    return int(pk)


async def copy_path(db: AsyncSession, spans: Sequence[Span], end: int, session_pk: int, segment_pk: int) -> int:
    """Copy the path's messages below `end` into a session's segment, at the same positions; how many were copied.

    One INSERT ... SELECT, so the payloads never leave the database. Copies keep their payload, text,
    token count and timestamp, and get entry ids `<fresh token>-<position>`: unique, because the token is new.
    """
    copy = select(
        literal(session_pk),
        literal(segment_pk),
        MessageRow.position,
        literal(new_token() + '-', String) + cast(MessageRow.position, String),
        MessageRow.run_id,
        MessageRow.kind,
        MessageRow.payload,
        MessageRow.text,
        MessageRow.tokens,
        MessageRow.created_at,
    ).select_from(MessageRow)
    columns = ['session_pk', 'segment_pk', 'position', 'entry_id', 'run_id', 'kind', 'payload', 'text', 'tokens']
    copied = await db.execute(insert(MessageRow).from_select([*columns, 'created_at'], on_path(copy, spans, (0, end))))
    return int(copied.rowcount)  # type: ignore[attr-defined]
