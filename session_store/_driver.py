"""The hot path's statements, sent straight to the database driver: one round trip each.

A run reads one row (its session's revision and window bounds) and writes one transaction (the session
moved, its messages appended). Through SQLAlchemy's async adaptation each statement costs several
trips to aiosqlite's thread and a pass through the engine's layers; here each costs one. SQLAlchemy
still does the compiling (once per statement and dialect, for the whole process) and its types'
bind and result processors still encode and decode the values, so the rows are exactly what the
rest of the store writes and reads. Connections come from the store's pool.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ClauseElement, Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ReturnsRows

__all__ = ('Prepared', 'Transaction', 'fetch_row', 'is_locked', 'prepared', 'transaction')


@dataclass(frozen=True)
class Prepared:
    """A statement compiled for one dialect: its SQL, its parameters in order, and how each value is encoded."""

    sql: str
    names: tuple[str, ...]
    encoders: tuple[Callable[[Any], Any] | None, ...]
    decoders: tuple[Callable[[Any], Any] | None, ...]
    """For a statement returning rows: how each column's value is decoded."""

    def arguments(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(
            value if encode is None else encode(value)
            for value, encode in zip((values[name] for name in self.names), self.encoders, strict=True)
        )

    def row(self, raw: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(
            value if decode is None else decode(value) for value, decode in zip(raw, self.decoders, strict=True)
        )


_PREPARED: dict[tuple[int, str, bool], Prepared] = {}


def prepared(statement: ClauseElement, dialect: Dialect, *, many: bool = False) -> Prepared:
    """`statement` (a module-level constant with named bind parameters) compiled for `dialect`, once per process.

    `many`: for a run per row of several (no implicit RETURNING of each row's key).
    """
    key = (id(statement), dialect.name, many)
    found = _PREPARED.get(key)
    if found is None:
        compiled = statement.compile(dialect=dialect, for_executemany=many)
        assert isinstance(compiled, SQLCompiler) and compiled.positiontup is not None
        names = tuple(compiled.positiontup)
        encoders = tuple(compiled.binds[name].type.bind_processor(dialect) for name in names)
        columns = statement.exported_columns if isinstance(statement, ReturnsRows) else ()
        decoders = tuple(column.type.result_processor(dialect, None) for column in columns)
        found = _PREPARED[key] = Prepared(str(compiled), names, encoders, decoders)
    return found


async def fetch_row(engine: AsyncEngine, statement: ClauseElement, values: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The first row `statement` returns, decoded; `None` if none. One round trip, outside any transaction."""
    query = prepared(statement, engine.dialect)
    async with engine.connect() as connection:
        driver = await _driver_of(connection)
        if engine.dialect.name == 'sqlite':
            rows = list(await driver.execute_fetchall(query.sql, query.arguments(values)))
            raw = rows[0] if rows else None
        else:
            raw = await driver.fetchrow(query.sql, *query.arguments(values))
    return None if raw is None else query.row(raw)


class Transaction:
    """Statements in one write transaction on a driver connection, one round trip each."""

    def __init__(self, driver: Any, dialect: Dialect) -> None:
        self._driver = driver
        self._dialect = dialect
        self._sqlite = dialect.name == 'sqlite'

    async def execute(self, statement: ClauseElement, values: Mapping[str, Any]) -> int:
        """Run `statement` once; how many rows it changed."""
        query = prepared(statement, self._dialect)
        if self._sqlite:
            return int((await self._driver.execute(query.sql, query.arguments(values))).rowcount)
        status: str = await self._driver.execute(query.sql, *query.arguments(values))
        return int(status.rsplit(' ', 1)[-1])

    async def execute_many(self, statement: ClauseElement, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run `statement` once per row, in one round trip."""
        query = prepared(statement, self._dialect, many=True)
        await self._driver.executemany(query.sql, [query.arguments(row) for row in rows])

    async def scalar(self, statement: ClauseElement, values: Mapping[str, Any]) -> Any:
        """Run `statement` (an INSERT ... RETURNING one column, say); the first column of its first row."""
        query = prepared(statement, self._dialect)
        if self._sqlite:
            rows = list(await self._driver.execute_fetchall(query.sql, query.arguments(values)))
            raw = rows[0]
        else:
            raw = await self._driver.fetchrow(query.sql, *query.arguments(values))
        return query.row(raw)[0]


@asynccontextmanager
async def transaction(engine: AsyncEngine) -> AsyncIterator[Transaction]:
    """A write transaction, committed when the block ends, rolled back if it raises.

    On SQLite it begins IMMEDIATE: the write lock is taken up front (waiting out the busy timeout),
    as every writer of the store takes it.
    """
    async with engine.connect() as connection:
        driver = await _driver_of(connection)
        await driver.execute('BEGIN IMMEDIATE' if engine.dialect.name == 'sqlite' else 'BEGIN')
        try:
            yield Transaction(driver, engine.dialect)
        except BaseException:
            await driver.execute('ROLLBACK')
            raise
        await driver.execute('COMMIT')


async def _driver_of(connection: AsyncConnection) -> Any:
    """The driver's own connection (aiosqlite's or asyncpg's) under a pooled one."""
    driver = (await connection.get_raw_connection()).driver_connection
    assert driver is not None
    return driver


def is_locked(error: BaseException) -> bool:
    """Whether `error` is SQLite refusing its lock, which a write may retry from the start."""
    return isinstance(error, sqlite3.OperationalError) and 'locked' in str(error)
