"""The two roles `docs/production.md` describes, on a real server: a migrating role that owns the tables, and a
running role holding only the rights the page's `GRANT` statements give. The statements run as the page shows them;
the store, opened as the running role, does everything a running process does, and refuses to migrate."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from session_store import Encryption, SchemaMismatch, ServerRefused, SessionStore
from session_store._db.schema import _config
from testkit.postgres import drop_database, fresh_database, require_postgres, run_async
from tests._markdown import DOCS, markdown_blocks

PAGE = DOCS / 'production.md'


def _grants() -> str:
    """The page's SQL block, as a reader copies it into their client."""
    (block,) = [block for block in markdown_blocks(PAGE) if block.language == 'sql']
    assert 'app_runner' in block.source
    return block.source


async def _execute(url: str, sql: str) -> None:
    import asyncpg  # type: ignore[import-untyped]  # ships no type hints

    parsed = make_url(url)
    connection = await asyncpg.connect(
        user=parsed.username, password=parsed.password, host=parsed.host, port=parsed.port, database=parsed.database
    )
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


def _as(url: str, role: str) -> str:
    return make_url(url).set(username=role, password=role).render_as_string(hide_password=False)


@pytest.fixture
def roles() -> Iterator[tuple[str, str, str]]:
    """A fresh database, with a migrating and a running role of this test's own (roles belong to the whole server,
    so each name is new): its URL as the superuser, as the migrating role, and as the running role."""
    try:
        server = require_postgres()
    except Exception as error:  # no server here outside CI
        pytest.skip(str(error))
    url = fresh_database(server)
    tag = uuid.uuid4().hex[:10]
    migrator, runner = f'app_migrator_{tag}', f'app_runner_{tag}'
    database = make_url(url).database
    run_async(
        lambda: _execute(
            url,
            f"CREATE ROLE {migrator} LOGIN PASSWORD '{migrator}'; CREATE ROLE {runner} LOGIN PASSWORD '{runner}';"
            f'GRANT CONNECT ON DATABASE "{database}" TO {migrator}, {runner};'
            f'GRANT CREATE ON SCHEMA public TO {migrator};',
        )
    )
    try:
        yield url, _as(url, migrator), _as(url, runner)
    finally:
        drop_database(url)
        run_async(lambda: _execute(server, f'DROP ROLE {runner}; DROP ROLE {migrator};'))


def _answering(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = next(p.content for p in messages[-1].parts if isinstance(p, UserPromptPart))
    return ModelResponse(parts=[TextPart(f'answer to {prompt}')])


async def test_the_running_role_does_all_a_process_does_with_the_pages_grants_and_never_migrates(
    roles: tuple[str, str, str],
) -> None:
    _, as_migrator, as_runner = roles
    runner_role = make_url(as_runner).username
    assert runner_role is not None

    # Before the migration, the running role finds an empty database and is told to migrate, not left to.
    with pytest.raises(SchemaMismatch, match=r'is empty\. Make its schema with'):
        async with SessionStore(as_runner, migrate=False):
            pass

    async with SessionStore(as_migrator) as owner:
        await owner.migrate()
    await _execute(as_migrator, _grants().replace('app_runner', runner_role))

    agent = Agent(FunctionModel(_answering))
    keys = Encryption(keys={'k1': b'\x01' * 32})
    async with SessionStore(as_runner, migrate=False, encryption=keys) as store:
        session = await store.session('s')
        for turn in range(3):
            await session.run(agent, f'order {turn}')
        assert [hit.position for hit in await store.search('order 2')] == [4, 5]  # the prompt, its answer
        await session.rewind(2)  # a branch: a new segment
        await session.run(agent, 'order 9')
        await store.set_metadata('s', {'user': 'bob'})
        await store.fork('s', at=2, new_session_id='t')
        await (await store.session('old', scope='archive')).run(agent, 'order 7')
        assert sorted(info.session_id for info in await store.sessions()) == ['old', 's', 't']
        assert len(await store.history('s', limit=None)) == 4
        soon = datetime.now(UTC) + timedelta(minutes=1)
        assert (await store.prune(older_than=soon, scope='archive')).sessions == ['old']
        assert sorted(info.session_id for info in await store.sessions()) == ['s', 't']

    # Without a right (here, on the keys' sequences), the store says what is missing, and stores nothing.
    await _execute(as_migrator, f'REVOKE USAGE ON ALL SEQUENCES IN SCHEMA public FROM {runner_role}')
    async with SessionStore(as_runner, migrate=False, encryption=keys) as store:
        with pytest.raises(ServerRefused, match='lacks a right on its tables') as refused:
            await store.session('new')
        assert refused.value.reason == 'privilege'
        assert 'new' not in [info.session_id for info in await store.sessions()]
    await _execute(as_migrator, f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {runner_role}')

    rekeyed = Encryption(keys={'k2': b'\x02' * 32, 'k1': b'\x01' * 32})
    async with SessionStore(as_runner, migrate=False, encryption=rekeyed) as store:
        assert (await store.rekey()).messages == 8 + 2  # every branch of s, and the fork's copies
        assert (await store.delete('s')).sessions == ['s']
        assert [info.session_id for info in await store.sessions()] == ['t']


async def test_a_running_role_granted_table_by_table_opens_after_the_owner_migrates(
    roles: tuple[str, str, str],
) -> None:
    """A deployment that granted the running role the tables it used one by one, before the schema had stamps and
    without default privileges: once the owner migrates, the role still opens the store, since whoever may read the
    schema revision may read the stamps the migration adds."""
    _, as_migrator, as_runner = roles
    runner_role = make_url(as_runner).username
    await _migrate(as_migrator, '0005')
    await _execute(
        as_migrator,
        f'GRANT USAGE ON SCHEMA public TO {runner_role}; GRANT SELECT ON alembic_version TO {runner_role};'
        f'GRANT SELECT, INSERT, UPDATE, DELETE ON sessions, segments, messages, summaries'
        f' TO {runner_role}; GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {runner_role};',
    )
    await _migrate(as_migrator, 'head')
    async with SessionStore(as_runner, migrate=False) as store:
        await (await store.session('s')).run(Agent(FunctionModel(_answering)), 'order 1')
        assert len(await store.history('s')) == 2


async def _migrate(url: str, to: str) -> None:
    """Take the database at `url` to revision `to`, as the role `url` logs in as."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(lambda sync: command.upgrade(_config(sync), to))
    finally:
        await engine.dispose()
