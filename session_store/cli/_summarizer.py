"""The summarizer options `chat`, `serve` and `compact` share, and the processor they make of them.

`--summarizer MODEL` summarizes what falls out of the window (`test` summarizes offline, extractively);
`--trigger N` is how many messages the window may reach before it is summarized, and `--keep N` how many of
the newest it keeps verbatim then. `compact` takes only `--keep`: it summarizes when asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from .._display import tiktoken_counter
from ._app import MAX_COUNT, Bounded
from ._runtime import Failure

if TYPE_CHECKING:  # pydantic-ai, imported once a processor is made: the options' help needs none of it
    from processors import SummarizationProcessor

__all__ = ('KEEP', 'TRIGGER', 'keep_option', 'summarizer_options', 'summarizer_processor', 'summarizing')

TRIGGER = 40
"""Messages the window may reach before it is summarized: 10 turns of a tool-using agent, 20 of a plain chat."""
KEEP = 12
"""Messages the window keeps verbatim when it is summarized: the last few turns, whole."""


def keep_option(default: int | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--keep N`, with `default` (or, for `None`, `KEEP` once a summarizer is given)."""
    shown = f' [default: {KEEP}, with --summarizer]' if default is None else ''
    return click.option(
        '--keep',
        type=Bounded(1, MAX_COUNT),
        default=default,
        show_default=default is not None,
        help=f'Messages the window keeps verbatim when it is summarized.{shown}',
    )


def summarizer_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--summarizer MODEL`, `--trigger N` and `--keep N`, for a command whose window is summarized as it runs."""
    with_keep = keep_option(None)(function)
    with_trigger = click.option(
        '--trigger',
        type=Bounded(2, MAX_COUNT),
        help=f'Summarize once the window reaches this many messages. [default: {TRIGGER}, with --summarizer]',
    )(with_keep)
    return click.option(
        '--summarizer',
        metavar='MODEL',
        help="Summarize what falls out of the window with this model ('test' summarizes offline, extractively); "
        'without it nothing is summarized.',
    )(with_trigger)


def summarizer_processor(model: str, *, trigger: int | None, keep: int) -> SummarizationProcessor:
    """A processor summarizing with `model` past `trigger` messages (`None`: only when asked), keeping `keep`.

    Resolving the model builds its provider, so call it where model errors become one line (inside `run`).
    """
    from processors import SummarizationProcessor

    from .._offline import resolve_summarizer

    return SummarizationProcessor(
        resolve_summarizer(model),
        trigger=None if trigger is None else ('messages', trigger),
        keep=('messages', keep),
        token_counter=tiktoken_counter(),
    )


def summarizing(model: str | None, trigger: int | None, keep: int | None) -> SummarizationProcessor | None:
    """What `summarizer_options` were given, as a processor; `None` without `--summarizer`.

    Refused in one line naming the option: `--trigger` or `--keep` without `--summarizer`, and a `--keep`
    that is not below `--trigger` (the window would be summarized on every request).
    """
    if model is None:
        given = [name for name, value in (('--trigger', trigger), ('--keep', keep)) if value is not None]
        if given:
            raise Failure(f'{" and ".join(given)} only apply with --summarizer MODEL; give one, or leave them out.')
        return None
    trigger = TRIGGER if trigger is None else trigger
    keep = KEEP if keep is None else keep
    if keep >= trigger:
        raise Failure(
            f'--keep ({keep}) must be less than --trigger ({trigger}): the window is summarized when it reaches '
            '--trigger messages, down to the --keep newest.'
        )
    return summarizer_processor(model, trigger=trigger, keep=keep)
