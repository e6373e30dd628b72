"""The names code written for summarization-pydantic-ai imports, and how they read and behave here."""

from __future__ import annotations

import inspect

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import processors
from processors import (  # the seed package's names, as code written for it imports them
    DEFAULT_CONTINUATION_PROMPT,
    SlidingWindow,
    SlidingWindowCapability,
    Summarization,
    SummarizationCapability,
    async_count_tokens,
    compat,
    count_tokens_approximately,
    format_messages_for_summary,
    summary_text,
)
from testkit.histories import tool_history

SEED_NAMES = (
    'SummarizationCapability',
    'SlidingWindowCapability',
    'LimitWarnerCapability',
    'ContextManagerCapability',
    'SummarizationProcessor',
    'SummarizationResult',
    'CompressionPlan',
    'SkipReason',
    'create_summarization_processor',
    'SlidingWindowProcessor',
    'create_sliding_window_processor',
    'LimitWarnerProcessor',
    'create_limit_warner_processor',
    'count_tokens_approximately',
    'format_messages_for_summary',
    'async_count_tokens',
    'ContextSize',
    'ContextFraction',
    'ContextTokens',
    'ContextMessages',
    'WarningOn',
    'TokenCounter',
    'DEFAULT_SUMMARY_PROMPT',
    'DEFAULT_CONTINUATION_PROMPT',
)
"""The seed package's public names (its `__all__`, less `__version__` and `ModelType`, pydantic-ai's own)."""


PUBLIC = (
    # each processor as a capability, and as a plain history processor
    'SlidingWindow',
    'Summarization',
    'ContextManagerCapability',
    'LimitWarnerCapability',
    'SlidingWindowProcessor',
    'SummarizationProcessor',
    'LimitWarnerProcessor',
    # the size rule and the token counters
    'ContextSize',
    'TokenCounter',
    'TiktokenCounter',
    'count_tokens',
    'count_tokens_approximately',
    # what a summary hands back
    'Summary',
    'SummarizationFailure',
    'SummarizationResult',
    'CompressionPlan',
    'summary_text',
)
"""`processors.__all__`: the short list a new user holds. Everything else lives in its module."""


def test_the_public_names_are_the_short_list() -> None:
    assert sorted(processors.__all__) == sorted(PUBLIC)
    assert len(processors.__all__) == len(set(processors.__all__))


@pytest.mark.parametrize('name', SEED_NAMES)
def test_every_public_name_of_the_seed_package_is_served(name: str) -> None:
    # `from pydantic_ai_summarization import X` becomes `from processors import X`, whether or not X is in
    # `__all__`; each is one object with its name in `compat`, the one list of the seed package's names.
    namespace: dict[str, object] = {}
    exec(f'from processors import {name}', namespace)
    assert namespace[name] is getattr(compat, name)


def test_compat_lists_exactly_the_seed_package_names() -> None:
    assert sorted(compat.__all__) == sorted(SEED_NAMES)


def test_the_package_serves_only_its_public_names_and_the_seed_package_names() -> None:
    """Internals (`Lineage`, `CompactionState`, `safe_cut_points`, ...) are imported from their modules."""
    served = {name for name in dir(processors) if not name.startswith('_')}
    modules = {name for name in served if inspect.ismodule(getattr(processors, name))}
    assert served - modules == set(PUBLIC) | set(SEED_NAMES)


def test_messages_format_for_a_summary_as_the_seed_package_formats_them() -> None:
    long = 'x' * 600
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart('Be brief.'), UserPromptPart('Hello'), UserPromptPart(['Look', 'here'])]),
        ModelResponse(parts=[ThinkingPart('hmm'), ToolCallPart('search', {'q': 'test'}, tool_call_id='1')]),
        ModelRequest(parts=[ToolReturnPart('search', 'Found 5 results', tool_call_id='1')]),
        ModelResponse(parts=[ToolCallPart('read', {}, tool_call_id='2')]),
        ModelRequest(parts=[ToolReturnPart('read', long, tool_call_id='2')]),
        ModelRequest(parts=[ToolReturnPart('read', 'bad arguments', tool_call_id='3', outcome='retried')]),
        ModelRequest(parts=[UserPromptPart(['A picture:', BinaryContent(b'\x89PNG', media_type='image/png')])]),
        ModelRequest(parts=[CompactionPart('the earlier gist')]),
        ModelResponse(parts=[TextPart('Hi there')]),
    ]
    assert format_messages_for_summary(messages).splitlines() == [
        'System: Be brief.',
        'User: Hello',
        'User: Look here',
        'Assistant (thinking): hmm',
        'Tool Call [search]: {"q":"test"}',
        'Tool [search]: Found 5 results',
        'Tool Call [read]: {}',
        f'Tool [read]: {"x" * 500}...',
        'Tool [read] (retried): bad arguments',
        'User: A picture: [1 media item]',
        'Earlier summary: the earlier gist',
        'Assistant: Hi there',
    ]
    assert format_messages_for_summary([]) == ''


async def test_async_count_tokens_awaits_an_async_counter_and_calls_a_sync_one() -> None:
    history = tool_history(2)

    async def counter(messages: object) -> int:
        return 7

    assert await async_count_tokens(count_tokens_approximately, history) == count_tokens_approximately(history)
    assert await async_count_tokens(counter, history) == 7


def test_the_continuation_prompt_is_the_seed_packages_text() -> None:
    assert DEFAULT_CONTINUATION_PROMPT == 'Summary of previous conversation:\n\n'


def test_the_seed_capability_names_are_ours_with_its_defaults() -> None:
    summarization = SummarizationCapability()
    assert isinstance(summarization, Summarization)
    assert (summarization.trigger, summarization.keep, summarization.model) == (
        ('messages', 50),
        ('messages', 10),
        'openai:gpt-4.1-mini',
    )
    window = SlidingWindowCapability(keep_head=('messages', 1))
    assert isinstance(window, SlidingWindow)
    assert (window.trigger, window.keep) == (('messages', 100), ('messages', 50))
    assert SummarizationCapability.get_serialization_name() == 'SummarizationCapability'
    assert SlidingWindowCapability.get_serialization_name() == 'SlidingWindowCapability'


async def test_summarization_capability_compacts_a_real_agent_run_and_leaves_its_history_whole() -> None:
    prompts: list[str] = []

    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        return ModelResponse(parts=[TextPart('they talked about turns 0 to 3')])

    seen: list[list[ModelMessage]] = []

    def assistant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart(f'answer {len(seen)}')])

    agent = Agent(
        FunctionModel(assistant),
        capabilities=[
            SummarizationCapability(model=FunctionModel(summarize), trigger=('messages', 8), keep=('messages', 2))
        ],
    )
    history: list[ModelMessage] = []
    for turn in range(5):
        history = (await agent.run(f'question {turn}', message_history=history)).all_messages()
    assert len(history) == 10 and not any(isinstance(p, CompactionPart) for m in history for p in m.parts)
    assert len(prompts) == 1 and 'question 0' in prompts[0]
    assert summary_text(seen[-1][0]) == 'they talked about turns 0 to 3'
    assert seen[-1][-1].parts[-1].content == 'question 4'  # type: ignore[union-attr]


async def test_the_seed_capabilities_run_with_their_defaults() -> None:
    for capability in (SummarizationCapability(), SlidingWindowCapability()):
        result = await Agent(TestModel(), capabilities=[capability]).run('Hello')
        assert result.output
