"""Deleting for good: one session, every session of a scope, or those not updated since a cutoff.

A deleted session goes whole, in one transaction: its messages (and their full-text index rows),
summaries, branches and the session itself. SQLite connections run with `secure_delete`, so the pages
the rows leave are zeroed; `vacuum` then rewrites what could still hold a deleted word (the full-text
index's older segments, the WAL's copies of pages) so the file's bytes hold none of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, delete, func, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from .._db.database import Database
from .._ids import check_id
from ..errors import SessionNotFound
from ..results import Removed
from ..rows import MessageRow, SegmentRow, SessionRow, SummaryRow

__all__ = ('delete_rows', 'remove_sessions', 'vacuum')


async def remove_sessions(
    database: Database,
    *,
    session_id: str | None = None,
    scope: str | None = None,
    updated_before: datetime | None = None,
    dry_run: bool = False,
) -> Removed:
    """Delete the sessions that match every filter given, whole; what was removed (or would be, `dry_run`).

    Raises:
        SessionNotFound: `session_id` names no session (under `scope`).
    """
    if session_id is not None:
        check_id(session_id)
    if scope is not None:
        check_id(scope, 'scope')
    matches: list[ColumnElement[bool]] = [true()]
    if session_id is not None:
        matches.append(SessionRow.session_id == session_id)
    if scope is not None:
        matches.append(SessionRow.scope == scope)
    if updated_before is not None:
        matches.append(SessionRow.updated_at < updated_before)

    async def remove(db: AsyncSession) -> Removed:
        found = (await db.execute(select(SessionRow.pk, SessionRow.session_id).where(*matches))).all()
        if session_id is not None and not found:
            raise SessionNotFound(session_id, scope)
        pks = [pk for pk, _ in found]
        removed = Removed(
            sessions=sorted(sid for _, sid in found),
            messages=await _count(db, MessageRow, pks),
            summaries=await _count(db, SummaryRow, pks),
        )
        if not dry_run:
            await delete_rows(db, pks)
        return removed

    return await database.write(session_id or scope or 'prune', remove)


async def _count(db: AsyncSession, row: type[MessageRow | SummaryRow], pks: Sequence[int]) -> int:
    return int(await db.scalar(select(func.count()).where(row.session_pk.in_(pks))) or 0) if pks else 0


async def delete_rows(db: AsyncSession, session_pks: Sequence[int]) -> None:
    """Delete sessions' rows, children first.

    Explicit rather than trusting ON DELETE CASCADE, which SQLite only honours with its pragma on; the
    messages' delete trigger takes their full-text rows with them.
    """
    if not session_pks:
        return
    for row in (SummaryRow, MessageRow, SegmentRow):
        await db.execute(delete(row).where(row.session_pk.in_(session_pks)))
    await db.execute(delete(SessionRow).where(SessionRow.pk.in_(session_pks)))


async def vacuum(database: Database) -> None:
    """Rewrite what could still hold deleted text, so the database's bytes hold none of it.

    SQLite: the full-text index is merged into one segment (older segments keep deleted words until
    merged), the file is vacuumed, and the WAL is checkpointed and truncated. PostgreSQL: `VACUUM` on the
    store's tables, which clears the rows deletes left behind.
    """
    # Outside any transaction: VACUUM refuses to run inside one, on either backend.
    async with database.connect() as connection:
        if database.backend == 'sqlite':
            await connection.exec_driver_sql("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            await connection.exec_driver_sql('VACUUM')
            await connection.exec_driver_sql('PRAGMA wal_checkpoint(TRUNCATE)')
        else:
            await connection.exec_driver_sql('VACUUM sessions, segments, messages, summaries')
