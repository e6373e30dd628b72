"""`textual` keeps what a construct says: its parameters, the values it holds, its columns' keys and types.

Whether the first open's reads go through it is a figure, not a test: `benchmarks/instructions.py`'s first open
(12.06M instructions with it, 18.66M without, on SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import JSON, Column, Integer, MetaData, Table, bindparam, select
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.exc import StatementError

from session_store._db.textual import textual


def test_text_keeps_the_constructs_parameters_values_and_column_types(tmp_path: Path) -> None:
    metadata = MetaData()
    rows = Table('rows', metadata, Column('n', Integer), Column('doc', JSON))
    engine = create_sync_engine(f'sqlite:///{tmp_path / "rows.db"}')
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(rows.insert(), [{'n': 1, 'doc': {'a': [1]}}, {'n': 5, 'doc': {'b': 'two'}}])
    # `n - 1`'s 1 is a value the construct holds; `least` is a parameter the caller gives.
    statement = textual(select((rows.c.n - 1).label('before'), rows.c.doc).where(rows.c.n >= bindparam('least')))
    assert [column.key for column in statement.selected_columns] == ['before', 'doc']
    with engine.connect() as connection:
        assert connection.execute(statement, {'least': 2}).all() == [(4, {'b': 'two'})]
        with pytest.raises(StatementError, match="A value is required for bind parameter 'least'"):
            connection.execute(statement).all()
    engine.dispose()


def test_a_statement_with_a_list_parameter_is_refused() -> None:
    rows = Table('rows', MetaData(), Column('n', Integer))
    with pytest.raises(ValueError, match='rendered at execution'):
        textual(select(rows.c.n).where(rows.c.n.in_(bindparam('ns', expanding=True))))
