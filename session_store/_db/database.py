"""`Database`: one store's engines, its read and write transactions, and the schema check before first use."""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, select
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from .._ids import check_id
from ..encryption import Encryption
from ..errors import DatabaseLocked, ServerRefused, SessionNotFound, StorageFull, StoreError, StoreUnavailable
from ..rows import SessionRow
from . import schema
from .engine import (
    SQLITE_BEGIN,
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_WAL_AUTOCHECKPOINT,
    ServerOptions,
    create_engine,
    create_threaded_engine,
    sqlite_path,
)
from .faults import BUSY_ADVICE, POOL_ADVICE, Fault, fault_of, refusal_of
from .parking import Caller, Parking
from .pinging import unpinged
from .sealing import Sealer

__all__ = ('Database', 'active_segment', 'find_session')

T = TypeVar('T')

_LOCKED_TRIES = 8


class Database:
    """The engines behind a `SessionStore`, with the transactions everything else runs in.

    Two kinds of work run here:

    - the ORM's (`read()`, `write()`): an `AsyncSession` over the async engine;
    - the hot path's (`statements()`, `transaction()`): a plain function of a synchronous SQLAlchemy
      `Connection`, so that it runs whole in one hop. On a SQLite file it runs on a worker thread, over a
      synchronous engine on the same file; elsewhere through the async engine's `AsyncConnection.run_sync`. On a
      SQLite file a write transaction (one run's rows) and a read of a few rows by index (`glance()`) run with
      no hop at all, on the loop's thread, on a connection that neither waits for a lock nor checkpoints the WAL;
      what it can't do at once goes to a worker thread, which waits (`_write_here`, `_unwaiting`).

    Writes begin IMMEDIATE on SQLite and retry a refused lock, so "database is locked" never reaches a user.
    A connection found lost (a server restart, a failover, a pooled connection gone stale) is replaced and the
    work tried once more, unless it was lost while committing; an expected fault that remains is the store's own
    error (`faults`): `StoreUnavailable`, `StorageFull`, `DatabaseLocked`. Hot-path work, once begun, finishes
    (committed or rolled back) even when the task awaiting it is cancelled: the cancellation is raised after it,
    never in the middle of a transaction.
    """

    def __init__(
        self,
        url: URL,
        *,
        migrate_empty: bool = True,
        read_only: bool = False,
        encryption: Encryption | None = None,
        server: ServerOptions | None = None,
    ) -> None:
        self.url = url
        self.sealer = Sealer(encryption)
        """Seals the private values this store writes, and opens those it reads."""
        server = server or ServerOptions()
        self.engine: AsyncEngine = create_engine(url, read_only=read_only, server=server)
        self.read_only = read_only
        self.backend = self.engine.dialect.name
        """`sqlite` or `postgresql`, as telemetry names it."""
        self._migrate_empty = migrate_empty and not read_only
        self._readers = async_sessionmaker(self.engine, expire_on_commit=False)
        self._writer = self.engine.execution_options(**{SQLITE_BEGIN: 'IMMEDIATE'})
        self._writers = async_sessionmaker(self._writer, expire_on_commit=False)
        self._autocommit = self.engine.execution_options(**_AUTOCOMMIT[self.backend])
        """Runs statements each on its own, on the one pool: a view of the engine, not an engine of its own, so one
        run never holds connections of two pools and one `pool_size` bounds them all. On PostgreSQL the view sets the
        connection's isolation level to AUTOCOMMIT as it is handed out and back as it is returned: asyncpg's dialect
        only records it, and begins no transaction then, so the switch costs no trip to the server."""
        self._pooled = server.transaction_pooler
        """Behind a transaction pooler the hot path's statements alone run in a transaction all the same: outside
        one, the pooler may hand a statement's execution to another server connection than it was prepared on."""
        self._parking = Parking(self.engine)
        """On PostgreSQL, the hot path's connection kept between its calls while nothing else of the store wants it."""
        self._threaded = create_threaded_engine(url, read_only=read_only)
        self._threaded_as = (
            None
            if self._threaded is None
            else {
                transaction: self._threaded.execution_options(**{SQLITE_BEGIN: 'IMMEDIATE' if transaction else None})
                for transaction in (True, False)
            }
        )
        self._writes = 0
        """Write transactions on a SQLite file since the last one that ran on a worker thread (`_write_here`)."""
        self._checked = False
        self._check_lock = asyncio.Lock()

    @property
    def sync_engines(self) -> list[Engine]:
        """Every engine that sends this store's statements, as SQLAlchemy's events see them: the async engine's
        synchronous core, and on a SQLite file the hot path's own engine."""
        return [self.engine.sync_engine, *([self._threaded] if self._threaded is not None else [])]

    @property
    def display_url(self) -> str:
        """The URL without its password, for messages."""
        return self.url.render_as_string(hide_password=True)

    async def ready(self, *, writing: bool | None = None) -> None:
        """Check the schema once (migrating an empty database), before the first query. `writing`: on the way to a
        write, so that a failure says nothing was stored; unless told, as the store was opened (to write, or only to
        read)."""
        if self._checked:
            return
        writing = not self.read_only if writing is None else writing
        async with self._check_lock:
            if not self._checked:
                path = sqlite_path(self.url)
                if self.read_only and path is not None and not path.exists():
                    raise StoreError(f'No database file at {path}: a read-only store opens only an existing one.')
                stamp = await self._attempts(
                    None, lambda: self._run(schema.read_stamp, transaction=False), writing=writing
                )
                if stamp is None or not stamp.current:
                    await self._parking.release()
                    await self._attempts(
                        None,
                        lambda: schema.check_schema(self.engine, self.url, migrate_empty=self._migrate_empty),
                        writing=writing,
                    )
                self._checked = True

    async def migrate(self) -> str | None:
        """Upgrade the schema to this version's head revision, then check it; the revision it was at before."""
        async with self._parking.using():
            before = await self._attempts(None, lambda: schema.revision(self.engine), writing=True)
            await self._attempts(None, lambda: schema.upgrade(self.engine), writing=True)
        self._checked = False
        await self.ready(writing=True)
        return before

    async def close(self) -> None:
        # A cancelled task (a command's Ctrl-C) still closes every connection: cancelled half-way, the driver's
        # close is abandoned and SQLAlchemy prints its traceback at exit.
        await _finished(self._parking.close())
        await _finished(self.engine.dispose())
        if self._threaded is not None:
            self._threaded.dispose()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """An ORM session for reads, on a checked schema.

        On PostgreSQL the pool pings each connection it hands out here (`pinging`), so the first read after a
        server restart gets a live one rather than failing on a stale one.
        """
        await self.ready(writing=False)
        # Around the session's closing too: on a connection the server just dropped, its rollback fails.
        try:
            async with self._parking.using(), self._readers() as db:
                yield db
        except Exception as error:
            raise self._translated(error, None, writing=False) from error

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncConnection]:
        """A plain async connection, each statement on its own (no transaction around them), for upkeep that stores
        nothing of its own (`VACUUM`): a failure says only that the database could not be reached."""
        await self.ready(writing=False)
        try:
            async with self._parking.using(), self._autocommit.connect() as db:
                yield db
        except Exception as error:
            raise self._translated(error, None, writing=False) from error

    async def write(self, session_id: str, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """Run `work` in a write transaction (an ORM session), retrying while SQLite reports its lock taken, and
        once on a fresh connection when the connection was lost before `work` was done (never while it commits:
        then whether it was stored can't be known, and `StoreUnavailable` says so).

        WAL and the busy timeout make most writers wait their turn; a transaction that read before
        writing can still be refused at once, and is safe to run again from the start. A cancelled caller's
        transaction still ends before the cancellation goes on, so it never holds a lock past its task.
        """
        done: list[bool] = []

        async def attempt() -> T:
            done.clear()
            async with self._parking.using(), self._writers() as db, db.begin():
                result = await work(db)
                done.append(True)
                return result

        await self.ready(writing=True)
        # Shielded: a cancelled caller still lets the transaction end (committed or rolled back) first.
        return await self._attempts(
            session_id, lambda: _finished(attempt()), committing=lambda: bool(done), writing=True
        )

    async def statements(
        self, work: Callable[[Connection], T], *, session_id: str | None = None, writing: bool = False
    ) -> T:
        """Run `work`'s statements each on its own, no transaction around them: reads, and writes of one
        statement (atomic by itself). One hop, however many statements `work` runs; once more on a fresh
        connection if the connection was lost, so `work` must be safe to run again (a write under a revision
        check is: its second run finds the revision moved). `writing`: `work` writes, or reads on the way to a
        write (a run's window), so that a failure says nothing was stored."""
        await self.ready(writing=writing)
        return await self._attempts(
            session_id, lambda: self._run(work, transaction=False, session_id=session_id), writing=writing
        )

    async def glance(
        self, work: Callable[[Connection], T], *, session_id: str | None = None, writing: bool = False
    ) -> T:
        """`statements(work)` for a read of a few rows by index (a session's row, a window): on a SQLite file it runs
        right here, on the event loop's thread, on a connection of the worker threads' pool, since a hop to a worker
        and back costs more than such a read. There the connection never waits for a lock: a read it can't make at
        once (or that fails at all) is made again the usual way, on a worker thread that waits, so `work` must be a
        read. A read-only store, whose reads wait out writers, always reads the usual way. `writing`: as for
        `statements`."""
        await self.ready(writing=writing)
        if self._threaded_as is None or self.read_only:
            return await self.statements(work, session_id=session_id, writing=writing)
        try:
            with _unwaiting(self._threaded_as[False]) as connection:
                return work(connection)
        except Exception:  # read again the usual way, which waits, retries and says what went wrong
            return await self.statements(work, session_id=session_id, writing=writing)

    async def transaction(self, session_id: str, work: Callable[[Connection], T]) -> T:
        """Run `work` in one write transaction, committed when it returns, rolled back if it raises; retried from
        the start while SQLite's lock is refused, and once on a fresh connection if the connection was lost, so
        `work` may run more than once and must be safe to (a write under a revision check is). On a SQLite file it
        runs on the event loop's thread unless it must wait for the lock, so it must be short: one run's rows."""
        await self.ready(writing=True)
        return await self._attempts(
            session_id, lambda: self._run(work, transaction=True, session_id=session_id), writing=True
        )

    async def _run(self, work: Callable[[Connection], T], *, transaction: bool, session_id: str | None = None) -> T:
        if self._threaded_as is None:
            caller = Caller(session_id, asyncio.current_task())  # read here, in the caller's task
            return await _finished(self._run_async(work, transaction, caller))
        engine = self._threaded_as[transaction]
        if transaction and self._write_here():
            try:
                with _unwaiting(engine) as connection, connection.begin():
                    return work(connection)
            except Exception as error:
                if fault_of(error) is not Fault.LOCKED:
                    raise
                # Another connection holds the write lock: wait for it on a worker thread, as any write may.
        loop = asyncio.get_running_loop()
        return await _finished(loop.run_in_executor(_worker_threads(), _run_on, engine, work, transaction))

    def _write_here(self) -> bool:
        """Whether the next write transaction on a SQLite file is tried on the loop's thread: every one but each
        `_CHECKPOINT_EVERY`-th, which runs on a worker thread, where SQLite's automatic checkpoint of the WAL (a
        sync of the file) runs when due, rather than on the loop's thread, which never checkpoints."""
        self._writes = (self._writes + 1) % _CHECKPOINT_EVERY
        return self._writes != 0 and not self.read_only

    async def _run_async(self, work: Callable[[Connection], T], transaction: bool, caller: Caller) -> T:
        # Unpinged: a connection found dead is replaced, and the work tried again (`_attempts`).
        with unpinged():
            if not transaction and not self._pooled:
                return await self._parking.run(self._autocommit, work, transaction=False, caller=caller)
            return await self._parking.run(self._writer, work, transaction=True, caller=caller)

    async def _attempts(
        self,
        session_id: str | None,
        attempt: Callable[[], Awaitable[T]],
        *,
        writing: bool,
        committing: Callable[[], bool] = lambda: False,
    ) -> T:
        """`attempt()`, tried again while SQLite refuses its lock, and once more when the connection was lost
        (unless `committing()` says the loss came as it committed); any expected fault as the store's own error,
        which says nothing was stored when `writing`."""
        lost = False
        for tried in range(1, _LOCKED_TRIES + 1):
            try:
                return await attempt()
            except Exception as error:
                fault = fault_of(error)
                if fault is Fault.LOCKED:
                    await self._locked(session_id, tried)
                    continue
                if fault is Fault.LOST and not lost and not committing():
                    lost = True  # a stale pooled connection, found dead: SQLAlchemy has replaced the pool's
                    continue
                stored = None if committing() else False
                raise self._translated(error, session_id, stored=stored, writing=writing) from error
        raise AssertionError('unreachable')

    def _translated(
        self, error: Exception, session_id: str | None, *, writing: bool, stored: bool | None = False
    ) -> Exception:
        """`error` as the store's own error when it is an expected fault; itself otherwise."""
        fault = fault_of(error)
        detail = _first_line(error)
        unavailable = functools.partial(StoreUnavailable, self.display_url, session_id, detail, stored=stored)
        if fault is Fault.LOST:
            return unavailable(writing=writing)
        if fault is Fault.FULL:
            return StorageFull(self.display_url, session_id, detail)
        if fault is Fault.BUSY:
            return unavailable(writing=writing, advice=BUSY_ADVICE)
        if fault is Fault.POOL:
            return unavailable(writing=writing, advice=POOL_ADVICE)
        if (refusal := refusal_of(error, read_only=self.read_only)) is not None:
            return ServerRefused(self.display_url, session_id, refusal.reason, detail, refusal.advice, writing=writing)
        if fault is Fault.LOCKED:
            return DatabaseLocked(session_id or '(the store)', 1)
        return error

    async def _locked(self, session_id: str | None, attempt: int) -> None:
        """Wait a little before trying a refused write again; give up after the last try, saying so."""
        if attempt == _LOCKED_TRIES:
            raise DatabaseLocked(session_id or '(the store)', _LOCKED_TRIES) from None
        await asyncio.sleep(0.01 * attempt * (0.5 + random.random()))


def _first_line(error: BaseException) -> str:
    cause = getattr(error, 'orig', None) or error
    text = str(cause).strip().splitlines()
    return f'{type(cause).__name__}: {text[0]}' if text else type(cause).__name__


_THREADS = 8
"""Worker threads for SQLite's hot path, shared by the process's stores: as many transactions and reads at once
(WAL serializes the writes). Shared, so a store opened later finds them started."""


@functools.cache
def _worker_threads() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(_THREADS, thread_name_prefix='session-store-sqlite')


_AUTOCOMMIT: dict[str, dict[str, Any]] = {
    # SQLite's driver runs each statement in its own transaction when none is begun (see `engine`).
    'sqlite': {SQLITE_BEGIN: None},
    'postgresql': {'isolation_level': 'AUTOCOMMIT'},
}


_CHECKPOINT_EVERY = 32
"""One write transaction in so many on a SQLite file runs on a worker thread, and checkpoints the WAL there when
SQLite's automatic checkpoint is due (at 1,000 pages): the WAL outgrows that by at most the pages of 31 runs."""

_WAITING = (f'PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}', f'PRAGMA wal_autocheckpoint={SQLITE_WAL_AUTOCHECKPOINT}')
_UNWAITING = ('PRAGMA busy_timeout=0', 'PRAGMA wal_autocheckpoint=0')


@contextmanager
def _unwaiting(engine: Engine) -> Iterator[Connection]:
    """A connection of a SQLite file's synchronous engine for work on the event loop's own thread: it is refused
    at once (a `LOCKED` fault) rather than waiting for another connection's lock, and it never checkpoints the WAL,
    so the loop never blocks on another writer or on a sync of the file. Back in the pool, it waits and checkpoints
    as every connection does."""
    with engine.connect() as connection:
        # On the driver's connection itself, so these are no statements of the store's to SQLAlchemy's events.
        driver = connection.connection.driver_connection
        assert driver is not None
        for pragma in _UNWAITING:
            driver.execute(pragma)
        try:
            yield connection
        finally:
            try:
                for pragma in _WAITING:
                    driver.execute(pragma)
            except Exception:
                connection.invalidate()  # never back in the pool a connection that doesn't wait for locks
                raise


def _run_on(engine: Engine, work: Callable[[Connection], T], transaction: bool) -> T:
    """`work` on a connection of a synchronous engine, in a transaction or not: a worker thread's whole task."""
    with engine.begin() if transaction else engine.connect() as connection:
        return work(connection)


async def _finished(running: Awaitable[T]) -> T:
    """`running`'s result; when the awaiting task is cancelled, the work still ends (committed or rolled back)
    before the cancellation goes on, so no transaction is left half-way and no connection mid-statement."""
    future = asyncio.ensure_future(running)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise


async def find_session(db: AsyncSession, session_id: str, scope: str | None) -> SessionRow:
    """The session's row; `SessionNotFound` if there is none visible under `scope`."""
    check_id(session_id)
    row = await db.scalar(select(SessionRow).where(SessionRow.session_id == session_id))
    if row is None or (scope is not None and row.scope != scope):
        raise SessionNotFound(session_id, scope)
    return row


def active_segment(row: SessionRow) -> int:
    """The segment the session's active path ends in (every session has one from its creation)."""
    assert row.active_segment_pk is not None, f'session {row.session_id!r} has no active segment'
    return row.active_segment_pk
