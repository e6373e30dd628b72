"""Limit warnings: Agent runs on FunctionModel see a warning turn as a limit nears; the history never holds one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, RunUsage

from processors import LimitWarnerCapability, LimitWarnerProcessor, Summarization, summary_text
from processors.compat import create_limit_warner_processor
from processors.limit_warner import LIMIT_WARNING_MARKER


def warning_in(messages: list[ModelMessage]) -> str | None:
    """The warning the last message carries, if any."""
    last = messages[-1]
    for part in last.parts:
        if isinstance(part, UserPromptPart) and isinstance(part.content, str) and LIMIT_WARNING_MARKER in part.content:
            return part.content
    return None


@dataclass
class Worker:
    """Calls the `step` tool `steps` times, then answers; each response reports `tokens` input tokens."""

    steps: int
    tokens: int = 10
    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(messages)
        usage = RequestUsage(input_tokens=self.tokens, output_tokens=5)
        if len(self.requests) <= self.steps:
            return ModelResponse(parts=[ToolCallPart('step', {}, tool_call_id=f'c{len(self.requests)}')], usage=usage)
        return ModelResponse(parts=[TextPart('done')], usage=usage)


def agent_with(worker: Worker, *capabilities: Any) -> Agent[None, str]:
    agent = Agent(FunctionModel(worker), capabilities=list(capabilities))

    @agent.tool_plain
    def step() -> str:
        return 'stepped'

    return agent


async def test_iteration_warnings_start_at_the_threshold_and_turn_critical_near_the_end() -> None:
    worker = Worker(steps=9)
    result = await agent_with(worker, LimitWarnerCapability(max_iterations=10, critical_remaining_iterations=2)).run(
        'go'
    )
    warnings = [warning_in(request) for request in worker.requests]
    # Request n+1 goes out after n requests: 7/10 is the 70% threshold.
    assert warnings[:7] == [None] * 7
    assert warnings[7] is not None and warnings[7].splitlines()[:3] == [
        LIMIT_WARNING_MARKER,
        'URGENT: Configured run limits are approaching.',
        '- Iterations: 7/10 requests used (70%); 3 remaining.',
    ]
    assert warnings[8] is not None and warnings[8].splitlines()[1:3] == [
        'CRITICAL: Configured run limits are approaching.',
        '- Iterations: 8/10 requests used (80%); 2 remaining.',
    ]
    # One warning per request at most, and none in the run's history.
    assert all(sum(LIMIT_WARNING_MARKER in str(m) for m in request) <= 1 for request in worker.requests)
    assert not any(LIMIT_WARNING_MARKER in str(m) for m in result.all_messages())
    assert len(result.all_messages()) == 2 + 2 * 9


async def test_total_and_context_token_warnings_use_the_runs_usage_and_the_window_sent() -> None:
    worker = Worker(steps=4, tokens=100)
    capability = LimitWarnerCapability(
        max_total_tokens=1_000, max_context_tokens=200, token_counter=lambda messages: 30 * len(messages)
    )
    await agent_with(worker, capability).run('go')
    warnings = [warning_in(request) for request in worker.requests]
    # Five requests of 105 tokens each stay under 70% of the 1,000 total; the context, at 30 tokens a message,
    # reaches 70% of 200 with the 5 messages of the third request.
    assert warnings[:2] == [None, None]
    assert warnings[2] is not None and '- Context window: 150/200 tokens used (75%); 50 remaining.' in warnings[2]
    assert 'Total tokens' not in warnings[2]
    assert warnings[4] is not None and '- Context window: 270/200 tokens used (135%); 0 remaining.' in warnings[4]
    assert warnings[4].splitlines()[1].startswith('CRITICAL')


async def test_a_warner_listed_first_still_measures_and_warns_after_the_window_is_compacted() -> None:
    summaries: list[str] = []

    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        summaries.append('made')
        return ModelResponse(parts=[TextPart(f'gist {len(summaries)}')])

    requests: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(messages)
        return ModelResponse(parts=[TextPart(f'answer {len(requests)}')])

    summarization = Summarization(model=FunctionModel(summarize), trigger=('messages', 8), keep=('messages', 3))
    warner = LimitWarnerCapability(max_context_tokens=60, token_counter=lambda messages: 10 * len(messages))
    agent = Agent(FunctionModel(answer), capabilities=[warner, summarization])
    history: list[ModelMessage] = []
    for turn in range(12):
        history = (await agent.run(f'question {turn}', message_history=history)).all_messages()

    assert not any(LIMIT_WARNING_MARKER in str(m) for m in history)
    warned = [request for request in requests if warning_in(request) is not None]
    assert warned and any(summary_text(request[0]) is not None for request in warned)
    for request in warned:
        # The warner measured the window actually sent (the compacted one, under 8 messages at 10 tokens each),
        # not the 20-odd message history.
        (line,) = [line for line in (warning_in(request) or '').splitlines() if 'Context window' in line]
        assert int(line.split(': ')[1].split('/')[0]) < 80
    # A warning never reached the window engine, which would otherwise take each request for a new history
    # and summarize again every time: one summary per compaction, far fewer than requests.
    assert len(summaries) == len({summary_text(r[0]) for r in requests} - {None}) <= 12 // 2


async def test_the_processor_replaces_an_earlier_warning_instead_of_adding_one() -> None:
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel

    warner = create_limit_warner_processor(max_iterations=10)
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart('question')])]
    first = await warner(RunContext(deps=None, model=TestModel(), usage=RunUsage(requests=8)), messages)
    second = await warner(RunContext(deps=None, model=TestModel(), usage=RunUsage(requests=9)), first)
    assert len(second) == 2 and second[0] is messages[0]
    assert '9/10' in (warning_in(second) or '') and '8/10' not in str(second)
    below = await warner(RunContext(deps=None, model=TestModel(), usage=RunUsage(requests=1)), second)
    assert below == messages


@pytest.mark.parametrize(
    ('kwargs', 'message'),
    [
        ({}, 'At least one max_* limit must be configured'),
        ({'max_iterations': 0}, 'max_iterations=0: max_iterations must be positive, got 0'),
        ({'max_total_tokens': -5}, 'max_total_tokens must be positive, got -5'),
        ({'max_iterations': 5, 'warn_on': []}, 'warn_on must not be empty'),
        ({'max_iterations': 5, 'warn_on': ['iterations', 'budget']}, 'Unsupported warn_on value(s): budget'),
        (
            {'max_iterations': 5, 'warn_on': ['context_window']},
            "'context_window' requires its corresponding max_* limit to be configured (max_context_tokens)",
        ),
        ({'max_iterations': 5, 'warning_threshold': 1.5}, 'warning_threshold must be between 0 and 1, got 1.5'),
        ({'max_iterations': 5, 'critical_remaining_iterations': -1}, 'must be non-negative, got -1'),
    ],
)
def test_bad_settings_fail_at_construction_in_the_seed_packages_words(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        LimitWarnerProcessor(**kwargs)
    assert message in str(raised.value)


def test_warn_on_defaults_to_every_configured_limit_and_keeps_the_order_asked() -> None:
    usage = RunUsage(requests=9, input_tokens=900)
    everything = LimitWarnerProcessor(max_iterations=10, max_total_tokens=1_000, max_context_tokens=100)
    assert [w.kind for w in everything.check(usage, context_tokens=90)] == [
        'iterations',
        'context_window',
        'total_tokens',
    ]
    only = LimitWarnerProcessor(max_iterations=10, max_total_tokens=1_000, warn_on=['total_tokens'])
    assert [w.kind for w in only.check(usage)] == ['total_tokens']
