"""A database written by the last release opens unchanged: the same archive, summary chains and windows.

`fixtures/release-0.1.db` was written by session-store 0.1 (schema revision 0003) and
`fixtures/release-0.1.json` holds what 0.1 itself read back from it; `fixtures/make_release_0_1.py`
made both.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.function import FunctionModel
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from processors import SummarizationProcessor
from session_store import SessionExport, SessionStore
from session_store._db.schema import _config, head_revision
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, scripted_agent
from testkit.templates import NewDatabase

FIXTURES = Path(__file__).parent / 'fixtures'
EXPECTED: dict[str, Any] = json.loads((FIXTURES / 'release-0.1.json').read_text())


def summarizing() -> SummarizationProcessor:
    """The processor 0.1 ran the `summarized` session with."""
    return SummarizationProcessor(FunctionModel(RecordingSummarizer()), trigger=('messages', 20), keep=('messages', 6))


def _reflect(connection: sa.Connection, name: str) -> sa.Table:
    return sa.Table(name, sa.MetaData(), autoload_with=connection)


async def transplant_release_0_1(url: str) -> None:
    """Make a PostgreSQL database at 0.1's schema revision holding the fixture's rows, as 0.1 would have."""
    engine = create_async_engine(url)
    source = sa.create_engine(f'sqlite:///{FIXTURES / "release-0.1.db"}')
    tables = ('sessions', 'messages', 'summaries')
    reflected = sa.MetaData()
    reflected.reflect(source, only=tables)
    with source.connect() as connection:
        rows = {
            name: [
                {key: value.replace(tzinfo=UTC) if isinstance(value, datetime) else value for key, value in row.items()}
                for row in connection.execute(reflected.tables[name].select().order_by(sa.column('pk'))).mappings()
            ]
            for name in tables
        }
    source.dispose()
    try:
        async with engine.begin() as connection:
            await connection.run_sync(lambda sync: command.upgrade(_config(sync), '0003'))
            for name in tables:
                target = await connection.run_sync(_reflect, name)
                await connection.execute(target.insert(), rows[name])
                await connection.execute(
                    sa.text(f"SELECT setval(pg_get_serial_sequence('{name}', 'pk'), (SELECT max(pk) FROM {name}))")
                )
    finally:
        await engine.dispose()


@pytest.fixture
async def release_db(new_database: NewDatabase) -> str:
    """The 0.1 database on the backend under test, upgraded to this version's schema as `migrate` would."""
    url = new_database(empty=True)
    if url.startswith('sqlite'):
        shutil.copy(FIXTURES / 'release-0.1.db', str(make_url(url).database))
    else:
        await transplant_release_0_1(url)
    store = SessionStore(url, migrate=False)
    await store.migrate()
    await store.close()
    return url


async def test_a_release_0_1_database_reads_back_as_it_was_written(release_db: str) -> None:
    async with SessionStore(release_db) as store:
        async with store.engine.connect() as connection:
            assert await connection.scalar(text('SELECT version_num FROM alembic_version')) == head_revision()
        assert sorted(info.session_id for info in await store.sessions()) == sorted(EXPECTED)
        for session_id, expected in EXPECTED.items():
            history = await store.history(session_id, scope=expected['scope'])
            assert json.loads(ModelMessagesTypeAdapter.dump_json(history)) == expected['history'], session_id
            chain = [
                {'covers_from': s.covers_from, 'covers_to': s.covers_to, 'text': s.text}
                for s in await store.summaries(session_id)
            ]
            assert chain == expected['summaries'], session_id
            if expected['window'] is not None:
                processor = summarizing() if expected['summaries'] else None
                session = await store.session(session_id, scope=expected['scope'], processor=processor)
                window = json.loads(ModelMessagesTypeAdapter.dump_json(await session.context()))
                assert window == expected['window'], session_id


async def test_a_release_0_1_session_carries_on_from_its_stored_summary(release_db: str) -> None:
    async with SessionStore(release_db) as store:
        summarizer = RecordingSummarizer()
        processor = SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 20), keep=('messages', 6))
        session = await store.session('summarized', scope='user-7', processor=processor)
        agent = scripted_agent(ParallelToolAssistant())
        for turn in range(12, 16):
            await session.run(agent, f'Turn M{turn} of summarized')
        chain = await store.summaries('summarized')
        assert len(chain) > len(EXPECTED['summarized']['summaries'])
        # The first new summary extended the last one 0.1 stored, rather than starting over.
        last_stored = EXPECTED['summarized']['summaries'][-1]
        assert chain[len(EXPECTED['summarized']['summaries'])].covers_from == last_stored['covers_to']
        assert last_stored['text'] in summarizer.inputs[0]
        # The full-text index still holds 0.1's rows and takes the new ones.
        for marker in ('M3', 'M14'):
            hits = await store.search(marker, session_id='summarized', match='words')
            assert hits and all(marker in hit.text for hit in hits), marker
        document = await store.export('summarized', scope='user-7')
    assert SessionExport.from_json_lines(document.to_json_lines()) == document


async def test_the_upgrade_and_its_downgrade_keep_every_summary_chain_linked(release_db: str) -> None:
    async def links() -> list[tuple[int, int | None]]:
        async with store.engine.connect() as connection:
            rows = await connection.execute(text('SELECT pk, previous_pk FROM summaries ORDER BY pk'))
            return [(pk, previous) for pk, previous in rows]

    store = SessionStore(release_db)
    upgraded = await links()
    assert upgraded == [(1, None), (2, 1)], 'the chain of the 0.1 session, as 0.1 linked it'
    async with store.engine.begin() as connection:
        await connection.run_sync(lambda sync: command.downgrade(_config(sync), '0003'))
    assert await links() == upgraded
    await store.close()
