"""The store's OpenTelemetry spans: where a turn's time went, in the same trace as pydantic-ai's own spans."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from processors import SummarizationProcessor
from session_store import SessionStore
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, scripted_agent

StoreFactory = Callable[..., SessionStore]

_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Finished spans of the test, the store's and pydantic-ai's alike (one global provider per process)."""
    trace.set_tracer_provider(_PROVIDER)  # only the first call takes; every test uses this one provider
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def attrs(span: ReadableSpan) -> Mapping[str, Any]:
    return span.attributes or {}


def ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        names.append(by_id[parent.span_id].name)
        parent = by_id[parent.span_id].parent
    return names


async def test_a_turn_s_spans_nest_under_the_agent_run(
    store_factory: StoreFactory, spans: InMemorySpanExporter
) -> None:
    processor = SummarizationProcessor(
        FunctionModel(RecordingSummarizer()), trigger=('messages', 10), keep=('messages', 4)
    )
    store = store_factory(processor=processor)
    instrumented = Instrumentation(InstrumentationSettings(tracer_provider=_PROVIDER))
    agent = scripted_agent(ParallelToolAssistant(), capabilities=[instrumented])
    session = await store.session('traced')
    for turn in range(1, 5):
        await session.run(agent, f'Turn M{turn}')
    hits = await store.search('M3', session_id='traced')

    finished = spans.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished}
    named = {name: [s for s in finished if s.name == name] for name in {s.name for s in finished}}
    backend = store.engine.dialect.name

    runs = [s for s in finished if s.name.startswith('invoke_agent')]
    assert len(runs) == 4
    assert {attrs(s)['gen_ai.conversation.id'] for s in runs} == {'traced'}

    # Storing each run happens inside it, as does the summarizer call of a compacting request.
    stored = named['session_store.store_run']
    assert len(stored) == 4
    for span in stored:
        assert ancestors(span, by_id)[0].startswith('invoke_agent')
        assert attrs(span)['gen_ai.conversation.id'] == 'traced'
        assert attrs(span)['db.system.name'] == backend
        assert attrs(span)['session_store.messages'] == 4
        assert attrs(span)['session_store.tokens'] > 0
    summarized = named['processors.summarize']
    assert summarized and all(any(a.startswith('invoke_agent') for a in ancestors(s, by_id)) for s in summarized)
    assert {attrs(s)['processors.summarize.outcome'] for s in summarized} == {'summarized'}
    assert sum(attrs(s)['session_store.summaries'] for s in stored) == len(summarized)

    # The window a run starts from is loaded before it (its history is what the run is given): from the
    # database for the first run of this store, from what the store itself wrote for every later one.
    loads = named['session_store.load_window']
    assert [attrs(s)['session_store.window.cached'] for s in loads] == [False, True, True, True]
    assert all(attrs(s)['gen_ai.conversation.id'] == 'traced' for s in loads)
    assert [attrs(s)['session_store.archive.messages'] for s in loads] == [0, 4, 8, 12]

    (opened,) = named['session_store.open_session']
    assert attrs(opened)['gen_ai.conversation.id'] == 'traced'
    (searched,) = named['session_store.search']
    assert attrs(searched)['session_store.hits'] == len(hits) > 0


async def test_the_conversation_door_s_spans_match_the_session_door_s(
    store_factory: StoreFactory, spans: InMemorySpanExporter
) -> None:
    """A load is a `load_conversation` span over the window's `load_window` (and, when the trigger holds, the
    summarizer's span and the summary's `store_run`); a save is a `store_run`; each names the conversation, and
    a window that was sent a summary says so (`gen_ai.conversation.compacted`)."""
    processor = SummarizationProcessor(
        FunctionModel(RecordingSummarizer()), trigger=('messages', 10), keep=('messages', 4)
    )
    store = store_factory(processor=processor)
    agent = scripted_agent(ParallelToolAssistant())
    conversations = store.conversations
    await store.session('door')
    for turn in range(1, 5):
        conversation = await conversations.load('door')
        assert conversation is not None
        await conversations.save(await agent.run(f'Turn M{turn}', conversation=conversation))

    finished = spans.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished}
    named = {name: [s for s in finished if s.name == name] for name in {s.name for s in finished}}
    loads = named['session_store.load_conversation']
    assert len(loads) == 4 and {attrs(s)['gen_ai.conversation.id'] for s in loads} == {'door'}
    windows = [
        s for s in named['session_store.load_window'] if 'session_store.load_conversation' in ancestors(s, by_id)
    ]
    # The first load reads the window from the database; later ones take it from memory, at the revision the
    # record they read has, without a trip of their own. Each load says how large a window it handed out.
    assert len(windows) >= 1 and attrs(windows[0])['session_store.window.cached'] is False
    assert [attrs(s)['session_store.window.messages'] for s in loads] == [0, 4, 8, 4]
    assert [attrs(s)['gen_ai.conversation.compacted'] for s in loads] == [False, False, False, True]
    summarized = named['processors.summarize']
    assert summarized and all('session_store.load_conversation' in ancestors(s, by_id) for s in summarized)
    stored = named['session_store.store_run']
    saves = [s for s in stored if attrs(s)['session_store.messages'] == 4]
    assert len(saves) == 4 and all(attrs(s)['gen_ai.conversation.id'] == 'door' for s in saves)
    assert sum(attrs(s)['session_store.summaries'] for s in stored) == len(summarized)
