"""SQLAlchemy's engine events on every engine a store sends statements through, for the length of a block."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from session_store import SessionStore


@contextmanager
def listening(store: SessionStore, name: str, listener: Callable[..., Any]) -> Iterator[None]:
    """`listener` hears SQLAlchemy's event `name` (`before_cursor_execute`, ...) of each of the store's engines (the
    async engine's core, and on a SQLite file the hot path's own) while the block runs."""
    engines = store._database.sync_engines
    for engine in engines:
        event.listen(engine, name, listener)
    try:
        yield
    finally:
        for engine in engines:
            event.remove(engine, name, listener)
