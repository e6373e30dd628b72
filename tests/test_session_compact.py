"""`session.compact(focus)`: a summary made on request, stored as the chain's next link, the window moved past it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import SlidingWindowProcessor, SummarizationProcessor
from session_store import SessionStore, SummarizerFailed
from session_store.cli import main
from testkit.scripted import MARKER, NEW_MESSAGES, PREVIOUS, ParallelToolAssistant, RecordingSummarizer, scripted_agent
from tests._cli import fails, ok

pytestmark = pytest.mark.through_pooler  # the store's concurrency, summaries and search, behind PgBouncer too

StoreFactory = Callable[..., SessionStore]


def on_request(summarizer: RecordingSummarizer) -> SummarizationProcessor:
    """Never compacts by itself (its trigger is far off); keeps the last 4 messages when asked to."""
    return SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 1_000), keep=('messages', 4))


def turns_in(text: str) -> set[str]:
    return {marker.split('-')[0] for marker in MARKER.findall(text)}


async def test_compact_stores_the_next_link_and_the_next_run_builds_on_it(store_factory: StoreFactory) -> None:
    summarizer = RecordingSummarizer()
    store = store_factory(processor=on_request(summarizer))
    session = await store.session('s')
    assistant = ParallelToolAssistant()
    agent = scripted_agent(assistant)
    for turn in range(1, 4):
        await session.run(agent, f'Turn M{turn}')

    first = await session.compact(focus='the billing dispute')
    assert first is not None and (first.covers_from, first.covers_to) == (0, 8)
    assert 'the billing dispute' in summarizer.inputs[-1]
    assert turns_in(NEW_MESSAGES.findall(summarizer.inputs[-1])[0]) == {'M1', 'M2'}
    window = await session.context()
    assert len(window) == 4 and first.text in str(window[0])  # the summary rides in the kept tail's first request

    # The next run starts from it; a second compaction extends it with only what it newly evicts.
    await session.run(agent, 'Turn M4')
    assert first.text in str(assistant.requests[-2]) and 'M1' not in str(assistant.requests[-2][1:])
    second = await session.compact()
    assert second is not None and (second.covers_from, second.covers_to) == (8, 12)
    assert PREVIOUS.findall(summarizer.inputs[-1]) == [first.text]
    assert turns_in(NEW_MESSAGES.findall(summarizer.inputs[-1])[0]) == {'M3'}
    assert [s.text for s in await store.summaries('s')] == [first.text, second.text]

    # A store opened afresh reads the same window, without calling the summarizer.
    calls = len(summarizer.inputs)
    fresh = store_factory(processor=on_request(summarizer))
    assert (await fresh.window('s')).messages == (await store.window('s')).messages
    assert len(summarizer.inputs) == calls
    assert len(await store.history('s', limit=None)) == 16  # the archive keeps every message


async def test_compact_refuses_or_skips_what_it_cannot_do(store_factory: StoreFactory) -> None:
    store = store_factory(processor=on_request(RecordingSummarizer()))
    session = await store.session('short')
    await session.run(scripted_agent(ParallelToolAssistant()), 'Turn M1')
    assert await session.compact() is None  # nothing older than the kept tail
    assert await store.summaries('short') == []

    sliding = await store.session('sliding', processor=SlidingWindowProcessor())
    with pytest.raises(ValueError, match='makes no summaries'):
        await sliding.compact()

    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError('the summarizer is down')

    failing = await store.session('failing', processor=on_request_with(broken))
    for turn in range(1, 4):
        await failing.run(scripted_agent(ParallelToolAssistant()), f'Turn M{turn}')
    before = await store.window('failing')
    with pytest.raises(SummarizerFailed, match='the summarizer failed, so nothing was compacted or stored'):
        await failing.compact()
    assert await store.summaries('failing') == []
    assert (await store.window('failing')).messages == before.messages


def on_request_with(model: Callable[[list[ModelMessage], AgentInfo], ModelResponse]) -> SummarizationProcessor:
    return SummarizationProcessor(FunctionModel(model), trigger=('messages', 1_000), keep=('messages', 4))


@pytest.mark.slow_on_postgresql
@pytest.mark.usefixtures('wide_console')
def test_the_compact_command_and_chat_s_slash_compact(db_url: str) -> None:
    async def setup() -> None:
        async with SessionStore(db_url) as store:
            session = await store.session('s')
            for turn in range(1, 4):
                await session.run(scripted_agent(ParallelToolAssistant()), f'Turn M{turn}')

    def invoke(*args: str, stdin: str | None = None) -> Result:
        return CliRunner().invoke(main, ['--db', db_url, *args], input=stdin)

    asyncio.run(setup())
    said = ok(invoke('compact', 's', '--summarizer', 'test', '--keep', '4', '--focus', 'billing'))
    assert "Compacted 's': summary 1 folds in messages 0-7" in said and 'window now starts at 8' in said
    fails(invoke('compact', 'nosuch', '--summarizer', 'test'), "No session 'nosuch'")

    chatted = invoke('chat', 's', '--model', 'test', '--summarizer', 'test', stdin='/compact\n')
    assert chatted.exit_code == 0 and "Nothing to compact in 's' yet" in chatted.stdout, chatted.output
    plain = invoke('chat', 's', '--model', 'test', stdin='/compact\n')
    assert plain.exit_code == 0, plain.output
    assert plain.stderr.splitlines() == [
        "Error: /compact needs a summarizer: start the chat with --summarizer MODEL ('test' is offline)."
    ]
