"""Reads for review: the sessions, a session's raw archive, and its summary chain."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from ._codec import decode, load_usage, utc
from ._database import Database, active_segment, find_session
from .results import SessionInfo, StoredSummary
from .rows import MessageRow, SessionRow, SummaryRow

__all__ = ('list_sessions', 'read_history', 'read_summaries', 'summary_chain')


async def list_sessions(database: Database, *, scope: str | None, limit: int | None) -> list[SessionInfo]:
    """The stored sessions, most recently updated first; under `scope`, only those saved with it."""
    summaries = select(func.count(SummaryRow.pk)).where(SummaryRow.session_pk == SessionRow.pk).scalar_subquery()
    query = select(SessionRow, summaries).order_by(SessionRow.updated_at.desc(), SessionRow.pk.desc())
    if scope is not None:
        query = query.where(SessionRow.scope == scope)
    if limit is not None:
        query = query.limit(limit)
    async with database.read() as db:
        rows = (await db.execute(query)).all()
    return [
        SessionInfo(
            session_id=row.session_id,
            scope=row.scope,
            message_count=row.message_count,
            summary_count=count,
            usage=load_usage(row.usage),
            created_at=utc(row.created_at),
            updated_at=utc(row.updated_at),
            metadata=row.metadata_,
        )
        for row, count in rows
    ]


async def read_history(
    database: Database, session_id: str, *, scope: str | None, offset: int, limit: int | None
) -> list[ModelMessage]:
    """`limit` archived messages from position `offset` (`None`: all of them), in order."""
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError(f'offset and limit must be >= 0; got offset={offset}, limit={limit}.')
    async with database.read() as db:
        row = await find_session(db, session_id, scope)
        query = (
            select(MessageRow.position, MessageRow.payload)
            .where(MessageRow.segment_pk == active_segment(row), MessageRow.position >= offset)
            .order_by(MessageRow.position)
        )
        if limit is not None:
            query = query.limit(limit)
        rows = (await db.execute(query)).all()
    return [decode(session_id, position, payload) for position, payload in rows]


async def read_summaries(database: Database, session_id: str, *, scope: str | None) -> list[StoredSummary]:
    """The session's summary chain, oldest first."""
    async with database.read() as db:
        return await summary_chain(db, (await find_session(db, session_id, scope)).pk)


async def summary_chain(db: AsyncSession, session_pk: int) -> list[StoredSummary]:
    """A session's summaries, oldest first, each numbered by its place in the chain."""
    rows = (
        await db.scalars(select(SummaryRow).where(SummaryRow.session_pk == session_pk).order_by(SummaryRow.pk))
    ).all()
    return [
        StoredSummary(
            index=index,
            covers_from=summary.covers_from,
            covers_to=summary.covers_to,
            text=summary.text,
            tokens=summary.tokens,
            model_name=summary.model_name,
            usage=load_usage(summary.usage),
            created_at=utc(summary.created_at),
        )
        for index, summary in enumerate(rows)
    ]
