"""`Parking`: the hot path's PostgreSQL connection, kept checked out between one session's calls while nothing else
wants it.

On PostgreSQL a pool's checkout and return (SQLAlchemy's connection objects, its events, the isolation level set
and reset) cost about as much CPU as the statement a door's load runs. So the connection a hot-path call ran on is
parked, rather than handed back to the pool, when nothing else of the store is using a connection at that moment,
for the session's next call (a door's save after its load, a run's write after its window read). Any other use of
the pool by the store (another session's call, an ORM read or write, upkeep, a migration) hands it back first,
and a connection is parked for at most `PARKED_SECONDS`, so the pool's own rules (`pool_recycle`, its pings) see it
again soon. The server sees no more connections than without it: the parked one is the one the pool would
otherwise hold idle. It goes back to the pool in the context it was checked out in, so the pool's events see each
connection checked out and back in by the same run, as without parking. A checkout that finds the pool's own
connections all busy waits a moment for one (`OverflowGate`) rather than open another.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import QueuePool

from .overflow import OverflowGate

__all__ = ('PARKED_SECONDS', 'Caller', 'Parking')

T = TypeVar('T')

PARKED_SECONDS = 30.0
"""How long a connection stays parked unused before the next call hands it back to the pool and checks one out:
longer than most model requests, which stand between a door's load and its save."""


class Caller(NamedTuple):
    """Who makes a hot-path call: the session it is for (if any), and the task making it."""

    session_id: str | None
    task: object

    def continues(self, parker: Caller) -> bool:
        """Whether this call may take the connection `parker`'s call parked: a call for the same session (a run may
        read its window and store in different tasks), or of the same task (a store's first call, for no session,
        then a session's)."""
        return (self.session_id is not None and self.session_id == parker.session_id) or self.task is parker.task


@dataclass
class _Parked:
    connection: AsyncConnection
    transaction: bool
    """Whether it came from the view that runs transactions (else the one that runs statements each on its own)."""
    parker: Caller
    context: contextvars.Context
    """The context it was checked out in, which hands it back."""
    since: float

    def release(self) -> asyncio.Task[None]:
        return asyncio.create_task(self.connection.close(), context=self.context)


class Parking:
    """The connection the hot path keeps between its calls on one engine, if its pool can spare one (a queue pool of
    more than one connection): `run` runs a call on it, `using` marks other work on the pool, `close` hands it back.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        pool = engine.sync_engine.pool
        queue_pool = pool if engine.dialect.name == 'postgresql' and isinstance(pool, QueuePool) else None
        self._enabled = queue_pool is not None and queue_pool.size() > 1
        self._parked: _Parked | None = None
        self._using = 0
        """The store's calls using a connection of the pool now (or about to)."""
        self._returning: asyncio.Task[None] | None = None
        """The parked connection on its way back to the pool: a checkout waits for it, so that the task it was
        checked out for never holds it and another at once."""
        self._closed = False
        self._gate = OverflowGate(queue_pool)

    async def run(self, view: AsyncEngine, work: Callable[[Connection], T], *, transaction: bool, caller: Caller) -> T:
        """`work` on the connection parked by a call `caller` continues (`Caller.continues`), if it came from `view`,
        else on one `view` checks out; in a transaction if asked. The connection is parked after, if nothing else is
        using the pool, else handed back."""
        self._using += 1
        try:
            connection = await self._take(view, transaction, caller)
            try:
                if transaction:
                    async with connection.begin():
                        result = await connection.run_sync(work)
                else:
                    result = await connection.run_sync(work)
            except BaseException:
                await connection.close()  # back to the pool, which knows what to do with a connection found dead
                raise
            if self._enabled and not self._closed and self._using == 1 and self._parked is None:
                self._parked = _Parked(connection, transaction, caller, contextvars.copy_context(), time.monotonic())
            else:
                await connection.close()
            return result
        finally:
            self._using -= 1

    @asynccontextmanager
    async def using(self) -> AsyncIterator[None]:
        """Other work on the pool: the parked connection goes back to it first, and none is parked meanwhile."""
        self._using += 1
        try:
            await self.release()
            yield
        finally:
            self._using -= 1

    async def release(self) -> None:
        """Hand the parked connection back to the pool, if there is one (or wait while it goes)."""
        parked, self._parked = self._parked, None
        if parked is not None:
            self._returning = parked.release()
        returning = self._returning
        if returning is not None:
            try:
                await returning
            finally:
                if self._returning is returning:
                    self._returning = None

    async def close(self) -> None:
        """Hand the parked connection back, and park none after."""
        self._closed = True
        await self.release()

    async def _take(self, view: AsyncEngine, transaction: bool, caller: Caller) -> AsyncConnection:
        parked = self._parked
        if parked is not None and parked.transaction == transaction and caller.continues(parked.parker):
            self._parked = None
            if time.monotonic() - parked.since < PARKED_SECONDS:
                return parked.connection
            self._parked = parked  # too long unused: back to the pool, as another session's is
        await self.release()
        await self._gate.wait()
        return await view.connect()
