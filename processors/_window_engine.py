"""The window engine both processors share: what a history looks like after its cuts, kept incrementally.

A window is `head + [bridge] + tail`: the head messages kept verbatim (`keep_head`), a bridge
request holding the system prompt and the summary (or just the system prompt once the message that
carried it was cut), and the tail from the current cut on. The engine remembers each history it has
seen (a *lineage*) with per-message token counts, running sums and a `CutIndex`, so a model request
on a history that only grew costs the new messages, not the history.
"""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai.messages import (
    BaseToolReturnPart,
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    UserPromptPart,
)

from .cut_points import CutIndex
from .specs import Size
from .summary import find_summary, summary_request, summary_text
from .text import render
from .tokens import TokenCounter, count_tokens

_MAX_LINEAGES = 16

logger = logging.getLogger('processors.summarization')
"""Where a failed summary is reported: the summarization processor's logger, whose failure it is."""


def _report(compaction: Compaction, outcome: str) -> None:
    """Log a failed compaction with what came of it instead."""
    if compaction.failure is not None:
        logger.warning('Summarization failed (%s); %s.', compaction.failure, outcome)


def leading_system_parts(messages: Sequence[ModelMessage]) -> list[SystemPromptPart]:
    """The system prompt parts that open a history's first request."""
    if not messages or not isinstance(messages[0], ModelRequest):
        return []
    parts: list[SystemPromptPart] = []
    for part in messages[0].parts:
        if not isinstance(part, SystemPromptPart):
            break
        parts.append(part)
    return parts


@dataclass(eq=False)
class Lineage:
    """One history the engine has indexed, and where its window currently stands."""

    messages: list[ModelMessage] = field(default_factory=list[ModelMessage])
    cum_tokens: list[int] = field(default_factory=lambda: [0])
    """`cum_tokens[i]` is the token count of `messages[:i]`."""
    cuts: CutIndex = field(default_factory=CutIndex)
    head_end: int = 0
    """`messages[:head_end]` open every window verbatim."""
    head_fixed: bool = False
    system_bridge: ModelRequest | None = None
    """The system prompt alone, to re-inject once the message carrying it is cut."""
    system_bridge_tokens: int = 0
    bridge: ModelRequest | None = None
    """What stands between head and tail: the summary request, or the system bridge."""
    bridge_tokens: int = 0
    summary: str | None = None
    cut: int = 0
    """The tail starts here; `messages[head_end:cut]` are summarized or dropped."""
    touched: bool = False
    """Whether a compaction changed the window, so it is no longer the history as it came in."""
    overhead: int = 0
    """How far the provider's reported input tokens exceeded our count: instructions, tool definitions, error."""
    sent: tuple[int, int] | None = None
    """The history length and window estimate when the last window went out, to anchor the next on."""
    late_answers: list[tuple[int, int, int]] = field(default_factory=list[tuple[int, int, int]])
    """(index, part index, call index or -1) of each answer not in the request right after its call: the only
    answers a cut made earlier, while their call was still open, can have separated from it."""
    opened_at: int = 0
    """How many messages the history had when its shape (summary, system prompt) was read: a summary in a later
    message would have made another shape."""
    planned: bool = False
    """Whether a compaction was planned on this history (which settles its head, and may cut it): its state is then
    more than its messages alone make."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def copy(self) -> Lineage:
        """A lineage of its own as this one stands, before any request was sent from it: to extend apart from it."""
        return replace(
            self,
            messages=list(self.messages),
            cum_tokens=list(self.cum_tokens),
            cuts=self.cuts.copy(),
            late_answers=list(self.late_answers),
            overhead=0,
            sent=None,
            lock=asyncio.Lock(),
        )

    def indexes_start_of(self, messages: Sequence[ModelMessage]) -> bool:
        """Whether every message indexed here is the one at its index in `messages` (the very object), and no
        message past those this history's shape was read from carries a summary."""
        known = self.messages
        return (
            len(known) <= len(messages)
            and all(mine is theirs for mine, theirs in zip(known, messages, strict=False))
            and find_summary(messages[self.opened_at :]) is None
        )

    def matches(self, messages: Sequence[ModelMessage]) -> bool:
        """Whether `messages` is this history, possibly grown since."""
        known = len(self.messages)
        return (
            0 < known <= len(messages)
            and messages[0] is self.messages[0]
            and messages[known - 1] is self.messages[known - 1]
        )

    async def extend(
        self, messages: Sequence[ModelMessage], counter: TokenCounter, known: Sequence[int | None] = ()
    ) -> None:
        """Index the messages past those already indexed; `known[i]` is `messages[i]`'s count, if counted before."""
        for index in range(len(self.messages), len(messages)):
            message = messages[index]
            tokens = known[index] if index < len(known) else None
            if tokens is None:
                tokens = await count_tokens(counter, [message])
            self.cum_tokens.append(self.cum_tokens[-1] + tokens)
            self.messages.append(message)
            answers = self.cuts.append(message)
            if isinstance(message, ModelRequest):
                self.late_answers += [(index, part, call) for part, call in answers if call < index - 1]

    def size(self, cut: int, bridge_tokens: int, has_bridge: bool, head_end: int | None = None) -> tuple[int, int]:
        """(messages, tokens) of the window whose tail starts at `cut`, the provider's overhead included;
        `head_end` stands in for a head not settled yet."""
        n = len(self.messages)
        cum = self.cum_tokens
        head = self.head_end if head_end is None else head_end
        return (
            head + has_bridge + n - cut,
            cum[head] + bridge_tokens + cum[n] - cum[cut] + self.overhead,
        )

    def current_size(self) -> tuple[int, int]:
        """(messages, tokens) of the window as it stands: the history itself until a compaction."""
        if self.touched:
            return self.size(self.cut, self.bridge_tokens, self.bridge is not None)
        return len(self.messages), self.cum_tokens[-1] + self.overhead

    def window(self, cut: int, bridge: ModelRequest | None) -> list[ModelMessage]:
        tail = self.messages[cut:]
        lost: dict[int, set[int]] = {}
        for index, part, call in self.late_answers[bisect_left(self.late_answers, (cut, -1, -1)) :]:
            if call < 0 or self.head_end <= call < cut:
                lost.setdefault(index, set()).add(part)
        for index, parts in lost.items():
            tail[index - cut] = _answers_as_text(tail[index - cut], parts)
        head = self.messages[: self.head_end]
        return [*head, bridge, *tail] if bridge is not None else [*head, *tail]

    def fallback_bridge(self) -> tuple[ModelRequest | None, int]:
        """The bridge when a compaction makes no new summary: the one in place, or the system prompt."""
        if self.bridge is not None:
            return self.bridge, self.bridge_tokens
        return self.system_bridge, self.system_bridge_tokens


def _answers_as_text(message: ModelMessage, lost: set[int]) -> ModelMessage:
    """`message` with its answers at the part indices `lost` (to calls the window lost: cut while still waiting
    for their result) turned into text, so the model keeps each result without an orphaned return."""
    assert isinstance(message, ModelRequest)
    parts = [
        _answer_as_text(part) if index in lost and isinstance(part, BaseToolReturnPart | RetryPromptPart) else part
        for index, part in enumerate(message.parts)
    ]
    return replace(message, parts=parts)


def _answer_as_text(part: BaseToolReturnPart[Any] | RetryPromptPart) -> UserPromptPart:
    outcome = part.outcome if isinstance(part, BaseToolReturnPart) else 'retried'
    return UserPromptPart(
        f'Result of the earlier {part.tool_name} call {part.tool_call_id} ({outcome}): {render(part.content)[0]}'
    )


@dataclass
class Compaction:
    """What a processor made of the messages a cut evicts."""

    bridge: ModelRequest | None = None
    """A new bridge (a summary request), or `None` to keep the current one."""
    bridge_tokens: int = 0
    persist: bool = True
    """Whether the cut stands for later requests; `False` drops the messages from this request only."""
    cut: int | None = None
    """Where the tail starts instead of the planned cut, when the processor dealt with fewer messages."""
    failure: str | None = None
    """Why the processor made nothing of the evicted messages, when it failed to (a summarizer's error): the engine
    reports it with what the request is sent instead."""


Compact = Callable[['Lineage', int, 'int | None'], Awaitable[Compaction]]
"""How a processor deals with `lineage.messages[lineage.cut:cut]`, given the context window."""


@dataclass
class Decision:
    """Whether and where a history is to be compacted, decided before any summarizer call."""

    lineage: Lineage
    messages: list[ModelMessage]
    """The history as the caller passed it."""
    context_window: int | None
    fired: bool
    """Whether a trigger fired."""
    forced: bool
    """Whether a compaction was asked for regardless of the triggers."""
    cut: int | None
    """Where the new tail starts; `None` when nothing is to be compacted."""
    start: int
    """The first message the compaction evicts: those before it were summarized or dropped already, or are the head."""
    tokens: int
    """The token estimate of the window as it stands, before compacting."""


@dataclass
class Outcome:
    """The window a history goes out as, and the compaction (if any) that made it."""

    window: list[ModelMessage]
    decision: Decision | None
    """`None` for an empty history."""
    compaction: Compaction | None
    """`None` when no compaction ran."""
    cut: int | None
    """Where the window's tail starts in the history, when a compaction ran."""
    tokens: int = 0
    """The window's token estimate."""


@dataclass
class Windowing:
    """The configured trigger and keep rules, and the lineages they are applied to."""

    triggers: tuple[Size, ...]
    keep: Size
    keep_head: Size | None
    keep_system_prompt: bool
    counter: TokenCounter
    max_input_tokens: int | None
    anchor_on_usage: bool
    cut_before_responses: bool = False
    """Whether a cut may open the tail with a response: only for a processor whose compaction puts a request
    (its summary) before the tail. A compaction that makes none moves such a cut on to a request."""
    _lineages: OrderedDict[int, list[Lineage]] = field(default_factory=OrderedDict[int, list[Lineage]])

    def context_window(self, model_window: int | None) -> int | None:
        return self.max_input_tokens if self.max_input_tokens is not None else model_window

    async def decide(
        self, messages: list[ModelMessage], context_window: int | None, *, force: bool = False
    ) -> Decision | None:
        """Whether and where `messages` would be compacted now, without compacting: `None` for no messages.

        `force` plans a compaction even though no trigger fires, as a manual compaction does.
        """
        if not messages:
            return None
        async with self._held(messages) as lineage:
            return self._decide(lineage, messages, context_window, force)

    async def execute(self, decision: Decision, compact: Compact) -> Outcome:
        """Carry out `decision`, made earlier by `decide`; a decision another compaction overtook evicts only
        what is still left to evict, or nothing."""
        lineage = decision.lineage
        async with lineage.lock:
            if decision.cut is not None and decision.cut <= lineage.cut:
                decision = replace(decision, cut=None)
            return await self._execute(lineage, decision, compact)

    async def process(
        self, messages: list[ModelMessage], context_window: int | None, compact: Compact, *, force: bool = False
    ) -> Outcome:
        """The window to send for `messages`, compacting through `compact` when a trigger fires (or `force`)."""
        if not messages:
            return Outcome(window=messages, decision=None, compaction=None, cut=None)
        async with self._held(messages) as lineage:
            return await self._execute(lineage, self._decide(lineage, messages, context_window, force), compact)

    @asynccontextmanager
    async def _held(self, messages: list[ModelMessage]) -> AsyncIterator[Lineage]:
        """The lineage `messages` is, indexed up to its end and locked while the caller works on it."""
        lineage = self._lineage_for(messages)
        async with lineage.lock:
            if lineage.messages and not lineage.matches(messages):
                # Another caller grew this history differently while we waited: start afresh.
                lineage = self._new_lineage(messages)
            if not lineage.messages:
                await lineage.extend(messages, self.counter)
                await self._open(lineage)
            else:
                await lineage.extend(messages, self.counter)
            self._anchor(lineage)
            yield lineage

    def _decide(
        self, lineage: Lineage, messages: list[ModelMessage], context_window: int | None, force: bool
    ) -> Decision:
        current = lineage.current_size()
        fired = self._fires(current, context_window)
        cut = self._plan_cut(lineage, context_window, current) if fired or force else None
        start = lineage.cut
        if cut is not None:
            start = max(start, self._head_end(lineage, context_window))
        return Decision(
            lineage=lineage,
            messages=messages,
            context_window=context_window,
            fired=fired,
            forced=force,
            cut=cut,
            start=start,
            tokens=current[1],
        )

    async def _execute(self, lineage: Lineage, decision: Decision, compact: Compact) -> Outcome:
        cut = decision.cut
        context_window = decision.context_window
        if cut is None:
            return self._unchanged(lineage, decision)
        lineage.planned = True
        self._fix_head(lineage, cut, context_window)
        compaction = await compact(lineage, cut, context_window)
        cut = compaction.cut or cut
        if compaction.bridge is None:
            if not compaction.persist and not decision.fired:
                # A manual compaction that made nothing: no trigger fired, so the window stays as it was.
                _report(compaction, 'nothing was compacted: no trigger holds, so the window stays as it was')
                return replace(self._unchanged(lineage, decision), compaction=compaction)
            bridge, bridge_tokens = lineage.fallback_bridge()
            if bridge is None and not isinstance(lineage.messages[cut], ModelRequest):
                # Nothing will stand before a tail that opens with a response: open it with a request.
                later = lineage.cuts.first_at_or_after(cut)
                if later is None:
                    _report(compaction, 'nothing was compacted: no cut opens the tail with a request')
                    return replace(self._unchanged(lineage, decision), compaction=compaction)
                cut = later
        else:
            bridge, bridge_tokens = compaction.bridge, compaction.bridge_tokens
        _report(
            compaction,
            'this request is sent the sliding window instead (the last summary, if any, and the kept tail); nothing '
            'is stored as a summary, and the next trigger tries again',
        )
        window = lineage.window(cut, bridge)
        estimate = lineage.size(cut, bridge_tokens, bridge is not None)[1]
        if compaction.persist:
            lineage.cut, lineage.bridge, lineage.bridge_tokens = cut, bridge, bridge_tokens
            lineage.touched = True
        lineage.sent = (len(lineage.messages), estimate - lineage.overhead)
        return Outcome(window=window, decision=decision, compaction=compaction, cut=cut, tokens=estimate)

    def _unchanged(self, lineage: Lineage, decision: Decision) -> Outcome:
        """The window as it stands: the history itself until a compaction, then head, bridge and tail."""
        window = lineage.window(lineage.cut, lineage.bridge) if lineage.touched else decision.messages
        lineage.sent = (len(lineage.messages), decision.tokens - lineage.overhead)
        return Outcome(window=window, decision=decision, compaction=None, cut=None, tokens=decision.tokens)

    async def remember(
        self, messages: Sequence[ModelMessage], token_counts: Sequence[int | None], indexed: Lineage | None = None
    ) -> None:
        """Index a history ahead of its first request, with the token counts already known for it; `indexed`, a
        lineage `indexed()` gave for the start of this very history (by another `Windowing` of the same rules),
        is taken over as it stood (a copy), so only the messages past it are indexed.

        A lineage that is not the start of `messages` (another message object anywhere, a summary past the
        point its shape was read at) is ignored, and the history indexed from scratch.
        """
        if not messages or self.find(messages) is not None:
            return
        if indexed is not None and indexed.messages and indexed.indexes_start_of(messages):
            lineage = indexed.copy()
            self._add_lineage(messages, lineage)
            async with lineage.lock:
                await lineage.extend(messages, self.counter, token_counts)
            return
        lineage = self._new_lineage(messages)
        async with lineage.lock:
            await lineage.extend(messages, self.counter, token_counts)
            await self._open(lineage)

    def indexed(self, messages: Sequence[ModelMessage]) -> Lineage | None:
        """The lineage of `messages` (the history it saw, possibly grown since), if no compaction was planned on
        it: then it is exactly what indexing its messages makes, and `remember` can take it over for a history
        that starts with them."""
        lineage = self.find(messages)
        return None if lineage is None or lineage.planned or lineage.touched else lineage

    def find(self, messages: Sequence[ModelMessage]) -> Lineage | None:
        """The lineage `messages` is, possibly grown since."""
        if not messages:
            return None
        key = id(messages[0])
        for lineage in self._lineages.get(key, []):
            if lineage.matches(messages):
                self._lineages.move_to_end(key)
                return lineage
        return None

    def _lineage_for(self, messages: Sequence[ModelMessage]) -> Lineage:
        return self.find(messages) or self._new_lineage(messages)

    def _new_lineage(self, messages: Sequence[ModelMessage]) -> Lineage:
        return self._add_lineage(messages, Lineage())

    def _add_lineage(self, messages: Sequence[ModelMessage], lineage: Lineage) -> Lineage:
        """Keep `lineage` as the one `messages` is, dropping the least recently used beyond `_MAX_LINEAGES`."""
        # The lineage holds messages[0] (or comes to, as it is extended), so its id can't be reused while it lives.
        key = id(messages[0])
        self._lineages.setdefault(key, []).append(lineage)
        self._lineages.move_to_end(key)
        while sum(len(group) for group in self._lineages.values()) > _MAX_LINEAGES:
            oldest_key, oldest = next(iter(self._lineages.items()))
            oldest.pop(0)
            if not oldest:
                del self._lineages[oldest_key]
        return lineage

    async def _open(self, lineage: Lineage) -> None:
        """Read an incoming history's shape: an earlier summary to extend, or the system prompt to keep."""
        messages = lineage.messages
        lineage.opened_at = len(messages)
        summary_at = find_summary(messages)
        if summary_at is not None:
            carrier = messages[summary_at]
            assert isinstance(carrier, ModelRequest)
            lineage.summary = summary_text(carrier)
            lineage.head_end = summary_at
            lineage.head_fixed = True
            system_parts = [part for part in carrier.parts if isinstance(part, SystemPromptPart)]
            if all(isinstance(part, SystemPromptPart | CompactionPart) for part in carrier.parts):
                # The bridge stands alone: the tail starts after it.
                lineage.bridge = carrier
                lineage.bridge_tokens = lineage.cum_tokens[summary_at + 1] - lineage.cum_tokens[summary_at]
                lineage.cut = summary_at + 1
            else:
                # The bridge was merged into the tail's first request, as pydantic-ai merges consecutive
                # requests: that request is the tail's start, and a compaction needs a bridge of its own.
                assert lineage.summary is not None
                lineage.bridge = summary_request(system_parts, lineage.summary)
                lineage.bridge_tokens = await count_tokens(self.counter, [lineage.bridge])
                lineage.cut = summary_at
        else:
            system_parts = self.kept_system_parts(messages)
        if system_parts:
            lineage.system_bridge = ModelRequest(parts=system_parts)
            lineage.system_bridge_tokens = await count_tokens(self.counter, [lineage.system_bridge])

    def kept_system_parts(self, messages: Sequence[ModelMessage]) -> list[SystemPromptPart]:
        """The system prompt parts re-injected once the message carrying them is cut: none when asked
        not to keep the system prompt, or when `keep_head` keeps leading messages whole instead."""
        if not self.keep_system_prompt or self.keep_head is not None:
            return []
        return leading_system_parts(messages)

    def _anchor(self, lineage: Lineage) -> None:
        """Learn the gap between our count and the provider's from the response to the last window sent."""
        if not self.anchor_on_usage or lineage.sent is None:
            return
        sent_length, estimate = lineage.sent
        if sent_length < len(lineage.messages):
            response = lineage.messages[sent_length]
            if isinstance(response, ModelResponse) and response.usage.input_tokens > 0:
                lineage.overhead = response.usage.input_tokens - estimate

    def token_ceiling(self, context_window: int | None) -> int | None:
        """The smallest token count a trigger fires at, if any trigger counts tokens."""
        ceilings = [t.tokens(context_window, 'trigger') for t in self.triggers if t.kind != 'messages']
        return min(ceilings) if ceilings else None

    def _fires(self, size: tuple[int, int], context_window: int | None, *, tokens_only: bool = False) -> bool:
        messages, tokens = size
        for trigger in self.triggers:
            if trigger.kind == 'messages':
                if messages >= trigger.value and not tokens_only:
                    return True
            elif tokens >= trigger.tokens(context_window, 'trigger'):
                return True
        return False

    def _plan_cut(self, lineage: Lineage, context_window: int | None, current: tuple[int, int]) -> int | None:
        """Where the tail should start: what `keep` asks for, at a safe cut, and below every trigger.

        `None` when there is nothing to evict: `keep` covers everything after the head and the last cut,
        and no token trigger fires (a token trigger guards the context window, so it overrides `keep`).
        """
        n = len(lineage.messages)
        head = self._head_end(lineage, context_window)
        floor = max(lineage.cut, head)
        if self.keep.kind == 'messages':
            target = n - int(self.keep.value)
        else:
            budget = self.keep.tokens(context_window, 'keep')
            target = bisect_left(lineage.cum_tokens, lineage.cum_tokens[n] - budget)
        if target <= floor and not self._fires(current, context_window, tokens_only=True):
            return None
        target = max(target, floor + 1)
        cuts = lineage.cuts
        responses = self.cut_before_responses
        cut = cuts.first_at_or_after(target, responses=responses)
        turn = cuts.first_at_or_after(target, turn_start=True)
        if turn is not None and (n - turn) * 2 >= n - target:
            cut = turn  # a whole turn reads better, as long as it keeps at least half of what keep asks
        if cut is None:
            cut = cuts.last_before(target, responses=responses)
            if cut is None or cut <= floor:
                return None
        # A window still over a trigger after compacting would compact again on every request.
        bridge, bridge_tokens = lineage.fallback_bridge()
        while self._fires(lineage.size(cut, bridge_tokens, bridge is not None, head), context_window):
            later = cuts.first_at_or_after(cut + 1, responses=responses)
            if later is None:
                break
            cut = later
        return cut

    def _head_count(self, lineage: Lineage, context_window: int | None) -> int:
        """How many leading messages `keep_head` keeps, moved until no call and its answer sit on two sides."""
        if self.keep_head is None:
            return 0
        if self.keep_head.kind == 'messages':
            wanted = min(int(self.keep_head.value), len(lineage.messages))
        else:
            budget = self.keep_head.tokens(context_window, 'keep_head')
            wanted = bisect_left(lineage.cum_tokens, budget + 1) - 1
        if wanted <= 0:
            return 0
        return lineage.cuts.head_end(wanted)

    def _head_end(self, lineage: Lineage, context_window: int | None) -> int:
        """Where the head ends: settled at the first compaction, and until then where that compaction settles it."""
        return lineage.head_end if lineage.head_fixed else self._head_count(lineage, context_window)

    def _fix_head(self, lineage: Lineage, cut: int, context_window: int | None) -> None:
        """On the first compaction, settle how many leading messages every later window keeps."""
        if not lineage.head_fixed:
            lineage.head_fixed = True
            lineage.head_end = min(self._head_count(lineage, context_window), cut)
            lineage.cut = max(lineage.cut, lineage.head_end)
