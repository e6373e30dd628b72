"""The archive's writes: sessions opened, segments added, messages and summaries inserted, paths copied, metadata.

Every function takes the `Database` it works on; the run cycle (`runs`), branches, imports and
`SQLConversationStore` all insert through here, so a message row is made one way whoever stores it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic_ai.messages import ModelMessage
from sqlalchemy import Insert, String, bindparam, cast, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from .._codec import dump_message, dump_usage, now
from .._db.database import Database, find_session
from .._db.sealing import SEALED, Vault
from .._db.textual import textual
from .._ids import new_token
from ..errors import SessionConflict
from ..rows import Base, MessageRow, SegmentRow, SessionRow, SummaryRow
from .records import NewSummary
from .tree import Span, on_path

__all__ = (
    'MESSAGE_INSERT',
    'SUMMARY_COLUMNS',
    'SUMMARY_INSERT',
    'add_root_segment',
    'check_metadata',
    'copy_path',
    'insert_messages',
    'insert_segment',
    'insert_summary',
    'message_rows',
    'new_session_row',
    'open_session',
    'summary_row',
    'write_metadata',
)


def new_session_row(
    session_id: str,
    scope: str | None,
    *,
    message_count: int = 0,
    head_end: int = 0,
    window_start: int = 0,
    usage: dict[str, Any] | None = None,
) -> SessionRow:
    """A new session's row; its metadata is set once its key is known, from its primary key (`Vault.seal_json`)."""
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
        metadata_={},
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


_SCOPE = textual(
    select(SessionRow.__table__.c.scope).where(SessionRow.__table__.c.session_id == bindparam('session_id'))
)
"""A session's scope, if it exists: what opening it checks (as text, `textual`: every first open reads it)."""


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

    # Most opens find the session: one row read, and a write only to create one.
    found = await database.glance(
        lambda db: db.execute(_SCOPE, {'session_id': session_id}).first(), session_id=session_id, writing=True
    )
    exists, stored = (False, None) if found is None else (True, found[0])
    if not exists:
        exists, stored = await database.write(session_id, create)
    if scope is not None and stored != scope:
        # Say no more than that the id is taken: another scope's sessions stay invisible.
        raise SessionConflict(
            session_id, 'is already in use as an id', advice='Choose another session id for this scope.'
        )


def check_metadata(metadata: object) -> None:
    """Refuse metadata a session can't hold: anything but a dict of JSON values with string keys.

    Raises:
        ValueError: Saying what it got.
    """
    try:
        # allow_nan=False: JSON has no NaN or infinity, and PostgreSQL refuses them where Python would write them.
        valid = isinstance(metadata, dict) and json.loads(json.dumps(metadata, allow_nan=False)) == metadata
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(f'metadata must be a dict of JSON values with string keys; got {metadata!r:.80}.')


async def write_metadata(database: Database, session_id: str, scope: str | None, metadata: dict[str, Any]) -> None:
    """Replace a session's metadata, sealed under its key when the store encrypts."""
    check_metadata(metadata)

    async def work(db: AsyncSession) -> None:
        row = await find_session(db, session_id, scope)
        row.metadata_ = database.sealer.vault(session_id, row.pk).seal_json('metadata', metadata)
        row.updated_at = now()

    await database.write(session_id, work)


def message_rows(
    vault: Vault,
    segment_pk: int,
    start: int,
    messages: Sequence[ModelMessage],
    tokens: Sequence[int],
    entry_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """`messages` as rows at positions `start..` of a segment, with new entry ids unless the caller's have them."""
    moment = now()
    search_text, ui_id_form = vault.sealer.search_text, vault.sealer.ui_id_form
    return [
        {
            'session_pk': vault.session_pk,
            'segment_pk': segment_pk,
            'position': start + offset,
            'entry_id': entry_ids[offset] if entry_ids is not None else new_token(),
            'run_id': getattr(message, 'run_id', None),
            'kind': message.kind,
            'payload': vault.seal('message', dump_message(message)),
            'text': search_text(message),
            'tokens': count,
            'created_at': moment,
            'ui_message_id': ui_id_form(message),
        }
        for offset, (message, count) in enumerate(zip(messages, tokens, strict=True))
    ]


def summary_row(
    vault: Vault, segment_pk: int, previous: int | None, summary: NewSummary, created_at: datetime
) -> dict[str, Any]:
    """`summary`, made on the segment's path, as the row linking after `previous`."""
    return {
        'session_pk': vault.session_pk,
        'segment_pk': segment_pk,
        'previous_pk': previous,
        'covers_from': summary.covers_from,
        'covers_to': summary.covers_to,
        'text': vault.seal('summary', summary.text),
        'tokens': summary.tokens,
        'model_name': summary.model_name,
        'usage': dump_usage(summary.usage),
        'created_at': created_at,
    }


def _insert_of(row: type[Base], columns: Sequence[str]) -> Insert:
    return insert(row).values({name: bindparam(name) for name in columns})


MESSAGE_INSERT = _insert_of(
    MessageRow,
    (
        'session_pk',
        'segment_pk',
        'position',
        'entry_id',
        'run_id',
        'kind',
        'payload',
        'text',
        'tokens',
        'created_at',
        'ui_message_id',
    ),
)
"""A row of `message_rows`, inserted."""
SUMMARY_COLUMNS = (
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
)
"""The columns of a `summary_row`."""
SUMMARY_INSERT = _insert_of(SummaryRow, SUMMARY_COLUMNS).returning(SummaryRow.pk)
"""A `summary_row`, inserted; returns its key."""


async def insert_messages(db: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Insert `message_rows(...)`: each message once, with its text for search and its token count."""
    if rows:
        await db.execute(MESSAGE_INSERT, rows)


async def insert_summary(
    db: AsyncSession,
    vault: Vault,
    segment_pk: int,
    previous: int | None,
    summary: NewSummary,
    created_at: datetime,
) -> int:
    """Store `summary`, made on the segment's path, as the link after `previous`; its primary key."""
    pk = await db.scalar(SUMMARY_INSERT, summary_row(vault, segment_pk, previous, summary, created_at))
    assert pk is not None
    return int(pk)


async def copy_path(
    db: AsyncSession, spans: Sequence[Span], end: int, source: Vault, target: Vault, segment_pk: int
) -> int:
    """Copy the path's messages below `end` into another session's segment, at the same positions; how many were copied.

    Copies keep their payload, search text, UI message id, token count and timestamp, and get entry ids
    `<fresh token>-<position>`: unique, because the token is new. A clear store copies with one INSERT ... SELECT,
    so the payloads never leave the database; a sealed payload is opened and sealed again under the target
    session's own key (and its search text and UI message id made again under the current key).
    """
    prefix = new_token() + '-'
    if not source.sealer.encrypting:
        copied = await _copy_clear(db, spans, end, prefix, target.session_pk, segment_pk)
        if copied < end:  # a sealed row was left behind: a copy must never hold what this store can't read
            sealed = select(MessageRow.position, MessageRow.payload).where(MessageRow.payload.startswith(SEALED))
            found = (await db.execute(on_path(sealed, spans, (0, end)).limit(1))).first()
            if found is not None:
                source.message(*found)  # raises KeyUnavailable, naming its key; the caller's transaction rolls back
        return copied
    read = select(MessageRow.position, MessageRow.payload, MessageRow.tokens, MessageRow.created_at)
    found_rows = (await db.execute(on_path(read, spans, (0, end)))).all()
    messages = [source.message(position, payload) for position, payload, _, _ in found_rows]
    rows = message_rows(
        target,
        segment_pk,
        0,
        messages,
        [tokens for *_, tokens, _ in found_rows],
        [f'{prefix}{p}' for p, *_ in found_rows],
    )
    for row, (*_, created_at) in zip(rows, found_rows, strict=True):
        row['created_at'] = created_at
    await insert_messages(db, rows)
    return len(rows)


async def _copy_clear(
    db: AsyncSession, spans: Sequence[Span], end: int, prefix: str, session_pk: int, segment_pk: int
) -> int:
    """The path's clear rows below `end` copied in one INSERT ... SELECT, so their payloads never leave the database."""
    copy = select(
        literal(session_pk),
        literal(segment_pk),
        MessageRow.position,
        literal(prefix, String) + cast(MessageRow.position, String),
        MessageRow.run_id,
        MessageRow.kind,
        MessageRow.payload,
        MessageRow.text,
        MessageRow.tokens,
        MessageRow.created_at,
        MessageRow.ui_message_id,
    ).where(MessageRow.payload.not_like(f'{SEALED}%'))
    columns = ['session_pk', 'segment_pk', 'position', 'entry_id', 'run_id', 'kind', 'payload', 'text', 'tokens']
    copied = await db.execute(
        insert(MessageRow).from_select([*columns, 'created_at', 'ui_message_id'], on_path(copy, spans, (0, end)))
    )
    return int(copied.rowcount)  # type: ignore[attr-defined]
