"""History processors for long pydantic-ai conversations: pair-safe cuts, real token counts, sliding
windows and incremental summaries. Pure: no I/O of their own.

`__all__` is what a new user needs: each processor as a capability and as a plain history
processor, the size rule, the token counters (and `count_tokens`, which awaits any of them) and
what a summary hands back. Everything else lives in its module (`processors.cut_points`,
`processors.tokens`, `processors.summary`, ...).

`summarization-pydantic-ai`'s public names are all in `compat`, and each is served here too, outside
`__all__`, so code written for that package switches by changing an import."""

from .capabilities import LimitWarnerCapability, SlidingWindow, Summarization

# Every name of `compat.__all__`: a star import re-exports each, typed, to type checkers too.
from .compat import *  # noqa: F403
from .compression import CompressionPlan, SummarizationResult
from .context_manager import ContextManagerCapability
from .limit_warner import LimitWarnerProcessor
from .sliding_window import SlidingWindowProcessor
from .specs import ContextSize
from .summarization import SummarizationProcessor
from .summary import SummarizationFailure, Summary, summary_text
from .tokens import TiktokenCounter, TokenCounter, count_tokens, count_tokens_approximately

__all__ = (
    'CompressionPlan',
    'ContextManagerCapability',
    'ContextSize',
    'LimitWarnerCapability',
    'LimitWarnerProcessor',
    'SlidingWindow',
    'SlidingWindowProcessor',
    'Summarization',
    'SummarizationFailure',
    'SummarizationProcessor',
    'SummarizationResult',
    'Summary',
    'TiktokenCounter',
    'TokenCounter',
    'count_tokens',
    'count_tokens_approximately',
    'summary_text',
)
