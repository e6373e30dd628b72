"""The window a store keeps decoded between runs: always the window a fresh read gives, never a stale one.

A store that stored a run knows the window the next run starts from; it checks the session's revision
(one indexed row) instead of reading the window again. Any write elsewhere, in another process too,
changes the revision, so the next read goes to the database.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import pytest
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import FunctionModel

from processors import SlidingWindowProcessor, SummarizationProcessor, count_tokens_approximately
from session_store import SessionStore
from testkit.scripted import MARKER, ParallelToolAssistant, RecordingSummarizer, scripted_agent

StoreFactory = Callable[..., SessionStore]


def summarizing() -> SummarizationProcessor:
    return SummarizationProcessor(FunctionModel(RecordingSummarizer()), trigger=('messages', 14), keep=('messages', 5))


async def assert_same_window(cached: SessionStore, fresh: SessionStore, session_id: str) -> None:
    ours, read = await cached.window(session_id), await fresh.window(session_id)
    assert (ours.messages, ours.positions) == (read.messages, read.positions)


@pytest.mark.slow_on_postgresql
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


@dataclass
class CountingCounter:
    """`count_tokens_approximately`, counting the messages it is asked about."""

    counted: int = 0

    def __call__(self, messages: Sequence[ModelMessage]) -> int:
        self.counted += len(messages)
        return count_tokens_approximately(messages)


def shown(requests: list[list[ModelMessage]]) -> list[list[str]]:
    """What the model was sent, request by request: the markers (turns, calls, answers, summaries) in order."""
    return [MARKER.findall(' '.join(str(message.parts) for message in request)) for request in requests]


@pytest.mark.slow_on_postgresql  # the same code on both backends; SQLite's variant stays quick
async def test_runs_from_a_kept_index_are_sent_what_runs_after_a_restart_are(store_factory: StoreFactory) -> None:
    """A store keeps how its last run's processor indexed the window, and its next run indexes only what is new: the
    model is sent exactly what a store restarted before every run sends, across token-sized cuts, summaries,
    another writer and a rewind, and the messages already indexed are not counted again."""
    makers: dict[str, Callable[[CountingCounter], SlidingWindowProcessor | SummarizationProcessor]] = {
        'sliding': lambda counter: SlidingWindowProcessor(
            trigger=('tokens', 500), keep=('tokens', 200), token_counter=counter
        ),
        'summarizing': lambda counter: SummarizationProcessor(
            FunctionModel(RecordingSummarizer()), trigger=('tokens', 500), keep=('tokens', 200), token_counter=counter
        ),
    }
    for name, make in makers.items():
        kept_counter, fresh_counter = CountingCounter(), CountingCounter()
        kept_store = store_factory(processor=make(kept_counter))
        kept_assistant, fresh_assistant = ParallelToolAssistant(), ParallelToolAssistant()
        kept = await kept_store.session(f'kept-{name}')
        counted_once = 0
        for turn in range(1, 21):
            prompt = f'Turn M{turn}'
            before = kept_counter.counted
            await kept.run(scripted_agent(kept_assistant), prompt)
            counted_once += kept_counter.counted - before == 4  # the run's own 4 messages, nothing of the window
            async with store_factory(processor=make(fresh_counter)) as fresh_store:  # as after a restart
                await (await fresh_store.session(f'fresh-{name}')).run(scripted_agent(fresh_assistant), prompt)
            if turn in (7, 14):
                # Another writer moves both sessions: the kept index is of a window no longer stored.
                async with store_factory(processor=make(CountingCounter())) as other:
                    for session_id in (f'kept-{name}', f'fresh-{name}'):
                        session = await other.session(session_id)
                        if turn == 7:
                            await session.run(scripted_agent(ParallelToolAssistant()), f'Turn M{100 + turn}')
                        else:
                            await session.rewind(40)
        assert shown(kept_assistant.requests) == shown(fresh_assistant.requests), name
        summaries = [len(await kept_store.summaries(f'{which}-{name}')) for which in ('kept', 'fresh')]
        assert summaries[0] == summaries[1] and (summaries[0] > 0) == (name == 'summarizing'), summaries
        assert len(await kept.context()) < len(await kept.history()), 'the window was cut'
        # Most runs start from the index their predecessor kept; the rest follow a cut, another writer or a rewind.
        assert counted_once >= 12, (name, counted_once)
        assert kept_counter.counted < fresh_counter.counted, name
