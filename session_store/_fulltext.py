"""Full-text matching on each database's own index: SQLite's FTS5 table, PostgreSQL's tsvector column.

Both come from migration 0003 and are kept in step with `messages` inside the writing transaction.
A query is reduced to its words, each passed as a bound value, so nothing a user types reaches the
query syntax; any word may match, and messages matching more (and rarer) words rank first.
"""

from __future__ import annotations

import re
from functools import reduce
from typing import Any, TypeVar

from sqlalchemy import ColumnClause, ColumnElement, Select, column, func, literal_column, table

from .schema import MessageRow

__all__ = ('rank_by_words', 'words')

Query = TypeVar('Query', bound='Select[*tuple[Any, ...]]')
_WORD = re.compile(r'\w+')
_MAX_WORDS = 32


def words(text: str) -> list[str]:
    """The distinct words of `text`, in order, at most 32."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        seen.setdefault(word, None)
    return list(seen)[:_MAX_WORDS]


def rank_by_words(query: Query, dialect: str, terms: list[str]) -> Query:
    """`query` over `messages`, narrowed to rows matching any of `terms` and ordered best match first."""
    if dialect == 'sqlite':
        fts = table('messages_fts', column('rowid'))
        index: ColumnClause[Any] = literal_column('messages_fts')
        # FTS5 syntax: each word as a quoted string, joined with OR. A \w+ word holds no quote to escape.
        expression = ' OR '.join(f'"{term}"' for term in terms)
        return (
            query.join(fts, fts.c.rowid == MessageRow.pk)
            .where(index.op('MATCH')(expression))
            .order_by(func.bm25(index))
        )
    tsquery: ColumnElement[Any] = reduce(
        lambda left, right: left.op('||')(right), (func.plainto_tsquery('english', term) for term in terms)
    )
    vector: ColumnClause[Any] = literal_column('messages.search_vector')
    return query.where(vector.op('@@')(tsquery)).order_by(func.ts_rank_cd(vector, tsquery).desc())
