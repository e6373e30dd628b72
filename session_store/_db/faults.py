"""What a failing database raises, told apart: a refused lock, a lost or unreachable server, a full disk, a server
with no free connection slot, and a server that refuses the store (`Refusal`).

Each expected fault becomes one of the store's own errors (`DatabaseLocked`, `StoreUnavailable`,
`StorageFull`, `ServerRefused`), saying what happened and what to do, instead of the driver's exception;
`Database` decides which of them are worth one more try.
"""

from __future__ import annotations

import enum
import sqlite3
import ssl
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError, InterfaceError
from sqlalchemy.exc import TimeoutError as PoolTimeout

__all__ = ('BUSY_ADVICE', 'POOL_ADVICE', 'Fault', 'Refusal', 'fault_of', 'refusal_of')


class Fault(enum.Enum):
    LOCKED = 'locked'
    """SQLite refused its write lock: the write may be tried again from the start."""
    LOST = 'lost'
    """The connection was lost, or the server could not be reached (down, restarting, failing over)."""
    FULL = 'full'
    """The disk (or the server's) is full: nothing more can be written until space is freed."""
    BUSY = 'busy'
    """Every connection slot of the server is taken: connecting works again once other clients close theirs."""
    POOL = 'pool'
    """Every connection of the store's own pool stayed in use for its `pool_timeout`: too many calls at once for
    the budget it was given."""
    REFUSED = 'refused'
    """The server refused the connection or a statement for a reason of its own (`refusal_of` says which)."""


BUSY_ADVICE = (
    'Every connection slot of the server is taken (its max_connections): retry once other clients close theirs. '
    "Keep the sum of every process's pools (pool_size + max_overflow per pool) under the server's max_connections, "
    'or put a pooler in front of it.'
)

POOL_ADVICE = (
    "Every connection of this store's pool was in use for pool_timeout (30 s unless set): more calls ran at once "
    "than its budget (pool_size + max_overflow in engine_options) holds. Retry, raise the budget within the server's "
    'max_connections, or run fewer calls at once.'
)


@dataclass(frozen=True)
class Refusal:
    """Why the server refused the store, and what to change: what `ServerRefused` says."""

    reason: str
    """A short name for the kind of refusal (`ServerRefused.reason`)."""
    advice: str


_CREDENTIALS = Refusal(
    'authentication',
    "Check the user and password in the URL; if they are right, the server's pg_hba.conf does not let this user in "
    'from here, or asks for TLS (sslmode=require) or a client certificate (sslcert=, sslkey=).',
)
_POOLER = Refusal(
    'transaction_pooler',
    'A prepared statement met another server connection than the one it was prepared on: the server is reached '
    "through a pooler in transaction mode (PgBouncer's pool_mode = transaction, a managed pooler). Pass "
    'SessionStore(url, transaction_pooler=True), or add ?transaction_pooler=true to the URL.',
)
_READ_ONLY_SERVER = Refusal(
    'read_only',
    'The server takes no writes (a hot standby, or default_transaction_read_only): point the URL at the primary, '
    'or list every host and add target_session_attrs=read-write.',
)
_READ_ONLY_STORE = Refusal('read_only', 'This store was opened with read_only=True: open one without it to write.')
_REFUSALS = {
    '28P01': _CREDENTIALS,  # invalid password
    '28000': _CREDENTIALS,  # invalid authorization: no pg_hba.conf entry, a client certificate asked for
    '3D000': Refusal(
        'database',
        'Create the database (createdb NAME, or CREATE DATABASE NAME as a user who may), or fix its name in the URL.',
    ),
    '25006': _READ_ONLY_SERVER,
    '57014': Refusal(
        'statement_timeout',
        "A statement ran past the server's statement_timeout (or was cancelled): try again, or raise the timeout for "
        "the store's role (ALTER ROLE ... SET statement_timeout = '60s') or in the URL "
        '(?options=-c%20statement_timeout%3D60s).',
    ),
    '42501': Refusal(
        'privilege',
        "The store's role lacks a right on its tables: grant the running role SELECT, INSERT, UPDATE and DELETE on "
        "them and USAGE on their sequences (the GRANT statements in the docs' Running in production), and migrate "
        'as the role that owns the schema.',
    ),
    '26000': _POOLER,  # prepared statement does not exist
    '42P05': _POOLER,  # prepared statement already exists: another client's, of the same name
}
_STARTUP_REFUSED = Refusal(
    'startup_parameter',
    "A pooler in front of the server does not take one of the URL's startup parameters (PgBouncer takes no options=): "
    'remove it from the URL and set it for the role instead (ALTER ROLE ... SET search_path = ...), or add it to the '
    "pooler's ignore_startup_parameters.",
)
_TLS_UNVERIFIED = Refusal(
    'tls',
    "TLS could not be set up as the URL asks (the server's certificate did not verify against sslrootcert, or its "
    'host name did not match): give the CA certificate that signed it as sslrootcert=PATH, or sslmode=require to '
    'encrypt without verifying the server.',
)
_TLS_REFUSED = Refusal(
    'tls',
    'The server does not take TLS, which the URL asks for (sslmode=require or stricter): turn ssl on at the server, '
    'or use sslmode=prefer to connect without it there.',
)


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


def refusal_of(error: BaseException, *, read_only: bool = False) -> Refusal | None:
    """Why the server refused the store, if `error` (SQLAlchemy's wrapper, or the driver's own exception) says so;
    `read_only`: the store made every transaction read-only itself."""
    cause = _cause(error)
    if isinstance(cause, ssl.SSLError):
        return _TLS_UNVERIFIED
    if isinstance(cause, ConnectionError) and 'rejected SSL upgrade' in str(cause):  # asyncpg's words for it
        return _TLS_REFUSED
    state = _sqlstate(cause)
    if state == '08P01' and 'unsupported startup parameter' in str(cause):  # PgBouncer's words for it
        return _STARTUP_REFUSED
    refusal = _REFUSALS.get(state or '')
    return _READ_ONLY_STORE if refusal is _READ_ONLY_SERVER and read_only else refusal


def fault_of(error: BaseException) -> Fault | None:
    """Which expected fault `error` is (SQLAlchemy's wrapper, or the driver's own exception), if any."""
    if isinstance(error, PoolTimeout):
        return Fault.POOL
    cause = _cause(error)
    if isinstance(cause, sqlite3.OperationalError):
        text = str(cause)
        if 'locked' in text:
            return Fault.LOCKED
        if 'disk is full' in text or 'disk I/O error' in text:
            return Fault.FULL
        return None
    if refusal_of(cause) is not None:
        return Fault.REFUSED
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return Fault.LOST
    state = _sqlstate(cause)
    if state == '53300':  # too many connections
        return Fault.BUSY
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
    if _no_host_as_asked(cause):
        return Fault.LOST
    return None


def _no_host_as_asked(cause: BaseException) -> bool:
    """None of the URL's hosts is what its `target_session_attrs` asks for (asyncpg's
    `TargetServerAttributeNotMatched`, as it is or as SQLAlchemy's dialect adapted it): in a failover, the primary is
    gone and no standby is promoted yet, so a later call may find one."""
    return any(
        type(error).__name__ == 'TargetServerAttributeNotMatched' and type(error).__module__.startswith('asyncpg')
        for error in (cause, cause.__cause__)
    )


def _cause(error: BaseException) -> BaseException:
    return error.orig if isinstance(error, DBAPIError) and error.orig is not None else error


def _sqlstate(cause: BaseException) -> str | None:
    """The SQLSTATE of the driver's error (asyncpg's, or SQLAlchemy's adaptation of it, which keeps it as its cause)."""
    state = getattr(cause, 'sqlstate', None) or getattr(getattr(cause, '__cause__', None), 'sqlstate', None)
    return None if state is None else str(state)
