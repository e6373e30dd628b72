"""What both processors are: a configured `Windowing` with the calls code outside the engine makes.

The engine (`_window_engine`) decides and applies cuts; this module is the processor surface over it: the
window for a history, the state a store persists, and the validation of a processor's size rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic_ai.messages import ModelMessage, SystemPromptPart

from ._window_engine import Compaction, Lineage, Windowing
from .specs import ContextSize, check_resolvable, parse_size, parse_triggers
from .tokens import TokenCounter


@dataclass(frozen=True)
class CompactionState:
    """Where a compacted history's window stands: `messages[:head_end]`, a bridge, then `messages[tail_start:]`."""

    head_end: int
    tail_start: int
    """Where the tail starts: a request, unless the processor cuts before responses (`cut_before_responses`,
    as `ContextManagerCapability` does), whose summary request then stands before it."""
    summary: str | None
    """The summary text the bridge carries, if any."""


class WindowedProcessor:
    """What both processors are: an awaitable `messages -> window`, over a `Windowing`."""

    _windowing: Windowing

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        return await self.window(messages)

    async def window(self, messages: list[ModelMessage], *, context_window: int | None = None) -> list[ModelMessage]:
        """The window to send for `messages`, compacting when a trigger fires.

        `context_window` is the serving model's, used when `max_input_tokens` is unset.
        """
        context = self._windowing.context_window(context_window)
        return (await self._windowing.process(messages, context, self._compact)).window

    async def _compact(self, lineage: Lineage, cut: int, context_window: int | None) -> Compaction:
        raise NotImplementedError

    async def remember(
        self, messages: Sequence[ModelMessage], token_counts: Sequence[int | None], indexed: Lineage | None = None
    ) -> None:
        """Take the token counts of a history this processor is about to see, so they aren't counted again.

        For code that stores counts: `token_counts[i]` is `messages[i]`'s count, or `None` to count it.
        `indexed` is what `indexed()` gave, on a processor of the same settings, for a history `messages` starts
        with (the same message objects): it is taken over, and only the messages past it are indexed.
        """
        await self._windowing.remember(messages, token_counts, indexed)

    def indexed(self, messages: Sequence[ModelMessage]) -> Lineage | None:
        """How this processor indexed `messages` (the history it saw, possibly grown since), if it never planned a
        compaction on it; `None` otherwise.

        For code that keeps a history between runs (a store's window at its revision): handed to `remember` on
        the next run's processor, it spares indexing the same messages again.
        """
        return self._windowing.indexed(messages)

    def below_every_trigger(self, message_count: int) -> bool:
        """Whether a window of `message_count` messages is sure to be sent as it is: every trigger counts messages
        and asks for more (with none, nothing ever fires). A token trigger's answer needs the window itself.

        For code that holds a stored window and would otherwise run the processor over it only to find that.
        """
        return all(trigger.kind == 'messages' and message_count < trigger.value for trigger in self._windowing.triggers)

    def kept_system_parts(self, messages: Sequence[ModelMessage]) -> list[SystemPromptPart]:
        """The system prompt parts this processor re-injects for `messages` once their first message is cut.

        For code that rebuilds windows from storage, so they open exactly as the processor's own do.
        """
        return self._windowing.kept_system_parts(messages)

    def token_counts(self, messages: Sequence[ModelMessage]) -> list[int | None]:
        """The count this processor made of each of `messages` (the history it saw, possibly grown since), or `None`."""
        lineage = self._windowing.find(messages)
        cum = lineage.cum_tokens if lineage is not None else [0]
        return [cum[i + 1] - cum[i] if i + 1 < len(cum) else None for i in range(len(messages))]

    def compaction_state(self, messages: Sequence[ModelMessage]) -> CompactionState | None:
        """The committed window of the history `messages` is (or grew from), or `None` if never compacted.

        For code that persists windows: after a run, this says which message the next window's tail
        starts at, so it can be rebuilt without the processor's memory.
        """
        lineage = self._windowing.find(messages)
        if lineage is None or (not lineage.touched and lineage.bridge is None):
            return None
        return CompactionState(head_end=lineage.head_end, tail_start=lineage.cut, summary=lineage.summary)


class WindowConfig(Protocol):
    """The size rules a processor is configured with."""

    @property
    def trigger(self) -> ContextSize | Sequence[ContextSize] | None: ...
    @property
    def keep(self) -> ContextSize: ...
    @property
    def keep_head(self) -> ContextSize | None: ...
    @property
    def token_counter(self) -> TokenCounter: ...
    @property
    def max_input_tokens(self) -> int | None: ...
    @property
    def keep_system_prompt(self) -> bool: ...
    @property
    def anchor_on_usage(self) -> bool: ...
    @property
    def context_window_from_model(self) -> bool: ...


def build_windowing(config: WindowConfig) -> Windowing:
    """Validate a processor's size rules into a `Windowing`, with errors that name the parameter."""
    triggers = parse_triggers(config.trigger)
    # keep=('messages', 0) is valid, as in summarization-pydantic-ai: keep only the request in flight.
    keep = parse_size(config.keep, 'keep', allow_zero=True)
    keep_head = None if config.keep_head is None else parse_size(config.keep_head, 'keep_head', allow_zero=True)
    if keep_head is not None and keep_head.value == 0:
        keep_head = None  # ('messages', 0) asks for no head, as in summarization-pydantic-ai
    sizes = [('trigger', trigger) for trigger in triggers] + [('keep', keep)]
    if keep_head is not None:
        sizes.append(('keep_head', keep_head))
    check_resolvable(sizes, config.max_input_tokens, model_supplies_window=config.context_window_from_model)
    if not callable(config.token_counter):
        raise ValueError(f'token_counter must be callable; got {config.token_counter!r}.')
    return Windowing(
        triggers=triggers,
        keep=keep,
        keep_head=keep_head,
        keep_system_prompt=config.keep_system_prompt,
        counter=config.token_counter,
        max_input_tokens=config.max_input_tokens,
        anchor_on_usage=config.anchor_on_usage,
        cut_before_responses=getattr(config, 'cut_before_responses', False),
    )
