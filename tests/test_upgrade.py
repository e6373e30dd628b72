"""A database written by the last release opens unchanged: the same archive, summary chains and windows.

`fixtures/release-0.1.db` was written by session-store 0.1 (schema revision 0003) and
`fixtures/release-0.1.json` holds what 0.1 itself read back from it; `fixtures/make_release_0_1.py`
made both. Its requests, and those of a database at revision 0004, get the UI message ids their prompts
carry in a column of their own (revision 0005) from `session-store migrate`.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest
from pydantic_ai.models.function import FunctionModel
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from processors import SummarizationProcessor
from session_store import SchemaMismatch, SessionExport, SessionStore
from session_store._codec import dump_message, load_message
from session_store._db.schema import _config, head_revision, migrations_dir
from session_store._db.sealing import Sealer
from session_store._ui_ids import with_ui_message_id
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, scripted_agent
from testkit.templates import NewDatabase
from tests.test_cli import cli, fails, ok
from tests.test_encryption import keys
from tests.test_ui_message_ids import CHAT_COLUMN, chat, check_chat_found, column, found, say

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


def _dumped(messages: list[Any]) -> Any:
    """`messages` as the installed pydantic-ai dumps them: 0.1's reading of its history was dumped by the
    pydantic-ai of its day, and a later one writes the fields it added (at their defaults) beside them."""
    return json.loads(ModelMessagesTypeAdapter.dump_json(messages))


async def test_a_release_0_1_database_reads_back_as_it_was_written(release_db: str) -> None:
    async with SessionStore(release_db) as store:
        async with store.engine.connect() as connection:
            assert await connection.scalar(text('SELECT version_num FROM alembic_version')) == head_revision()
        assert sorted(info.session_id for info in await store.sessions()) == sorted(EXPECTED)
        for session_id, expected in EXPECTED.items():
            history = await store.history(session_id, scope=expected['scope'])
            assert _dumped(history) == _dumped(ModelMessagesTypeAdapter.validate_python(expected['history'])), (
                session_id
            )
            chain = [
                {'covers_from': s.covers_from, 'covers_to': s.covers_to, 'text': s.text}
                for s in await store.summaries(session_id)
            ]
            assert chain == expected['summaries'], session_id
            if expected['window'] is not None:
                processor = summarizing() if expected['summaries'] else None
                session = await store.session(session_id, scope=expected['scope'], processor=processor)
                window = _dumped(await session.context())
                assert window == _dumped(ModelMessagesTypeAdapter.validate_python(expected['window'])), session_id


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


# UI message ids (revision 0005)

PLANTED = {('short', 0): 'r01-prompt', ('short', 2): 'r01-tools', ('saved', 4): 'r01-sealed'}
"""UI ids given to requests of the 0.1 database, as 0.1 stored what a UI adapter handed it: a prompt's, a request
holding only tool returns (no prompt: never in the column), and a prompt sealed under `keys('k1')`."""


async def plant_ui_ids(url: str) -> None:
    """Give the requests `PLANTED` names their UI ids, in the payload only (as a store before 0005 kept them)."""
    engine = create_async_engine(url)
    sealer = Sealer(keys('k1'))
    select_row = text(
        'SELECT m.pk, m.session_pk, m.payload FROM messages m JOIN sessions s ON s.pk = m.session_pk '
        'WHERE s.session_id = :id AND m.position = :position'
    )
    try:
        async with engine.begin() as connection:
            for (session_id, position), ui_id in PLANTED.items():
                pk, session_pk, payload = (
                    await connection.execute(select_row, {'id': session_id, 'position': position})
                ).one()
                request = load_message(payload)
                assert isinstance(request, ModelRequest)
                planted = dump_message(with_ui_message_id(request, ui_id))
                if ui_id == 'r01-sealed':
                    planted = sealer.seal(session_pk, 'message', planted)
                await connection.execute(
                    text('UPDATE messages SET payload = :payload WHERE pk = :pk'), {'payload': planted, 'pk': pk}
                )
    finally:
        await engine.dispose()


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same migration
def test_session_store_migrate_gives_a_release_0_1_database_the_ui_ids_of_its_clear_prompts(
    new_database: NewDatabase, tmp_path: Path
) -> None:
    url = new_database(empty=True)
    if url.startswith('sqlite'):
        shutil.copy(FIXTURES / 'release-0.1.db', str(make_url(url).database))
    else:
        asyncio.run(transplant_release_0_1(url))
    asyncio.run(plant_ui_ids(url))
    head = head_revision()
    fails(cli('sessions', db=url, cwd=tmp_path), f'at schema revision 0003, older than {head}', 'session-store migrate')
    assert f'from schema revision 0003 to {head}' in ok(cli('migrate', db=url, cwd=tmp_path))
    assert 'nothing to do' in ok(cli('migrate', db=url, cwd=tmp_path))
    assert all(session_id in ok(cli('sessions', db=url, cwd=tmp_path)) for session_id in EXPECTED)
    asyncio.run(_check_release_0_1_ui_ids(url))


async def _check_release_0_1_ui_ids(url: str) -> None:
    async with SessionStore(url, encryption=keys('k1')) as store:
        # Only the clear prompt is filled in: not the request without a prompt, not the sealed one, nothing else.
        for session_id, expected in EXPECTED.items():
            filled = [(p, ui_id) for p, (_, ui_id) in enumerate(await column(store, session_id)) if ui_id is not None]
            assert filled == ([(0, 'r01-prompt')] if session_id == 'short' else []), session_id
            history = await store.history(session_id, limit=None)
            assert len(history) == len(expected['history']), session_id
        [hit] = await found(store, 'short', 'r01-prompt')
        assert (hit.position, hit.prompt, hit.ui_id) == (0, 'Turn M0 of short', 'r01-prompt')
        assert await found(store, 'short', 'r01-tools') == []
        # The sealed prompt is found by its entry id (decoded with the key), and by its UI id once a rekey made it.
        assert await found(store, 'saved', 'r01-sealed') == []
        record = await store.conversations.read_record('saved')
        assert record is not None and record.head_id is not None
        sealed_entry = (await store.conversations.read_history(record.head_id))[4]
        [by_entry] = await found(store, 'saved', sealed_entry.id)
        assert (by_entry.position, by_entry.ui_id) == (4, 'r01-sealed')
    async with SessionStore(url, encryption=keys('k2', 'k1')) as rotated:
        await rotated.rekey()
        assert await found(rotated, 'saved', 'r01-sealed') == [by_entry]
        # The old session carries on through both doors, and its new prompts are found by their UI ids.
        agent = scripted_agent(ParallelToolAssistant())
        await say(rotated, 'short', 'r01-next', 'Turn S9 from a front end', agent)
        await (await rotated.session('short', scope='user-8')).run(agent, 'Turn S10')
        [next_hit] = await found(rotated, 'short', 'r01-next')
        assert (next_hit.position, next_hit.prompt) == (8, 'Turn S9 from a front end')
        assert len(await rotated.history('short', limit=None)) == 16


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same migration
def test_session_store_migrate_backfills_a_database_at_revision_0004(new_database: NewDatabase, tmp_path: Path) -> None:
    url = new_database()
    chat(url)  # clear: a front end's conversation c1, with a regenerate and an edit
    before = asyncio.run(_sealed_session_then_downgrade(url))
    head = head_revision()
    fails(cli('sessions', db=url, cwd=tmp_path), f'at schema revision 0004, older than {head}', 'session-store migrate')
    assert f'from schema revision 0004 to {head}' in ok(cli('migrate', db=url, cwd=tmp_path))
    asyncio.run(_check_0004_backfilled(url, before))


async def _sealed_session_then_downgrade(url: str) -> list[tuple[str, str | None]]:
    """Add an encrypted session beside `chat`'s clear one, then take the database back to revision 0004; the
    column as it was before."""
    async with SessionStore(url, encryption=keys('k1')) as store:
        agent = scripted_agent(ParallelToolAssistant())
        for turn in range(2):
            await say(store, 'sealed', f's{turn}', f'Turn Z{turn}', agent)
        before = await column(store)
        async with store.engine.begin() as connection:
            await connection.run_sync(lambda sync: command.downgrade(_config(sync), '0004'))
            assert await connection.scalar(text('SELECT version_num FROM alembic_version')) == '0004'
            columns = await connection.run_sync(
                lambda sync: [c['name'] for c in sa.inspect(sync).get_columns('messages')]
            )
            indexes = await connection.run_sync(
                lambda sync: [i['name'] for i in sa.inspect(sync).get_indexes('messages')]
            )
    assert 'ui_message_id' not in columns and 'ix_messages_session_ui_id' not in indexes
    assert 'payload' in columns
    return before


async def _check_0004_backfilled(url: str, before: list[tuple[str, str | None]]) -> None:
    async with SessionStore(url, encryption=keys('k1')) as store:
        async with store.engine.connect() as connection:
            indexes = await connection.run_sync(lambda sync: sa.inspect(sync).get_indexes('messages'))
        assert {'name': 'ix_messages_ui_id', 'column_names': ['session_pk', 'ui_message_id']} in [
            {'name': i['name'], 'column_names': i['column_names']} for i in indexes
        ]
        after = await column(store)
        # The clear rows hold again exactly what the store wrote; the sealed ones are left for a rekey.
        assert after[: len(CHAT_COLUMN)] == before[: len(CHAT_COLUMN)] == CHAT_COLUMN
        assert [ui_id for _, ui_id in after[len(CHAT_COLUMN) :]] == [None] * (len(before) - len(CHAT_COLUMN))
        assert [ui_id is None for _, ui_id in before[len(CHAT_COLUMN) :]] == [False, True, True, True] * 2
        await check_chat_found(store)
        assert await found(store, 'sealed', 's1') == []
        agent = scripted_agent(ParallelToolAssistant())
        await say(store, 'c1', 'u9', 'Turn C9', agent)
        assert [(h.position, h.prompt) for h in await found(store, 'c1', 'u9')] == [(2, 'Turn C9')]
    async with SessionStore(url, encryption=keys('k2', 'k1')) as rotated:
        await rotated.rekey()
        assert [(h.position, h.prompt, h.ui_id) for h in await found(rotated, 'sealed', 's1')] == [(4, 'Turn Z1', 's1')]
        await check_chat_found(rotated)


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same migrate
def test_rows_an_older_release_writes_during_a_rollout_are_filled_in_by_the_next_migrate(
    new_database: NewDatabase, tmp_path: Path
) -> None:
    url = new_database()
    chat(url)
    asyncio.run(_as_an_older_release_left_it(url))
    assert 'nothing to do' in ok(cli('migrate', db=url, cwd=tmp_path))
    asyncio.run(_check_filled_in(url))


async def _as_an_older_release_left_it(url: str) -> None:
    """The UI ids and their index as they are after a rollout to 0005: prompts a 0004 process went on storing hold no
    id in the column, and the index is missing, as a `migrate` stopped before building it leaves it."""
    async with SessionStore(url) as store:
        async with store.engine.begin() as connection:
            await connection.execute(text('UPDATE messages SET ui_message_id = NULL'))
            await connection.execute(text('DROP INDEX ix_messages_ui_id'))
        assert [ui_id for _, ui_id in await column(store)] == [None] * len(CHAT_COLUMN)
        assert await found(store, 'c1', 'u1') == []


async def _check_filled_in(url: str) -> None:
    async with SessionStore(url) as store:
        assert await column(store) == CHAT_COLUMN
        await check_chat_found(store)
        async with store.engine.connect() as connection:
            indexes = await connection.run_sync(lambda sync: sa.inspect(sync).get_indexes('messages'))
        assert 'ix_messages_ui_id' in [i['name'] for i in indexes]


# Conversation titles (revision 0006), and the compatibility stamp


async def _at_revision_0005_with_metadata(url: str) -> None:
    """The 0.1 database taken to revision 0005 (what the release before titles left), one session given metadata."""
    if url.startswith('sqlite'):
        shutil.copy(FIXTURES / 'release-0.1.db', str(make_url(url).database))
    else:
        await transplant_release_0_1(url)
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(lambda sync: command.upgrade(_config(sync), '0005'))
            await connection.execute(
                text("UPDATE sessions SET metadata = :m WHERE session_id = 'short'"), {'m': '{"customer": "C-7"}'}
            )
    finally:
        await engine.dispose()


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same migration
def test_a_database_at_revision_0005_opens_after_the_upgrade_and_takes_titles(
    new_database: NewDatabase, tmp_path: Path
) -> None:
    url = new_database(empty=True)
    asyncio.run(_at_revision_0005_with_metadata(url))
    head = head_revision()
    fails(cli('sessions', db=url, cwd=tmp_path), f'at schema revision 0005, older than {head}', 'session-store migrate')
    assert f'from schema revision 0005 to {head}' in ok(cli('migrate', db=url, cwd=tmp_path))
    asyncio.run(_check_0005_upgraded(url))


async def _check_0005_upgraded(url: str) -> None:
    async with SessionStore(url) as store:
        infos = {info.session_id: info for info in await store.sessions()}
        assert sorted(infos) == sorted(EXPECTED)
        assert {(i.title, str(i.metadata)) for i in infos.values()} == {(None, '{}'), (None, "{'customer': 'C-7'}")}
        record = await store.conversations.read_record('short')
        assert record is not None and (record.title, record.metadata) == (None, {'customer': 'C-7'})
        # Its sessions carry on through both doors, and take a title.
        titled = await store.conversations.update('short', title='Order M0', expected_title=None)
        assert (titled.title, titled.metadata) == ('Order M0', {'customer': 'C-7'})
        agent = scripted_agent(ParallelToolAssistant())
        await (await store.session('short', scope='user-8')).run(agent, 'Turn S9')
        assert [(i.title, i.metadata) for i in await store.sessions() if i.session_id == 'short'] == [
            ('Order M0', {'customer': 'C-7'})
        ]
        # The downgrade takes the column and the stamp away again, and the upgrade gives them back.
        async with store.engine.begin() as connection:
            await connection.run_sync(lambda sync: command.downgrade(_config(sync), '0005'))
            tables = await connection.run_sync(lambda sync: sa.inspect(sync).get_table_names())
            columns = await connection.run_sync(
                lambda sync: [c['name'] for c in sa.inspect(sync).get_columns('sessions')]
            )
            assert 'schema_compatibility' not in tables and 'title' not in columns and 'metadata' in columns
            await connection.run_sync(lambda sync: command.upgrade(_config(sync), 'head'))
    async with SessionStore(url) as store:
        assert (await store.conversations.update('short', title='Again')).metadata == {'customer': 'C-7'}


LATER_REVISION = '''"""A later release's additive revision, for the tests: a nullable column{what}."""

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('sessions', sa.Column('later_release_column', sa.String(64), nullable=True))
    {stamp}


def downgrade() -> None:
    op.execute("DELETE FROM schema_compatibility WHERE revision = '0008'")
    op.drop_column('sessions', 'later_release_column')
'''

STAMP_0008 = "op.execute(\"INSERT INTO schema_compatibility (revision, compatible_from) VALUES ('0008', '0007')\")"
"""What an additive revision after 0007 writes: the releases at 0007 on may use a database at it."""


def later_scripts(folder: Path, *, stamped: bool) -> Path:
    """This version's migrations, copied to `folder`, with a later release's revision 0008 after them."""
    scripts = folder / 'migrations'
    shutil.copytree(migrations_dir(), scripts, ignore=shutil.ignore_patterns('__pycache__'))
    what = ', stamped compatible from 0007' if stamped else ', not stamped compatible'
    source = LATER_REVISION.format(what=what, stamp=STAMP_0008 if stamped else 'pass')
    (scripts / 'versions' / '0008_later.py').write_text(source)
    return scripts


async def upgrade_with(url: str, scripts: Path) -> None:
    """Migrate the database at `url` with the alembic scripts in `scripts`, as a later release would."""

    def upgrade(connection: sa.Connection) -> None:
        config = _config(connection)
        config.set_main_option('script_location', str(scripts))
        command.upgrade(config, 'head')

    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(upgrade)
    finally:
        await engine.dispose()


def test_a_later_additive_revision_stamped_compatible_opens_and_works(
    new_database: NewDatabase, tmp_path: Path
) -> None:
    url = new_database()
    asyncio.run(upgrade_with(url, later_scripts(tmp_path, stamped=True)))
    asyncio.run(_check_later_revision_works(url))
    said = ok(cli('migrate', db=url, cwd=tmp_path))
    assert 'schema revision 0008' in said and 'nothing to do' in said
    assert 'c1' in ok(cli('sessions', db=url, cwd=tmp_path))


async def _check_later_revision_works(url: str) -> None:
    agent = scripted_agent(ParallelToolAssistant())
    async with SessionStore(url) as store:
        async with store.engine.connect() as connection:
            assert await connection.scalar(text('SELECT version_num FROM alembic_version')) == '0008'
        session = await store.session('s1', scope='team')
        await session.run(agent, 'Turn M0')
        conversation = await store.conversations.load('c1') or Conversation(conversation_id='c1')
        await store.conversations.save(await agent.run('Turn C0', conversation=conversation))
        assert (await store.conversations.update('c1', title='Later', expected_title=None)).title == 'Later'
        loaded = await store.conversations.load('c1')
        assert loaded is not None and len(loaded.messages) == 4
        assert [len(await store.history(s)) for s in ('s1', 'c1')] == [4, 4]
        # Migrating is nothing to do: the database is newer than this version, and safe for it.
        assert await store.migrate() == '0008'
        async with store.engine.connect() as connection:
            assert await connection.scalar(text('SELECT version_num FROM alembic_version')) == '0008'
            later = await connection.scalar(text('SELECT count(later_release_column) FROM sessions'))
            assert later == 0, "this version leaves the later release's column as it is"


def test_a_store_serving_while_a_later_additive_revision_migrates_carries_on(
    new_database: NewDatabase, tmp_path: Path
) -> None:
    url = new_database()
    asyncio.run(_serve_through_the_migration(url, later_scripts(tmp_path, stamped=True)))
    asyncio.run(_check_later_revision_works(url))  # and a store opened afterwards, as a restarted process would


async def _serve_through_the_migration(url: str, scripts: Path) -> None:
    """Runs turns on one session before, while and after the later release migrates, without reopening the store."""
    agent = scripted_agent(ParallelToolAssistant())
    migrated = asyncio.Event()
    async with SessionStore(url) as store:
        session = await store.session('serving')
        await session.run(agent, 'Turn M0')

        async def serve() -> int:
            runs, after = 1, 0
            while after < 3:
                await session.run(agent, f'Turn M{runs}')
                runs += 1
                after += migrated.is_set()
            return runs

        serving = asyncio.create_task(serve())
        await upgrade_with(url, scripts)
        migrated.set()
        runs = await serving
        assert len(await store.history('serving', limit=None)) == 4 * runs
        async with store.engine.connect() as connection:
            assert await connection.scalar(text('SELECT version_num FROM alembic_version')) == '0008'


def test_a_later_revision_not_stamped_compatible_is_refused(new_database: NewDatabase, tmp_path: Path) -> None:
    url = new_database()
    asyncio.run(upgrade_with(url, later_scripts(tmp_path, stamped=False)))

    async def open_it() -> None:
        async with SessionStore(url) as store:
            await store.sessions()

    async def migrate_it() -> None:
        store = SessionStore(url)  # not entered: entering checks the schema, which migrating must not need
        try:
            await store.migrate()
        finally:
            await store.close()

    # Opening it and migrating it (from Python too, not only `session-store migrate`) refuse it in the same words.
    for attempt in (open_it, migrate_it):
        with pytest.raises(SchemaMismatch, match=r'revision 0008, which this version .* a newer session-store wrote'):
            asyncio.run(attempt())
    fails(cli('sessions', db=url, cwd=tmp_path), '0008', 'a newer session-store wrote it')
    fails(cli('migrate', db=url, cwd=tmp_path), '0008', 'a newer session-store wrote it')
