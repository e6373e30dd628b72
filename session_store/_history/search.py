"""Search over the archive: a phrase as typed (LIKE), or words through each database's full-text index.

A hit is read as its row holds it (`SearchRecord`, importing no pydantic-ai, which `session-store search` prints);
`SessionStore.search` makes its `SearchHit`s from these same records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count
from typing import Literal

from sqlalchemy import Row, Select, and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from .._arguments import check_count, check_text
from .._codec import parse
from .._db.database import Database, find_session
from .._db.fulltext import rank_by_words, words
from .._db.sealing import Sealer
from .._parts import message_text
from .._telemetry import span
from ..results import SearchHit
from ..rows import MessageRow, SessionRow
from .review import StoredMessage
from .tree import active_paths

__all__ = ('MAX_SEARCH', 'SearchRecord', 'search', 'search_records')

MAX_SEARCH = 1_000
"""The longest search text, in characters."""

_HitRow = Row[str, int, str | None, int, str]
"""A search hit as read: session id, session pk, scope, position, payload."""

_PHRASE_PAGE = 200
"""Candidates an encrypted store's phrase search opens at a time, checking each for the phrase."""


@dataclass(frozen=True)
class SearchRecord(StoredMessage):
    """A search hit as its row holds it (opened): the fields of a `SearchHit`, its message still the stored JSON."""

    scope: str | None
    text: str
    """What the hit shows: what the message says, as a clear store indexes it."""

    def hit(self) -> SearchHit:
        """As `SessionStore.search()` hands it out: the message a pydantic-ai one."""
        return SearchHit(
            session_id=self.session_id, scope=self.scope, position=self.position, message=self.message(), text=self.text
        )


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
    found = await search_records(
        database, text, scope=scope, session_id=session_id, limit=limit, match=match, branches=branches
    )
    return [record.hit() for record in found]


async def search_records(
    database: Database,
    text: str,
    *,
    scope: str | None,
    session_id: str | None,
    limit: int,
    match: Literal['phrase', 'words'],
    branches: Literal['active', 'all'] = 'active',
) -> list[SearchRecord]:
    """`search`'s hits, as their rows hold them."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_SEARCH or '\x00' in text:
        raise ValueError(f'search text must be a string of 1 to {MAX_SEARCH} characters, without NUL.')
    check_text(text, 'text')
    check_count(limit, 'limit', minimum=1)
    if match not in ('phrase', 'words'):
        raise ValueError(f"match must be 'phrase' or 'words'; got {match!r}.")
    if branches not in ('active', 'all'):
        raise ValueError(f"branches must be 'active' or 'all'; got {branches!r}.")
    query = select(
        SessionRow.session_id, SessionRow.pk, SessionRow.scope, MessageRow.position, MessageRow.payload
    ).join(SessionRow, SessionRow.pk == MessageRow.session_pk)
    if scope is not None:
        query = query.where(SessionRow.scope == scope)
    sealer = database.sealer
    found: list[SearchRecord]
    with span('search', database.backend, session_id, match=match, branches=branches) as current:
        async with database.read() as db:
            session_pk = None
            if session_id is not None:
                session_pk = (await find_session(db, session_id, scope)).pk
                query = query.where(MessageRow.session_pk == session_pk)
            await _check_keys(db, sealer, scope, session_pk)
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
            matching = _Matching(db, database.engine.dialect.name, query, sealer, session_pk)
            if match == 'words':
                found = await matching.words(text, limit)
            elif sealer.encrypting:
                found = await matching.phrase_in_sealed(text, limit)
            else:
                found = await matching.phrase(text, limit)
        current.set_attribute('session_store.hits', len(found))
    return found


async def _check_keys(db: AsyncSession, sealer: Sealer, scope: str | None, session_pk: int | None) -> None:
    """Refuse a search the store's keys can't answer: one whose newest session in reach holds a message sealed
    under a key the store wasn't given, or under another secret than the one given for its key id.

    A sealed message's index holds its words blind, under the key that sealed it, so no term of another key's
    matches it: without this, such a search finds nothing and says so, as if nothing matched. One message is
    opened, as every read opens it, raising the `KeyUnavailable` a read of it raises (naming the session and
    the key). Rows of other sessions sealed under yet other keys (a store half way through `rekey` with an old
    key already dropped) are not looked at: only the hits a search finds are opened.
    """
    newest = select(SessionRow.pk, SessionRow.session_id)
    if session_pk is not None:
        newest = newest.where(SessionRow.pk == session_pk)
    elif scope is not None:
        newest = newest.where(SessionRow.scope == scope)
    chosen = newest.order_by(SessionRow.updated_at.desc(), SessionRow.pk.desc()).limit(1).subquery()
    any_message = (
        select(chosen.c.session_id, chosen.c.pk, MessageRow.position, MessageRow.payload)
        .join(MessageRow, MessageRow.session_pk == chosen.c.pk)
        .limit(1)
    )
    found = (await db.execute(any_message)).first()
    if found is not None:
        sealer.payload(*found)


@dataclass
class _Matching:
    """One search's query, narrowed to matching messages each way a search can match."""

    db: AsyncSession
    dialect: str
    query: Select[str, int, str | None, int, str]
    sealer: Sealer
    session_pk: int | None

    async def phrase(self, text: str, limit: int) -> list[SearchRecord]:
        """Messages whose text holds `text` as typed (any case), newest first: a LIKE over clear text."""
        escaped = text.replace('\\', '\\\\').replace('%', '\\%').replace('_', '\\_')
        phrase = MessageRow.text.ilike(f'%{escaped}%', escape='\\')
        return self._opened(await self._rows(self.query.where(phrase).order_by(MessageRow.pk.desc()).limit(limit)))

    async def phrase_in_sealed(self, text: str, limit: int) -> list[SearchRecord]:
        """The same, where the index holds blind words: messages with every word, opened and checked for the phrase.

        Whole words only (a blind index can't match part of one), best match first.
        """
        terms = self._terms(text)
        if not terms:
            return []
        wanted = text.lower()
        ranked = rank_by_words(self.query, self.dialect, terms, every=True, session_pk=self.session_pk)
        found: list[SearchRecord] = []
        for offset in count(0, _PHRASE_PAGE):
            rows = await self._rows(ranked.limit(_PHRASE_PAGE).offset(offset))
            found += [record for record in self._opened(rows) if wanted in record.text.lower()]
            if len(found) >= limit or len(rows) < _PHRASE_PAGE:
                return found[:limit]
        raise AssertionError('unreachable')

    async def words(self, text: str, limit: int) -> list[SearchRecord]:
        """Messages with every word of `text` (a selective query the index answers), else with any of them."""
        terms = self._terms(text)
        if not terms:
            return []
        for every in (True, False) if len(terms) > 1 else (True,):
            # Nothing with every word: rank what has any (slower, since common words match widely).
            ranked = rank_by_words(self.query, self.dialect, terms, every=every, session_pk=self.session_pk)
            rows = await self._rows(ranked.limit(limit))
            if rows:
                return self._opened(rows)
        return []

    def _terms(self, text: str) -> list[list[str]]:
        """Each word of `text` in the forms the index may hold it: clear, and blind under each key."""
        return [self.sealer.search_terms(word) for word in words(text)]

    async def _rows(self, query: Select[str, int, str | None, int, str]) -> Sequence[_HitRow]:
        return (await self.db.execute(query)).all()

    def _opened(self, rows: Sequence[_HitRow]) -> list[SearchRecord]:
        found: list[SearchRecord] = []
        for session_id, pk, scope, position, stored in rows:
            payload = self.sealer.payload(session_id, pk, position, stored)
            text = message_text(parse(session_id, position, payload)).replace('\x00', '')
            found.append(SearchRecord(session_id, position, payload, scope, text))
        return found
