"""Full-text matching on each database's own index: SQLite's FTS5 table, PostgreSQL's tsvector column.

Both come from migration 0003, split text into runs of letters and digits (so `ORD-73519` is
`ord` and `73519`), and are kept in step with `messages` inside the writing transaction. A query
is reduced to its words the same way, each passed as a bound value, so nothing a user types
reaches the query syntax.
"""

from __future__ import annotations

import re
from functools import reduce
from typing import Any, TypeVar

from sqlalchemy import ColumnClause, ColumnElement, Select, column, func, literal_column, table

from .rows import MessageRow

__all__ = ('rank_by_words', 'words')

Query = TypeVar('Query', bound='Select[*tuple[Any, ...]]')
_WORD = re.compile(r'[^\W_]+')
_MAX_WORDS = 32


def words(text: str) -> list[str]:
    """The distinct words (runs of letters and digits) of `text`, in order, at most 32."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        seen.setdefault(word, None)
    return list(seen)[:_MAX_WORDS]


def rank_by_words(query: Query, dialect: str, terms: list[str], *, every: bool, session_pk: int | None = None) -> Query:
    """`query` over `messages`, narrowed to rows with every (or any) of `terms`, best match first.

    `session_pk`, when given, lets SQLite's index itself keep to one session.
    """
    if dialect == 'sqlite':
        fts = table('messages_fts', column('rowid'))
        index: ColumnClause[Any] = literal_column('messages_fts')
        # FTS5 syntax: each word quoted (a word holds no quote to escape), joined with AND or OR.
        expression = f'text : ({(" AND " if every else " OR ").join(f"{chr(34)}{term}{chr(34)}" for term in terms)})'
        if session_pk is not None:
            expression = f'session_tag : "s{session_pk}" AND {expression}'
        return (
            query.join(fts, fts.c.rowid == MessageRow.pk)
            .where(index.op('MATCH')(expression))
            .order_by(func.bm25(index))
        )
    tsquery: ColumnElement[Any] = reduce(
        lambda left, right: left.op('&&' if every else '||')(right),
        (func.plainto_tsquery('english', term) for term in terms),
    )
    vector: ColumnClause[Any] = literal_column('messages.search_vector')
    return query.where(vector.op('@@')(tsquery)).order_by(func.ts_rank(vector, tsquery).desc())
