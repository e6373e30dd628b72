"""Where a history may be cut without separating a tool call from its return.

A cut at index `i` keeps `messages[i:]`. It is safe when `messages[i]` is a request (a window never
opens with a model response) and no tool call id has parts on both sides of it: a call and its
return, parallel calls answered over several requests, retried calls, native (builtin) tool calls,
and deferred calls answered in a later run. A call still waiting for its return, such as one
pending approval in the final response, constrains nothing until the return arrives.

The check is exact over the whole history: every tool call id's span is marked, however far apart
its parts are. `CutIndex` does this incrementally, in amortized constant time per message, so a
growing conversation never re-scans its past.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

__all__ = ('CutIndex', 'is_turn_start', 'safe_cut_points')


def tool_call_ids(message: ModelMessage) -> Iterator[str]:
    """The tool call ids `message`'s parts refer to: calls, returns, retries, native calls alike."""
    for part in message.parts:
        tool_call_id = getattr(part, 'tool_call_id', None)
        if isinstance(tool_call_id, str):
            yield tool_call_id


def is_turn_start(message: ModelMessage) -> bool:
    """Whether `message` opens a turn: a request carrying the user's prompt."""
    return isinstance(message, ModelRequest) and any(isinstance(part, UserPromptPart) for part in message.parts)


class CutIndex:
    """The safe cut points of a growing history, kept up to date as messages are appended.

    `_below[i]` points towards the largest index `<= i` that no tool call id spans (a union-find with
    path compression), so marking a span unsafe skips what an earlier span already marked, and each
    index is marked at most once over the whole history. Whether a cut may open the tail with a
    response is a question each query answers (`responses=`): only where a request (a summary, the
    system prompt) will stand before the tail.
    """

    def __init__(self) -> None:
        self._below: list[int] = []
        self._first_seen: dict[str, int] = {}
        self._requests: list[bool] = []
        self._turn_starts: list[bool] = []

    def __len__(self) -> int:
        return len(self._below)

    def append(self, message: ModelMessage) -> None:
        index = len(self._below)
        # Index 0 is no cut at all.
        self._below.append(index if index > 0 else -1)
        self._requests.append(isinstance(message, ModelRequest))
        self._turn_starts.append(index > 0 and is_turn_start(message))
        for tool_call_id in tool_call_ids(message):
            first = self._first_seen.setdefault(tool_call_id, index)
            if first < index:
                self._mark_unsafe(first, index)

    def _find(self, index: int) -> int:
        """The largest index `<= index` that no span covers, or -1."""
        root = index
        below = self._below
        while root >= 0 and below[root] != root:
            root = below[root]
        while index >= 0 and below[index] != index:
            below[index], index = root, below[index]
        return root

    def _mark_unsafe(self, low: int, high: int) -> None:
        """Cuts in `(low, high]` would separate `messages[low]` from `messages[high]`."""
        index = self._find(high)
        while index > low:
            self._below[index] = index - 1
            index = self._find(index - 1)

    def is_safe(self, index: int, *, responses: bool = False) -> bool:
        """Whether the tail may start at `index`: no tool call spans it, and it is a request unless `responses`."""
        return 0 < index < len(self._below) and self._find(index) == index and (responses or self._requests[index])

    def is_turn_start(self, index: int) -> bool:
        return self._turn_starts[index]

    def first_at_or_after(self, start: int, *, turn_start: bool = False, responses: bool = False) -> int | None:
        """The first safe cut `>= start` (a turn start, if asked; a response only if `responses`), or `None`."""
        for index in range(max(start, 1), len(self._below)):
            opens = responses or self._requests[index]
            if opens and self._find(index) == index and (not turn_start or self._turn_starts[index]):
                return index
        return None

    def last_before(self, end: int, *, responses: bool = False) -> int | None:
        """The last safe cut `< end` (a response only if `responses`), or `None`."""
        index = self._find(min(end, len(self._below)) - 1)
        while index > 0 and not (responses or self._requests[index]):
            index = self._find(index - 1)
        return index if index > 0 else None


def safe_cut_points(messages: Sequence[ModelMessage]) -> list[int]:
    """The indices `i` where `messages[i:]` may start a window without orphaning a tool call or return.

    Exact over the whole history in one O(n) pass; see the module docstring for what counts.
    """
    index = CutIndex()
    for message in messages:
        index.append(message)
    return [i for i in range(1, len(messages)) if index.is_safe(i)]
