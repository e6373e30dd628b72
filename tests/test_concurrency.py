"""Concurrent writers and crashes, on SQLite and PostgreSQL: nothing lost, nothing duplicated, conflicts reported."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import text

from session_store import SessionConflict, SessionStore
from session_store._codec import now
from testkit.scripted import MARKER, ParallelToolAssistant, scripted_agent

pytestmark = pytest.mark.through_pooler  # the store's concurrency, summaries and search, behind PgBouncer too

ROOT = Path(__file__).resolve().parent.parent
StoreFactory = Callable[..., SessionStore]


def slow_agent(delay: float = 0.2) -> Agent[None, str]:
    """A scripted agent whose every model call takes `delay` seconds, so runs overlap."""
    assistant = ParallelToolAssistant()

    async def slowly(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(delay)
        return assistant(messages, info)

    agent = scripted_agent(assistant)
    agent._model = FunctionModel(slowly)  # same tools, slower model
    return agent


def prompts(history: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in history
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def assert_whole_runs(history: list[ModelMessage]) -> None:
    """Every run of the scripted agent stores four messages: prompt, calls, returns, answer."""
    assert len(history) % 4 == 0
    for start in range(0, len(history), 4):
        kinds = [m.kind for m in history[start : start + 4]]
        assert kinds == ['request', 'response', 'request', 'response']
        assert prompts(history[start : start + 1])


async def test_two_runs_at_once_one_conflicts_and_nothing_interleaves(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('busy')
        agent = slow_agent()
        outcomes = await asyncio.gather(
            session.run(agent, 'Turn M1 first'), session.run(agent, 'Turn M2 second'), return_exceptions=True
        )
        conflicts = [o for o in outcomes if isinstance(o, SessionConflict)]
        assert len(conflicts) == 1
        assert "Session 'busy' changed while this run was in progress" in str(conflicts[0])
        history = await store.history('busy', limit=None)
        assert len(history) == 4
        assert_whole_runs(history)


async def test_waiting_runs_queue_and_each_sees_the_last(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('queue', wait=True, timeout=30)
        agent = slow_agent(0.05)
        await asyncio.gather(*(session.run(agent, f'Turn M{i} queued') for i in range(4)))
        history = await store.history('queue', limit=None)
        assert len(history) == 16
        assert_whole_runs(history)
        assert sorted(prompts(history)) == [f'Turn M{i} queued' for i in range(4)]


async def test_a_waiting_run_gives_up_after_its_timeout(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        holder = await store.session('held', wait=True)
        impatient = await store.session('held', wait=True, timeout=0.3)
        holding = asyncio.create_task(holder.run(slow_agent(0.5), 'Turn M1 slow'))
        await asyncio.sleep(0.1)  # the holder takes the lease
        with pytest.raises(SessionConflict, match=r'was still held by another run after waiting 0\.3s'):
            await impatient.run(scripted_agent(ParallelToolAssistant()), 'Turn M2 impatient')
        await holding
        assert len(await store.history('held', limit=None)) == 4


async def test_a_crashed_holders_lease_lapses(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('orphaned', wait=True, timeout=5)
        async with store.engine.begin() as connection:
            await connection.execute(
                text('UPDATE sessions SET lease_owner = :owner, lease_expires = :expires'),
                {'owner': 'crashed-process', 'expires': now() - timedelta(seconds=1)},
            )
        await session.run(scripted_agent(ParallelToolAssistant()), 'Turn M1 after the crash')
        assert len(await store.history('orphaned', limit=None)) == 4


async def test_many_writers_on_one_database_never_see_a_raw_lock_error(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        agent = scripted_agent(ParallelToolAssistant())

        async def converse(index: int) -> None:
            session = await store.session(f'writer-{index}')
            for turn in range(5):
                await session.run(agent, f'Turn M{index}t{turn}')

        await asyncio.gather(*(converse(i) for i in range(12)))
        for info in await store.sessions():
            assert info.message_count == 20


def run_workers(args: list[list[str]], timeout: float) -> None:
    workers = [subprocess.Popen([sys.executable, '-m', *a], cwd=ROOT) for a in args]
    for worker in workers:
        assert worker.wait(timeout=timeout) == 0


@pytest.mark.slow
async def test_load_two_processes_twenty_tasks_five_sessions(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2 processes x 10 tasks x 50 runs, over 5 shared sessions; half the tasks wait, half fail fast.
    outs = [tmp_path / f'{number}.json' for number in (1, 2)]
    run_workers([['tests._load_worker', db_url, out.stem, '10', '50', '5', str(out)] for out in outs], timeout=1_200)
    outcomes = [tuple(o) for out in outs for o in json.loads(out.read_text())]
    async with SessionStore(db_url) as store:
        archived: Counter[str] = Counter()
        total = 0
        for info in await store.sessions():
            history = await store.history(info.session_id, limit=None)
            assert len(history) == info.message_count
            assert_whole_runs(history)
            total += len(history)
            archived.update(MARKER.findall(' '.join(prompts(history))))
    stored = {f'M{prompt_id}' for _, prompt_id, outcome in outcomes if outcome == 'stored'}
    conflicts = [prompt_id for _, prompt_id, outcome in outcomes if outcome == 'conflict']
    lost = stored - set(archived)
    duplicated = [marker for marker, times in archived.items() if times > 1]
    with capsys.disabled():  # the counts belong in the CI log
        print(
            f'\nload ({db_url.split(":")[0]}): {len(outcomes)} runs, {len(stored)} stored, '
            f'{len(conflicts)} conflicts reported, '
            f'{total} messages archived, {len(lost)} lost, {len(duplicated)} duplicated'
        )
    assert len(outcomes) == 1_000
    assert not lost and not duplicated
    assert set(archived) == stored  # a run reported as a conflict stored nothing
    assert total == 4 * len(stored)


@pytest.mark.slow
async def test_sigkill_mid_run_leaves_only_whole_runs(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(7)
    started: set[str] = set()
    reported: set[str] = set()
    for kill in range(30):
        worker = subprocess.Popen(
            [sys.executable, '-m', 'tests._crash_worker', db_url, str(kill + 1)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == 'ready'
        await asyncio.sleep(rng.uniform(0.0, 0.6))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        for line in worker.stdout.read().splitlines():
            event, prompt_id = line.split()
            (started if event == 'started' else reported).add(f'M{prompt_id}')
        if db_url.startswith('sqlite'):
            path = db_url.split('///', 1)[1]
            with sqlite3.connect(path) as connection:
                assert connection.execute('PRAGMA integrity_check').fetchone() == ('ok',)
    async with SessionStore(db_url) as store:
        archived: list[str] = []
        for info in await store.sessions():
            history = await store.history(info.session_id, limit=None)
            assert len(history) == info.message_count
            assert_whole_runs(history)
            archived += MARKER.findall(' '.join(prompts(history)))
            summaries = await store.summaries(info.session_id)
            assert [s.covers_from for s in summaries[1:]] == [s.covers_to for s in summaries[:-1]]
    lost = reported - set(archived)
    with capsys.disabled():  # the counts belong in the CI log
        print(
            f'\ncrash ({db_url.split(":")[0]}): 30 SIGKILLs, {len(started)} runs attempted, '
            f'{len(archived)} whole runs stored, {len(lost)} reported runs lost'
        )
    assert not lost
    assert len(archived) == len(set(archived))
    assert set(archived) <= started
