"""History processors for long pydantic-ai conversations: pair-safe cuts, real token counts, sliding
windows and incremental summaries. Pure: no I/O of their own.

`summarization-pydantic-ai`'s names (`SlidingWindowCapability`, the `create_*` factories, ...) live in
`compat` and are served here too, so code written for that package switches by changing an import."""

from ._processor_base import CompactionState
from ._text import format_messages, message_text, part_text
from ._window_engine import Lineage
from .capabilities import LimitWarnerCapability, SlidingWindow, Summarization, as_capability
from .compat import (
    DEFAULT_CONTINUATION_PROMPT,
    SlidingWindowCapability,
    SummarizationCapability,
    async_count_tokens,
    create_limit_warner_processor,
    create_sliding_window_processor,
    create_summarization_processor,
    format_messages_for_summary,
)
from .compression import CompressionPlan, SkipReason, SummarizationResult
from .context_manager import CONTEXT_MANAGER_ID, DEFAULT_MAX_TOKENS, ContextManagerCapability
from .cut_points import is_turn_start, safe_cut_points, tool_call_ids
from .limit_warner import LIMIT_WARNING_MARKER, LimitWarnerProcessor, LimitWarning, WarningOn
from .sliding_window import SlidingWindowProcessor
from .specs import ContextFraction, ContextMessages, ContextSize, ContextTokens
from .summarization import DEFAULT_SUMMARY_PROMPT, SummarizationProcessor
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
    'CONTEXT_MANAGER_ID',
    'DEFAULT_CONTINUATION_PROMPT',
    'DEFAULT_MAX_TOKENS',
    'DEFAULT_SUMMARY_PROMPT',
    'LIMIT_WARNING_MARKER',
    'MEDIA_TOKENS',
    'MESSAGE_OVERHEAD_TOKENS',
    'CompactionState',
    'CompressionPlan',
    'ContextFraction',
    'ContextManagerCapability',
    'ContextMessages',
    'ContextSize',
    'ContextTokens',
    'LimitWarnerCapability',
    'LimitWarnerProcessor',
    'LimitWarning',
    'Lineage',
    'SkipReason',
    'SlidingWindow',
    'SlidingWindowCapability',
    'SlidingWindowProcessor',
    'Summarization',
    'SummarizationCapability',
    'SummarizationFailure',
    'SummarizationProcessor',
    'SummarizationResult',
    'Summary',
    'TiktokenCounter',
    'TokenCounter',
    'WarningOn',
    'as_capability',
    'async_count_tokens',
    'count_tokens',
    'count_tokens_approximately',
    'create_limit_warner_processor',
    'create_sliding_window_processor',
    'create_summarization_processor',
    'find_summary',
    'format_messages',
    'format_messages_for_summary',
    'is_turn_start',
    'message_text',
    'part_text',
    'safe_cut_points',
    'summary_request',
    'summary_text',
    'tool_call_ids',
)
