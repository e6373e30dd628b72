"""Size rules: when to compress (triggers) and how much to keep, as `(kind, value)` pairs.

`("messages", n)` counts messages, `("tokens", n)` counts tokens, and `("fraction", f)` is a share
of the context window: `max_input_tokens` when given, else the model's own `context_window`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ('ContextFraction', 'ContextMessages', 'ContextSize', 'ContextTokens')

ContextMessages: TypeAlias = tuple[Literal['messages'], int]
ContextTokens: TypeAlias = tuple[Literal['tokens'], int]
ContextFraction: TypeAlias = tuple[Literal['fraction'], float]
ContextSize: TypeAlias = ContextMessages | ContextTokens | ContextFraction
"""`("messages", n)`, `("tokens", n)` or `("fraction", f)` with `0 < f <= 1`."""


@dataclass(frozen=True)
class Size:
    """A validated `ContextSize`."""

    kind: Literal['messages', 'tokens', 'fraction']
    value: float

    def tokens(self, context_window: int | None, parameter: str) -> int:
        """This size in tokens (`tokens` or `fraction` kinds), resolving a fraction against `context_window`."""
        if self.kind == 'tokens':
            return int(self.value)
        if context_window is None:
            raise ValueError(
                f'{parameter}=({self.kind!r}, {self.value!r}) needs a context window: pass max_input_tokens, '
                "or use a model whose profile has a 'context_window'."
            )
        return int(context_window * self.value)


def parse_size(spec: object, parameter: str, *, allow_zero: bool = False) -> Size:
    """Validate one `(kind, value)` pair, raising `ValueError` that names `parameter` and the value.

    The messages also hold `summarization-pydantic-ai`'s wording ("Fractional ... values must be between
    0 and 1", "... thresholds must be non-negative", "Unsupported context size type"), so code that
    matches those keeps working.
    """
    name = parameter.split('[')[0]
    if not (isinstance(spec, tuple | list) and len(spec) == 2):
        raise ValueError(
            f"{parameter} must be a (kind, value) pair such as ('messages', 50), ('tokens', 100_000) or "
            f"('fraction', 0.8); got {spec!r}."
        )
    kind, value = spec
    if kind == 'fraction':
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise ValueError(
                f"{parameter}=('fraction', {value!r}): Fractional {name} values must be between 0 and 1, "
                f'got {value!r}; a fraction must be in (0, 1].'
            )
        return Size('fraction', float(value))
    if kind in ('messages', 'tokens'):
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ValueError(
                f'{parameter}=({kind!r}, {value!r}): {name} thresholds must be non-negative, got {value!r}.'
            )
        least = 0 if allow_zero else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            bound = 'a whole number >= 0' if allow_zero else 'a whole number > 0'
            raise ValueError(f'{parameter}=({kind!r}, {value!r}): the value must be {bound}.')
        return Size(kind, value)
    raise ValueError(
        f'{parameter}=({kind!r}, {value!r}): Unsupported context size type {kind} for {name}; '
        "the kind must be 'messages', 'tokens' or 'fraction'."
    )


def parse_triggers(trigger: ContextSize | Sequence[ContextSize] | None, parameter: str = 'trigger') -> tuple[Size, ...]:
    """Validate a trigger: one pair, a list of pairs (any of which fires), or `None` (never fires)."""
    if trigger is None:
        return ()
    if isinstance(trigger, tuple) and len(trigger) == 2 and isinstance(trigger[0], str):
        return (parse_size(trigger, parameter),)
    if isinstance(trigger, Sequence) and not isinstance(trigger, str):
        if not trigger:
            raise ValueError(f'{parameter}=[]: give at least one (kind, value) pair, or None to never trigger.')
        return tuple(parse_size(spec, f'{parameter}[{i}]') for i, spec in enumerate(trigger))
    raise ValueError(f'{parameter} must be a (kind, value) pair or a list of them; got {trigger!r}.')


def check_resolvable(
    sizes: Sequence[tuple[str, Size]], max_input_tokens: int | None, *, model_supplies_window: bool
) -> None:
    """A fraction needs `max_input_tokens`, unless a model will supply its context window at request time."""
    if max_input_tokens is not None and (
        isinstance(max_input_tokens, bool) or not isinstance(max_input_tokens, int) or max_input_tokens <= 0
    ):
        raise ValueError(
            f'max_input_tokens={max_input_tokens!r}: max_input_tokens must be greater than 0, '
            f'got {max_input_tokens!r}; it must be a whole number > 0.'
        )
    for parameter, size in sizes:
        if size.kind == 'fraction' and max_input_tokens is None and not model_supplies_window:
            name = parameter.split('[')[0]
            uses = 'keep_head.' if name == 'keep_head' else 'trigger or keep values.'
            raise ValueError(
                f"{parameter}=('fraction', {size.value!r}) needs max_input_tokens to resolve against: "
                f'max_input_tokens is required when using fraction-based {uses} Pass it, '
                "or use the capability, which reads the model's context window."
            )
