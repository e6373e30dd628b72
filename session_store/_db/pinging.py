"""Pinging a pooled PostgreSQL connection as it is handed out: for every checkout but the hot path's.

A store keeps one pool per engine, and the hot path shares it with the ORM. The ORM's reads can't be run again
once their first statement fails on a connection gone stale (a server restart, a failover), so their connection is
pinged first, as SQLAlchemy's `pool_pre_ping` would. The hot path runs again whole on a fresh connection instead
(`Database._attempts`), so a ping there would only double its round trips. `pool_pre_ping` is the pool's alone, the
same for every checkout; this is the same ping through the pool's public events, skipped inside `unpinged()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import InvalidatePoolError
from sqlalchemy.pool import ConnectionPoolEntry

__all__ = ('ping_on_checkout', 'unpinged')

_UNPINGED: ContextVar[bool] = ContextVar('session_store_unpinged', default=False)
_FRESH = 'session_store_fresh'
"""A pool entry's `info` key: its connection was just made, so it needs no ping."""


@contextmanager
def unpinged() -> Iterator[None]:
    """Connections checked out in this block (by this task) are handed out unpinged."""
    token = _UNPINGED.set(True)
    try:
        yield
    finally:
        _UNPINGED.reset(token)


def ping_on_checkout(engine: Engine) -> None:
    """Ping `engine`'s pooled connections as they are handed out, outside `unpinged()`; one found dead is replaced,
    and every connection pooled before it with it (they died in the same restart)."""
    dialect = engine.dialect

    def made(_dbapi_connection: Any, entry: ConnectionPoolEntry) -> None:
        entry.info[_FRESH] = True

    def handed_out(dbapi_connection: Any, entry: ConnectionPoolEntry, _proxy: Any) -> None:
        if entry.info.pop(_FRESH, False) or _UNPINGED.get():
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:  # what `pool_pre_ping` catches
            if dialect.is_disconnect(error, dbapi_connection, None):
                # The pool replaces the connection and tries the checkout again (SQLAlchemy's documented contract).
                raise InvalidatePoolError(str(error)) from error
            raise

    event.listen(engine, 'connect', made)
    event.listen(engine, 'checkout', handed_out)
