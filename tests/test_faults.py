"""Summarizer faults and hostile input against a store, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from alembic import command
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import SummarizationFailure, SummarizationProcessor
from session_store import SchemaMismatch, SessionStore
from session_store._db.schema import _config, head_revision
from testkit.scripted import ParallelToolAssistant, scripted_agent

StoreFactory = Callable[..., SessionStore]


def faulty_summarizer(fault: str, calls: list[int]) -> FunctionModel:
    async def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        if fault == 'raise':
            raise RuntimeError('summarizer provider is down')
        if fault == 'hang':
            await asyncio.sleep(60)
        if fault == 'empty':
            return ModelResponse(parts=[TextPart('')])
        return ModelResponse(parts=[TextPart('far too long ' * 20_000)])

    return FunctionModel(summarize)


@pytest.mark.slow_on_postgresql  # the processor's faults, the same store code on both; SQLite stays quick
@pytest.mark.parametrize('fault', ['raise', 'hang', 'empty', 'oversized'])
async def test_a_failing_summarizer_never_breaks_the_run_and_is_retried(
    store_factory: StoreFactory, fault: str
) -> None:
    calls: list[int] = []
    failures: list[SummarizationFailure] = []
    processor = SummarizationProcessor(
        faulty_summarizer(fault, calls),
        trigger=[('messages', 20), ('tokens', 20_000)],
        keep=('messages', 6),
        # A hang waits out the timeout on every call, so a short one; the other faults answer at once.
        summarizer_timeout=0.05 if fault == 'hang' else 0.3,
        on_failure=failures.append,
    )
    async with store_factory(processor=processor) as store:
        session = await store.session('faulty')
        agent = scripted_agent(ParallelToolAssistant())
        for turn in range(6):
            result = await session.run(agent, f'Turn M{turn} please')
            assert result.output.startswith('Answer M')
        assert calls and len(failures) == len(calls)
        assert {f.reason for f in failures} == {
            {
                'raise': 'error',
                'hang': 'timeout',
                'empty': 'empty',
                'oversized': 'oversized',
            }[fault]
        }
        assert await store.summaries('faulty') == []
        assert len(await store.history('faulty', limit=None)) == 24
        # The window never moved past unsummarized messages: the next trigger tries them again.
        window = await session.context()
        assert len(window) == 24
        before = len(calls)
        await session.run(agent, 'Turn M6 please')
        assert len(calls) > before


@pytest.mark.parametrize(
    'session_id',
    ["'; DROP TABLE sessions; --", 'quote " and \' both', 'robert"); DELETE FROM messages; --', 'ünïcødé ✓'],
)
async def test_hostile_ids_are_stored_verbatim_never_executed(store_factory: StoreFactory, session_id: str) -> None:
    async with store_factory() as store:
        session = await store.session(session_id, scope="x' OR '1'='1")
        await session.run(scripted_agent(ParallelToolAssistant()), 'Turn M1 please')
        await store.session('bystander')
        assert sorted(s.session_id for s in await store.sessions()) == sorted([session_id, 'bystander'])
        assert len(await store.history(session_id, limit=None)) == 4
        assert [s.session_id for s in await store.sessions(scope="x' OR '1'='1")] == [session_id]
        assert await store.sessions(scope='x') == []


async def test_hostile_search_terms_are_rejected_or_matched_literally(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('s')
        await session.run(scripted_agent(ParallelToolAssistant()), "Turn M1 100% of O'Brien_s order")
        assert [h.position for h in await store.search("100% of O'Brien_s")] == [0]
        assert await store.search('100_ of') == []  # _ and % are literal, not wildcards
        for bad in ('nul\x00byte', 'x' * 10_000_000, '', '   '):
            with pytest.raises(ValueError, match='search text must be a string of 1 to 1000 characters'):
                await store.search(bad)


async def test_huge_and_nul_bearing_messages_round_trip_verbatim(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('big')
        prompt = 'Turn M1 ' + 'x' * 10_000_000 + ' nul\x00inside'
        result = await session.run(scripted_agent(ParallelToolAssistant()), prompt)
        history = await store.history('big', limit=None)
        assert history == result.new_messages()
        assert history[0].parts[-1].content == prompt  # type: ignore[union-attr]


async def test_a_database_at_an_older_revision_says_how_to_upgrade(store_factory: StoreFactory, db_url: str) -> None:
    async with store_factory() as store:
        await store.session('kept')
        async with store.engine.begin() as connection:
            await connection.run_sync(lambda sync: command.downgrade(_config(sync), '0001'))
    store = store_factory()
    with pytest.raises(
        SchemaMismatch,
        match=rf'revision 0001, older than {head_revision()}\. Upgrade it with `await store\.migrate\(\)`',
    ):
        await store.sessions()
    await store.migrate()
    assert [s.session_id for s in await store.sessions()] == ['kept']
