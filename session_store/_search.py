"""Search over the archive: a phrase as typed (LIKE), or words through each database's full-text index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from sqlalchemy import Row, Select, and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from ._codec import decode
from ._database import Database, find_session
from ._fulltext import rank_by_words, words
from ._telemetry import span
from ._tree import active_paths
from .results import SearchHit
from .rows import MessageRow, SessionRow

__all__ = ('MAX_SEARCH', 'search')

MAX_SEARCH = 1_000
"""The longest search text, in characters."""

_HitRow = Row[str, str | None, int, str, str]
"""A search hit as read: session id, scope, position, payload, text."""


async def search(
    database: Database,
    text: str,
    *,
    scope: str | None,
    session_id: str | None,
    limit: int,
    match: Literal['phrase', 'words'],
    branches: Literal['active', 'all'] = 'active',
) -> list[SearchHit]:
    """Messages matching `text`; see `SessionStore.search`. An unknown `session_id` is `SessionNotFound`."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_SEARCH or '\x00' in text:
        raise ValueError(f'search text must be a string of 1 to {MAX_SEARCH} characters, without NUL.')
    if limit < 1:
        raise ValueError(f'limit must be >= 1; got {limit}.')
    if match not in ('phrase', 'words'):
        raise ValueError(f"match must be 'phrase' or 'words'; got {match!r}.")
    if branches not in ('active', 'all'):
        raise ValueError(f"branches must be 'active' or 'all'; got {branches!r}.")
    query = (
        select(SessionRow.session_id, SessionRow.scope, MessageRow.position, MessageRow.payload, MessageRow.text)
        .join(SessionRow, SessionRow.pk == MessageRow.session_pk)
        .limit(limit)
    )
    if scope is not None:
        query = query.where(SessionRow.scope == scope)
    rows: Sequence[_HitRow]
    with span('search', database.backend, session_id, match=match, branches=branches) as current:
        async with database.read() as db:
            session_pk = None
            if session_id is not None:
                session_pk = (await find_session(db, session_id, scope)).pk
                query = query.where(MessageRow.session_pk == session_pk)
            if branches == 'active':
                path = active_paths(session_pk)
                query = query.join(
                    path,
                    and_(
                        path.c.segment_pk == MessageRow.segment_pk,
                        MessageRow.position >= path.c.start,
                        MessageRow.position < path.c.end,
                    ),
                )
            if match == 'phrase':
                escaped = text.replace('\\', '\\\\').replace('%', '\\%').replace('_', '\\_')
                phrase = MessageRow.text.ilike(f'%{escaped}%', escape='\\')
                rows = (await db.execute(query.where(phrase).order_by(MessageRow.pk.desc()))).all()
            else:
                rows = await _by_words(db, database.engine.dialect.name, query, text, session_pk)
        current.set_attribute('session_store.hits', len(rows))
    return [
        SearchHit(session_id=sid, scope=sc, position=pos, message=decode(sid, pos, payload), text=found)
        for sid, sc, pos, payload, found in rows
    ]


async def _by_words(
    db: AsyncSession, dialect: str, query: Select[str, str | None, int, str, str], text: str, session_pk: int | None
) -> list[_HitRow]:
    """Messages with every word of `text` (a selective query the index answers), else with any of them."""
    terms = words(text)
    if not terms:
        return []
    rows = list((await db.execute(rank_by_words(query, dialect, terms, every=True, session_pk=session_pk))).all())
    if not rows and len(terms) > 1:
        # Nothing has every word: rank what has any (slower, since common words match widely).
        rows = list((await db.execute(rank_by_words(query, dialect, terms, every=False, session_pk=session_pk))).all())
    return rows
