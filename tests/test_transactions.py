"""The hot path's transactions (`Database.statements`, `Database.transaction`, `Database.glance`): atomic, where they
say they run, finished once begun even when the caller is cancelled, and on public APIs only."""

from __future__ import annotations

import ast
import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, bindparam, event, func, select, text, update
from sqlalchemy.engine import make_url

from session_store import SessionStore
from session_store._db.database import Database
from session_store.rows import SessionRow
from testkit.scripted import ParallelToolAssistant, scripted_agent

_sessions = SessionRow.__table__.c
_RENAME = update(SessionRow).where(SessionRow.pk == bindparam('b_pk')).values(revision=bindparam('revision'))
_REVISION = select(_sessions.revision).where(_sessions.pk == bindparam('pk'))
_COUNT = select(func.count()).select_from(SessionRow)
_PACKAGES = Path(__file__).parent.parent
_NAMED_TUPLE_API = {'_make', '_replace', '_asdict', '_fields'}
"""Public, though they start with `_` (so as not to clash with field names)."""


@contextmanager
def _write_lock_held(url: str, *, seconds: float) -> Iterator[None]:
    """On a SQLite file, SQLite's write lock held by another connection for `seconds` from now, as another process
    writing would hold it; on other databases, nothing."""
    if not url.startswith('sqlite'):
        yield
        return
    other = sqlite3.connect(make_url(url).database or '', isolation_level=None, check_same_thread=False)
    other.execute('BEGIN IMMEDIATE')
    releaser = threading.Timer(seconds, other.execute, ['COMMIT'])
    releaser.start()
    try:
        yield
    finally:
        releaser.join()
        other.close()


async def opened(store: SessionStore) -> tuple[Database, int]:
    """The store's database, and the key of its one session."""
    await store.session('s')
    database = store._database
    pk = await database.statements(lambda db: db.execute(select(_sessions.pk)).scalar_one())
    return database, pk


async def revision_of(database: Database, pk: int) -> str:
    return await database.statements(lambda db: db.execute(_REVISION, {'pk': pk}).scalar_one())


async def test_a_transaction_that_raises_leaves_nothing_behind(store_factory) -> None:
    database, pk = await opened(store_factory())

    def rename(db: Connection, revision: str, fail: bool) -> int:
        changed = db.execute(_RENAME, {'b_pk': pk, 'revision': revision}).rowcount
        if fail:
            raise RuntimeError('after the first statement')
        return changed

    assert await database.transaction('s', lambda db: rename(db, 'kept', fail=False)) == 1
    with pytest.raises(RuntimeError, match='after the first statement'):
        await database.transaction('s', lambda db: rename(db, 'dropped', fail=True))
    assert await revision_of(database, pk) == 'kept'
    assert await database.statements(lambda db: db.execute(_COUNT).scalar_one()) == 1


async def test_a_statement_the_database_refuses_rolls_back_and_the_connection_serves_the_next(store_factory) -> None:
    database, pk = await opened(store_factory())
    duplicate = text('INSERT INTO sessions (pk, session_id) VALUES (:pk, :session_id)')

    def rename_then_refused(db: Connection) -> None:
        db.execute(_RENAME, {'b_pk': pk, 'revision': 'dropped'})
        db.execute(duplicate, {'pk': pk, 'session_id': 's'})

    for _ in range(3):  # the pools hand the same connections back each time: no transaction is left open on them
        with pytest.raises(Exception, match=r'(?i)unique|duplicate|not null|null value'):
            await database.transaction('s', rename_then_refused)
    assert await revision_of(database, pk) != 'dropped'
    assert await database.transaction('s', lambda db: db.execute(_RENAME, {'b_pk': pk, 'revision': 'kept'}).rowcount)
    assert await revision_of(database, pk) == 'kept'


async def test_a_cancelled_caller_waits_for_its_transaction_to_end_whole(store_factory, db_url: str) -> None:
    """Cancelled mid-transaction, the caller sees `CancelledError` only once the transaction has ended: nothing
    is left half-done on a connection, and what the transaction did is there whole."""
    database, pk = await opened(store_factory())
    began = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_rename(db: Connection) -> int:
        changed = db.execute(_RENAME, {'b_pk': pk, 'revision': 'during'}).rowcount
        loop.call_soon_threadsafe(began.set)
        if db.dialect.name == 'sqlite':
            time.sleep(0.3)  # on a worker thread: the event loop goes on and delivers the cancellation meanwhile
        else:
            db.execute(text('SELECT pg_sleep(0.3)'))
        db.execute(_RENAME, {'b_pk': pk, 'revision': 'after'})
        return changed

    with _write_lock_held(db_url, seconds=0.2):  # on SQLite, so the write runs on a worker thread, which awaits
        task = asyncio.create_task(database.transaction('s', slow_rename))
        await began.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await revision_of(database, pk) == 'after'
    assert await database.transaction('s', lambda db: db.execute(_RENAME, {'b_pk': pk, 'revision': 'next'}).rowcount)
    assert await revision_of(database, pk) == 'next'


async def test_a_sqlite_file_writes_on_the_loop_reads_on_worker_threads_and_memory_through_aiosqlite(
    tmp_path: Path,
) -> None:
    """The SQLite hot path is one synchronous engine on the file: a write transaction runs on the event loop's own
    thread (no hop, as a glance), other statements in one hop to a worker thread. An in-memory database, which
    lives on its one connection, runs the same functions through the async engine, as PostgreSQL does."""

    def where(db: Connection) -> tuple[str, str]:
        return threading.current_thread().name, db.dialect.driver

    loop_thread = threading.current_thread().name
    async with SessionStore(f'sqlite+aiosqlite:///{tmp_path / "s.db"}') as on_file:
        assert await on_file._database.transaction('s', where) == (loop_thread, 'pysqlite')
        assert (await on_file._database.statements(where))[0].startswith('session-store-sqlite')
    async with SessionStore('sqlite+aiosqlite:///:memory:') as in_memory:
        assert await in_memory._database.transaction('s', where) == (loop_thread, 'aiosqlite')


async def test_a_write_on_the_loop_neither_waits_nor_checkpoints_and_one_in_32_runs_on_a_worker(
    tmp_path: Path,
) -> None:
    """On the loop's thread a write's connection is refused a lock at once and never checkpoints the WAL (a sync of
    the file); one write in 32 runs on a worker thread, which waits and checkpoints as SQLite does, and so does every
    connection once back in the pool."""

    def settings(db: Connection) -> tuple[int, int]:
        return db.execute(text('PRAGMA busy_timeout')).scalar_one(), db.execute(
            text('PRAGMA wal_autocheckpoint')
        ).scalar_one()

    def where(db: Connection) -> tuple[str, int, int]:
        return threading.current_thread().name, *settings(db)

    async with SessionStore(f'sqlite+aiosqlite:///{tmp_path / "s.db"}') as store:
        database, loop_thread = (await opened(store))[0], threading.current_thread().name
        ran = [await database.transaction('s', where) for _ in range(64)]
        on_loop = [settings for thread, *settings in ran if thread == loop_thread]
        on_workers = [settings for thread, *settings in ran if thread.startswith('session-store-sqlite')]
        assert len(on_loop) == 62 and len(on_workers) == 2, ran
        assert {tuple(found) for found in on_loop} == {(0, 0)}
        assert {tuple(found) for found in on_workers} == {(30_000, 1_000)}
        after = {await database.statements(settings) for _ in range(8)}
        assert after == {(30_000, 1_000)}


async def test_a_write_refused_the_lock_on_the_loop_waits_for_it_on_a_worker_thread(tmp_path: Path) -> None:
    """Another process holding SQLite's write lock for longer than the store's retries last: the store's write is
    refused on the loop's thread, waits for the lock on a worker thread (the busy timeout), and is stored once the
    lock is let go, rather than failing as `DatabaseLocked`."""
    path = tmp_path / 's.db'
    async with SessionStore(f'sqlite+aiosqlite:///{path}') as store:
        database, pk = await opened(store)

        def rename(db: Connection) -> str:
            db.execute(_RENAME, {'b_pk': pk, 'revision': 'after the lock'})
            return threading.current_thread().name

        with _write_lock_held(f'sqlite:///{path}', seconds=1.5):
            thread = await database.transaction('s', rename)
        assert thread.startswith('session-store-sqlite')
        assert await revision_of(database, pk) == 'after the lock'


async def test_the_wal_stays_near_its_checkpoint_size_while_writes_run_on_the_loop(tmp_path: Path) -> None:
    """The WAL is checkpointed by the writes that run on worker threads: 400 writes of 10 pages each (4,000 pages)
    leave a WAL of about SQLite's 1,000-page checkpoint size, plus the writes between two checkpoints, not all of
    them."""
    path = tmp_path / 's.db'
    async with SessionStore(f'sqlite+aiosqlite:///{path}') as store:
        database = (await opened(store))[0]
        await database.statements(lambda db: db.execute(text('CREATE TABLE filler (data BLOB)')))
        page = await database.statements(lambda db: db.execute(text('PRAGMA page_size')).scalar_one())
        for _ in range(400):
            await database.transaction(
                's', lambda db: db.execute(text('INSERT INTO filler VALUES (randomblob(40000))'))
            )
        wal_pages = Path(f'{path}-wal').stat().st_size / page
    assert 1_000 <= wal_pages <= 1_000 + 32 * 12, wal_pages


async def test_a_sqlite_file_glances_on_the_loop_and_reads_on_a_worker_thread_when_it_cannot(tmp_path: Path) -> None:
    """A read of a few rows (`Database.glance`: a session's row, a window) runs on the event loop's own thread, with
    no hop to a worker. One that fails there is made again the usual way, on a worker thread, which waits out a lock
    (the loop's thread never does: its connection is refused at once), and raises what a read raises if it fails
    there too.

    SQLite in WAL mode refuses a reader only in moments no test can hold open (a WAL being recovered), so the
    refusal here is the read's own, raised on the loop's thread as SQLite's would be."""
    refused_on: set[str] = set()

    def where(db: Connection) -> tuple[str, str | None]:
        thread = threading.current_thread().name
        if thread in refused_on or 'everywhere' in refused_on:
            raise sqlite3.OperationalError('no such table: sessions')
        return thread, db.execute(select(_sessions.revision)).scalar()

    async with SessionStore(f'sqlite+aiosqlite:///{tmp_path / "s.db"}') as store:
        await store.session('s')
        database, loop_thread = store._database, threading.current_thread().name
        thread, revision = await database.glance(where)
        assert thread == loop_thread and revision is not None
        # Its connection, one of the workers' pool, waits for no lock while it glances, and for 30 s again after.
        busy = text('PRAGMA busy_timeout')
        assert await database.glance(lambda db: db.execute(busy).scalar()) == 0
        waits = {await database.statements(lambda db: db.execute(busy).scalar()) for _ in range(8)}
        assert waits == {30_000}

        refused_on.add(loop_thread)
        thread, read_again = await database.glance(where)
        assert thread.startswith('session-store-sqlite') and read_again == revision

        refused_on.add('everywhere')
        with pytest.raises(sqlite3.OperationalError, match='no such table'):
            await database.glance(where)


async def test_a_run_on_a_sqlite_file_reads_and_writes_on_the_loop(tmp_path: Path) -> None:
    """A run's reads (opening its session, the session's row its kept window is checked against, a conversation's
    record) are glances, made on the loop's thread, and so is its write, with no hop to a worker thread."""
    sent: list[tuple[str, str]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        reads_row = statement.startswith('SELECT') and 'FROM sessions' in statement
        kind = 'row' if reads_row else statement.split(None, 1)[0].upper()
        sent.append((kind, threading.current_thread().name))

    async with SessionStore(f'sqlite+aiosqlite:///{tmp_path / "s.db"}') as store:
        session = await store.session('s')
        agent = scripted_agent(ParallelToolAssistant())
        await session.run(agent, 'Turn M1')
        for engine in store._database.sync_engines:
            event.listen(engine, 'before_cursor_execute', record)
        session = await store.session('s')
        await session.run(agent, 'Turn M2')
        conversation = await store.conversations.load('s')
        assert conversation is not None
        await store.conversations.save(await agent.run('Turn M3', conversation=conversation))
    loop = threading.current_thread().name
    reads = {thread for kind, thread in sent if kind == 'row'}
    writes = {thread for kind, thread in sent if kind in ('UPDATE', 'INSERT')}
    assert reads == {loop}, sent
    assert writes == {loop}, sent


def test_the_packages_use_no_private_attribute_of_their_dependencies() -> None:
    """No `x._name` in `processors` or `session_store` unless `_name` is one of ours, and no import from a
    dependency's private module: a private attribute of SQLAlchemy, aiosqlite, asyncpg or pydantic-ai is a break
    waiting for their next release, which users take (the wheel declares lower bounds only)."""
    trees = {
        path.relative_to(_PACKAGES): ast.parse(path.read_text())
        for package in ('processors', 'session_store')
        for path in (_PACKAGES / package).rglob('*.py')
    }
    ours = set(_NAMED_TUPLE_API)
    for tree in trees.values():
        ours.update(_names_defined(tree))
    found = {f'{path}: {use}' for path, tree in trees.items() for use in _private_uses(tree, ours)}
    assert found == _NOT_YET, 'private attributes of a dependency:\n' + '\n'.join(sorted(found - _NOT_YET))


_NOT_YET = {'session_store/_ui_ids.py: from pydantic_ai.ui._utils'}
"""The UI message id a stored message was loaded from, read and set through pydantic-ai's private helpers, in that
one module: a resubmitted message (an edit, a regenerate) is found by it, and pydantic-ai has no public reader yet."""


def _names_defined(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            yield node.attr
        elif isinstance(node, ast.arg):
            yield node.arg


def _private_uses(tree: ast.AST, ours: set[str]) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith('_') and not node.attr.startswith('__'):
            if node.attr not in ours:
                yield f'.{node.attr}'
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module != '__future__':
            private_module = any(part.startswith('_') for part in node.module.split('.'))
            if private_module or node.module in ('sqlalchemy.util', 'sqlalchemy.sql.compiler'):
                yield f'from {node.module}'
