"""Deleting for good: a session, a scope's sessions, sessions gone quiet; and nothing of them left in the bytes."""

from __future__ import annotations

import asyncio
import glob
from collections.abc import Callable
from datetime import timedelta

import pytest
from click.testing import CliRunner, Result
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import text, update
from sqlalchemy.ext.asyncio import AsyncSession

from processors import SummarizationProcessor
from session_store import SessionNotFound, SessionStore
from session_store._codec import now
from session_store.cli import main
from session_store.results import Removed
from session_store.rows import SessionRow
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, scripted_agent
from tests._cli import ok

StoreFactory = Callable[..., SessionStore]

SECRET = 'ZEBRA-4417-SECRET'
"""A marker written into a prompt, tool returns, a summary and the session's metadata."""


def summarizing() -> SummarizationProcessor:
    recorder = RecordingSummarizer()

    def repeating(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """Summaries that carry the marker when what they summarize does."""
        text = recorder(messages, info).text or ''
        return ModelResponse(parts=[TextPart(f'{text} ({SECRET})' if SECRET in str(messages) else text)])

    return SummarizationProcessor(FunctionModel(repeating), trigger=('messages', 10), keep=('messages', 4))


async def fill(store: SessionStore, session_id: str, scope: str | None, turns: int, marker: str = SECRET) -> None:
    session = await store.session(session_id, scope=scope)
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(turns):
        await session.run(agent, f'Turn M{turn} about {marker}')


async def database_text(store: SessionStore, db_url: str) -> bytes:
    """Everything the database holds: the SQLite file with its WAL and shared memory, or every PostgreSQL row."""
    if store.engine.dialect.name == 'sqlite':
        path = db_url.split(':///', 1)[1]
        return b''.join(open(name, 'rb').read() for name in sorted(glob.glob(f'{path}*')))
    chunks = []
    async with AsyncSession(store.engine) as db:
        for table in ('sessions', 'segments', 'messages', 'summaries'):
            rows = (await db.execute(text(f'SELECT * FROM {table}'))).all()
            chunks.append(repr(rows).encode())
    return b''.join(chunks)


async def test_deleting_a_scope_removes_all_of_it_down_to_the_bytes(db_url: str, store_factory: StoreFactory) -> None:
    store = store_factory(processor=summarizing())
    await fill(store, 'alice-1', 'alice', 6)
    await fill(store, 'alice-2', 'alice', 3)
    await fill(store, 'bob-1', 'bob', 3, marker='BOB-ONLY')
    session = await store.session('alice-1', scope='alice')
    await session.rewind(8)  # a branch too
    await fill(store, 'alice-1', 'alice', 1)
    assert len(await store.summaries('alice-1')) > 0
    assert SECRET.encode() in await database_text(store, db_url)  # the check below can fail

    removed = await store.delete(scope='alice')
    assert removed.sessions == ['alice-1', 'alice-2']
    assert removed.messages == 24 + 4 + 12 and removed.summaries > 0
    await store.vacuum()

    assert [info.session_id for info in await store.sessions()] == ['bob-1']
    assert await store.search(SECRET) == []
    assert SECRET.encode() not in await database_text(store, db_url)
    assert b'BOB-ONLY' in await database_text(store, db_url)
    with pytest.raises(SessionNotFound):
        await store.history('alice-1')
    # A new session under a deleted id starts empty, whatever this store had cached of the old one.
    assert await (await store.session('alice-1', scope='alice')).context() == []


async def test_delete_needs_a_session_or_a_scope(store_factory: StoreFactory) -> None:
    store = store_factory()
    await fill(store, 'kept', None, 1)
    with pytest.raises(ValueError, match='needs a session_id, or a scope'):
        await store.delete()
    with pytest.raises(SessionNotFound):
        await store.delete('nosuch')
    assert await store.delete(scope='nobody') == Removed(sessions=[], messages=0, summaries=0)
    assert len(await store.sessions()) == 1


async def test_prune_removes_only_sessions_gone_quiet(db_url: str, store_factory: StoreFactory) -> None:
    store = store_factory()
    await fill(store, 'old', 'team', 2)
    await fill(store, 'old-elsewhere', 'other', 2)
    await fill(store, 'recent', 'team', 2)
    async with AsyncSession(store.engine) as db, db.begin():
        await db.execute(
            update(SessionRow)
            .where(SessionRow.session_id.in_(['old', 'old-elsewhere']))
            .values(updated_at=now() - timedelta(days=100))
        )

    planned = await store.prune(older_than=timedelta(days=90), scope='team', dry_run=True)
    assert planned == Removed(sessions=['old'], messages=8, summaries=0)
    assert len(await store.sessions()) == 3  # a dry run deletes nothing

    assert (await store.prune(older_than=timedelta(days=90), scope='team')).sessions == ['old']
    assert sorted(info.session_id for info in await store.sessions()) == ['old-elsewhere', 'recent']
    assert (await store.prune(older_than=now() - timedelta(days=1))).sessions == ['old-elsewhere']
    for bad in (timedelta(0), now().replace(tzinfo=None), '90d'):
        with pytest.raises(ValueError, match='older_than'):
            await store.prune(older_than=bad)  # type: ignore[arg-type]


@pytest.mark.usefixtures('wide_console')
def test_the_commands_delete_prune_and_vacuum(db_url: str) -> None:
    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, ['--db', db_url, *args])

    async def setup() -> None:
        async with SessionStore(db_url) as store:
            await fill(store, 'a', 'u1', 2)
            await fill(store, 'b', 'u1', 1)
            await fill(store, 'c', 'u2', 1, marker='KEEP-C')

    async def held() -> tuple[bytes, list[str]]:
        async with SessionStore(db_url) as store:
            return await database_text(store, db_url), [info.session_id for info in await store.sessions()]

    asyncio.run(setup())
    for usage, said in [
        (('delete', '--yes'), 'Name a session ID, or give --scope'),
        (('prune', '--older-than', 'soon'), 'such as 90d'),
    ]:
        refused = invoke(*usage)
        assert refused.exit_code == 2 and said in refused.output, refused.output
    assert 'Would delete 0 sessions' in ok(invoke('prune', '--older-than', '1d', '--dry-run'))
    said = ok(invoke('delete', '--scope', 'u1', '--yes'))
    assert "Deleted 2 sessions ('a', 'b')" in said and '12 messages and 0 summaries' in said
    raw, left = asyncio.run(held())
    assert SECRET.encode() not in raw and b'KEEP-C' in raw and left == ['c']
    said = ok(invoke('delete', 'c', '--yes'))
    assert "Deleted session 'c'" in said and '4 messages and 0 summaries' in said
    raw, left = asyncio.run(held())
    assert b'KEEP-C' not in raw and left == []
    assert "nothing deleted survives in its tables' files" in ok(invoke('vacuum'))
