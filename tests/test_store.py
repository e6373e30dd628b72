"""SessionStore on SQLite and PostgreSQL: schema checks, the archive, summaries, search, scopes, export."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from sqlalchemy import text

from processors import SlidingWindowProcessor, SummarizationProcessor, count_tokens_approximately
from session_store import SchemaMismatch, SessionConflict, SessionNotFound, SessionStore, StoreError
from session_store._db.schema import head_revision
from session_store._history.records import RunRecord
from session_store._history.review import StoredSession, SummaryRecord
from session_store.results import SessionInfo, StoredSummary
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, Stop, scripted_agent

StoreFactory = Callable[..., SessionStore]


def summarizing(summarizer: RecordingSummarizer | None = None) -> SummarizationProcessor:
    return SummarizationProcessor(
        FunctionModel(summarizer or RecordingSummarizer()), trigger=('messages', 20), keep=('messages', 6)
    )


async def converse(store: SessionStore, session_id: str, turns: int, *, scope: str | None = None) -> None:
    session = await store.session(session_id, scope=scope)
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(turns):
        await session.run(agent, f'Turn M{turn} for {session_id}')


async def rows(store: SessionStore) -> dict[str, list[Any]]:
    """Every row of every table, in a stable order."""
    dump = {}
    async with store.engine.connect() as connection:
        for table in ('sessions', 'messages', 'summaries', 'alembic_version'):
            result = await connection.execute(text(f'SELECT * FROM {table} ORDER BY 1'))
            dump[table] = [tuple(row) for row in result]
    return dump


# Schema


async def test_a_new_database_is_migrated_on_first_open(empty_store_factory: StoreFactory) -> None:
    async with empty_store_factory() as store:
        async with store.engine.connect() as connection:
            version = (await connection.execute(text('SELECT version_num FROM alembic_version'))).scalar_one()
        assert version == head_revision()
        assert await store.sessions() == []


async def test_a_database_from_a_newer_release_is_refused(store_factory: StoreFactory) -> None:
    async with store_factory() as store, store.engine.begin() as connection:
        await connection.execute(text("UPDATE alembic_version SET version_num = 'f00dfeed'"))
    with pytest.raises(SchemaMismatch, match=r'f00dfeed.*newer session-store wrote it'):
        async with store_factory():
            pass


async def test_a_foreign_or_unmigrated_database_is_refused_with_what_to_do(
    empty_store_factory: StoreFactory,
) -> None:
    with pytest.raises(SchemaMismatch, match=r'is empty.*store\.migrate\(\)'):
        async with empty_store_factory(migrate=False):
            pass
    store = empty_store_factory(migrate=False)
    await store.migrate()
    assert await store.sessions() == []
    async with store.engine.begin() as connection:
        await connection.execute(text('DROP TABLE alembic_version'))
    with pytest.raises(SchemaMismatch, match='no session-store schema revision'):
        async with empty_store_factory():
            pass


def test_bad_urls_fail_clearly() -> None:
    for neither in ('not a url', 'postgres//db.example.com/app', 'sqlite:/chat.db'):
        with pytest.raises(ValueError, match=r"Not a database URL.*nor the path of a SQLite file.*'\./sessions\.db'"):
            SessionStore(neither)
    with pytest.raises(ValueError, match='runs on sqlite\\+aiosqlite:// or postgresql\\+asyncpg://'):
        SessionStore('mysql://root:secret@localhost/db')
    assert SessionStore('sqlite:///x.db').url.drivername == 'sqlite+aiosqlite'


async def test_a_sqlite_files_path_is_taken_as_that_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / 'data'
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv('HOME', str(tmp_path))
    given: list[str | Path] = ['./chat.db', 'chat.db', '../data/chat.db', '~/data/chat.db', folder / 'chat.db']
    assert {str(SessionStore(path).url) for path in given} == {f'sqlite+aiosqlite:///{folder / "chat.db"}'}
    async with SessionStore('./chat.db') as store:
        await converse(store, 's1', 1)
    monkeypatch.chdir(tmp_path)  # the file, not the working directory, holds it: read back through its URL
    async with SessionStore(f'sqlite+aiosqlite:///{folder / "chat.db"}') as store:
        assert len(await store.history('s1')) == 4
    assert {path.name for path in tmp_path.iterdir()} == {'data'}


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize('bad', ['', 'x' * 256, 'tab\there', 'nul\x00', 42, None])
async def test_session_ids_must_be_printable_and_short(store_factory: StoreFactory, bad: object) -> None:
    async with store_factory() as store:
        with pytest.raises(ValueError, match='session_id must be 1 to 255 printable characters'):
            await store.session(bad)  # type: ignore[arg-type]


# The archive and the run cycle


async def test_runs_are_archived_whole_and_in_order(store_factory: StoreFactory) -> None:
    async with store_factory(processor=summarizing()) as store:
        session = await store.session('s1')
        agent = scripted_agent(ParallelToolAssistant())
        produced: list[ModelMessage] = []
        for turn in range(12):
            produced += (await session.run(agent, f'Turn M{turn}')).new_messages()
        assert await store.history('s1', limit=None) == produced
        assert await store.history('s1', offset=10, limit=5) == produced[10:15]
        assert await store.history('s1', offset=100) == []
        (info,) = await store.sessions()
        assert (info.session_id, info.message_count) == ('s1', 48)
        assert info.usage.requests == 24 and info.summary_count == len(await store.summaries('s1')) >= 2


async def test_a_run_whose_model_raises_leaves_every_row_as_it_was(store_factory: StoreFactory) -> None:
    async with store_factory(processor=summarizing()) as store:
        await converse(store, 's1', 8)
        before = await rows(store)
        session = await store.session('s1')
        with pytest.raises(Stop):
            # The second request fails: tool calls were made and a summary may have been written in memory.
            await session.run(scripted_agent(ParallelToolAssistant(fail_after=2)), 'Turn M99 that fails')
        assert await rows(store) == before


async def test_stream_and_iter_runs_are_stored_too(store_factory: StoreFactory) -> None:
    agent = Agent(TestModel(custom_output_text='the answer'))

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f'{q} found'

    async with store_factory() as store:
        session = await store.session('s1')
        async with session.run_stream(agent, 'streamed') as stream:
            assert await stream.get_output() == 'the answer'
        async with session.iter(agent, 'iterated') as run:
            async for _ in run:
                pass
        assert run.result is not None
        history = await store.history('s1', limit=None)
    assert history == [*stream.new_messages(), *run.result.new_messages()]
    assert len(history) == 6  # the stream called the tool; the second run answered straight away
    assert isinstance(history[-1], ModelResponse) and history[-1].parts == [TextPart('the answer')]


async def test_the_session_owns_its_history() -> None:
    store = SessionStore('sqlite+aiosqlite:///:memory:')
    session = await store.session('s1')
    with pytest.raises(TypeError, match='do not pass message_history='):
        await session.run(scripted_agent(ParallelToolAssistant()), 'hi', message_history=[])
    await store.close()


@pytest.mark.slow_on_postgresql
@pytest.mark.through_pooler
async def test_the_window_is_rebuilt_from_the_summary_and_the_kept_tail(store_factory: StoreFactory) -> None:
    async with store_factory(processor=summarizing()) as store:
        await converse(store, 's1', 15)
        summaries = await store.summaries('s1')
        window = await (await store.session('s1')).context()
        archive = await store.history('s1', limit=None)
    assert [s.index for s in summaries] == list(range(len(summaries)))
    assert summaries[0].covers_from == 0
    assert [s.covers_from for s in summaries[1:]] == [s.covers_to for s in summaries[:-1]]
    assert all(s.usage.requests == 1 and s.tokens > 0 for s in summaries)
    tail_start = summaries[-1].covers_to
    # The summary (with the system prompt) rides in the tail's first request; the rest is the archive's tail.
    assert window[1:] == archive[tail_start + 1 :]
    first = window[0]
    assert isinstance(first, ModelRequest)
    assert [p.part_kind for p in first.parts[:2]] == ['system-prompt', 'compaction']
    assert first.parts[2:] == archive[tail_start].parts


@pytest.mark.through_pooler
async def test_a_stale_writer_gets_a_conflict_and_stores_nothing(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        await converse(store, 's1', 1)
        session = await store.session('s1')
        loaded = await store._runs.load_window('s1', None, session.processor)
        await session.run(scripted_agent(ParallelToolAssistant()), 'Turn M5 first writer')
        before = await rows(store)
        with pytest.raises(SessionConflict, match="Session 's1' changed"):
            await store._runs.store(
                's1',
                loaded,
                RunRecord(
                    messages=[ModelResponse(parts=[TextPart('late')])],
                    tokens=[1],
                    head_end=0,
                    window_start=0,
                    summaries=[],
                    usage=loaded.usage,
                    deferred_tool_requests=None,
                ),
            )
        assert await rows(store) == before


# Review: summaries, search, scopes, delete, export


@pytest.mark.through_pooler
async def test_search_finds_archived_text_and_escapes_wildcards(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        await converse(store, 'alpha', 3)
        await converse(store, 'beta', 3)
        hits = await store.search('M1-r2 found')
        assert {(h.session_id, h.position) for h in hits} == {('alpha', 6), ('beta', 6)}
        assert all('M1-r2 found' in h.text for h in hits)
        assert await store.search('%') == []
        assert await store.search("'; DROP TABLE messages; --") == []
        assert len(await store.history('alpha', limit=None)) == 12


async def test_scopes_isolate_sessions(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        await converse(store, 'mine', 2, scope='user-1')
        await converse(store, 'theirs', 2, scope='user-2')
        assert [s.session_id for s in await store.sessions(scope='user-1')] == ['mine']
        for call in (
            store.history('theirs', scope='user-1'),
            store.summaries('theirs', scope='user-1'),
            store.export('theirs', scope='user-1'),
            store.delete('theirs', scope='user-1'),
        ):
            with pytest.raises(SessionNotFound, match="No session 'theirs' under scope 'user-1'"):
                await call
        with pytest.raises(SessionConflict, match='is already in use as an id') as taken:
            await store.session('theirs', scope='user-1')
        assert 'user-2' not in str(taken.value)
        assert {h.session_id for h in await store.search('Turn', scope='user-1')} == {'mine'}
        assert len(await store.history('theirs', scope='user-2', limit=None)) == 8


async def test_delete_removes_one_session_only(store_factory: StoreFactory) -> None:
    async with store_factory(processor=summarizing()) as store:
        await converse(store, 'gone', 8)
        await converse(store, 'kept', 8)
        await store.delete('gone')
        with pytest.raises(SessionNotFound):
            await store.history('gone')
        assert [s.session_id for s in await store.sessions()] == ['kept']
        assert len(await store.history('kept', limit=None)) == 32
        assert await store.summaries('kept')


@pytest.mark.slow_on_postgresql
async def test_export_then_import_into_a_fresh_database_round_trips(
    store_factory: StoreFactory, new_database: Callable[[], str]
) -> None:
    async with store_factory(processor=summarizing()) as store:
        await converse(store, 's1', 10, scope='team')
        exported = await store.export('s1')
        messages = await store.history('s1', limit=None)
        summaries = await store.summaries('s1')
        window = await (await store.session('s1')).context()
    async with SessionStore(new_database(), processor=summarizing()) as fresh:
        assert await fresh.import_(exported) == 's1'
        assert await fresh.history('s1', scope='team', limit=None) == messages
        assert await fresh.summaries('s1') == summaries
        assert await (await fresh.session('s1')).context() == window
        with pytest.raises(SessionConflict, match='already exists'):
            await fresh.import_(exported)
        with pytest.raises(TypeError, match='takes a SessionExport'):
            await fresh.import_('{"format": "something else"}')  # type: ignore[arg-type]


async def test_a_corrupt_row_names_its_session_and_position(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        await converse(store, 'broken', 2)
        await converse(store, 'fine', 2)
        async with store.engine.begin() as connection:
            await connection.execute(
                text(
                    'UPDATE messages SET payload = \'{"kind": "nonsense"}\' WHERE position = 3 AND session_pk = '
                    "(SELECT pk FROM sessions WHERE session_id = 'broken')"
                )
            )
        with pytest.raises(StoreError, match="Session 'broken': the message at position 3 is corrupt"):
            await store.history('broken')
        assert len(await store.history('fine', limit=None)) == 8


async def test_stores_opening_one_empty_database_at_once_migrate_it_once(empty_store_factory: StoreFactory) -> None:
    stores = [empty_store_factory() for _ in range(4)]
    await asyncio.gather(*(store.ready() for store in stores))
    async with stores[0].engine.connect() as connection:
        versions = (await connection.execute(text('SELECT version_num FROM alembic_version'))).all()
    assert versions == [(head_revision(),)]
    await converse(stores[1], 'after', 1)
    assert len(await stores[2].history('after', limit=None)) == 4


@pytest.mark.slow_on_postgresql
async def test_each_message_is_counted_once_and_the_count_kept(store_factory: StoreFactory) -> None:
    from tests.test_tokens import CountingCounter

    counter = CountingCounter()
    processor = SlidingWindowProcessor(trigger=('messages', 40), keep=('messages', 12), token_counter=counter)
    async with store_factory(processor=processor) as store:
        await converse(store, 's1', 20)
        archived = await store.history('s1', limit=None)
        exported = await store.export('s1')
    # A run counts its new messages, plus the bridge-carrying request and the system prompt alone
    # it rebuilds; the stored window itself is never counted again.
    assert len(archived) <= counter.counted <= len(archived) + 2 * 20
    assert exported.tokens == [count_tokens_approximately([m]) for m in archived]


@pytest.mark.parametrize(('record', 'view'), [(StoredSession, SessionInfo), (SummaryRecord, StoredSummary)])
def test_the_review_reads_records_carry_every_field_of_the_view_made_from_them(record: type, view: type) -> None:
    # The listings print the records and the store hands out views built from them field by field (the usage
    # made a RunUsage): a field added to a view alone would take its default there, silently.
    assert [field.name for field in dataclasses.fields(record)] == [field.name for field in dataclasses.fields(view)]
