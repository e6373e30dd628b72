"""ContextManagerCapability on real Agent runs (FunctionModel): compaction asked for by the agent or the application,
at the threshold, truncated tool outputs in what the model sees, and a run history that stays whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import ContextManagerCapability, LimitWarnerCapability, Summary, summary_text
from processors.context_manager import CONTEXT_MANAGER_ID
from processors.limit_warner import LIMIT_WARNING_MARKER
from testkit.histories import pair_violations
from testkit.scripted import NEW_MESSAGES, PREVIOUS

FIVE_MB = '\n'.join(f'row {i:07d} ' + 'x' * 40 for i in range(5 * 1024 * 1024 // 52))


@dataclass
class Summarizer:
    """Records each summarizer prompt; answers `SUMMARY-<n>`."""

    prompts: list[str] = field(default_factory=list[str])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = messages[-1].parts[-1]
        assert isinstance(prompt, UserPromptPart) and isinstance(prompt.content, str)
        self.prompts.append(prompt.content)
        return ModelResponse(parts=[TextPart(f'SUMMARY-{len(self.prompts)}')])


def returns_in(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def exporting_agent(seen: list[list[ModelMessage]]) -> tuple[Agent[None, str], ContextManagerCapability]:
    """An agent whose first request calls `export` (5 MB back), with a context manager cutting tool outputs
    to 500 tokens; every request the model gets lands in `seen`."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart('export', {}, tool_call_id='big')])
        return ModelResponse(parts=[TextPart('exported')])

    manager = ContextManagerCapability(
        max_tokens=100_000, max_tool_output_tokens=500, summarization_model=FunctionModel(Summarizer())
    )
    agent = Agent(FunctionModel(model), capabilities=[manager])

    @agent.tool_plain
    def export() -> str:
        return FIVE_MB

    return agent, manager


async def test_a_5_mb_tool_output_reaches_the_model_truncated_and_the_history_keeps_it_whole() -> None:
    seen: list[list[ModelMessage]] = []
    agent, manager = exporting_agent(seen)
    result = await agent.run('export everything')

    (sent,) = returns_in(seen[1])
    assert isinstance(sent.content, str) and len(sent.content) <= 2_000 + 100
    lines = sent.content.splitlines()
    assert lines[:5] == FIVE_MB.splitlines()[:5] and lines[-5:] == FIVE_MB.splitlines()[-5:]
    assert f'({len(FIVE_MB.splitlines()) - 10} lines omitted)' in sent.content
    # The run's history, what a store archives, holds the output whole; nothing was summarized for it.
    (kept,) = returns_in(result.all_messages())
    assert kept.content == FIVE_MB
    assert manager.compression_count == 0 and manager.processor.usage.requests == 0


async def test_one_long_line_is_cut_by_characters() -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart('dump', {}, tool_call_id='d')])
        return ModelResponse(parts=[TextPart('ok')])

    agent = Agent(FunctionModel(model), capabilities=[ContextManagerCapability(max_tool_output_tokens=100)])

    @agent.tool_plain
    def dump() -> dict[str, Any]:
        return {'blob': 'y' * 50_000, 'small': 1}

    result = await agent.run('dump')
    (sent,) = returns_in(seen[1])
    assert isinstance(sent.content, str) and 'characters omitted' in sent.content and len(sent.content) < 500
    (kept,) = returns_in(result.all_messages())
    assert kept.content == {'blob': 'y' * 50_000, 'small': 1}


@dataclass
class Chatty:
    """Answers each user turn; calls `compact_conversation` (with a focus) on the turn that asks for it."""

    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(messages)
        last = messages[-1]
        prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
        if prompt == 'please tidy up':
            return ModelResponse(
                parts=[ToolCallPart('compact_conversation', {'focus': 'the order numbers'}, tool_call_id='tidy')]
            )
        if any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart('tidied')])
        return ModelResponse(parts=[TextPart(f'noted: {prompt}')])


async def test_the_agent_calling_compact_conversation_gets_a_compacted_next_request() -> None:
    summarizer, chatty, made = Summarizer(), Chatty(), list[Summary]()
    manager = ContextManagerCapability(
        summarization_model=FunctionModel(summarizer), include_compact_tool=True, on_summary=made.append
    )
    agent = Agent(FunctionModel(chatty), system_prompt='You keep orders.', capabilities=[manager])
    history: list[ModelMessage] = []
    for turn in range(4):
        history = (await agent.run(f'order number {1000 + turn}', message_history=history)).all_messages()
    assert summarizer.prompts == []  # far below 90% of the budget: nothing compacted on its own

    result = await agent.run('please tidy up', message_history=history)

    tool_request, after = chatty.requests[-2], chatty.requests[-1]
    assert len(tool_request) == 9  # the whole history, plus the turn asking to tidy up
    # The request after the tool call: the system prompt and summary, then the compact_conversation call and its
    # return (keep=('messages', 0) keeps the request in flight, and the call it answers).
    assert summary_text(after[0]) == 'SUMMARY-1'
    assert [p.content for p in after[0].parts if isinstance(p, SystemPromptPart)] == ['You keep orders.']
    assert after[1:] == result.all_messages()[9:11]
    assert pair_violations(after, result.all_messages()) == []
    (returned,) = returns_in(result.new_messages())
    assert 'Conversation compaction requested. Focus: the order numbers.' in str(returned.content)
    # The summarizer read the earlier turns and the focus; the summary is marked as asked for.
    (prompt,) = summarizer.prompts
    assert 'order number 1000' in prompt and 'order number 1003' in prompt and 'please tidy up' in prompt
    assert '<focus>' in prompt and 'the order numbers' in prompt
    assert [(s.forced, s.focus) for s in made] == [(True, 'the order numbers')]
    assert manager.compression_count == 1
    # The run's history is whole and holds no summary; the next run keeps the compacted window.
    assert len(result.all_messages()) == 12
    assert not any(isinstance(p, CompactionPart) for m in result.all_messages() for p in m.parts)
    await agent.run('order number 2000', message_history=result.all_messages())
    assert summary_text(chatty.requests[-1][0]) == 'SUMMARY-1' and len(summarizer.prompts) == 1


async def test_one_long_chain_of_tool_calls_in_a_single_run_is_compacted_where_the_agent_asks() -> None:
    # A coding agent's run: one prompt, then tool call after tool call; no request opens a turn to cut at.
    summarizer, requests = Summarizer(), list[list[ModelMessage]]()

    def agent_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(messages)
        step = len(requests)
        if step <= 6:
            return ModelResponse(parts=[ToolCallPart('run', {'step': step}, tool_call_id=f's{step}')])
        if step == 7:
            return ModelResponse(parts=[ToolCallPart('compact_conversation', {}, tool_call_id='tidy')])
        return ModelResponse(parts=[TextPart('build fixed')])

    manager = ContextManagerCapability(summarization_model=FunctionModel(summarizer), include_compact_tool=True)
    agent = Agent(FunctionModel(agent_model), system_prompt='You fix builds.', capabilities=[manager])

    @agent.tool_plain
    def run(step: int) -> str:
        return f'output of step {step}'

    result = await agent.run('fix the build')

    after = requests[-1]
    # The system prompt and the summary of steps 1 to 6, then the compact_conversation call and its return.
    assert summary_text(after[0]) == 'SUMMARY-1'
    assert [p.content for p in after[0].parts if isinstance(p, SystemPromptPart)] == ['You fix builds.']
    assert after[1:] == result.all_messages()[-3:-1]
    assert pair_violations(after, result.all_messages()) == []
    assert 'output of step 6' in summarizer.prompts[0] and manager.compression_count == 1
    assert len(result.all_messages()) == 2 + 2 * 7


async def test_request_compact_and_compact_compress_with_focus_and_every_callback() -> None:
    summarizer, events = Summarizer(), list[tuple[Any, ...]]()

    def after_compress(messages: list[ModelMessage], summarized: bool, summary: str | None) -> str:
        events.append(('after', summarized, summary))
        return 'KEEP IDS'

    manager = ContextManagerCapability(
        max_tokens=10_000,
        summarization_model=FunctionModel(summarizer),
        on_usage_update=lambda share, tokens, budget: events.append(('usage', tokens, budget)),
        on_before_compress=lambda messages, cutoff: events.append(('before', len(messages), cutoff)),
        on_after_compress=after_compress,
    )
    chatty = Chatty()
    agent = Agent(FunctionModel(chatty), capabilities=[manager])
    history: list[ModelMessage] = []
    for turn in range(3):
        history = (await agent.run(f'order number {turn}', message_history=history)).all_messages()
    events.clear()

    manager.request_compact(focus='refunds')
    history = (await agent.run('anything new?', message_history=history)).all_messages()

    kinds = [event[0] for event in events]
    assert kinds == ['usage', 'before', 'after', 'usage']
    assert events[1] == ('before', 7, 6) and events[2] == ('after', True, 'SUMMARY-1')
    assert events[0][2] == events[3][2] == 10_000 and events[3][1] < events[0][1]
    assert 'refunds' in summarizer.prompts[0]
    # What on_after_compress returned rides beside the summary, in this request and the next ones.
    for request in chatty.requests[-1:]:
        assert [p.content for p in request[0].parts if isinstance(p, SystemPromptPart)] == ['KEEP IDS']
    history = (await agent.run('and now?', message_history=history)).all_messages()
    assert [p.content for p in chatty.requests[-1][0].parts if isinstance(p, SystemPromptPart)] == ['KEEP IDS']

    # compact() outside a run: forced, incremental, the same callbacks.
    events.clear()
    grown = [*history, ModelRequest(parts=[UserPromptPart('last one')])]
    window = await manager.compact(grown, focus='shipping')
    assert summary_text(window[0]) == 'SUMMARY-2' and window[-1] is grown[-1]
    assert PREVIOUS.findall(summarizer.prompts[1]) == ['SUMMARY-1'] and 'shipping' in summarizer.prompts[1]
    assert [event[0] for event in events] == ['usage', 'before', 'after', 'usage']
    assert manager.compression_count == 2


async def test_the_window_is_compacted_at_the_threshold_of_the_models_context_window() -> None:
    summarizer, chatty = Summarizer(), Chatty()
    usage: list[float] = []
    manager = ContextManagerCapability(
        compress_threshold=0.5,
        summarization_model=FunctionModel(summarizer),
        on_usage_update=lambda share, tokens, budget: usage.append(share),
    )
    model = FunctionModel(chatty, profile={'context_window': 400})
    agent = Agent(model, capabilities=[manager])
    history: list[ModelMessage] = []
    for turn in range(12):
        history = (await agent.run(f'order number {turn} ' + 'z' * 80, message_history=history)).all_messages()

    assert summarizer.prompts and manager.compression_count == len(summarizer.prompts)
    # Every request the model got stayed around the threshold of its 400-token window.
    assert max(usage) < 0.8
    # Incremental: each summarizer input held the previous summary and only messages not read before.
    seen: set[str] = set()
    for index, prompt in enumerate(summarizer.prompts):
        if index:
            assert PREVIOUS.findall(prompt) == [f'SUMMARY-{index}']
        (block,) = NEW_MESSAGES.findall(prompt)
        turns = {line for line in block.splitlines() if line.startswith('User: order number')}
        assert not turns & seen
        seen |= turns


async def test_a_fresh_engine_passed_to_a_run_stands_in_for_the_agents_and_shares_its_requests_and_counts() -> None:
    summarizer, chatty, usage = Summarizer(), Chatty(), list[int]()
    manager = ContextManagerCapability(
        summarization_model=FunctionModel(summarizer),
        include_compact_tool=True,
        on_usage_update=lambda share, tokens, budget: usage.append(tokens),
    )
    agent = Agent(FunctionModel(chatty), capabilities=[manager])
    history: list[ModelMessage] = []
    for turn in range(3):
        history = (await agent.run(f'order number {turn}', message_history=history)).all_messages()
    made, failed = list[Summary](), list[object]()
    copy = manager.fresh_engine(on_summary=made.append, on_failure=failed.append)
    assert copy.id == manager.id == CONTEXT_MANAGER_ID and copy.processor is not manager.processor
    usage.clear()

    manager.request_compact(focus='refunds')  # asked of the agent's capability, carried out by the copy
    await agent.run('anything new?', message_history=history, capabilities=[copy])

    # The copy replaced the agent's capability for the run (one usage report before and one after the compaction,
    # not two of each), reported its summary to its own callback, and counted it on the agent's capability.
    assert len(usage) == 2 and usage[1] < usage[0]
    assert [s.focus for s in made] == ['refunds'] and failed == []
    assert summary_text(chatty.requests[-1][0]) == 'SUMMARY-1' and len(summarizer.prompts) == 1
    assert manager.compression_count == copy.compression_count == 1
    assert manager.processor.usage.requests == 1
    # Its engine remembers no history of its own: the agent's capability never saw the compacted window.
    assert manager.processor.compaction_state(history) is None


async def test_a_limit_warner_listed_first_warns_on_the_managed_window() -> None:
    chatty = Chatty()
    agent = Agent(
        FunctionModel(chatty),
        capabilities=[
            LimitWarnerCapability(max_context_tokens=40, token_counter=lambda messages: 10 * len(messages)),
            ContextManagerCapability(max_tokens=100_000, summarization_model=FunctionModel(Summarizer())),
        ],
    )
    history: list[ModelMessage] = []
    for turn in range(3):
        history = (await agent.run(f'order number {turn}', message_history=history)).all_messages()
    assert LIMIT_WARNING_MARKER in str(chatty.requests[-1][-1])
    assert not any(LIMIT_WARNING_MARKER in str(m) for m in history)


@pytest.mark.parametrize(
    ('kwargs', 'message'),
    [
        ({'compress_threshold': 1.5}, 'compress_threshold must be between 0 and 1, got 1.5'),
        ({'compress_threshold': 0}, 'compress_threshold must be between 0 and 1, got 0'),
        ({'max_tool_output_tokens': 0}, 'max_tool_output_tokens=0'),
        ({'keep': ('messages', -1)}, 'keep thresholds must be non-negative'),
    ],
)
def test_bad_settings_fail_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        ContextManagerCapability(**kwargs)
    assert message in str(raised.value)


def test_the_compact_tool_is_offered_only_when_asked() -> None:
    assert ContextManagerCapability().get_toolset() is None
    toolset = ContextManagerCapability(include_compact_tool=True).get_toolset()
    assert toolset is not None and 'compact_conversation' in toolset.tools  # type: ignore[attr-defined]
    assert ContextManagerCapability.get_serialization_name() == 'ContextManagerCapability'
