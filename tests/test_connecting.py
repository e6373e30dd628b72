"""Connecting to PostgreSQL as production does it, on real servers: connection strings as hosting providers hand them
out (libpq's `sslmode`, `application_name`, `connect_timeout`, `options`, ..., and several hosts with
`target_session_attrs`), TLS against a server of the test's own with a certificate the test makes, a schema other
than `public`, and every expected refusal (credentials, a missing database, TLS, no free connection slot, a server
shutting down, a read-only server, a statement timeout, a transaction pooler the store was not told about) as a
`StoreError` saying what to do, from the API and from every command in one line. Opens with `migrate=False` during
another process's migration wait for it.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # ships no type hints
import pytest
from click.testing import CliRunner, Result
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from session_store import SchemaMismatch, ServerRefused, SessionStore, StoreUnavailable
from session_store._db import schema
from session_store._db.engine import POOLER_PARAMETER
from session_store.cli import main
from testkit.faults import OwnServer, own_server
from testkit.postgres import fresh_database
from testkit.templates import NewDatabase
from testkit.tls import Authority
from tests._cli import fails, ok
from tests.test_production import prompts

on_postgresql = pytest.mark.parametrize('new_database', ['postgresql'], indirect=True)

_SEEN = text(
    "SELECT current_setting('application_name') AS application_name, current_setting('statement_timeout') AS "
    'statement_timeout, current_schema() AS schema, '
    '(SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid())::text AS ssl'
)


async def connected(url: str) -> dict[str, Any]:
    """Store a run through a store on `url`, read it back, and say what the server sees of the store's connection."""
    async with SessionStore(url) as store:
        session = await store.session('c')
        before = len(await store.history('c', limit=None))
        await session.run(Agent(TestModel(custom_output_text='stored')), 'hello')
        assert len(await store.history('c', limit=None)) == before + 2
        async with store.engine.connect() as connection:
            return dict((await connection.execute(_SEEN)).one()._mapping)


async def refusal(url: str) -> ServerRefused:
    """What a store on `url` raises on its first call."""
    store = SessionStore(url)
    try:
        with pytest.raises(ServerRefused) as refused:
            await store.session('c')
        return refused.value
    finally:
        await store.close()


def invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, ['--db', url, *args], input='hello\n')


async def command(url: str, *args: str) -> Result:
    """`invoke` from a test's event loop: a command runs its own loop, on a thread of its own."""
    return await asyncio.to_thread(invoke, url, *args)


def dsn(url: str) -> str:
    """asyncpg's spelling of a store URL, for connections of the test's own."""
    return make_url(url).set(drivername='postgresql').render_as_string(hide_password=False)


COMMANDS = [
    ['sessions'],
    ['history', 'c'],
    ['summaries', 'c'],
    ['context', 'c'],
    ['search', 'hello'],
    ['branches', 'c'],
    ['export', 'c'],
    ['migrate'],
    ['chat', 'c', '--model', 'test'],
]


@pytest.mark.parametrize(
    ('query', 'says'),
    [
        ('keepalives=1', 'keepalives (a libpq setting) has no asyncpg equivalent: asyncpg has no TCP keepalive'),
        ('client_encoding=latin1', 'asyncpg always talks UTF-8'),
        ('sslfactor=3', 'sslfactor is not one that session-store or asyncpg knows: remove it, or give asyncpg keyword'),
        ('sslmode=on', 'sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full'),
        ('ssl=require&sslmode=require', 'both ssl and sslmode: give sslmode only'),
        ('sslmode=require&sslrootcert=/nowhere/ca.pem', "sslrootcert names '/nowhere/ca.pem': no file"),
        ('sslmode=verify-full', 'add sslrootcert=PATH'),
        ('sslmode=require&sslrootcert=system', 'sslrootcert=system'),
        ('connect_timeout=soon', 'connect_timeout must be a number'),
        ('connect_timeout=0', 'connect_timeout must be a number of seconds above 0'),
        ('connect_timeout=5&timeout=5', 'both connect_timeout and timeout'),
        ('target_session_attrs=master', 'target_session_attrs must be one of any, primary'),
        ('application_name=a&application_name=b', 'application_name is given 2 times: give it once'),
    ],
)
def test_connection_string_parameters_asyncpg_cannot_take_are_refused_before_connecting(
    query: str, says: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv('HOME', str(tmp_path))  # no ~/.postgresql/root.crt
    monkeypatch.delenv('PGSSLROOTCERT', raising=False)
    url = f'postgresql://app:secret@127.0.0.1:1/app?{query}'  # nothing listens on port 1: nothing may connect
    with pytest.raises(ValueError, match='The URL') as refused:
        SessionStore(url)
    assert says in str(refused.value)
    fails(invoke(url, 'sessions'), says)


PLAIN = {'application_name': '', 'statement_timeout': '0', 'schema': 'public', 'ssl': 'false'}
"""What the server sees of a store's connection made from a URL without parameters."""


async def connects_as_asked(db_url: str, cases: list[tuple[str, dict[str, str]]]) -> None:
    """A store on `db_url` with each case's query stores a run, and the server sees its connection as the case says."""
    assert '?' not in db_url
    assert await connected(db_url) == PLAIN
    for query, differs in cases:
        assert await connected(f'{db_url}?{query}') == {**PLAIN, **differs}, query


@on_postgresql
async def test_connection_strings_as_providers_hand_them_out_connect(db_url: str) -> None:
    await connects_as_asked(
        db_url,
        [
            ('sslmode=disable', {}),
            ('application_name=support-bot', {'application_name': 'support-bot'}),
            ('connect_timeout=10', {}),
            ('options=-c%20statement_timeout%3D45s', {'statement_timeout': '45s'}),
        ],
    )
    # This server has no TLS: a URL that requires it is refused, saying so.
    refused = await refusal(f'{db_url}?sslmode=require')
    assert refused.reason == 'tls' and 'The server does not take TLS' in str(refused)


@pytest.mark.slow
@on_postgresql
async def test_more_of_libpqs_parameters_connect(db_url: str) -> None:
    await connects_as_asked(
        db_url,
        [
            ('sslmode=allow', {}),
            ('sslmode=prefer', {}),
            ('ssl=disable', {}),  # SQLAlchemy's spelling
            ('fallback_application_name=fallback', {'application_name': 'fallback'}),
            ('target_session_attrs=read-write', {}),
            (
                'sslmode=disable&application_name=a%20b&options=-cstatement_timeout%3D5min',
                {'application_name': 'a b', 'statement_timeout': '5min'},
            ),
        ],
    )


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: a host that refuses connections, as a stopped server's does."""
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])


async def server_port(url: str) -> int:
    """The port of the server a store on `url` connected to."""
    async with SessionStore(url) as store, store.engine.connect() as connection:
        return int((await connection.execute(text("SELECT current_setting('port')"))).scalar_one())


@on_postgresql
async def test_a_multi_host_url_with_its_first_host_down_runs_on_the_next(db_url: str) -> None:
    url = make_url(db_url)
    down, up = closed_port(), url.port
    user, name = f'{url.username}:{url.password}', url.database
    for multi_host in (
        f'postgresql://{user}@127.0.0.1:{down},127.0.0.1:{up}/{name}?target_session_attrs=read-write',
        f'postgres://{user}@/{name}?host=127.0.0.1,127.0.0.1&port={down},{up}&target_session_attrs=primary',
        f'postgresql+asyncpg://{user}@/{name}?host=127.0.0.1:{down}&host=127.0.0.1:{up}&target_session_attrs=any',
        f'postgresql://{user}@127.0.0.1:{down},localhost:{up}/{name}?target_session_attrs=prefer-standby',
    ):
        assert await connected(multi_host) == PLAIN, multi_host
        assert await server_port(multi_host) == up
    # No host is what the URL asks for (a failover's moment with no primary): unavailable, saying so.
    store = SessionStore(f'postgresql://{user}@127.0.0.1:{up},localhost:{up}/{name}?target_session_attrs=standby')
    try:
        with pytest.raises(StoreUnavailable, match='None of the hosts match the target attribute') as unavailable:
            await store.session('c')
        assert str(url.password) not in str(unavailable.value)
    finally:
        await store.close()
    # Every host down: unavailable, and the password in no message.
    store = SessionStore(f'postgresql://{user}@127.0.0.1:{down},127.0.0.1:{closed_port()}/{name}')
    try:
        with pytest.raises(StoreUnavailable) as unavailable:
            await store.sessions()
        assert str(url.password) not in str(unavailable.value)
    finally:
        await store.close()
    line = fails(await command(f'postgresql://{user}@127.0.0.1:{down},127.0.0.1:{closed_port()}/{name}', 'sessions'))
    assert str(url.password) not in line


@on_postgresql
def test_every_command_takes_a_multi_host_url(db_url: str) -> None:
    url = make_url(db_url)
    login, down = f'{url.username}:{url.password}', closed_port()
    in_the_query = f'postgresql://{login}@/{url.database}?host=127.0.0.1,127.0.0.1&port={down},{url.port}'
    in_the_address = f'postgresql://{login}@127.0.0.1:{down},127.0.0.1:{url.port}/{url.database}'
    for args in (['sessions'], ['migrate']):
        ok(invoke(in_the_query, *args))  # passes today
        ok(invoke(in_the_address, *args))


@pytest.mark.slow
async def test_target_session_attrs_against_two_primaries_picks_the_first_reachable(server: OwnServer) -> None:
    first = make_url(fresh_database(server.url))
    with own_server() as other:
        second = make_url(other.url)
        # One user, password and database for both, as a URL listing them asks.
        admin = await asyncpg.connect(dsn(other.url))
        await admin.execute(f"ALTER USER {first.username} PASSWORD '{first.password}'")
        await admin.execute(f'CREATE DATABASE "{first.database}"')
        await admin.close()
        login = f'{first.username}:{first.password}'
        both = f'127.0.0.1:{first.port},127.0.0.1:{second.port}'
        for attributes in ('any', 'primary', 'read-write'):
            url = f'postgresql://{login}@{both}/{first.database}?target_session_attrs={attributes}'
            assert await connected(url) == PLAIN
            assert await server_port(url) == first.port
            reversed_order = f'postgresql://{login}@/{first.database}?host=127.0.0.1,127.0.0.1'
            reversed_order += f'&port={second.port},{first.port}&target_session_attrs={attributes}'
            assert await server_port(reversed_order) == second.port
        # The first stopped: a new store runs on the second.
        await asyncio.to_thread(server.stop)
        url = f'postgresql://{login}@{both}/{first.database}?target_session_attrs=primary'
        assert await server_port(url) == second.port
        assert await connected(url) == PLAIN
        await asyncio.to_thread(server.start)


@on_postgresql
def test_every_command_says_in_one_line_that_the_server_refused_tls(db_url: str) -> None:
    ok(invoke(f'{db_url}?sslmode=disable&application_name=cli&connect_timeout=10', 'sessions'))
    for args in COMMANDS:
        fails(invoke(f'{db_url}?sslmode=require', *args), 'refused the store', 'The server does not take TLS')


@on_postgresql
async def test_wrong_credentials_and_a_missing_database_are_refused_saying_what_to_fix(db_url: str) -> None:
    url = make_url(db_url)
    wrong = url.set(password='not-the-password-0451').render_as_string(hide_password=False)
    refused = await refusal(wrong)
    assert refused.reason == 'authentication' and 'Check the user and password in the URL' in str(refused)
    assert 'not-the-password-0451' not in str(refused) and str(url.password) not in str(refused)
    line = fails(await command(wrong, 'sessions'), 'password authentication failed', 'Check the user and password')
    assert 'not-the-password-0451' not in line

    missing = url.set(database='no_such_database_here').render_as_string(hide_password=False)
    refused = await refusal(missing)
    assert refused.reason == 'database' and 'database "no_such_database_here" does not exist' in str(refused)
    assert 'Create the database' in str(refused)


@pytest.mark.slow
@on_postgresql
async def test_a_read_only_server_refuses_writes_saying_where_to_point_the_store(db_url: str) -> None:
    async with SessionStore(db_url) as store:
        await (await store.session('kept')).run(Agent(TestModel()), 'before')
    async with SessionStore(db_url, read_only=True) as store:  # read-only of its own accord: it says so instead
        with pytest.raises(ServerRefused, match=r"Session 'new': .*opened with read_only=True: open one without it"):
            await store.session('new')
    async with SessionStore(db_url) as store, store.engine.connect() as connection:
        name = make_url(db_url).database
        await connection.execute(text(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on'))
        await connection.commit()
    # What a hot standby answers every write with (SQLSTATE 25006); reads still work.
    async with SessionStore(db_url) as store:
        assert [info.session_id for info in await store.sessions()] == ['kept']
        refused_write = r"Session 'new': .*read-only transaction.*point the URL at the primary"
        with pytest.raises(ServerRefused, match=refused_write):
            await store.session('new')
        session = await store.session('kept')
        with pytest.raises(ServerRefused) as refused:
            await session.run(Agent(TestModel()), 'refused')
        assert refused.value.reason == 'read_only'
        assert len(await store.history('kept', limit=None)) == 2


@pytest.mark.slow
@on_postgresql
async def test_a_statement_timeout_set_in_the_url_is_a_store_error_and_the_store_goes_on(db_url: str) -> None:
    url = f'{db_url}?options=-c%20statement_timeout%3D300'
    blocker = await asyncpg.connect(dsn(db_url))
    async with SessionStore(url) as store:
        session = await store.session('t')
        await session.run(Agent(TestModel()), 'first')
        locked = blocker.transaction()
        await locked.start()
        await blocker.execute('LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE')  # every statement on it waits
        with pytest.raises(ServerRefused, match=r"Session 't': .*statement timeout.*statement_timeout") as refused:
            await session.run(Agent(TestModel()), 'timed out')
        assert refused.value.reason == 'statement_timeout'
        await locked.rollback()
        await session.run(Agent(TestModel()), 'after')
        assert await prompts(store, 't') == ['first', 'after']
    await blocker.close()


@pytest.mark.slow
async def test_connect_timeout_bounds_connecting_to_a_server_that_never_answers() -> None:
    with socket.create_server(('127.0.0.1', 0)) as silent:  # accepts connections (the kernel does), answers nothing
        port = silent.getsockname()[1]
        store = SessionStore(f'postgresql://app:secret@127.0.0.1:{port}/app?connect_timeout=1')
        try:
            # asyncpg's own default would wait 60 seconds per try; the URL's second is what ends it.
            with pytest.raises(StoreUnavailable, match='TimeoutError'):
                await asyncio.wait_for(store.session('s'), 30)
        finally:
            await store.close()


@pytest.mark.slow
async def test_tls_as_the_url_asks_against_a_server_with_a_certificate_of_its_own(
    server: OwnServer, tmp_path: Path
) -> None:
    authority, stranger = Authority.make(tmp_path, 'test-ca'), Authority.make(tmp_path, 'other-ca')
    issued = authority.issue('server', ('127.0.0.1', 'localhost'))
    client = authority.issue('postgres')  # a client certificate for the user the store connects as
    for source, name in (
        (issued.certificate, 'server.crt'),
        (issued.key, 'server.key'),
        (authority.certificate, 'ca.crt'),
    ):
        shutil.copy(source, server.data / name)
        server.own(server.data / name)
    plain, certified = fresh_database(server.url), fresh_database(server.url)
    server.allow_first(f'hostssl {make_url(certified).database} all 127.0.0.1/32 scram-sha-256 clientcert=verify-ca')
    server.configure(ssl='on', ssl_cert_file='server.crt', ssl_key_file='server.key', ssl_ca_file='ca.crt')

    root = f'sslrootcert={authority.certificate}'
    assert (await connected(f'{plain}?sslmode=require'))['ssl'] == 'true'
    assert (await connected(f'{plain}?sslmode=verify-ca&{root}'))['ssl'] == 'true'
    assert (await connected(f'{plain}?sslmode=verify-full&{root}'))['ssl'] == 'true'
    assert (await connected(f'{plain}?sslmode=disable'))['ssl'] == 'false'
    unverified = await refusal(f'{plain}?sslmode=verify-full&sslrootcert={stranger.certificate}')
    assert unverified.reason == 'tls' and 'certificate verify failed' in str(unverified)
    assert 'give the CA certificate that signed it as sslrootcert=PATH' in str(unverified)

    # A database that asks for a client certificate: given, it connects; left out, the server refuses.
    cert = f'sslcert={client.certificate}&sslkey={client.key}'
    assert (await connected(f'{certified}?sslmode=verify-full&{root}&{cert}'))['ssl'] == 'true'
    missing = await refusal(f'{certified}?sslmode=verify-full&{root}')
    assert missing.reason == 'authentication' and 'certificate' in str(missing)

    ok(await command(f'{plain}?sslmode=verify-full&{root}', 'sessions'))
    for args in COMMANDS:
        fails(await command(f'{plain}?sslmode=verify-full&sslrootcert={stranger.certificate}', *args), 'refused', 'TLS')


@pytest.mark.slow
async def test_a_server_with_every_connection_slot_taken_is_unavailable_until_one_frees_up(server: OwnServer) -> None:
    url = fresh_database(server.url)
    server.configure(max_connections='6')
    held = []
    with pytest.raises(asyncpg.TooManyConnectionsError):
        for _ in range(10):
            held.append(await asyncpg.connect(dsn(url)))
    store = SessionStore(url)
    try:
        with pytest.raises(StoreUnavailable, match=r'too many clients.*Every connection slot of the server is taken'):
            await store.session('s')
        line = fails(await command(url, 'sessions'), 'too many clients', 'max_connections')
        assert 'Traceback' not in line
        for connection in held[:2]:  # the store's two pools take one connection each
            await connection.close()
        session = await store.session('s')
        await session.run(Agent(TestModel()), 'once a slot is free')
        assert len(await store.history('s', limit=None)) == 2
    finally:
        await store.close()
        for connection in held[2:]:
            await connection.close()


@pytest.mark.slow
async def test_a_server_shutting_down_is_unavailable_and_the_store_works_once_it_is_back(server: OwnServer) -> None:
    url = fresh_database(server.url)
    holder = await asyncpg.connect(dsn(url))  # a smart shutdown waits for every session to end
    stopping = asyncio.create_task(asyncio.to_thread(server.stop, 'smart'))
    while True:  # until the server turns new connections away
        try:
            await (await asyncpg.connect(dsn(url))).close()
        except asyncpg.CannotConnectNowError:
            break
        await asyncio.sleep(0.05)
    store = SessionStore(url)
    try:
        with pytest.raises(StoreUnavailable, match=r'shutting down.*retry once the server is back'):
            await store.session('s')
        await holder.close()
        await stopping
        await asyncio.to_thread(server.start)
        session = await store.session('s')
        await session.run(Agent(TestModel()), 'back')
        assert len(await store.history('s', limit=None)) == 2
    finally:
        await store.close()


@pytest.mark.slow
@on_postgresql
async def test_a_transaction_pooler_the_store_was_not_told_about_is_named_in_the_error(
    db_url: str, pooler: Any
) -> None:
    through = make_url(pooler(db_url))
    forgotten = through.difference_update_query([POOLER_PARAMETER]).render_as_string(hide_password=False)
    returned: dict[str, list[str]] = {}
    failures: list[BaseException] = []

    async def chat(store: SessionStore, name: str) -> None:
        returned[name] = []
        try:
            session = await store.session(name)
            for turn in range(4):
                await session.run(Agent(TestModel()), f'{name}-{turn}')
                returned[name].append(f'{name}-{turn}')
        except Exception as error:
            failures.append(error)

    async with SessionStore(forgotten, migrate=False) as store:
        await asyncio.gather(*(chat(store, f's{n}') for n in range(8)))
    assert failures, 'eight sessions at once through PgBouncer met no server connection but their own'
    for error in failures:
        assert isinstance(error, ServerRefused) and error.reason == 'transaction_pooler', repr(error)
        assert 'transaction_pooler=True' in str(error) and '?transaction_pooler=true' in str(error)
    # Nothing half-stored: each session holds exactly the runs that returned.
    async with SessionStore(db_url) as store:
        for name, stored in returned.items():
            assert (await prompts(store, name) if stored else []) == stored
    async with SessionStore(through.render_as_string(hide_password=False)) as store:  # told: every run works
        failures.clear()
        await asyncio.gather(*(chat(store, f'told{n}') for n in range(8)))
        assert failures == []
    # PgBouncer takes no `options`: the store says where to put them instead.
    refused = await refusal(through.update_query_dict({'options': '-csearch_path=chats'}).render_as_string(False))
    assert refused.reason == 'startup_parameter' and 'ALTER ROLE' in str(refused)


@pytest.mark.slow
@on_postgresql
async def test_an_open_that_may_not_migrate_waits_for_a_migration_under_way_then_opens(
    new_database: NewDatabase,
) -> None:
    empty_db_url = new_database(empty=True)
    engine = create_async_engine(empty_db_url)
    try:
        # Another process's migration, held open under the migration lock with the schema made but not committed.
        async with schema._migrating(engine) as migrating:
            await migrating.run_sync(schema._upgrade)
            opening = asyncio.create_task(SessionStore(empty_db_url, migrate=False).__aenter__())
            await asyncio.sleep(1.0)
            assert not opening.done(), opening.exception() if opening.done() else None
        store = await opening
        await (await store.session('s')).run(Agent(TestModel()), 'after the migration')
        await store.close()
    finally:
        await engine.dispose()
    # Before any migration, a store that may not migrate still says the database is empty.
    with pytest.raises(SchemaMismatch, match='is empty'):
        async with SessionStore(new_database(empty=True), migrate=False):
            pass


@pytest.mark.slow
@on_postgresql
async def test_a_store_migrates_and_runs_in_a_schema_other_than_public(empty_db_url: str) -> None:
    engine = create_async_engine(empty_db_url)
    async with engine.begin() as connection:
        await connection.execute(text('CREATE SCHEMA chats'))
    url = f'{empty_db_url}?options=-csearch_path%3Dchats'
    assert (await connected(url))['schema'] == 'chats'
    async with SessionStore(url, migrate=False) as store:
        assert [hit.session_id for hit in await store.search('hello')] == ['c']
    async with engine.connect() as connection:
        tables = await connection.run_sync(
            lambda sync: {s: inspect(sync).get_table_names(s) for s in ('chats', 'public')}
        )
    assert {'alembic_version', 'sessions', 'messages', 'summaries'} <= set(tables['chats']) and tables['public'] == []
    await engine.dispose()
    with pytest.raises(SchemaMismatch, match='is empty'):  # the same database without the schema: nothing there
        async with SessionStore(empty_db_url, migrate=False):
            pass
