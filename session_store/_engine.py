"""How the store connects: URL checks, and the SQLite settings that make concurrent writers safe."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

__all__ = ('DEFAULT_URL', 'SQLITE_BEGIN', 'create_engine', 'database_url')

DEFAULT_URL = 'sqlite+aiosqlite:///sessions.db'

SQLITE_BEGIN = 'session_store_sqlite_begin'
"""Execution option: how a SQLite transaction begins (`''` deferred, `'IMMEDIATE'` for writers)."""

_ASYNC_DRIVERS = {'sqlite': 'sqlite+aiosqlite', 'postgresql': 'postgresql+asyncpg', 'postgres': 'postgresql+asyncpg'}
_SUPPORTED = ('sqlite+aiosqlite', 'postgresql+asyncpg')


def database_url(url: str | URL) -> URL:
    """`url` checked and given its async driver: plain `sqlite://` and `postgresql://` are accepted."""
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise ValueError(f'Not a database URL: {url!r} ({error}). Use e.g. {DEFAULT_URL!r}.') from None
    if parsed.drivername in _ASYNC_DRIVERS:
        parsed = parsed.set(drivername=_ASYNC_DRIVERS[parsed.drivername])
    if parsed.drivername not in _SUPPORTED:
        raise ValueError(
            f'Unsupported database URL {parsed.render_as_string(hide_password=True)!r}: '
            'session-store runs on sqlite+aiosqlite:// or postgresql+asyncpg://.'
        )
    return parsed


def create_engine(url: URL) -> AsyncEngine:
    """An async engine for `url`; on SQLite, in WAL mode with explicit, optionally IMMEDIATE, transactions."""
    if url.drivername != 'sqlite+aiosqlite':
        return create_async_engine(url)
    engine = create_async_engine(url, connect_args={'timeout': 30})
    event.listen(engine.sync_engine, 'connect', _tune_sqlite)
    event.listen(engine.sync_engine, 'begin', _begin_sqlite)
    return engine


def _tune_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers and one writer work at once; the busy timeout makes a second writer wait for
    # the lock instead of failing with "database is locked"; foreign keys make deletes cascade.
    cursor = dbapi_connection.cursor()
    cursor.execute('PRAGMA journal_mode=WAL')
    cursor.execute('PRAGMA busy_timeout=30000')
    cursor.execute('PRAGMA foreign_keys=ON')
    cursor.execute('PRAGMA synchronous=NORMAL')
    cursor.close()
    # The driver would open transactions itself, lazily and never before DDL; the `begin` event
    # opens them instead, so migrations are atomic and writers can start IMMEDIATE.
    dbapi_connection.isolation_level = None


def _begin_sqlite(connection: Connection) -> None:
    # A writer takes the write lock up front (waiting out the busy timeout) rather than reading
    # first and being refused when it then tries to write.
    connection.exec_driver_sql(f'BEGIN {connection.get_execution_options().get(SQLITE_BEGIN, "")}')
