"""Production faults against real servers: restarts and outages, a lease held through one, many processes opening
one empty database, a full disk. Each fault raises one of the store's own errors, saying what to do, and the
archive holds exactly the runs that returned."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import func, select, text

from session_store import SessionStore, StorageFull, StoreUnavailable
from session_store._db.schema import head_revision
from session_store.rows import SessionRow
from testkit.faults import OwnServer
from testkit.postgres import fresh_database

StoreFactory = Callable[..., SessionStore]


def answering(delay: float = 0.0) -> Agent[None, str]:
    """An agent whose model answers each prompt after `delay` seconds (the span a fault can fall in)."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(delay)
        prompt = next(p.content for p in messages[-1].parts if isinstance(p, UserPromptPart))
        return ModelResponse(parts=[TextPart(f'answer to {prompt}')])

    return Agent(FunctionModel(answer))


async def prompts(store: SessionStore, session_id: str) -> list[str]:
    return [
        str(p.content)
        for m in await store.history(session_id, limit=None)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


async def unreachable_reads(store: SessionStore, session_id: str, *more: Callable[[], Awaitable[object]]) -> None:
    """Every kind of read fails saying the database can't be reached and what to do, and nothing of storing."""
    reads: list[Callable[[], Awaitable[object]]] = [
        lambda: store.history(session_id),
        store.sessions,
        lambda: store.search('order'),
        lambda: store.window(session_id),
        lambda: store.summaries(session_id),
        lambda: store.export(session_id),
        *more,
    ]
    for read in reads:
        with pytest.raises(StoreUnavailable) as raised:
            await read()
        message = str(raised.value)
        assert 'annot reach the database at' in message and 'retry once the server is back' in message, message
        assert 'stored' not in message and not raised.value.writing, message


async def test_reads_of_a_database_out_of_reach_say_so_and_nothing_of_storing() -> None:
    store = SessionStore('postgresql+asyncpg://app:secret@127.0.0.1:1/app')  # nothing listens on port 1
    await unreachable_reads(store, 's')
    reader = SessionStore(store.url, read_only=True)
    await unreachable_reads(reader, 's', reader.ready)
    # Opened to write, the store's own check of the schema (which would make it in an empty database) is a write's.
    for write in (lambda: store.session('s'), lambda: store.delete('s'), store.migrate, store.ready):
        with pytest.raises(StoreUnavailable, match=r'annot reach the database at .*; nothing was stored\.') as raised:
            await write()
        assert raised.value.writing and raised.value.stored is False
    await store.close()
    await reader.close()


@pytest.mark.slow
async def test_the_same_store_works_after_every_restart_and_says_so_while_the_server_is_away(
    server: OwnServer,
) -> None:
    store = SessionStore(fresh_database(server.url))
    session = await store.session('s')
    returned: list[str] = []
    for turn in range(5):
        if turn:
            server.restart()
        if turn % 2 == 0:  # the first call after the server is back: a read, or a run
            assert await prompts(store, 's') == returned
        await session.run(answering(), f'T{turn}')
        returned.append(f'T{turn}')

    # While the server is away every call fails fast, saying so, and stores nothing: a call that writes says so, a
    # read says only that the database is out of reach (nothing of it was to be stored).
    server.stop()
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"Session 's': cannot reach the database .*nothing was stored.*retry"):
        await session.run(answering(), 'lost')
    with pytest.raises(StoreUnavailable, match=r"Session 'other': cannot reach the database .*nothing was stored"):
        await store.session('other')
    await unreachable_reads(store, 's', session.context, session.branches)
    assert time.monotonic() - started < 10
    server.start()
    await session.run(answering(), 'T5')
    returned.append('T5')

    # A restart while the model answers: the run is stored when it ends.
    run = asyncio.create_task(session.run(answering(delay=1.5), 'T6'))
    await asyncio.sleep(0.3)
    await asyncio.to_thread(server.restart)
    await run
    returned.append('T6')
    assert await prompts(store, 's') == returned
    await store.close()


@pytest.mark.slow
async def test_a_waiting_run_through_an_outage_is_stored_and_leaves_no_lease(
    server: OwnServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = SessionStore(fresh_database(server.url))
    store._leases.ttl = timedelta(seconds=1.5)  # its heartbeat every half second falls in the outage
    session = await store.session('w', wait=True, timeout=60)

    # The heartbeat fails while the server is away; the run, stored after it is back, is reported stored.
    run = asyncio.create_task(session.run(answering(delay=3), 'W0'))
    await asyncio.sleep(0.3)
    await asyncio.to_thread(server.stop)
    await asyncio.sleep(1.2)
    await asyncio.to_thread(server.start)
    await run
    assert 'could not be renewed' in caplog.text
    started = time.monotonic()
    await session.run(answering(), 'W1')
    assert time.monotonic() - started < 1.0, 'the lease was left behind'

    # The store fails (the server stays away): its own error comes through, not the release's, and this store's
    # next run takes the lease it could not release over at once, with no wait for it to lapse.
    store._leases.ttl = timedelta(seconds=30)
    run = asyncio.create_task(session.run(answering(delay=1), 'lost'))
    await asyncio.sleep(0.3)
    await asyncio.to_thread(server.stop)
    with pytest.raises(StoreUnavailable, match=r"Session 'w': cannot reach the database"):
        await run
    assert 'could not be released' in caplog.text
    await asyncio.to_thread(server.start)
    started = time.monotonic()
    await session.run(answering(), 'W2')
    assert time.monotonic() - started < 5.0, 'the next run waited for the lease to lapse'
    assert await prompts(store, 'w') == ['W0', 'W1', 'W2']
    await store.close()


@pytest.mark.slow
@pytest.mark.parametrize('round_', range(20))
def test_processes_opening_one_empty_database_at_once_all_open_it(new_database: Callable[[], str], round_: int) -> None:
    """Four processes open one new, empty database at the same moment: one migrates it, the others wait and go on."""
    url = new_database()
    workers = [
        subprocess.Popen([sys.executable, '-m', 'tests._open_worker', url, f'p{n}'], stderr=subprocess.PIPE, text=True)
        for n in range(4)
    ]
    failures = [worker.stderr.read() for worker in workers if worker.wait(timeout=120) != 0]  # type: ignore[union-attr]
    assert failures == []

    async def check() -> None:
        async with SessionStore(url) as store:
            async with store.engine.connect() as connection:
                versions = (await connection.execute(text('SELECT version_num FROM alembic_version'))).scalars().all()
                counts = (await connection.execute(select(func.sum(SessionRow.message_count)))).scalar()
            assert versions == [head_revision()] and counts == 8
            assert sorted(info.session_id for info in await store.sessions()) == ['p0', 'p1', 'p2', 'p3']

    asyncio.run(check())


def filler(size: int) -> Agent[None, str]:
    """An agent that answers every prompt with `size` characters of text."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = next(p.content for p in messages[-1].parts if isinstance(p, UserPromptPart))
        return ModelResponse(parts=[TextPart(f'{prompt} ' + 'x' * size)])

    return Agent(FunctionModel(answer))


@pytest.mark.spawns('mount', 'umount', reason='a 2 MB tmpfs: two mount calls of a few ms, no Python')
@pytest.mark.skipif(os.geteuid() != 0, reason='mounting a small tmpfs needs root')
async def test_a_full_disk_raises_storage_full_stores_nothing_partial_and_the_store_goes_on(tmp_path: Path) -> None:
    disk = tmp_path / 'small'
    disk.mkdir()
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', str(disk)], check=True)
    store = SessionStore(f'sqlite+aiosqlite:///{disk / "sessions.db"}')
    try:
        ballast = disk / 'ballast'
        ballast.write_bytes(b'\0' * 600_000)
        session = await store.session('d')
        agent, returned = filler(40_000), []
        with pytest.raises(StorageFull, match=r"Session 'd'.*no space left.*nothing was stored.*Free some disk space"):
            for turn in range(100):
                await session.run(agent, f'T{turn}')
                returned.append(f'T{turn}')
        assert returned, 'the disk filled before any run'
        # Whole runs only, every one that returned; reads keep working.
        assert await prompts(store, 'd') == returned
        assert [info.message_count for info in await store.sessions()] == [2 * len(returned)]
        ballast.unlink()
        await session.run(agent, 'after')
        assert await prompts(store, 'd') == [*returned, 'after']
    finally:
        await store.close()
        subprocess.run(['umount', str(disk)], check=True)
