"""Deleting for good: one session, every session of a scope, or those not updated since a cutoff.

A deleted session goes whole, in one transaction: its messages (and their full-text index rows),
summaries, branches and the session itself. SQLite connections run with `secure_delete`, so the pages
the rows leave are zeroed; `vacuum` then rewrites what could still hold a deleted word (the full-text
index's older segments, the WAL's copies of pages) so the file's bytes hold none of it. On PostgreSQL a
delete leaves the rows' bytes in the tables' files, and so does a plain `VACUUM` (it frees the space without
overwriting it, and a GIN index keeps every word it ever held): `vacuum` runs `VACUUM (FULL, ANALYZE)`, which
writes each table and its indexes anew, and samples its statistics again. Only the tables' owner may: for
anyone else the server skips them with a warning, and `vacuum` says which it skipped rather than pretending.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select, text, true
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from .._db.database import Database
from .._ids import check_id
from ..errors import SessionNotFound
from ..results import Removed, Vacuumed
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


async def vacuum(database: Database) -> Vacuumed:
    """Rewrite what could still hold deleted text, so the database's bytes hold none of it; what it could not.

    SQLite: the full-text index is merged into one segment (older segments keep deleted words until
    merged), the file is vacuumed, and the WAL is checkpointed and truncated. PostgreSQL: `VACUUM (FULL,
    ANALYZE)` on the store's tables that this role may vacuum, each written anew with its indexes and TOAST (the
    old files are emptied when it commits), and its column statistics sampled again from the rows left (the
    samples `pg_stats` shows held deleted values); the others are named in `Vacuumed.skipped`.
    """
    # Outside any transaction: VACUUM refuses to run inside one, on either backend.
    async with database.connect() as connection:
        if database.backend == 'sqlite':
            await connection.exec_driver_sql("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            await connection.exec_driver_sql('VACUUM')
            await connection.exec_driver_sql('PRAGMA wal_checkpoint(TRUNCATE)')
            return Vacuumed()
        return await _vacuum_full(connection)


TABLES = ('sessions', 'segments', 'messages', 'summaries')
"""The tables that hold what a delete removes, children of `sessions` after it."""

_WHO_MAY = """
SELECT c.relname, pg_get_userbyid(c.relowner), current_user,
       pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE'){maintain}
FROM pg_class c, pg_database d
WHERE c.oid = ANY(CAST(:tables AS regclass[])) AND d.datname = current_database()
"""
"""Who may vacuum each table, by the server's rule: a member of its owner's role or the database owner's
(superusers are members of every role), or from PostgreSQL 17 on, whoever holds `MAINTAIN` on it."""


async def _vacuum_full(connection: AsyncConnection) -> Vacuumed:
    """`VACUUM (FULL, ANALYZE)` on the store's tables this role may; the rest, and any the server skipped, reported.

    Two checks, since either alone can miss: the catalogue says which tables the role may vacuum (the server
    sends no warning when `client_min_messages` is above it), and the server's own warnings name any table it
    skipped all the same (whose rules for who may vacuum vary by version).
    """
    version = int(await connection.scalar(text('SHOW server_version_num')) or 0)
    maintain = " OR has_table_privilege(c.oid, 'MAINTAIN')" if version >= 170000 else ''
    rows = (await connection.execute(text(_WHO_MAY.format(maintain=maintain)), {'tables': list(TABLES)})).all()
    owners = {str(name): str(owner) for name, owner, _, _ in rows}
    role = str(rows[0][2]) if rows else None
    allowed = [name for name in TABLES if any(row[0] == name and row[3] for row in rows)]
    skipped = {name for name in TABLES if name not in allowed}
    if allowed:
        driver: Any = (await connection.get_raw_connection()).driver_connection  # asyncpg's own
        warned: list[str] = []

        def listen(_: object, notice: Any) -> None:
            # `severity_en` is never translated (the server's `lc_messages` translates the rest).
            if (getattr(notice, 'severity_en', None) or getattr(notice, 'severity', None)) == 'WARNING':
                warned.append(str(notice.message))

        driver.add_log_listener(listen)
        try:
            await connection.exec_driver_sql(f'VACUUM (FULL, ANALYZE) {", ".join(allowed)}')
        finally:
            driver.remove_log_listener(listen)
        skipped.update(name for name in allowed if any(re.search(rf'\b{name}\b', said) for said in warned))
    listed = [name for name in TABLES if name in skipped]
    return Vacuumed(skipped=listed, role=role, owner=owners.get(listed[0]) if listed else None)
