"""The hot path's statements, sent straight to the database driver: one round trip each.

A run reads one row (its session's revision and window bounds) and writes one transaction (the session
moved, its messages appended). Through SQLAlchemy's async adaptation each statement costs several
trips to aiosqlite's thread and a pass through the engine's layers; here each costs one, and on SQLite a
whole write transaction costs one. SQLAlchemy
still does the compiling (once per statement and dialect, for the whole process) and its types'
bind and result processors still encode and decode the values, so the rows are exactly what the
rest of the store writes and reads. Connections come from the store's pool.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar, cast

from sqlalchemy import ClauseElement, Dialect
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ReturnsRows
from sqlalchemy.util import greenlet_spawn

__all__ = (
    'Execute',
    'ExecuteMany',
    'Prepared',
    'Scalar',
    'Step',
    'Work',
    'fetch_row',
    'fetch_rows',
    'in_thread',
    'is_locked',
    'prepared',
    'run_transaction',
)

T = TypeVar('T')


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


_PREPARED: dict[tuple[int, str, bool], tuple[ClauseElement, Prepared]] = {}
"""Each statement compiled, keyed by its identity; the entry holds the statement, so no other can take its id."""


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
        found = _PREPARED[key] = (statement, Prepared(str(compiled), names, encoders, decoders))
    return found[1]


async def fetch_row(engine: AsyncEngine, statement: ClauseElement, values: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The first row `statement` returns, decoded; `None` if none. One round trip, outside any transaction."""
    rows = await fetch_rows(engine, statement, values)
    return rows[0] if rows else None


async def fetch_rows(engine: AsyncEngine, statement: ClauseElement, values: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Every row `statement` returns, decoded. One round trip, outside any transaction."""
    query = prepared(statement, engine.dialect)
    async with _driver_connection(engine) as driver:
        if engine.dialect.name == 'sqlite':
            raw = await driver.execute_fetchall(query.sql, query.arguments(values))
        else:
            raw = await driver.fetch(query.sql, *query.arguments(values))
    return [query.row(row) for row in raw]


class Execute(NamedTuple):
    """Run `statement` once; the step's result is how many rows it changed."""

    statement: ClauseElement
    values: Mapping[str, Any]


class ExecuteMany(NamedTuple):
    """Run `statement` once per row (one call to the driver); the step's result is `None`."""

    statement: ClauseElement
    rows: Sequence[Mapping[str, Any]]


class Scalar(NamedTuple):
    """Run `statement` (an INSERT ... RETURNING one column, say); the step's result is its first row's first column."""

    statement: ClauseElement
    values: Mapping[str, Any]


Step = Execute | ExecuteMany | Scalar
Work = Generator[Step, Any, T]
"""A write transaction's statements, as a generator: it yields each step and is sent the step's result.

Written once, run two ways: step by step, one round trip each (PostgreSQL), or whole on SQLite's side of
aiosqlite's thread, so the transaction costs one trip there instead of one per statement.
"""


async def run_transaction(engine: AsyncEngine, work: Callable[[], Work[T]]) -> T:
    """Run `work` in one write transaction, committed when it returns, rolled back if it raises.

    On SQLite it begins IMMEDIATE: the write lock is taken up front (waiting out the busy timeout), as every
    writer of the store takes it; and the whole transaction, from BEGIN to COMMIT, runs in one trip to the
    connection's thread.
    """
    async with _driver_connection(engine) as driver:
        if engine.dialect.name == 'sqlite':
            run_in_thread = in_thread(driver)
            if run_in_thread is not None:
                return cast(T, await run_in_thread(_run_sqlite, driver, engine.dialect, work))
        await driver.execute('BEGIN IMMEDIATE' if engine.dialect.name == 'sqlite' else 'BEGIN')
        try:
            steps, result = work(), None
            try:
                while True:
                    result = await _perform(driver, engine.dialect, steps.send(result))
            except StopIteration as done:
                value = done.value
            await driver.execute('COMMIT')
            return cast(T, value)
        except BaseException:
            # SQLite may have ended the transaction itself (a failed COMMIT, a full disk); PostgreSQL only warns.
            if engine.dialect.name != 'sqlite' or driver.in_transaction:
                await driver.execute('ROLLBACK')
            raise


def in_thread(driver: Any) -> Callable[..., Awaitable[Any]] | None:
    """aiosqlite's way of running a function on its connection's thread, which its own methods use.

    It is not public API (as the `_tx` queue SQLAlchemy's adapter reaches into is not): should a release
    drop it, writes take one trip per statement instead, and a test says so.
    """
    run = getattr(driver, '_execute', None)
    return run if callable(run) and hasattr(driver, '_conn') else None


def _run_sqlite(driver: Any, dialect: Dialect, work: Callable[[], Work[T]]) -> T:
    """`work` on the connection's own thread, from BEGIN IMMEDIATE to COMMIT (ROLLBACK if it raises)."""
    connection: sqlite3.Connection = driver._conn
    connection.execute('BEGIN IMMEDIATE')
    try:
        steps, result = work(), None
        try:
            while True:
                step = steps.send(result)
                if isinstance(step, ExecuteMany):
                    query = prepared(step.statement, dialect, many=True)
                    connection.executemany(query.sql, [query.arguments(row) for row in step.rows])
                    result = None
                    continue
                query = prepared(step.statement, dialect)
                cursor = connection.execute(query.sql, query.arguments(step.values))
                result = query.row(cursor.fetchone())[0] if isinstance(step, Scalar) else cursor.rowcount
        except StopIteration as done:
            value: T = done.value
        connection.execute('COMMIT')
        return value
    except BaseException:
        if connection.in_transaction:  # SQLite may have ended it itself (a failed COMMIT, a full disk)
            connection.execute('ROLLBACK')
        raise


async def _perform(driver: Any, dialect: Dialect, step: Step) -> Any:
    """One step on the driver's connection: one round trip."""
    sqlite = dialect.name == 'sqlite'
    if isinstance(step, ExecuteMany):
        query = prepared(step.statement, dialect, many=True)
        await driver.executemany(query.sql, [query.arguments(row) for row in step.rows])
        return None
    query = prepared(step.statement, dialect)
    arguments = query.arguments(step.values)
    if isinstance(step, Scalar):
        if sqlite:
            raw = next(iter(await driver.execute_fetchall(query.sql, arguments)))
        else:
            raw = await driver.fetchrow(query.sql, *arguments)
        return query.row(raw)[0]
    if sqlite:
        return int((await driver.execute(query.sql, arguments)).rowcount)
    status: str = await driver.execute(query.sql, *arguments)
    return int(status.rsplit(' ', 1)[-1])


@asynccontextmanager
async def _driver_connection(engine: AsyncEngine) -> AsyncIterator[Any]:
    """The driver's own connection (aiosqlite's or asyncpg's), checked out of the store's pool and back.

    Straight from the pool: an engine-level `Connection` around it costs about 0.08 ms more per checkout. It goes
    back through SQLAlchemy's greenlet, as an engine-level one would, so that a reset the pool does on return
    (a rollback of a transaction the dialect began) can reach the database.
    """
    pooled = await engine.raw_connection()
    try:
        driver = pooled.driver_connection
        assert driver is not None
        yield driver
    finally:
        await greenlet_spawn(pooled.close)


def is_locked(error: BaseException) -> bool:
    """Whether `error` is SQLite refusing its lock, which a write may retry from the start."""
    return isinstance(error, sqlite3.OperationalError) and 'locked' in str(error)
