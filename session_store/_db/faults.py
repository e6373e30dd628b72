"""What a failing database raises, told apart: a refused lock, a lost or unreachable server, a full disk.

Each expected fault becomes one of the store's own errors (`DatabaseLocked`, `StoreUnavailable`,
`StorageFull`), saying what happened and what to do, instead of the driver's exception; `Database`
decides which of them are worth one more try.
"""

from __future__ import annotations

import enum
import sqlite3

from sqlalchemy.exc import DBAPIError, InterfaceError

__all__ = ('Fault', 'fault_of')


class Fault(enum.Enum):
    LOCKED = 'locked'
    """SQLite refused its write lock: the write may be tried again from the start."""
    LOST = 'lost'
    """The connection was lost, or the server could not be reached (down, restarting, failing over)."""
    FULL = 'full'
    """The disk (or the server's) is full: nothing more can be written until space is freed."""


_LOST_SQLSTATES = {
    '08000',  # connection exception
    '08003',  # connection does not exist
    '08006',  # connection failure
    '08001',  # could not establish a connection
    '08004',  # the server rejected the connection
    '57P01',  # admin shutdown (a fast restart, a failover)
    '57P02',  # crash shutdown
    '57P03',  # cannot connect now (starting up, shutting down)
}
_FULL_SQLSTATES = {'53100'}  # disk full


def fault_of(error: BaseException) -> Fault | None:
    """Which expected fault `error` is (SQLAlchemy's wrapper, or the driver's own exception), if any."""
    cause = error.orig if isinstance(error, DBAPIError) else error
    if isinstance(cause, sqlite3.OperationalError):
        text = str(cause)
        if 'locked' in text:
            return Fault.LOCKED
        if 'disk is full' in text or 'disk I/O error' in text:
            return Fault.FULL
        return None
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return Fault.LOST
    state = getattr(cause, 'sqlstate', None) or getattr(getattr(cause, '__cause__', None), 'sqlstate', None)
    if state in _LOST_SQLSTATES:
        return Fault.LOST
    if state in _FULL_SQLSTATES:
        return Fault.FULL
    if isinstance(cause, OSError) or isinstance(error, InterfaceError):
        return Fault.LOST  # refused, reset, unreachable; or a connection the driver found closed
    # asyncpg's own client-side errors for a connection that died under it carry no SQLSTATE.
    name = type(cause).__name__
    if type(cause).__module__.startswith('asyncpg') and name in (
        'ConnectionDoesNotExistError',
        'InterfaceError',
        'InternalClientError',
        'ConnectionFailureError',
        'CannotConnectNowError',
    ):
        return Fault.LOST
    return None
