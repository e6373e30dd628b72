"""Size rules are validated at construction, with errors that name the parameter and the value."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.test import TestModel

from processors import SlidingWindow, SlidingWindowProcessor, Summarization, SummarizationProcessor


@pytest.mark.parametrize(
    ('kwargs', 'message'),
    [
        ({'trigger': ('bytes', 10)}, "trigger=('bytes', 10): Unsupported context size type bytes for trigger"),
        ({'trigger': ('messages', 0)}, "trigger=('messages', 0): the value must be a whole number > 0"),
        ({'trigger': ('tokens', -5)}, "trigger=('tokens', -5)"),
        ({'trigger': ('messages', 2.5)}, "trigger=('messages', 2.5)"),
        (
            {'trigger': ('fraction', 0.0), 'max_input_tokens': 1000},
            "trigger=('fraction', 0.0): Fractional trigger values must be between 0 and 1, got 0.0",
        ),
        ({'trigger': ('fraction', 1.5), 'max_input_tokens': 1000}, "trigger=('fraction', 1.5)"),
        ({'trigger': [('messages', 10), ('tokens', 0)]}, "trigger[1]=('tokens', 0)"),
        ({'trigger': []}, 'trigger=[]'),
        ({'trigger': 'messages'}, 'trigger must be'),
        ({'keep': ('messages', -1)}, "keep=('messages', -1): keep thresholds must be non-negative, got -1"),
        ({'keep': ('messages', 1.5)}, "keep=('messages', 1.5): the value must be a whole number >= 0"),
        ({'keep_head': ('messages', -2)}, "keep_head=('messages', -2): keep_head thresholds must be non-negative"),
        ({'trigger': ('fraction', 0.8)}, "trigger=('fraction', 0.8) needs max_input_tokens"),
        ({'trigger': ('fraction', 0.8)}, 'max_input_tokens is required when using fraction-based trigger or keep'),
        ({'keep_head': ('fraction', 0.1)}, 'max_input_tokens is required when using fraction-based keep_head.'),
        ({'keep': ('fraction', 0.3)}, "keep=('fraction', 0.3) needs max_input_tokens"),
        ({'max_input_tokens': 0}, 'max_input_tokens=0: max_input_tokens must be greater than 0'),
        ({'token_counter': 42}, 'token_counter must be callable'),
    ],
)
def test_bad_specs_fail_at_construction_naming_the_parameter(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        SlidingWindowProcessor(**kwargs)
    assert message in str(raised.value)
    with pytest.raises(ValueError) as raised:
        SummarizationProcessor(TestModel(), **kwargs)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ('kwargs', 'message'),
    [
        ({'summary_prompt': 'Summarize please.'}, 'summary_prompt must contain {messages}'),
        ({'trim_tokens_to_summarize': 0}, 'trim_tokens_to_summarize=0'),
        ({'max_summary_tokens': -1}, 'max_summary_tokens=-1'),
        ({'summarizer_timeout': 0}, 'summarizer_timeout=0'),
    ],
)
def test_bad_summarizer_settings_fail_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace('{', r'\{').replace('}', r'\}')):
        SummarizationProcessor(TestModel(), **kwargs)


def test_valid_specs_are_accepted() -> None:
    SlidingWindowProcessor(trigger=[('messages', 10), ('tokens', 500)], keep=('messages', 0))
    SlidingWindowProcessor(trigger=('fraction', 1.0), keep=('fraction', 0.5), max_input_tokens=8_000)
    SlidingWindowProcessor(trigger=None)


def test_capabilities_defer_fractions_to_the_model_context_window() -> None:
    # No max_input_tokens: the capability reads the serving model's context_window at request time.
    SlidingWindow(trigger=('fraction', 0.8), keep=('fraction', 0.3))
    Summarization(model=TestModel(), trigger=('fraction', 0.8))


async def test_a_fraction_with_no_window_anywhere_fails_naming_the_parameter() -> None:
    from pydantic_ai import Agent

    agent = Agent(TestModel(), capabilities=[SlidingWindow(trigger=('fraction', 0.8))])
    with pytest.raises(ValueError, match=r"trigger=\('fraction', 0.8\) needs a context window"):
        await agent.run('hello')


async def test_below_every_trigger_is_sure_only_for_message_triggers_the_window_is_under() -> None:
    """What a store asks before running the processor over a stored window: no answer it gives may skip a
    compaction the processor's own pass would make."""
    by_count = SlidingWindowProcessor(trigger=[('messages', 10), ('messages', 30)], keep=('messages', 4))
    assert by_count.below_every_trigger(9) and not by_count.below_every_trigger(10)
    with_tokens = SlidingWindowProcessor(trigger=[('messages', 10), ('tokens', 5_000)], keep=('messages', 4))
    assert not with_tokens.below_every_trigger(1)  # a token trigger needs the window's counts
    assert SlidingWindowProcessor(trigger=None).below_every_trigger(10**6)  # nothing ever fires
    summarizer = SummarizationProcessor(TestModel(), trigger=('messages', 10), keep=('messages', 4))
    assert summarizer.below_every_trigger(9) and not summarizer.below_every_trigger(10)
    # The processor's own pass agrees at the boundary: 9 messages stay as they are, 10 are cut.
    history: list[ModelMessage] = []
    for turn in range(5):
        history += [
            ModelRequest(parts=[UserPromptPart(f'question {turn}')]),
            ModelResponse(parts=[TextPart(f'answer {turn}')]),
        ]
    assert await by_count.window(history[:9]) == history[:9]
    assert len(await by_count.window(history[:10])) < 10
