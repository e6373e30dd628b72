"""The window a store keeps decoded between runs: always the window a fresh read gives, never a stale one.

A store that stored a run knows the window the next run starts from; it checks the session's revision
(one indexed row) instead of reading the window again. Any write elsewhere, in another process too,
changes the revision, so the next read goes to the database.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable

import pytest
from pydantic_ai.models.function import FunctionModel

from processors import SlidingWindowProcessor, SummarizationProcessor
from session_store import SessionStore
from testkit.scripted import MARKER, ParallelToolAssistant, RecordingSummarizer, scripted_agent

StoreFactory = Callable[..., SessionStore]


def summarizing() -> SummarizationProcessor:
    return SummarizationProcessor(FunctionModel(RecordingSummarizer()), trigger=('messages', 14), keep=('messages', 5))


async def assert_same_window(cached: SessionStore, fresh: SessionStore, session_id: str) -> None:
    ours, read = await cached.window(session_id), await fresh.window(session_id)
    assert (ours.messages, ours.positions) == (read.messages, read.positions)


async def test_cached_windows_are_what_a_fresh_read_gives(store_factory: StoreFactory) -> None:
    for processor in (summarizing(), SlidingWindowProcessor(trigger=('messages', 14), keep=('messages', 5))):
        store = store_factory(processor=processor)
        name = type(processor).__name__
        session = await store.session(name)
        agent = scripted_agent(ParallelToolAssistant())
        for turn in range(1, 13):
            await session.run(agent, f'Turn M{turn}')
            # A new store has nothing cached: it reads the window from the archive.
            fresh = store_factory(processor=processor)
            await assert_same_window(store, fresh, name)
            await fresh.close()
        # After a rewind the window is read again, and runs on the new path cache theirs.
        await session.rewind(20)
        for turn in range(13, 19):
            await session.run(agent, f'Turn M{turn}')
            fresh = store_factory(processor=processor)
            await assert_same_window(store, fresh, name)
            await fresh.close()


Elsewhere = Callable[[], Awaitable[None]]


async def check_another_writer_is_seen(
    store: SessionStore, run_elsewhere: Elsewhere, rewind_elsewhere_to_8: Elsewhere
) -> None:
    """`store` keeps the window it wrote; a turn and a rewind written elsewhere must reach its next runs."""
    assistant = ParallelToolAssistant()
    agent = scripted_agent(assistant)
    session = await store.session('shared')
    for turn in range(1, 5):
        await session.run(agent, f'Turn M{turn}')
    assert len(await session.context()) == 16  # warm: this store wrote that window

    await run_elsewhere()  # 'Turn M50' on the same session
    window = await session.context()
    assert len(window) == 20 and 'M50' in str(window[-1])
    await session.run(agent, 'Turn M5')
    assert 'M50' in str(assistant.requests[-2])  # the run's first request carried the other writer's turn

    await rewind_elsewhere_to_8()
    await session.run(agent, 'Turn M6')
    seen = {marker.split('-')[0] for marker in MARKER.findall(str(assistant.requests[-2]))}
    assert seen == {'M1', 'M2', 'M6'}
    assert len(await store.history('shared', limit=None)) == 12


async def test_another_store_writing_invalidates_the_cached_window(store_factory: StoreFactory) -> None:
    # A second store has an engine, connections and window cache of its own, as another process would.
    other = store_factory()

    async def run_elsewhere() -> None:
        await (await other.session('shared')).run(scripted_agent(ParallelToolAssistant()), 'Turn M50')

    async def rewind_elsewhere_to_8() -> None:
        await (await other.session('shared')).rewind(8)

    await check_another_writer_is_seen(store_factory(), run_elsewhere, rewind_elsewhere_to_8)


@pytest.mark.slow  # two new processes; the test above is the same check with a second store in this one
async def test_another_process_writing_invalidates_the_cached_window(db_url: str, store_factory: StoreFactory) -> None:
    other = (
        'import asyncio, sys\n'
        'from session_store import SessionStore\n'
        'from testkit.scripted import ParallelToolAssistant, scripted_agent\n'
        'async def main():\n'
        '    async with SessionStore(sys.argv[1]) as store:\n'
        "        await (await store.session('shared')).run(scripted_agent(ParallelToolAssistant()), 'Turn M50')\n"
        'asyncio.run(main())\n'
    )

    async def run_elsewhere() -> None:
        subprocess.run([sys.executable, '-c', other, db_url], check=True, timeout=120)

    async def rewind_elsewhere_to_8() -> None:  # through the command line
        subprocess.run(
            [sys.executable, '-m', 'session_store', 'rewind', 'shared', '8', '--db', db_url],
            check=True,
            timeout=120,
            capture_output=True,
        )

    await check_another_writer_is_seen(store_factory(), run_elsewhere, rewind_elsewhere_to_8)
