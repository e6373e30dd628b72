"""`OverflowGate`: on PostgreSQL, a checkout that would open an overflow connection first waits a moment for one of
the pool's own to be given back.

SQLAlchemy's queue pool opens an overflow connection as soon as a checkout finds none idle, and closes it as it is
given back while `pool_size` others are idle. So a burst of calls above `pool_size` opens and closes connections
again and again, each a TCP connection, authentication and the driver's set-up (about 12 ms, 5 ms of it the
client's CPU, on a local server), and a new process on the server. The store's calls hold a connection for one or two
statements, so one is usually given back within milliseconds: a checkout that finds every one of `pool_size` busy
waits up to `OVERFLOW_AFTER` for one, and only then lets the pool open another. The budget is the pool's as set: a
burst that lasts still gets its overflow connections, that much later.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import QueuePool

__all__ = ('OVERFLOW_AFTER', 'OverflowGate')

OVERFLOW_AFTER = 0.05
"""Seconds a checkout waits for a pooled connection before the pool may open an overflow one: a few times what
opening one takes on a local server, about what it takes through TLS to a hosted one."""


class OverflowGate:
    """Where the hot path's checkouts wait for a pooled connection of `pool` rather than open an overflow one (see the
    module's docstring); with no pool (an engine other than PostgreSQL's with a queue pool), they never wait."""

    def __init__(self, pool: QueuePool | None) -> None:
        self._pool = pool
        self._waiting: deque[asyncio.Future[None]] = deque()
        if self._pool is not None:
            event.listen(self._pool, 'checkin', self._given_back)

    async def wait(self) -> None:
        """Return once a checkout would find a connection idle or open one within `pool_size`, or after
        `OVERFLOW_AFTER`, whichever is first."""
        pool = self._pool
        if pool is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OVERFLOW_AFTER
        join = self._waiting.append
        # Woken, a waiter looks again: a checkout that did not wait may have taken the connection given back first.
        while not (pool.checkedin() or pool.checkedout() < pool.size()):
            left = deadline - loop.time()
            if left <= 0:
                return  # the pool opens an overflow connection now, as it would have at once
            waiter = loop.create_future()
            join(waiter)
            join = self._waiting.appendleft  # waiting on, it keeps its place ahead of those that came after it
            try:
                await asyncio.wait_for(waiter, left)
            except TimeoutError:
                return
            finally:
                if not waiter.done():
                    waiter.cancel()
                if waiter in self._waiting:
                    self._waiting.remove(waiter)

    def _given_back(self, *_: Any) -> None:
        """A connection went back to the pool (or, past `pool_size`, was closed): the longest waiting checkout goes."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if waiter.done():  # gave up waiting
                continue
            loop = waiter.get_loop()
            if _running_loop() is loop:
                waiter.set_result(None)
            else:  # given back from another thread (a connection the garbage collector closed)
                loop.call_soon_threadsafe(_wake, waiter)
            return


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
