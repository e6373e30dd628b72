"""History processors for long pydantic-ai conversations: pair-safe cuts, real token counts, sliding
windows and incremental summaries. Pure: no I/O of their own."""

from ._text import format_messages, message_text, part_text
from ._windowed import CompactionState
from .capabilities import SlidingWindow, Summarization, as_capability
from .compression import CompressionPlan, SkipReason, SummarizationResult
from .cut_points import is_turn_start, safe_cut_points, tool_call_ids
from .sliding_window import SlidingWindowProcessor, create_sliding_window_processor
from .specs import ContextFraction, ContextMessages, ContextSize, ContextTokens
from .summarization import (
    DEFAULT_CONTINUATION_PROMPT,
    DEFAULT_SUMMARY_PROMPT,
    SummarizationProcessor,
    create_summarization_processor,
)
from .summary import SummarizationFailure, Summary, find_summary, summary_request, summary_text
from .tokens import (
    MEDIA_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    TiktokenCounter,
    TokenCounter,
    count_tokens,
    count_tokens_approximately,
)

__all__ = (
    'DEFAULT_CONTINUATION_PROMPT',
    'DEFAULT_SUMMARY_PROMPT',
    'MEDIA_TOKENS',
    'MESSAGE_OVERHEAD_TOKENS',
    'CompactionState',
    'CompressionPlan',
    'ContextFraction',
    'ContextMessages',
    'ContextSize',
    'ContextTokens',
    'SkipReason',
    'SlidingWindow',
    'SlidingWindowProcessor',
    'Summarization',
    'SummarizationFailure',
    'SummarizationProcessor',
    'SummarizationResult',
    'Summary',
    'TiktokenCounter',
    'TokenCounter',
    'as_capability',
    'count_tokens',
    'count_tokens_approximately',
    'create_sliding_window_processor',
    'create_summarization_processor',
    'find_summary',
    'format_messages',
    'is_turn_start',
    'message_text',
    'part_text',
    'safe_cut_points',
    'summary_request',
    'summary_text',
    'tool_call_ids',
)
