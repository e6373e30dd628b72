"""`SessionStore(read_only=True)`: review a database without changing it, on read-only media too."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from sqlalchemy.exc import OperationalError

from session_store import SchemaMismatch, SessionStore, StoreError


async def make_database(path: Path) -> None:
    async with SessionStore(f'sqlite:///{path}') as store:
        session = await store.session('kept', scope='team')
        await session.run(Agent(TestModel()), 'Where is ORDER-1042?')


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    """A directory on a read-only file system: a read-only bind mount, which needs root."""
    source, mounted = tmp_path / 'source', tmp_path / 'ro'
    source.mkdir()
    mounted.mkdir()
    made = subprocess.run(['mount', '--bind', str(source), str(mounted)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f'cannot bind-mount here: {made.stderr.decode().strip()}')
    try:
        subprocess.run(['mount', '-o', 'remount,ro,bind', str(mounted)], check=True, capture_output=True)
        yield mounted
    finally:
        subprocess.run(['umount', str(mounted)], check=True)


async def test_a_read_only_store_reads_without_writing_anything(tmp_path: Path) -> None:
    path = tmp_path / 'sessions.db'
    await make_database(path)
    before = path.read_bytes()
    async with SessionStore(f'sqlite:///{path}', read_only=True) as store:
        assert [info.session_id for info in await store.sessions()] == ['kept']
        assert len(await store.history('kept')) == 2
        assert [hit.position for hit in await store.search('ORDER-1042', session_id='kept')] == [0]
        with pytest.raises(OperationalError, match='readonly'):
            await store.session('new')
    # WAL readers may leave SQLite's shared-memory index beside the file, but nothing is written.
    assert path.read_bytes() == before
    wal = tmp_path / 'sessions.db-wal'
    assert not wal.exists() or wal.stat().st_size == 0


async def test_a_read_only_store_never_creates_a_database(tmp_path: Path) -> None:
    store = SessionStore(f'sqlite:///{tmp_path / "missing.db"}', read_only=True)
    with pytest.raises(
        StoreError, match=r'No database file at .*missing\.db: a read-only store opens only an existing'
    ):
        await store.sessions()
    await store.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.spawns('mount', 'umount', reason='a read-only bind mount: two mount calls of a few ms, no Python')
async def test_a_database_on_read_only_media_is_reviewable(read_only_mount: Path) -> None:
    await make_database(read_only_mount.parent / 'source' / 'sessions.db')
    url = f'sqlite:///{read_only_mount / "sessions.db"}'
    writable = SessionStore(url, migrate=False)
    with pytest.raises(OperationalError, match='unable to open database file'):
        await writable.sessions()  # what review on read-only media used to do
    await writable.close()
    async with SessionStore(url, read_only=True) as store:
        assert len(await store.history('kept', scope='team')) == 2


async def test_an_in_memory_database_is_not_sent_to_migrate() -> None:
    for url in ('sqlite+aiosqlite://', 'sqlite:///:memory:'):
        store = SessionStore(url, migrate=False)
        with pytest.raises(SchemaMismatch, match='in-memory SQLite database') as refused:
            await store.sessions()
        assert 'migrate' not in str(refused.value)
        await store.close()
