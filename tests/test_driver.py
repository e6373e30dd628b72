"""The hot path's driver-level transactions (`session_store._driver`): atomic; on SQLite, one trip to its thread."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, func, select, text, update

from session_store import SessionStore, _driver
from session_store._driver import Execute, Work, run_transaction
from session_store.rows import SessionRow

_sessions = SessionRow.__table__.c
_RENAME = update(SessionRow).where(SessionRow.pk == bindparam('b_pk')).values(revision=bindparam('revision'))
_REVISION = select(_sessions.revision).where(_sessions.pk == bindparam('pk'))
_COUNT = select(func.count()).select_from(SessionRow)


async def test_a_transaction_that_raises_leaves_nothing_behind(store_factory) -> None:
    store: SessionStore = store_factory()
    await store.session('s')
    engine = store._database.engine
    pk = (await _driver.fetch_row(engine, select(_sessions.pk), {}) or (None,))[0]

    def rename(revision: str, fail: bool) -> Work[int]:
        changed = yield Execute(_RENAME, {'b_pk': pk, 'revision': revision})
        if fail:
            raise RuntimeError('after the first statement')
        return int(changed)

    assert await run_transaction(engine, lambda: rename('kept', fail=False)) == 1
    with pytest.raises(RuntimeError, match='after the first statement'):
        await run_transaction(engine, lambda: rename('dropped', fail=True))
    assert await _driver.fetch_row(engine, _REVISION, {'pk': pk}) == ('kept',)
    assert await _driver.fetch_row(engine, _COUNT, {}) == (1,)


async def test_a_statement_the_database_refuses_rolls_back_and_the_connection_serves_the_next(store_factory) -> None:
    store: SessionStore = store_factory()
    await store.session('s')
    engine = store._database.engine
    pk = (await _driver.fetch_row(engine, select(_sessions.pk), {}) or (None,))[0]
    duplicate = text('INSERT INTO sessions (pk, session_id) VALUES (:pk, :session_id)')

    def rename_then_refused() -> Work[None]:
        yield Execute(_RENAME, {'b_pk': pk, 'revision': 'dropped'})
        yield Execute(duplicate, {'pk': pk, 'session_id': 's'})

    for _ in range(3):  # the pool hands the same connection back each time: no transaction is left open on it
        with pytest.raises(Exception, match=r'(?i)unique|duplicate|not null|null value'):
            await run_transaction(engine, rename_then_refused)
    assert await _driver.fetch_row(engine, _REVISION, {'pk': pk}) != ('dropped',)

    def rename() -> Work[int]:
        return int((yield Execute(_RENAME, {'b_pk': pk, 'revision': 'kept'})))

    assert await run_transaction(engine, rename) == 1
    assert await _driver.fetch_row(engine, _REVISION, {'pk': pk}) == ('kept',)


async def test_sqlite_runs_a_whole_write_in_one_trip_to_the_connections_thread(tmp_path) -> None:
    """aiosqlite's private way of running a function on its thread is what makes a run's write one trip: if a
    release drops it, writes still work (a trip per statement), and this test says the fast path is gone."""
    async with SessionStore(f'sqlite+aiosqlite:///{tmp_path / "s.db"}') as store:
        await store.session('s')
        async with store._database.engine.connect() as connection:
            driver = (await connection.get_raw_connection()).driver_connection
            assert _driver.in_thread(driver) is not None
