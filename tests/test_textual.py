"""The reads a new store's first open makes run as text rendered once (`session_store._db.textual`), not as
constructs SQLAlchemy compiles again for every engine; and `textual` keeps what a construct says."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import CompactionPart
from pydantic_ai.models.function import FunctionModel
from sqlalchemy import JSON, Column, Integer, MetaData, Table, TextClause, TextualSelect, bindparam, select
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.exc import StatementError

from processors import SummarizationProcessor
from session_store import SessionStore
from session_store._db.textual import textual
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, scripted_agent
from tests._events import listening

StoreFactory = Callable[..., SessionStore]


@contextmanager
def compiled_constructs(store: SessionStore) -> Iterator[list[str]]:
    """What the store's engines are given to compile while the block runs, other than text: statement constructs,
    each named by its SQL's first line."""
    seen: list[str] = []

    def given(conn: Any, clauseelement: Any, multiparams: Any, params: Any, execution_options: Any) -> None:
        if not isinstance(clauseelement, str | TextClause | TextualSelect):
            seen.append(str(clauseelement).splitlines()[0])

    with listening(store, 'before_execute', given):
        yield seen


async def test_a_first_open_compiles_no_statement_construct(store_factory: StoreFactory) -> None:
    processor = SummarizationProcessor(
        FunctionModel(RecordingSummarizer()), trigger=('messages', 12), keep=('messages', 6)
    )
    writer = store_factory(processor=processor)
    session = await writer.session('opened')
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(4):
        await session.run(agent, f'Turn {turn} please')
    stored = await session.context()
    assert any(isinstance(part, CompactionPart) for message in stored for part in message.parts)

    # A restarted process: a new store, its session opened and its window read, then pydantic-ai's door.
    reopened = store_factory(processor=processor)
    with compiled_constructs(reopened) as seen:
        window = await (await reopened.session('opened')).context()
    assert window == stored
    assert seen == []
    door = store_factory(processor=processor)
    with compiled_constructs(door) as seen:
        loaded = await door.conversations.load('opened')
    assert loaded is not None and loaded.messages == stored
    assert seen == []


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
