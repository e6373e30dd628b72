"""Full-text matching on each database's own index: SQLite's FTS5 table, PostgreSQL's tsvector column.

Both come from migration 0003, split text into runs of letters and digits (so `ORD-73519` is
`ord` and `73519`), and are kept in step with `messages` inside the writing transaction. A query
is reduced to its words the same way, each passed as a bound value, so nothing a user types
reaches the query syntax.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import reduce
from typing import Any, TypeVar

from sqlalchemy import ColumnClause, ColumnElement, Select, case, column, func, literal_column, table

from ..rows import MessageRow

__all__ = ('rank_by_words', 'words')

Query = TypeVar('Query', bound='Select[*tuple[Any, ...]]')
_WORD = re.compile(r'[^\W_]+')
_MAX_WORDS = 32


def words(text: str, *, limit: int | None = _MAX_WORDS) -> list[str]:
    """The distinct words (runs of letters and digits) of `text`, lowercased, in order; at most `limit` of them."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        seen.setdefault(word, None)
    return list(seen)[:limit]


def rank_by_words(
    query: Query, dialect: str, terms: Sequence[Sequence[str]], *, every: bool, session_pk: int | None = None
) -> Query:
    """`query` over `messages`, narrowed to rows with every (or any) of `terms`, best match first.

    Each term is the forms one word takes in the index, itself first and then its blind hashes in an
    encrypted store: a row has the term if it has any of them. `session_pk`, when given, lets SQLite's index
    itself keep to one session.
    """
    if dialect == 'sqlite':
        fts = table('messages_fts', column('rowid'))
        index: ColumnClause[Any] = literal_column('messages_fts')
        # FTS5 syntax: each form quoted (a word holds no quote to escape), joined with AND or OR.
        groups = ('(' + ' OR '.join(f'"{form}"' for form in forms) + ')' for forms in terms)
        expression = f'text : ({(" AND " if every else " OR ").join(groups)})'
        if session_pk is not None:
            expression = f'session_tag : "s{session_pk}" AND {expression}'
        return (
            query.join(fts, fts.c.rowid == MessageRow.pk)
            .where(index.op('MATCH')(expression))
            .order_by(func.bm25(index))
        )

    def either(forms: Sequence[str]) -> ColumnElement[Any]:
        clear: ColumnElement[Any] = func.plainto_tsquery('english', forms[0])
        if len(forms) == 1:
            return clear
        queries: list[ColumnElement[Any]] = [func.plainto_tsquery('english', form) for form in forms]
        any_form = reduce(lambda left, right: left.op('||')(right), queries)
        # A stop word leaves the clear index and the query alike; its blind forms go too, as in a clear store.
        return case((func.numnode(clear) == 0, clear), else_=any_form)

    tsquery: ColumnElement[Any] = reduce(
        lambda left, right: left.op('&&' if every else '||')(right), (either(forms) for forms in terms)
    )
    vector: ColumnClause[Any] = literal_column('messages.search_vector')
    return query.where(vector.op('@@')(tsquery)).order_by(func.ts_rank(vector, tsquery).desc())
