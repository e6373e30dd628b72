"""How the store connects: URL checks, the driver extras, and the SQLite settings that make concurrent writers safe."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from .._store_error import InvalidURL
from ._urls import DEFAULT_URL, asyncpg_arguments, flag, host_list, hosts_in_query, seconds
from .pinging import ping_on_checkout

__all__ = (
    'CONNECT_TIMEOUT',
    'DEFAULT_URL',
    'POOLER_PARAMETER',
    'QUERY_WAIT_PARAMETER',
    'QUERY_WAIT_TIMEOUT',
    'SQLITE_BEGIN',
    'SQLITE_BUSY_TIMEOUT_MS',
    'SQLITE_WAL_AUTOCHECKPOINT',
    'ServerOptions',
    'connect_arguments',
    'create_engine',
    'create_threaded_engine',
    'database_url',
    'in_memory',
    'server_options',
    'sqlite_path',
)

SQLITE_BEGIN = 'session_store_sqlite_begin'
"""Execution option: how a SQLite transaction begins (`''` deferred, `'IMMEDIATE'` for writers, `None` not at all)."""

_ASYNC_DRIVERS = {'sqlite': 'sqlite+aiosqlite', 'postgresql': 'postgresql+asyncpg', 'postgres': 'postgresql+asyncpg'}
_SUPPORTED = ('sqlite+aiosqlite', 'postgresql+asyncpg')
_POSTGRES_EXTRA = 'pip install "pydantic-ai-session-store[postgresql]"'


def database_url(url: str | os.PathLike[str] | URL) -> URL:
    """`url` checked and given its async driver: plain `sqlite://`, `postgresql://` and `postgres://` are accepted,
    and so is a SQLite file's path (`_path_in`). libpq's several hosts in a URL's address
    (`postgresql://user@h1:5432,h2:5433/db`) are moved into its query, which `server_options` reads.

    Raises:
        InvalidURL: Neither a URL nor a SQLite file's path, a malformed host list or port, or not one of the
            supported backends.
        ModuleNotFoundError: A PostgreSQL URL, without the `postgresql` extra's driver installed.
    """
    if isinstance(url, os.PathLike):
        return _file_url(os.fspath(url))
    if isinstance(url, str) and (path := _path_in(url)) is not None:
        return _file_url(path)
    if isinstance(url, str):
        url = hosts_in_query(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InvalidURL(
            f'Not a database URL: {_without_password(str(url))!r}, nor the path of a SQLite file. Use a URL such as '
            f"{DEFAULT_URL!r} or 'postgresql://user@host/db', or a path such as './sessions.db'."
        ) from None
    except ValueError:  # SQLAlchemy's parser, on a port that is not a number (its message quotes it, and no more)
        raise InvalidURL(
            "The URL's port is not a number from 1 to 65535: write postgresql://user@host:5432/db, or for several "
            'hosts postgresql://user@h1:5432,h2:5433/db.'
        ) from None
    if parsed.drivername in _ASYNC_DRIVERS:
        parsed = parsed.set(drivername=_ASYNC_DRIVERS[parsed.drivername])
    if parsed.drivername not in _SUPPORTED:
        raise InvalidURL(
            f'Unsupported database URL {parsed.render_as_string(hide_password=True)!r}: '
            'session-store runs on sqlite+aiosqlite:// or postgresql+asyncpg://.'
        )
    if parsed.drivername == 'postgresql+asyncpg' and importlib.util.find_spec('asyncpg') is None:
        raise ModuleNotFoundError(
            f'PostgreSQL needs the asyncpg driver, which is an extra: {_POSTGRES_EXTRA}.', name='asyncpg'
        )
    return parsed


def _without_password(text: str) -> str:
    """`text`, a string that failed to parse as a URL, with what looks like a password in it masked."""
    return re.sub(r'(//[^/?#@:]*:).*@', r'\1***@', text)


_SQLITE_SUFFIXES = ('.db', '.sqlite', '.sqlite3')


def _path_in(text: str) -> str | None:
    """`text` as a SQLite file's path, when it is plainly one rather than a URL: it names a directory (`./chat.db`,
    `data/chat.db`, `/srv/chat.db`, `~/chat.db`) or ends in `.db`, `.sqlite` or `.sqlite3` (`chat.db`). `None`
    otherwise, and for anything with a `:` or a `//` in it, which a path has no need of and a mistyped URL has
    (`postgres//host/db`, `sqlite:/chat.db`): those are left to fail as URLs, saying so."""
    rest = text[len(Path(text).drive) :]  # a Windows drive's colon is a path's
    if not text.strip() or ':' in rest or '//' in rest:
        return None
    named = os.sep in text or '/' in text or text.startswith('~') or text.lower().endswith(_SQLITE_SUFFIXES)
    return text if named else None


def _file_url(path: str) -> URL:
    """The URL of the SQLite file `path` names, made absolute (`~` expanded), so that the store and every message
    name the same file wherever the process later changes directory."""
    return URL.create('sqlite+aiosqlite', database=os.path.abspath(os.path.expanduser(path)))


def in_memory(url: URL) -> bool:
    """A SQLite database that lives only as long as its connection, and starts empty every time."""
    return url.drivername.startswith('sqlite') and url.database in (None, '', ':memory:')


def sqlite_path(url: URL) -> Path | None:
    """The file a SQLite URL names; `None` for other backends and in-memory databases."""
    if not url.drivername.startswith('sqlite') or in_memory(url) or url.database is None:
        return None
    return Path(url.database)


@dataclass(frozen=True)
class ServerOptions:
    """How the store reaches a PostgreSQL server: behind a pooler or not, and SQLAlchemy's engine settings."""

    transaction_pooler: bool = False
    """The server is reached through a pooler in transaction mode (PgBouncer's `pool_mode = transaction`, most
    managed poolers), which hands each transaction whichever server connection is free: no prepared statement
    may outlive its transaction, and every statement runs inside one."""
    engine_options: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """More keyword arguments for SQLAlchemy's `create_async_engine` (`pool_size`, `pool_recycle`, ...)."""
    query_wait_timeout: float | None = None
    """Seconds the store waits for the server to take what it sends outside a transaction (`QUERY_WAIT_TIMEOUT`
    when `None`)."""


POOLER_PARAMETER = 'transaction_pooler'
"""The URL query parameter that says `transaction_pooler=true`, for a URL given on the command line."""

QUERY_WAIT_PARAMETER = 'query_wait_timeout'
"""The URL query parameter that sets the store's `QUERY_WAIT_TIMEOUT`."""

CONNECT_TIMEOUT = 10.0
"""Seconds the store waits to connect to a PostgreSQL server (asyncpg's `timeout`, libpq's `connect_timeout`), over
all of a URL's hosts together, unless the URL or `connect_args` says otherwise; asyncpg's own is 60."""

QUERY_WAIT_TIMEOUT = 3.0
"""Seconds the store waits for a PostgreSQL server to take what it sends outside a transaction: a `BEGIN`, a
statement's preparation, a statement run on its own, a ping. A pooler in transaction mode lends a server connection
at those moments, and in front of a stopped server holds each of them until its own wait runs out (PgBouncer's
`query_wait_timeout`, 120 s); once a transaction has begun, a server is taking its statements, and nothing in it is
bounded, so a migration, a VACUUM or a statement waiting for a lock runs as long as it needs. A call waits at most
three times (the pool's ping of its connection, its first statement on the fresh one the pool then makes, and that
once more on a fresh connection), and three waits fit in 10 s."""


def server_options(url: URL, given: ServerOptions) -> tuple[URL, ServerOptions]:
    """`url` without the query parameters the store reads itself, and the options they and `given` make.

    On PostgreSQL, several hosts become one form (`?host=h1,h2&port=5432,5433`, `_urls.host_list`) and libpq's
    parameters (`sslmode`, `application_name`, `connect_timeout`, `options`, ...) asyncpg's `connect()` arguments
    (`_urls`); values in `given`'s `connect_args` win over the URL's.

    Raises:
        InvalidURL: A query parameter that is not the number or boolean it must be, a malformed host list, or a
            parameter asyncpg can't take.
    """
    query = dict(url.query)
    pooler = given.transaction_pooler
    if POOLER_PARAMETER in query:
        pooler = flag(POOLER_PARAMETER, query.pop(POOLER_PARAMETER)) or pooler
    waiting = given.query_wait_timeout
    if QUERY_WAIT_PARAMETER in query:
        waiting = seconds(QUERY_WAIT_PARAMETER, query.pop(QUERY_WAIT_PARAMETER))
    options = dict(given.engine_options)
    if url.drivername == 'postgresql+asyncpg':
        if (listed := host_list(query, port=url.port)) is not None:
            query, url = listed, url.set(host=None, port=None)  # the query's hosts replace the address's, as in libpq
        query, connect_args = asyncpg_arguments(query)
        chosen = dict(options.get('connect_args', {}))
        if 'server_settings' in connect_args and 'server_settings' in chosen:
            chosen['server_settings'] = {**connect_args['server_settings'], **chosen['server_settings']}
        if connect_args:
            options['connect_args'] = {**connect_args, **chosen}
    return url.set(query=query), ServerOptions(pooler, options, waiting)


def create_engine(url: URL, *, read_only: bool = False, server: ServerOptions | None = None) -> AsyncEngine:
    """An async engine for `url`; on SQLite, in WAL mode with explicit, optionally IMMEDIATE, transactions.

    `read_only` opens a SQLite file read-only (so review works on read-only media and never creates a
    file); on PostgreSQL it makes every transaction read-only. `server` says how a PostgreSQL server is reached.
    """
    if url.drivername != 'sqlite+aiosqlite':
        return _postgresql_engine(url, read_only, server or ServerOptions())
    engine = create_async_engine(_sqlite_file_url(url, read_only), **_SQLITE_ENGINE_OPTIONS)
    _tune(engine.sync_engine, read_only)
    return engine


def _postgresql_engine(url: URL, read_only: bool, server: ServerOptions) -> AsyncEngine:
    options = dict(server.engine_options)
    options.pop('connect_args', None)
    if read_only:
        options['execution_options'] = {**options.get('execution_options', {}), 'postgresql_readonly': True}
    engine = create_async_engine(url, connect_args=connect_arguments(server), **options)
    if 'pool_pre_ping' not in options:
        # A pooled connection is pinged as it is handed out, so the first use after a server restart or failover
        # gets a live one: the ORM's reads can't be run again whole if their first statement fails. Not the hot
        # path's, which is run again on a fresh connection instead (`pinging`).
        ping_on_checkout(engine.sync_engine)
    return engine


def connect_arguments(server: ServerOptions) -> dict[str, Any]:
    """The keyword arguments a PostgreSQL engine hands `asyncpg.connect()` beside its URL's: `server`'s
    `connect_args`, with the store's own where they say nothing (its deadlines, its statements' names, no statement
    cache behind a transaction pooler)."""
    connect_args = dict(server.engine_options.get('connect_args', {}))
    # A name of its own for every statement prepared, so that no two client connections' statements meet on one
    # server connection: behind a transaction pooler the store was not told about, a statement that reaches another
    # server connection than its own is then not found there (a `ServerRefused` saying what to set), rather than
    # found under the same name as another client's statement and run in its place.
    connect_args.setdefault('prepared_statement_name_func', _statement_name)
    connect_args.setdefault('timeout', CONNECT_TIMEOUT)
    waiting = server.query_wait_timeout or QUERY_WAIT_TIMEOUT
    if connect_args.get('command_timeout'):  # a bound on every statement bounds the wait too, and is not loosened
        waiting = min(waiting, float(connect_args['command_timeout']))
    connect_args['connection_class'] = _waiting_at_most(connect_args.get('connection_class'), waiting)
    if server.transaction_pooler:
        # No statement cache on either side, so that none is looked for after its transaction ended.
        connect_args.setdefault('statement_cache_size', 0)
        connect_args.setdefault('prepared_statement_cache_size', 0)
    return connect_args


def _statement_name() -> str:
    return f'__session_store_{uuid.uuid4().hex}__'


@functools.cache
def _waiting_at_most(base: type[Any] | None, limit: float) -> type[Any]:
    """asyncpg's `Connection` (or the `connection_class` given in `connect_args`), waiting at most `limit` seconds
    for the server to take what it is sent outside a transaction (`QUERY_WAIT_TIMEOUT`): its public `prepare`,
    `execute` and `fetchrow` (how SQLAlchemy's dialect prepares a statement, begins a transaction and pings) pass
    asyncpg their documented `timeout` when the caller gave none. A wait that runs out closes the connection, which
    the pool then replaces, and is asyncpg's `InterfaceError` saying which deadline ran out and how to change it."""
    import asyncpg  # type: ignore[import-untyped]  # the postgresql extra's driver (`database_url` checked it is there)

    class WaitingAtMost(base or asyncpg.Connection):  # type: ignore[misc]
        query_wait_timeout = limit

        async def prepare(self, query: str, **options: Any) -> Any:
            return await self._session_store_within(super().prepare, query, **options)

        async def execute(self, query: str, *args: Any, **options: Any) -> Any:
            return await self._session_store_within(super().execute, query, *args, **options)

        async def fetchrow(self, query: str, *args: Any, **options: Any) -> Any:
            return await self._session_store_within(super().fetchrow, query, *args, **options)

        async def set_type_codec(self, typename: str, **options: Any) -> Any:
            # How SQLAlchemy's dialect registers its JSON codecs on a new connection: a catalogue query of asyncpg's
            # own, sent with no timeout of its own (SQLAlchemy 2.0 does it as it connects).
            if self.is_in_transaction():
                return await super().set_type_codec(typename, **options)
            try:
                return await asyncio.wait_for(super().set_type_codec(typename, **options), limit)
            except TimeoutError:
                self.terminate()
                raise asyncpg.InterfaceError(_no_answer(limit)) from None

        async def _session_store_within(self, call: Callable[..., Awaitable[Any]], *args: Any, **options: Any) -> Any:
            if options.get('timeout') is not None or self.is_in_transaction():
                return await call(*args, **options)
            try:
                return await call(*args, **{**options, 'timeout': limit})
            except TimeoutError:
                self.terminate()  # mid-statement: never back in the pool
                raise asyncpg.InterfaceError(_no_answer(limit)) from None

    return WaitingAtMost


def _no_answer(limit: float) -> str:
    """What a wait that ran out says: which deadline, and how to change it."""
    return (
        f'no answer from the server within {limit:g} s, the deadline for a server to take a statement '
        f'(set it with ?{QUERY_WAIT_PARAMETER}=SECONDS in the URL)'
    )


def create_threaded_engine(url: URL, *, read_only: bool = False) -> Engine | None:
    """For a SQLite file, a synchronous engine over the same file, set up as `create_engine`'s: the one the
    hot path runs whole transactions on, on the event loop's thread or in one hop to a worker thread (`Database`).
    `None` for other databases.

    An in-memory database exists only on its one connection, so it has no second engine.
    """
    if url.drivername != 'sqlite+aiosqlite' or in_memory(url):
        return None
    file_url = _sqlite_file_url(url, read_only).set(drivername='sqlite+pysqlite')
    # A pooled connection serves whichever worker thread takes it, one at a time.
    options = {**_SQLITE_ENGINE_OPTIONS, 'connect_args': {**_SQLITE_CONNECT_ARGS, 'check_same_thread': False}}
    engine = create_sync_engine(file_url, **options)
    _tune(engine, read_only)
    return engine


_SQLITE_CONNECT_ARGS = {'timeout': 30}
_SQLITE_ENGINE_OPTIONS: dict[str, Any] = {
    'connect_args': _SQLITE_CONNECT_ARGS,
    # Every connection is given back with its transaction ended (committed, or rolled back by its
    # `Connection`), so the pool's own rollback on return would only cost another trip to the driver.
    'pool_reset_on_return': None,
}


def _sqlite_file_url(url: URL, read_only: bool) -> URL:
    """`url`, made to open its file read-only when asked."""
    path = sqlite_path(url)
    if not read_only or path is None:
        return url
    # A file opened read-only: `mode=ro` never creates it; on a directory nobody can write (read-only
    # media), WAL's shared-memory file can't be made either, so the file is read as immutable.
    options = {'mode': 'ro', 'uri': 'true'}
    if not os.access(path.resolve().parent, os.W_OK) and not Path(f'{path}-shm').exists():
        options['immutable'] = '1'
    return url.set(database=f'file:{path.resolve()}').update_query_dict(options)


def _tune(engine: Engine, read_only: bool) -> None:
    event.listen(engine, 'connect', _tune_sqlite_readonly if read_only else _tune_sqlite)
    event.listen(engine, 'begin', _begin_sqlite)


SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite connection waits for another's lock before it is refused."""
SQLITE_WAL_AUTOCHECKPOINT = 1_000
"""The WAL's size, in pages, at which a committing connection checkpoints it (SQLite's default, set explicitly
because the hot path turns it off on the loop's thread and back on, `Database`)."""

_SQLITE_SETTINGS = (
    # WAL lets readers and one writer work at once; the busy timeout makes a second writer wait for
    # the lock instead of failing with "database is locked"; foreign keys make deletes cascade.
    'PRAGMA journal_mode=WAL',
    f'PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}',
    f'PRAGMA wal_autocheckpoint={SQLITE_WAL_AUTOCHECKPOINT}',
    'PRAGMA foreign_keys=ON',
    'PRAGMA synchronous=NORMAL',
    # Pages that deleted rows leave are zeroed, so a deleted conversation's text doesn't linger in the file.
    'PRAGMA secure_delete=ON',
)
_SQLITE_READ_ONLY_SETTINGS = (
    # Setting the journal mode is a write; a reader only waits out writers and never writes.
    f'PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}',
    'PRAGMA query_only=ON',
)


def _tune_sqlite(dbapi_connection: Any, _record: Any) -> None:
    _settle(dbapi_connection, _SQLITE_SETTINGS)


def _tune_sqlite_readonly(dbapi_connection: Any, _record: Any) -> None:
    _settle(dbapi_connection, _SQLITE_READ_ONLY_SETTINGS)


def _settle(dbapi_connection: Any, pragmas: tuple[str, ...]) -> None:
    """A new connection's settings (sqlite3's own connection, or aiosqlite's as SQLAlchemy adapts it).

    The driver would open transactions itself, lazily and never before DDL; the `begin` event opens them
    instead (isolation level `None`), so migrations are atomic and writers can start IMMEDIATE.
    """
    cursor = dbapi_connection.cursor()
    for pragma in pragmas:
        cursor.execute(pragma)
    cursor.close()
    dbapi_connection.isolation_level = None


def _begin_sqlite(connection: Connection) -> None:
    # A writer takes the write lock up front (waiting out the busy timeout) rather than reading
    # first and being refused when it then tries to write. A reader that needs no snapshot across
    # statements runs each in its own (SQLite's autocommit mode).
    begin = connection.get_execution_options().get(SQLITE_BEGIN, '')
    if begin is not None:
        connection.exec_driver_sql(f'BEGIN {begin}')
