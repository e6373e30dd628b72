"""`Database`: one store's engine, its read and write transactions, and the schema check before first use."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from . import migration
from ._driver import Work, is_locked, run_transaction
from ._engine import SQLITE_BEGIN, create_engine, sqlite_path
from ._ids import check_id
from ._run_state import WindowCache
from ._sealing import Sealer
from .encryption import Encryption
from .errors import SessionNotFound, StoreError
from .rows import SessionRow

__all__ = ('Database', 'active_segment', 'find_session')

T = TypeVar('T')

_LOCKED_TRIES = 8


class Database:
    """The engine behind a `SessionStore`, with the transactions everything else runs in.

    Reads run in plain transactions (`read()`); writes run through `write()`, which on SQLite
    begins IMMEDIATE and retries a refused lock, so "database is locked" never reaches a user.
    """

    def __init__(
        self,
        url: URL,
        *,
        migrate_empty: bool = True,
        read_only: bool = False,
        encryption: Encryption | None = None,
    ) -> None:
        self.url = url
        self.sealer = Sealer(encryption)
        """Seals the private values this store writes, and opens those it reads."""
        self.engine: AsyncEngine = create_engine(url, read_only=read_only)
        self.read_only = read_only
        self.backend = self.engine.dialect.name
        """`sqlite` or `postgresql`, as telemetry names it."""
        self._migrate_empty = migrate_empty and not read_only
        self._readers = async_sessionmaker(self.engine, expire_on_commit=False)
        self._writer = self.engine.execution_options(**{SQLITE_BEGIN: 'IMMEDIATE'})
        self._autocommit = (
            self.engine.execution_options(**{SQLITE_BEGIN: None})
            if self.engine.dialect.name == 'sqlite'
            else self.engine.execution_options(isolation_level='AUTOCOMMIT')
        )
        self._writers = async_sessionmaker(self._writer, expire_on_commit=False)
        self.windows = WindowCache()
        """The windows this store read or wrote last, decoded, each valid at its revision."""
        self._checked = False
        self._check_lock = asyncio.Lock()

    @property
    def display_url(self) -> str:
        """The URL without its password, for messages."""
        return self.url.render_as_string(hide_password=True)

    async def ready(self) -> None:
        """Check the schema once (migrating an empty database), before the first query."""
        if self._checked:
            return
        async with self._check_lock:
            if not self._checked:
                path = sqlite_path(self.url)
                if self.read_only and path is not None and not path.exists():
                    raise StoreError(f'No database file at {path}: a read-only store opens only an existing one.')
                await migration.check_schema(self.engine, self.url, migrate_empty=self._migrate_empty)
                self._checked = True

    async def migrate(self) -> None:
        """Upgrade the schema to this version's head revision, then check it."""
        await migration.upgrade(self.engine)
        self._checked = False
        await self.ready()

    async def close(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """An ORM session for reads, on a checked schema."""
        await self.ready()
        async with self._readers() as db:
            yield db

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncConnection]:
        """A plain connection for the hot path's reads, each statement on its own (no transaction around them).

        For reads whose rows don't change once written (a window's messages and summaries), where an ORM
        session's bookkeeping and a transaction's begin and end would only cost.
        """
        await self.ready()
        async with self._autocommit.connect() as db:
            yield db

    async def write(self, session_id: str, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """Run `work` in a write transaction (an ORM session), retrying while SQLite reports its lock taken.

        WAL and the busy timeout make most writers wait their turn; a transaction that read before
        writing can still be refused at once, and is safe to run again from the start.
        """
        return await self._retrying(session_id, self._writers, work)

    async def write_direct(self, session_id: str, work: Callable[[], Work[T]]) -> T:
        """`write` on the driver's own connection, for the hot path's statements (see `_driver`); `work` may run
        more than once (from the start), so it must only yield statements."""
        await self.ready()
        for attempt in range(1, _LOCKED_TRIES + 1):
            try:
                return await run_transaction(self.engine, work)
            except sqlite3.OperationalError as error:
                if not is_locked(error):
                    raise
                await self._locked(session_id, attempt)
        raise AssertionError('unreachable')

    async def _retrying(
        self, session_id: str, opened: Callable[[], AsyncSession], work: Callable[[AsyncSession], Awaitable[T]]
    ) -> T:
        await self.ready()
        for attempt in range(1, _LOCKED_TRIES + 1):
            try:
                async with opened() as db, db.begin():
                    return await work(db)
            except (OperationalError, sqlite3.OperationalError) as error:
                if not is_locked(getattr(error, 'orig', error)):
                    raise
                await self._locked(session_id, attempt)
        raise AssertionError('unreachable')

    async def _locked(self, session_id: str, attempt: int) -> None:
        """Wait a little before trying a refused write again; give up after the last try, saying so."""
        if attempt == _LOCKED_TRIES:
            raise StoreError(
                f'Session {session_id!r}: the SQLite database stayed locked by other writers through '
                f'{_LOCKED_TRIES} tries; nothing was written. Try again, or move to PostgreSQL for '
                'many concurrent writers.'
            ) from None
        await asyncio.sleep(0.01 * attempt * (0.5 + random.random()))


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
