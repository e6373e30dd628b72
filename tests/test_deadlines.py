"""The store's deadlines on PostgreSQL: how long it waits to connect, and for a server to take a statement.

PgBouncer in front of a stopped server logs clients in and then holds each of their statements until its own
`query_wait_timeout` (120 s) runs out. Here a server of the test's own that does the same (it logs clients in and
answers nothing after that, in this process), and in the slow tier PgBouncer itself in front of a server that is then
stopped: a call fails with `StoreUnavailable` in seconds, saying which deadline ran out and how to change it, and
works again once the server is back. Statements that run long on a live server (a migration waiting for another's,
VACUUM) are not cut short.
"""

from __future__ import annotations

import asyncio
import shutil
import struct
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]  # ships no type hints
import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from sqlalchemy import text

from session_store import SessionStore, StoreUnavailable
from session_store._db.engine import ServerOptions, connect_arguments, database_url, server_options
from session_store._store_error import InvalidURL
from testkit.faults import OwnServer, PoolerUnavailable, pgbouncer
from testkit.postgres import fresh_database
from tests._cli import fails
from tests.test_connecting import command, invoke
from tests.test_production import prompts

SECRET = 'n0t-in-any-message'


def connect_args(url: str, **given: object) -> dict[str, object]:
    """The keyword arguments the store hands `asyncpg.connect()` beside the URL's, for `url`."""
    _, options = server_options(database_url(url), ServerOptions(engine_options=given))
    return connect_arguments(options)


def test_the_store_bounds_connecting_and_waiting_for_a_statement_by_default() -> None:
    given = connect_args(f'postgresql://app:{SECRET}@db.internal/app')
    assert given['timeout'] == 10.0
    assert issubclass(given['connection_class'], asyncpg.Connection)  # type: ignore[arg-type]
    assert given['connection_class'].query_wait_timeout == 3.0  # type: ignore[attr-defined]


def test_the_deadlines_are_set_in_the_url_or_in_connect_args() -> None:
    url = f'postgresql://app:{SECRET}@db.internal/app'
    given = connect_args(f'{url}?connect_timeout=2.5&query_wait_timeout=1.5')
    assert given['timeout'] == 2.5 and given['connection_class'].query_wait_timeout == 1.5  # type: ignore[attr-defined]
    assert connect_args(f'{url}?timeout=3')['timeout'] == 3.0  # asyncpg's own name for it
    assert connect_args(url, connect_args={'timeout': 30})['timeout'] == 30
    # A bound on every statement's run (asyncpg's command_timeout) bounds the wait too, never loosened by it.
    assert connect_args(f'{url}?command_timeout=2')['connection_class'].query_wait_timeout == 2.0  # type: ignore[attr-defined]
    # The store reads its own parameter and takes it out of the URL.
    store = SessionStore(f'{url}?query_wait_timeout=1.5&connect_timeout=2')
    assert 'query_wait_timeout' not in store.url.query and 'connect_timeout' not in store.url.query


@pytest.mark.parametrize(
    ('query', 'says'),
    [
        ('query_wait_timeout=0', 'query_wait_timeout must be a number of seconds above 0'),
        ('query_wait_timeout=-1', 'query_wait_timeout must be a number of seconds above 0'),
        ('query_wait_timeout=soon', 'query_wait_timeout must be a number'),
        ('query_wait_timeout=1&query_wait_timeout=2', 'query_wait_timeout is given 2 times'),
        ('timeout=0', 'timeout must be a number of seconds above 0'),
    ],
)
def test_bad_deadlines_are_refused_before_connecting(query: str, says: str) -> None:
    url = f'postgresql://app:{SECRET}@127.0.0.1:1/app?{query}'  # nothing listens on port 1: nothing may connect
    with pytest.raises(InvalidURL, match=says):
        SessionStore(url)
    fails(invoke(url, 'sessions'), says)


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack('!i', len(body) + 4) + body


@asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A PostgreSQL server on 127.0.0.1 that logs every client in and then answers nothing: what PgBouncer in front
    of a stopped server is to its clients. Yields its port."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (length,) = struct.unpack('!i', await reader.readexactly(4))
                (code,) = struct.unpack('!i', (await reader.readexactly(length - 4))[:4])
                if code == 80877103:  # SSLRequest: no TLS here
                    writer.write(b'N')
                    continue
                if code == 80877102:  # CancelRequest: nothing to cancel
                    return
                break
            settings = {'server_version': '15.0', 'client_encoding': 'UTF8', 'integer_datetimes': 'on'}
            writer.write(_message(b'R', struct.pack('!i', 0)))  # AuthenticationOk
            for name, value in settings.items():
                writer.write(_message(b'S', f'{name}\0{value}\0'.encode()))
            writer.write(_message(b'K', struct.pack('!ii', 4242, 2424)))
            writer.write(_message(b'Z', b'I'))  # ready for a query, which it will never answer
            await writer.drain()
            while await reader.read(65536):
                pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, '127.0.0.1', 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_a_server_that_takes_no_statement_is_unavailable_naming_the_deadline() -> None:
    async with silent_server() as port:
        url = f'postgresql://app:{SECRET}@127.0.0.1:{port}/app?sslmode=disable&query_wait_timeout=0.3'
        store = SessionStore(url)
        try:
            for call in (lambda: store.session('s'), store.sessions):
                with pytest.raises(StoreUnavailable) as unavailable:
                    await asyncio.wait_for(call(), 60)  # a guard against a hang, not a timing
                message = str(unavailable.value)
                assert 'no answer from the server within 0.3 s' in message and 'query_wait_timeout' in message
                assert SECRET not in message and '\n' not in message
        finally:
            await store.close()
        line = fails(await command(url, 'sessions'), 'annot reach the database', 'query_wait_timeout')
        assert SECRET not in line


@asynccontextmanager
async def through_pgbouncer(server: OwnServer) -> AsyncIterator[str]:
    """PgBouncer in transaction mode in front of a new database on `server`: the URL through it."""
    url = fresh_database(server.url)
    root = Path(tempfile.mkdtemp(prefix='session-store-pgbouncer-'))  # a folder PgBouncer's user can reach
    try:
        with pgbouncer(url, root) as through:
            yield f'{through}?transaction_pooler=true'
    except PoolerUnavailable as error:
        pytest.skip(str(error))
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def unavailable(call: Callable[[], Awaitable[object]]) -> tuple[StoreUnavailable, float]:
    """The `StoreUnavailable` `call` fails with, and the seconds it took."""
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as unavailable:
        await asyncio.wait_for(call(), 300)
    return unavailable.value, time.monotonic() - started


async def fresh_store_sessions(url: str) -> object:
    """A new process's first call: a store that never connected before."""
    store = SessionStore(url)
    try:
        return await store.sessions()
    finally:
        await store.close()


@pytest.mark.slow
async def test_a_stopped_server_behind_pgbouncer_is_unavailable_within_seconds(server: OwnServer) -> None:
    async with through_pgbouncer(server) as url:
        store = SessionStore(url)
        session = await store.session('s')
        await session.run(Agent(TestModel()), 'before')
        await asyncio.to_thread(server.stop)
        # Before the deadline the first of these waited out PgBouncer's query_wait_timeout (120 s), and the others
        # failed at once only because PgBouncer's failed login was then fresh. The acceptance is 10 s: a call waits
        # at most three times the default 3 s (the pool's ping, the statement on a fresh connection, and once more),
        # 3.0 s here; 10 s leaves room for a loaded machine and is still far short of PgBouncer's own wait.
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: session.run(Agent(TestModel()), 'lost'),
            store.sessions,
            lambda: store.history('s'),
            lambda: fresh_store_sessions(url),
        ]
        for call in calls:
            error, took = await unavailable(call)
            assert took < 10, (took, str(error))
            assert 'query_wait_timeout' in str(error) or 'server login has been failing' in str(error), str(error)
            assert '\n' not in str(error) and error.stored is False
        started = time.monotonic()
        fails(await command(url, 'sessions'), 'annot reach the database')  # the command line: one line
        assert time.monotonic() - started < 10
        await asyncio.to_thread(server.start)
        # PgBouncer tries the server again only once its server_login_retry (15 s) has passed since the last failed
        # login, and until then fails each call at once; then the same store works again.
        back = time.monotonic() + 60
        while True:
            try:
                await session.run(Agent(TestModel()), 'after')
                break
            except StoreUnavailable as error:
                assert error.stored is False and time.monotonic() < back, str(error)
                await asyncio.sleep(0.5)
        assert await prompts(store, 's') == ['before', 'after']
        await store.close()


@pytest.mark.slow
async def test_statements_that_run_long_on_a_live_server_are_not_cut_short(server: OwnServer) -> None:
    database = fresh_database(server.url)
    async with SessionStore(f'{database}?query_wait_timeout=0.5') as store:
        await (await store.session('s')).run(Agent(TestModel()), 'kept')
        async with store.engine.connect() as connection:  # a statement that runs for three deadlines
            assert (await connection.execute(text('SELECT pg_sleep(1.5), 1'))).one()[1] == 1
        # A migration that waits for another process's to commit waits as long as it takes.
        blocker = await asyncpg.connect(database.replace('postgresql+asyncpg', 'postgresql', 1))
        locked = blocker.transaction()
        await locked.start()
        await blocker.execute('SELECT pg_advisory_xact_lock(7240331)')  # the store's migration lock
        migrating = asyncio.create_task(store.migrate())
        await asyncio.sleep(1.5)
        assert not migrating.done(), migrating.exception() if migrating.done() else None
        await locked.rollback()
        await migrating
        await store.delete('s')  # VACUUM, as the owner
        await blocker.close()
