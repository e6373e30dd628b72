"""`ContextManagerCapability` through a `Session`: the seed package's capability setup, unchanged, with every summary
it makes stored with the run that made it, and tool outputs cut only in what the model sees."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import ContextManagerCapability, Summary, summary_text
from session_store import SessionStore
from testkit.histories import pair_violations
from testkit.scripted import NEW_MESSAGES, PREVIOUS
from tests.test_context_manager import FIVE_MB, Chatty, Summarizer, exporting_agent, returns_in

StoreFactory = Callable[..., SessionStore]


def system_prompts(message: ModelMessage) -> list[str]:
    return [p.content for p in message.parts if isinstance(p, SystemPromptPart)]


@pytest.mark.slow_on_postgresql
async def test_the_agents_compact_conversation_call_compacts_its_next_request_and_is_stored_with_the_run(
    store_factory: StoreFactory,
) -> None:
    summarizer, chatty, made = Summarizer(), Chatty(), list[Summary]()
    manager = ContextManagerCapability(
        summarization_model=FunctionModel(summarizer), include_compact_tool=True, on_summary=made.append
    )
    # The seed package's setup, as it was: the agent carries the capability. The session opened with it stands in.
    agent = Agent(FunctionModel(chatty), system_prompt='You keep orders.', capabilities=[manager])
    store = store_factory()
    session = await store.session('orders', processor=manager)
    for turn in range(4):
        await session.run(agent, f'order number {1000 + turn}')
    assert summarizer.prompts == [] and await store.summaries('orders') == []

    result = await session.run(agent, 'please tidy up')

    # The request after the compact_conversation call: the system prompt and the summary, then the call and its return.
    after = chatty.requests[-1]
    assert summary_text(after[0]) == 'SUMMARY-1' and system_prompts(after[0]) == ['You keep orders.']
    assert after[1:] == result.all_messages()[9:11]
    assert pair_violations(after, result.all_messages()) == []
    (prompt,) = summarizer.prompts
    assert 'order number 1000' in prompt and 'please tidy up' in prompt and 'the order numbers' in prompt
    assert [(s.forced, s.focus) for s in made] == [(True, 'the order numbers')]
    assert manager.compression_count == 1 and manager.processor.usage.requests == 1

    # Stored with the run: the summary covers the archive up to the call, the window moved past it, the archive whole.
    (stored,) = await store.summaries('orders')
    assert (stored.text, stored.covers_from, stored.covers_to) == ('SUMMARY-1', 0, 9)
    archive = await store.history('orders')
    assert archive == result.all_messages() and len(archive) == 12

    # A store opened afresh reads the same window, which opens with the summary standing alone before the call
    # (the capability cut before a response), without calling the summarizer.
    fresh = store_factory()
    window = await fresh.window('orders')
    assert window.messages == (await store.window('orders')).messages
    assert window.positions == [9, 9, 10, 11]
    bridge, call = window.messages[0], window.messages[1]
    assert isinstance(bridge, ModelRequest) and summary_text(bridge) == 'SUMMARY-1'
    assert system_prompts(bridge) == ['You keep orders.']
    assert isinstance(call, ModelResponse) and call == archive[9]

    # The next run, in the fresh store's session, starts from that window and calls no summarizer.
    resumed = await fresh.session('orders', processor=manager)
    await resumed.run(agent, 'order number 2000')
    assert chatty.requests[-1][:4] == window.messages and len(summarizer.prompts) == 1
    assert len(await fresh.history('orders')) == 14


@pytest.mark.slow_on_postgresql
async def test_later_compactions_extend_the_stored_chain(store_factory: StoreFactory) -> None:
    summarizer, events, steps = Summarizer(), list[tuple[object, ...]](), list[int]()

    def coder(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # Each prompt starts one long chain of tool calls (no request opens a turn to cut at inside it): three
        # build steps, then a compact_conversation call, then the answer.
        last = messages[-1]
        if any(isinstance(p, ToolReturnPart) and p.tool_name == 'compact_conversation' for p in last.parts):
            return ModelResponse(parts=[TextPart('build fixed')])
        if len(steps) % 3 == 0 and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[ToolCallPart('compact_conversation', {}, tool_call_id=f'tidy{len(steps)}')])
        steps.append(len(steps) + 1)
        return ModelResponse(parts=[ToolCallPart('build', {'step': steps[-1]}, tool_call_id=f'b{steps[-1]}')])

    def after_compress(messages: list[ModelMessage], summarized: bool, summary: str | None) -> None:
        events.append(('after', summary))

    manager = ContextManagerCapability(
        summarization_model=FunctionModel(summarizer),
        include_compact_tool=True,
        on_before_compress=lambda messages, cutoff: events.append(('before', cutoff)),
        on_after_compress=after_compress,
    )
    agent = Agent(FunctionModel(coder), system_prompt='You fix builds.', capabilities=[manager])

    @agent.tool_plain
    def build(step: int) -> str:
        return f'output of step {step}'

    store = store_factory(processor=manager)  # the store's processor: every session it opens goes through it
    session = await store.session('build')
    await session.run(agent, 'fix the build')
    await session.run(agent, 'fix it again')

    first, second = await store.summaries('build')
    assert (first.covers_from, second.covers_from) == (0, first.covers_to)
    # The second summary was made from the first and only the steps after it.
    assert PREVIOUS.findall(summarizer.prompts[1]) == ['SUMMARY-1']
    (block,) = NEW_MESSAGES.findall(summarizer.prompts[1])
    assert 'output of step 3' not in block and 'fix it again' in block
    assert [event[0] for event in events] == ['before', 'after', 'before', 'after']

    # session.compact() goes through the same capability: its callbacks, its count, the chain's next link.
    third = await session.compact(focus='the failing tests')
    assert third is not None and third.covers_from == second.covers_to and 'the failing tests' in summarizer.prompts[2]
    assert manager.compression_count == 3 and len(events) == 6
    fresh = store_factory(processor=manager)
    assert (await fresh.window('build')).messages == (await store.window('build')).messages
    assert pair_violations((await fresh.window('build')).messages, await fresh.history('build')) == []
    assert len(summarizer.prompts) == 3


async def test_a_run_that_fails_after_the_agents_compaction_stores_neither_it_nor_its_summary(
    store_factory: StoreFactory,
) -> None:
    summarizer, chatty = Summarizer(), Chatty()
    failing = [False]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if failing[0] and summary_text(messages[0]) is not None:
            raise RuntimeError('the provider is down')
        return chatty(messages, info)

    manager = ContextManagerCapability(summarization_model=FunctionModel(summarizer), include_compact_tool=True)
    agent = Agent(FunctionModel(model), capabilities=[manager])
    store = store_factory()
    session = await store.session('s', processor=manager)
    for turn in range(2):
        await session.run(agent, f'order number {turn}')
    before = await store.window('s')

    failing[0] = True
    with pytest.raises(RuntimeError, match='the provider is down'):
        await session.run(agent, 'please tidy up')  # compacted before the request that fails

    assert summarizer.prompts and await store.summaries('s') == []
    assert (await store.window('s')).messages == before.messages and len(await store.history('s')) == 4
    failing[0] = False
    await session.run(agent, 'please tidy up')  # asks again: the summary is made anew and stored this time
    assert [s.text for s in await store.summaries('s')] == ['SUMMARY-2']


async def test_a_5_mb_tool_output_reaches_the_model_truncated_and_the_archive_keeps_it_whole(
    store_factory: StoreFactory,
) -> None:
    seen: list[list[ModelMessage]] = []
    agent, manager = exporting_agent(seen)
    store = store_factory()
    session = await store.session('export', processor=manager)
    await session.run(agent, 'export everything')
    await session.run(agent, 'thanks')

    # Both runs, the second from the stored window, sent the output cut to its first and last lines.
    for request in (seen[1], seen[2]):
        (sent,) = returns_in(request)
        assert isinstance(sent.content, str) and len(sent.content) <= 2_100
        assert sent.content.splitlines()[:5] == FIVE_MB.splitlines()[:5]
        assert sent.content.splitlines()[-5:] == FIVE_MB.splitlines()[-5:]
    # The archive, read by a store opened afresh, holds it whole; its stored count is what the model was sent.
    fresh = store_factory()
    (kept,) = returns_in(await fresh.history('export'))
    assert kept.content == FIVE_MB
    window = await fresh.window('export')
    assert sum(t for t in window.tokens if t is not None) < 2_000
    assert manager.compression_count == 0


async def test_a_context_manager_the_session_could_not_store_is_refused(store_factory: StoreFactory) -> None:
    store = store_factory()
    with pytest.raises(TypeError, match=r"processor='summarize': a session compresses with a SlidingWindowProcessor"):
        await store.session('s', processor='summarize')  # type: ignore[arg-type]

    manager = ContextManagerCapability(summarization_model=FunctionModel(Summarizer()))
    agent = Agent(FunctionModel(Chatty()), capabilities=[manager])
    plain = await store.session('plain')
    with pytest.raises(ValueError, match=r"open the session with it \(store.session\('plain', processor=manager\)\)"):
        await plain.run(agent, 'hello')

    managed = await store.session('managed', processor=manager)
    with pytest.raises(ValueError, match='not in capabilities='):
        await managed.run(Agent(FunctionModel(Chatty())), 'hello', capabilities=[manager])
    other = ContextManagerCapability(summarization_model=FunctionModel(Summarizer()), id='other')
    with pytest.raises(ValueError, match="the agent's ContextManagerCapability \\(id='other'\\)"):
        await managed.run(Agent(FunctionModel(Chatty()), capabilities=[other]), 'hello')
    assert await store.history('plain') == [] and await store.history('managed') == []

    # The same setup with the session opened with the agent's capability runs and stores.
    await managed.run(agent, 'hello')
    assert len(await store.history('managed')) == 2
