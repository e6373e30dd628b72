"""Migrated databases for tests, copied from one template per backend instead of migrated one by one.

A store migrates an empty database on its first open, through every alembic revision: a few tenths of a
second per database on each backend, paid by nearly every test. ``Templates`` migrates one database per
backend, the first time one is asked for, the same way (a store's first open), and then hands out copies:

- SQLite: the template file, checkpointed so that its ``-wal``/``-shm`` state is in the file itself, copied
  byte for byte. A copy is the same file a first open would have left.
- PostgreSQL: ``CREATE DATABASE ... TEMPLATE``. The template is named for this process (``fresh_database``
  puts the process id and a random suffix in every name), sealed against connections once migrated, since
  PostgreSQL copies only a database nobody is connected to, and dropped by ``close()``. So several
  processes can share one server, each with its own template. A ``CREATE DATABASE`` takes the server a
  tenth of a second or more whatever it copies, so the next copy of a template is made ahead, on a thread
  of its own, while the test that took the last one runs; ``drop_later`` drops databases the same way.

A test that needs an empty database (migration, refusals of an unmigrated or foreign database) asks for one
explicitly; see ``tests/conftest.py``.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any, Protocol

from session_store import SessionStore
from testkit.postgres import drop_database, fresh_database, run_async, seal_template

__all__ = ['Fill', 'NewDatabase', 'Templates', 'migrate']


Fill = Callable[[str], Coroutine[Any, Any, None]]
"""Writes what a template holds into the migrated database at the URL it is given (a store's first writes)."""


class NewDatabase(Protocol):
    """What the ``new_database`` fixture gives: URLs of new databases, migrated unless ``empty``."""

    def __call__(self, *, empty: bool = False, fill: Fill | None = None) -> str:
        """A new database's URL: at this version's schema, or with ``empty=True`` holding nothing at all.

        An empty SQLite database is a path where no file is yet. With ``fill``, the database is a copy of one
        that ``fill`` wrote into once for the whole run (see ``Templates``).
        """
        ...


async def migrate(url: str) -> None:
    """Give the empty database at ``url`` this version's schema as a store's first open does."""
    async with SessionStore(url) as store:
        await store.ready()


def _checkpoint(path: Path) -> None:
    """Move everything in ``path``'s write-ahead log into the file itself, so that the file alone is whole."""
    with closing(sqlite3.connect(path)) as connection:
        busy, _, _ = connection.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchone()
    if busy:
        raise RuntimeError(f'{path}: the checkpoint was blocked; something still has the template open')
    wal = Path(f'{path}-wal')
    if wal.exists() and wal.stat().st_size:
        raise RuntimeError(f'{wal} still holds pages after a checkpoint')


class Templates:
    """Migrated templates per backend, made on first use; copies of them on demand. ``close()`` drops them.

    Besides the plain migrated one, a template can hold what a ``Fill`` wrote into a migrated copy, for tests
    that each start from the same populated database and then write to it: the conversation is run once,
    and each test gets a copy. Templates are keyed by the fill function itself, so pass a module-level one.
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._lock = threading.RLock()
        self._sqlite: dict[Fill | None, Path] = {}
        self._postgresql: dict[tuple[str, Fill | None], str] = {}
        """Template URL by the server URL it lives on and its fill."""
        self._maker = ThreadPoolExecutor(max_workers=1, thread_name_prefix='templates-copy')
        self._dropper = ThreadPoolExecutor(max_workers=1, thread_name_prefix='templates-drop')
        self._next: dict[tuple[str, Fill | None], Future[str]] = {}
        """The copy of each PostgreSQL template made ahead for the next test that asks for one."""
        self._dropping: list[Future[None]] = []

    def sqlite_copy(self, path: Path, fill: Fill | None = None) -> None:
        """Write a migrated SQLite database (holding what ``fill`` wrote) to ``path``, which must not exist yet."""
        if path.exists():
            raise FileExistsError(path)
        shutil.copyfile(self._sqlite_template(fill), path)

    def postgresql_copy(self, server: str, fill: Fill | None = None) -> str:
        """A new migrated database (holding what ``fill`` wrote) on the PostgreSQL server of ``server``; its URL.

        Drop it with ``drop_later`` (or ``drop_database``).
        """
        key = (server, fill)
        with self._lock:
            template = self._postgresql_template(server, fill)
            taken = self._next.pop(key, None) or self._maker.submit(fresh_database, server, template=template)
            self._next[key] = self._maker.submit(fresh_database, server, template=template)
        return taken.result()

    def drop_later(self, url: str) -> None:
        """Drop the PostgreSQL database of ``url`` on a thread of its own; ``close()`` waits for it."""
        with self._lock:
            self._dropping.append(self._dropper.submit(drop_database, url))

    def close(self) -> None:
        """Drop what is left on PostgreSQL: copies made ahead, then the templates. The SQLite templates live in
        the folder given, which its owner removes. Raises the first failure of a drop ``drop_later`` was given."""
        with self._lock:
            ahead, self._next = list(self._next.values()), {}
            made, self._postgresql = list(self._postgresql.values()), {}
            dropping, self._dropping = self._dropping, []
        self._maker.shutdown(wait=True)
        unused = [future.result() for future in ahead if future.exception() is None]
        failures = [error for future in dropping if (error := future.exception()) is not None]
        self._dropper.shutdown(wait=True)
        for url in [*unused, *made]:
            drop_database(url)
        if failures:
            raise failures[0]

    def _sqlite_template(self, fill: Fill | None) -> Path:
        with self._lock:
            if fill not in self._sqlite:
                source = None if fill is None else self._sqlite_template(None)
                path = self._folder / f'template-{len(self._sqlite)}.db'
                url = f'sqlite+aiosqlite:///{path}'
                if fill is None:
                    run_async(lambda: migrate(url))
                else:
                    assert source is not None
                    shutil.copyfile(source, path)
                    run_async(lambda: fill(url))
                _checkpoint(path)
                self._sqlite[fill] = path
            return self._sqlite[fill]

    def _postgresql_template(self, server: str, fill: Fill | None) -> str:
        with self._lock:
            if (server, fill) not in self._postgresql:
                source = None if fill is None else self._postgresql_template(server, None)
                url = fresh_database(server, template=source, prefix='session_store_template')
                try:
                    run_async(lambda: migrate(url) if fill is None else fill(url))
                    seal_template(url)
                except BaseException:
                    drop_database(url)
                    raise
                self._postgresql[server, fill] = url
            return self._postgresql[server, fill]
