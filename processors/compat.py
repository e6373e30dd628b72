"""`summarization-pydantic-ai`'s public names, all of them, so its users switch by changing an import.

`__all__` here is that package's surface (less pydantic-ai's `ModelType` and its `__version__`), and
`processors` serves each of these names too, so `from pydantic_ai_summarization import X` becomes
`from processors import X` (or `from processors.compat import X`). Most are our own names, imported
from their modules. Those defined here exist only for code written against that package: its
capability classes (with its defaults), its factories (with its signatures and defaults), its
transcript format, its name for awaiting a counter, and a constant it exports. Code written for
`processors` uses the plain names: `SlidingWindow`, `Summarization`, the processor classes
themselves and `count_tokens`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import BaseToolCallPart, BaseToolReturnPart, FilePart, ModelMessage, SpeechPart
from pydantic_ai.models import Model

from . import sliding_window, summarization
from .capabilities import LimitWarnerCapability, SlidingWindow, Summarization
from .compression import CompressionPlan, SkipReason, SummarizationResult
from .context_manager import ContextManagerCapability
from .limit_warner import LimitWarnerProcessor, WarningOn
from .sliding_window import SlidingWindowProcessor
from .specs import ContextFraction, ContextMessages, ContextSize, ContextTokens
from .summarization import DEFAULT_SUMMARY_PROMPT, SummarizationProcessor
from .text import part_text, render, speaker
from .tokens import TokenCounter, count_tokens, count_tokens_approximately

__all__ = (
    'DEFAULT_CONTINUATION_PROMPT',
    'DEFAULT_SUMMARY_PROMPT',
    'CompressionPlan',
    'ContextFraction',
    'ContextManagerCapability',
    'ContextMessages',
    'ContextSize',
    'ContextTokens',
    'LimitWarnerCapability',
    'LimitWarnerProcessor',
    'SkipReason',
    'SlidingWindowCapability',
    'SlidingWindowProcessor',
    'SummarizationCapability',
    'SummarizationProcessor',
    'SummarizationResult',
    'TokenCounter',
    'WarningOn',
    'async_count_tokens',
    'count_tokens_approximately',
    'create_limit_warner_processor',
    'create_sliding_window_processor',
    'create_summarization_processor',
    'format_messages_for_summary',
)


@dataclass
class SlidingWindowCapability(SlidingWindow):
    """`SlidingWindow` under `summarization-pydantic-ai`'s name, for code that imports it (same defaults)."""

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return 'SlidingWindowCapability'


@dataclass
class SummarizationCapability(Summarization):
    """`Summarization` under `summarization-pydantic-ai`'s name and defaults: summarize at 50 messages, keep 10,
    with `openai:gpt-4.1-mini`. Pass arguments by keyword (the summarizer `model` comes first here)."""

    model: Model | str = 'openai:gpt-4.1-mini'
    trigger: ContextSize | Sequence[ContextSize] | None = ('messages', 50)
    keep: ContextSize = ('messages', 10)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return 'SummarizationCapability'


def create_sliding_window_processor(
    trigger: ContextSize | Sequence[ContextSize] | None = sliding_window.DEFAULT_TRIGGER,
    keep: ContextSize = sliding_window.DEFAULT_KEEP,
    keep_head: ContextSize | None = None,
    max_input_tokens: int | None = None,
    token_counter: TokenCounter | None = None,
) -> SlidingWindowProcessor:
    """A `SlidingWindowProcessor`, with `summarization-pydantic-ai`'s factory signature and defaults."""
    return SlidingWindowProcessor(
        trigger=trigger,
        keep=keep,
        keep_head=keep_head,
        max_input_tokens=max_input_tokens,
        token_counter=token_counter or count_tokens_approximately,
    )


def create_summarization_processor(
    model: Model | str = 'openai:gpt-4.1',
    trigger: ContextSize | Sequence[ContextSize] | None = summarization.DEFAULT_TRIGGER,
    keep: ContextSize = summarization.DEFAULT_KEEP,
    max_input_tokens: int | None = None,
    token_counter: TokenCounter | None = None,
    summary_prompt: str | None = None,
) -> SummarizationProcessor:
    """A `SummarizationProcessor`, with `summarization-pydantic-ai`'s factory signature and defaults."""
    return SummarizationProcessor(
        model=model,
        trigger=trigger,
        keep=keep,
        max_input_tokens=max_input_tokens,
        token_counter=token_counter or count_tokens_approximately,
        summary_prompt=summary_prompt or DEFAULT_SUMMARY_PROMPT,
    )


def create_limit_warner_processor(
    max_iterations: int | None = None,
    max_context_tokens: int | None = None,
    max_total_tokens: int | None = None,
    warn_on: list[WarningOn] | None = None,
    warning_threshold: float = 0.7,
    critical_remaining_iterations: int = 3,
    token_counter: TokenCounter | None = None,
) -> LimitWarnerProcessor:
    """A `LimitWarnerProcessor`, with `summarization-pydantic-ai`'s factory signature."""
    return LimitWarnerProcessor(
        max_iterations=max_iterations,
        max_context_tokens=max_context_tokens,
        max_total_tokens=max_total_tokens,
        warn_on=warn_on,
        warning_threshold=warning_threshold,
        critical_remaining_iterations=critical_remaining_iterations,
        token_counter=token_counter or count_tokens_approximately,
    )


async_count_tokens = count_tokens
"""`count_tokens` under `summarization-pydantic-ai`'s name."""

DEFAULT_CONTINUATION_PROMPT = 'Summary of previous conversation:\n\n'
"""The text `summarization-pydantic-ai` puts before its summary in the message that carries it, kept for
code that imports it. Our summaries travel as a `CompactionPart`, which pydantic-ai itself introduces to the
model as a summary of the earlier conversation, so no prefix is added to them."""

_CLIP = 500
"""How many characters of a tool result that package's transcript keeps."""


def _seed_text(value: Any) -> str:
    """`value` read as `summarization-pydantic-ai` reads message content: the text items of a list joined
    by spaces (a `{'text': ...}` dict counts as text), media noted rather than read."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        texts: list[str] = []
        media = 0
        for item in value:
            if isinstance(item, dict) and 'text' in item:
                texts.append(str(item['text']))
            elif not isinstance(item, dict):
                text, item_media = render(item)
                media += item_media
                if text:
                    texts.append(text)
        if media:
            texts.append(f'[{media} media item{"s" if media > 1 else ""}]')
        return ' '.join(texts)
    text, media = render(value)
    return f'{text} [{media} media item{"s" if media > 1 else ""}]'.strip() if media else text


def _seed_line(part: Any, message: ModelMessage) -> str | None:
    if isinstance(part, BaseToolCallPart):
        return f'Tool Call [{part.tool_name}]: {render(part.args)[0]}'
    if isinstance(part, BaseToolReturnPart):
        content = _seed_text(part.content)
        outcome = '' if part.outcome == 'success' else f' ({part.outcome})'
        return f'Tool [{part.tool_name}]{outcome}: {content[:_CLIP]}{"..." if len(content) > _CLIP else ""}'
    text = (
        _seed_text(getattr(part, 'content', None))
        if not isinstance(part, FilePart | SpeechPart)
        else part_text(part)[0]
    )
    return f'{speaker(part, message)}: {text}' if text else None


def format_messages_for_summary(messages: Sequence[ModelMessage]) -> str:
    """`messages` as `summarization-pydantic-ai` formats them for a summarizer: `User: ...`, `Assistant: ...`,
    `System: ...`, `Tool Call [name]: args`, `Tool [name]: result` (clipped at 500 characters), one line each.

    For code that builds its own summarizer prompts. Every part kind has a line here (thinking, retries,
    summaries, media), where that package skipped those it did not know.
    """
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            line = _seed_line(part, message)
            if line is not None:
                lines.append(line)
    return '\n'.join(lines)
