"""Warnings to the model as a run nears its limits: requests made, context tokens, total tokens.

A `LimitWarnerProcessor` looks at the run's usage and the history about to be sent, and when a limit
is within `warning_threshold` of being reached it appends a user turn saying so, marked
`[LimitWarnerProcessor]`, so the model can finish before it is cut off. An earlier warning is
removed first, so at most one is ever in what the model sees. The warning text is worded as in
`summarization-pydantic-ai`, so code that reads it keeps working.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias, get_args

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, SystemPromptPart, UserPromptPart
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage

from .tokens import TokenCounter, count_tokens, count_tokens_approximately

__all__ = (
    'LIMIT_WARNING_MARKER',
    'LimitWarnerProcessor',
    'LimitWarning',
    'WarningOn',
)

WarningOn: TypeAlias = Literal['iterations', 'context_window', 'total_tokens']
"""A limit to warn about: requests made (`max_iterations`), the history's tokens (`max_context_tokens`),
or the run's input and output tokens together (`max_total_tokens`)."""

LIMIT_WARNING_MARKER = '[LimitWarnerProcessor]'
"""The first line of every warning; how a warning is recognised and replaced by the next one."""

_KINDS: tuple[WarningOn, ...] = get_args(WarningOn)
_LIMITS: dict[WarningOn, str] = {
    'iterations': 'max_iterations',
    'context_window': 'max_context_tokens',
    'total_tokens': 'max_total_tokens',
}


@dataclass(frozen=True)
class LimitWarning:
    """One limit the run is close to: how much is used of how much, and whether it is critical."""

    kind: WarningOn
    used: int
    limit: int
    critical: bool
    """Iterations: no more than `critical_remaining_iterations` left. Tokens: the limit is reached."""

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def describe(self) -> str:
        """The warning's line, as the model reads it."""
        share = f'{self.used / self.limit:.0%}'
        if self.kind == 'iterations':
            return f'Iterations: {self.used}/{self.limit} requests used ({share}); {self.remaining} remaining.'
        if self.kind == 'context_window':
            return f'Context window: {self.used}/{self.limit} tokens used ({share}); {self.remaining} remaining.'
        return f'Total tokens: {self.used}/{self.limit} used ({share}); {self.remaining} remaining.'


def warning_text(warnings: Sequence[LimitWarning]) -> str:
    """The user turn that carries `warnings`: the marker, a severity line, a line per limit, and what to do."""
    critical = any(w.critical for w in warnings)
    advice = (
        'Finish the current task now with what you have; make no tool call that is not essential.'
        if critical
        else 'Finish the current task efficiently; avoid tool calls that are not needed.'
    )
    return '\n'.join(
        [
            LIMIT_WARNING_MARKER,
            f'{"CRITICAL" if critical else "URGENT"}: Configured run limits are approaching.',
            *(f'- {w.describe()}' for w in warnings),
            advice,
        ]
    )


def _is_warning(part: ModelRequestPart) -> bool:
    return (
        isinstance(part, UserPromptPart | SystemPromptPart)
        and isinstance(part.content, str)
        and LIMIT_WARNING_MARKER in part.content
    )


def strip_warnings(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """`messages` without earlier warnings: their parts removed, a request that held only warnings dropped.

    A request that was empty to begin with stays (pydantic-ai appends one when a run resumes without a prompt).
    """
    kept: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest) and any(_is_warning(part) for part in message.parts):
            parts = [part for part in message.parts if not _is_warning(part)]
            if parts:
                kept.append(replace(message, parts=parts))
        else:
            kept.append(message)
    return kept


def _positive(value: int | None, name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ValueError(f'{name}={value!r}: {name} must be positive, got {value!r} (a whole number > 0).')


@dataclass
class LimitWarnerProcessor:
    """A history processor that warns the model as the run nears a configured limit.

    Call it as pydantic-ai calls a history processor, `await warner(ctx, messages)`, or use
    `LimitWarnerCapability`, which applies it to each request without touching the run's history.
    Each limit warns once its use reaches `warning_threshold` of it: requests made so far
    (`ctx.usage.requests`) against `max_iterations`, the history's tokens (`token_counter` over the
    messages about to be sent) against `max_context_tokens`, and the run's input plus output tokens
    against `max_total_tokens`.

    Args:
        max_iterations: The run's request budget.
        max_context_tokens: The context budget the history is measured against.
        max_total_tokens: The run's token budget.
        warn_on: Which limits warn; by default every one configured.
        warning_threshold: The share of a limit, in (0, 1], at which it starts to warn.
        critical_remaining_iterations: At this many requests left, an iterations warning is critical.
        token_counter: Counts the history's tokens, sync or async, called once per request with the
            whole history (only when `max_context_tokens` warns).
    """

    max_iterations: int | None = None
    max_context_tokens: int | None = None
    max_total_tokens: int | None = None
    warn_on: list[WarningOn] | None = None
    warning_threshold: float = 0.7
    critical_remaining_iterations: int = 3
    token_counter: TokenCounter = count_tokens_approximately
    _kinds: tuple[WarningOn, ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        for kind in _KINDS:
            _positive(getattr(self, _LIMITS[kind]), _LIMITS[kind])
        threshold = self.warning_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1:
            raise ValueError(
                f'warning_threshold={threshold!r}: warning_threshold must be between 0 and 1, got {threshold!r} '
                '(a share of each limit, 0 excluded).'
            )
        remaining = self.critical_remaining_iterations
        if isinstance(remaining, bool) or not isinstance(remaining, int) or remaining < 0:
            raise ValueError(
                f'critical_remaining_iterations={remaining!r}: critical_remaining_iterations must be '
                f'non-negative, got {remaining!r}.'
            )
        configured = tuple(kind for kind in _KINDS if getattr(self, _LIMITS[kind]) is not None)
        if not configured:
            raise ValueError(
                'At least one max_* limit must be configured: max_iterations, max_context_tokens or max_total_tokens.'
            )
        if self.warn_on is None:
            self._kinds = configured
            return
        if not self.warn_on:
            raise ValueError('warn_on must not be empty: name the limits to warn about, or pass None for all.')
        unknown = sorted(str(kind) for kind in set(self.warn_on) - set(_KINDS))
        if unknown:
            raise ValueError(f'Unsupported warn_on value(s): {", ".join(unknown)}. Use {", ".join(map(repr, _KINDS))}.')
        for kind in self.warn_on:
            if kind not in configured:
                raise ValueError(
                    f'warn_on holds {kind!r}: {kind!r} requires its corresponding max_* limit to be configured '
                    f'({_LIMITS[kind]}).'
                )
        self._kinds = tuple(dict.fromkeys(self.warn_on))

    def check(self, usage: RunUsage, context_tokens: int | None = None) -> list[LimitWarning]:
        """The limits `usage` (and the history's `context_tokens`) are close to, in a fixed order."""
        found: list[LimitWarning] = []
        for kind in _KINDS:
            limit = getattr(self, _LIMITS[kind])
            if kind not in self._kinds or limit is None:
                continue
            if kind == 'iterations':
                used = usage.requests
            elif kind == 'context_window':
                if context_tokens is None:
                    continue
                used = context_tokens
            else:
                used = usage.total_tokens
            if used / limit < self.warning_threshold:
                continue
            # Iterations are critical with few requests left; tokens once the limit is reached.
            critical = limit - used <= self.critical_remaining_iterations if kind == 'iterations' else used >= limit
            found.append(LimitWarning(kind=kind, used=used, limit=limit, critical=critical))
        return found

    async def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """`messages` without earlier warnings, plus a warning turn at the end if a limit is near."""
        cleaned = strip_warnings(messages)
        context_tokens = None
        if 'context_window' in self._kinds:
            context_tokens = await count_tokens(self.token_counter, cleaned)
        warnings = self.check(ctx.usage, context_tokens)
        if not warnings or not cleaned:
            return cleaned
        return [*cleaned, ModelRequest(parts=[UserPromptPart(warning_text(warnings))])]
