"""`textual`: a read statement as its SQL text, rendered once per process, with its columns and parameters typed.

SQLAlchemy compiles a statement construct again for every engine: its compiled cache belongs to the engine (the
cache key holds the engine's dialect). A new store is a new engine, so the reads a session's first open makes
(the schema stamp, the session's row, the window's `UNION`) were compiled on every open, about 3 ms of it, more
than the statements took to run. A `TextualSelect` compiles in a tenth of that. Its text is rendered from the
construct itself by SQLAlchemy's generic compiler, so the construct stays the one definition of the statement.

Only for statements whose generic rendering is plain SQL both SQLite and PostgreSQL run as written (selects,
unions, scalar subqueries, `coalesce`): the test suite runs every one of them on both.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BindParameter, CompoundSelect, Select, TextualSelect, bindparam, column, text
from sqlalchemy.sql import visitors

__all__ = ('textual',)


def textual(statement: Select[Any] | CompoundSelect[Any]) -> TextualSelect:
    """`statement` as SQL text: its named parameters keep their names and types, a value held in the construct
    (`x - 1`'s 1) stays bound with it, and its columns keep their keys and types (a JSON column is still decoded).

    Raises:
        ValueError: `statement` has a parameter rendered at execution (an expanding `IN`), which no text can hold,
            or a column without a name.
    """
    compiled = statement.compile()
    sql = str(compiled)
    if '__[POSTCOMPILE_' in sql:
        raise ValueError(f'A statement with parameters rendered at execution has no fixed text: {sql!r}')
    types = {found.key: found.type for found in visitors.iterate(statement) if isinstance(found, BindParameter)}
    parameters = [
        bindparam(name, type_=types.get(name)) if value is None else bindparam(name, value)
        for name, value in compiled.params.items()
    ]
    columns = []
    for selected in statement.selected_columns:
        if selected.key is None:
            raise ValueError(f'Every column of a statement made text needs a name: {selected!r} has none.')
        columns.append(column(selected.key, selected.type))
    return text(sql).bindparams(*parameters).columns(*columns)
