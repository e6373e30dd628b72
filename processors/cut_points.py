"""Where a history may be cut without separating a tool call from its return.

A cut at index `i` keeps `messages[i:]`. It is safe when `messages[i]` is a request (a window never
opens with a model response) and no tool call has its answer on the other side of it: a call and its
return, parallel calls answered over several requests, retried calls, native (builtin) tool calls,
and deferred calls answered in a later run. A call still waiting for its return, such as one
pending approval in the final response, constrains only the message right after it until the return
arrives.

A call and its answer pair by *position*, as pydantic-ai pairs them: an answer answers the call with
its id in the nearest preceding response (or earlier in its own response, for a native tool's result).
Ids are not unique in real histories: many servers number calls `call_0`, `call_1`, ... afresh in every
response, so the same id comes back turn after turn, and only position tells which call a return answers.

The check is exact over the whole history: every pair is marked, however far apart its parts are.
`CutIndex` does this incrementally, in amortized constant time per message, so a growing conversation
never re-scans its past.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pydantic_ai.messages import BaseToolCallPart, ModelMessage, ModelRequest, RetryPromptPart, UserPromptPart

__all__ = ('CutIndex', 'ToolPairing', 'is_turn_start', 'safe_cut_points')


def tool_call_ids(message: ModelMessage) -> Iterator[str]:
    """The tool call ids `message`'s parts refer to: calls, returns, retries, native calls alike."""
    for part in message.parts:
        tool_call_id = getattr(part, 'tool_call_id', None)
        if isinstance(tool_call_id, str):
            yield tool_call_id


class ToolPairing:
    """Which call each tool answer in a history answers, read message by message in order.

    An answer (a tool return, a retry, a native tool's result) answers the call with its id in the
    nearest preceding response that holds one: a later call with the same id takes every later answer,
    as pydantic-ai's own repair of a history pairs them. One dictionary lookup per part.
    """

    def __init__(self) -> None:
        self._calls: dict[str, int] = {}
        self.waiting: dict[str, int] = {}
        """Where each id's latest call was made, while nothing has answered it yet."""
        self._open: dict[int, int] = {}
        """How many calls each message made that wait for an answer."""

    def add(self, index: int, message: ModelMessage) -> list[tuple[int, int]]:
        """Note `message`, at `index`, and return `(part index, call index)` for each answer it holds; the call
        index is -1 for an answer no earlier message called."""
        answers: list[tuple[int, int]] = []
        for position, part in enumerate(message.parts):
            tool_call_id = getattr(part, 'tool_call_id', None)
            if not isinstance(tool_call_id, str):
                continue
            if isinstance(part, BaseToolCallPart):
                self._close(tool_call_id)
                self._calls[tool_call_id] = self.waiting[tool_call_id] = index
                self._open[index] = self._open.get(index, 0) + 1
            elif not (isinstance(part, RetryPromptPart) and part.tool_name is None):
                # A legacy retry without a tool name is feedback on the whole response; its id answers nothing.
                answers.append((position, self._calls.get(tool_call_id, -1)))
                self._close(tool_call_id)
        return answers

    def _close(self, tool_call_id: str) -> None:
        """The id's waiting call is answered, or shadowed by a new call with the same id."""
        call = self.waiting.pop(tool_call_id, None)
        if call is not None:
            self._open[call] -= 1

    def open_at(self, index: int) -> bool:
        """Whether the message at `index` made a call that still waits for its answer."""
        return self._open.get(index, 0) > 0

    def copy(self) -> ToolPairing:
        """A pairing of its own, as this one stands, to read more messages into without changing this one."""
        copied = ToolPairing()
        copied._calls, copied.waiting, copied._open = dict(self._calls), dict(self.waiting), dict(self._open)
        return copied


def is_turn_start(message: ModelMessage) -> bool:
    """Whether `message` opens a turn: a request carrying the user's prompt."""
    return isinstance(message, ModelRequest) and any(isinstance(part, UserPromptPart) for part in message.parts)


class CutIndex:
    """The safe cut points of a growing history, kept up to date as messages are appended.

    `_below[i]` points towards the largest index `<= i` that no call and answer pair spans (a union-find
    with path compression), so marking a span unsafe skips what an earlier span already marked, and each
    index is marked at most once over the whole history. Whether a cut may open the tail with a
    response is a question each query answers (`responses=`): only where a request (a summary, the
    system prompt) will stand before the tail.
    """

    def __init__(self) -> None:
        self._below: list[int] = []
        self._pairing = ToolPairing()
        self._requests: list[bool] = []
        self._turn_starts: list[bool] = []

    def __len__(self) -> int:
        return len(self._below)

    def copy(self) -> CutIndex:
        """An index of its own, as this one stands, to append to without changing this one."""
        copied = CutIndex()
        copied._below, copied._requests, copied._turn_starts = (
            list(self._below),
            list(self._requests),
            list(self._turn_starts),
        )
        copied._pairing = self._pairing.copy()
        return copied

    def append(self, message: ModelMessage) -> list[tuple[int, int]]:
        """Index `message` as the history's next one; `(part index, call index)` of each answer it holds, as
        `ToolPairing.add` gives them, for a caller that needs to know which call each answers."""
        index = len(self._below)
        # Index 0 is no cut at all.
        self._below.append(index if index > 0 else -1)
        self._requests.append(isinstance(message, ModelRequest))
        self._turn_starts.append(index > 0 and is_turn_start(message))
        answers = self._pairing.add(index, message)
        for _, call in answers:
            if 0 <= call < index:
                self._mark_unsafe(call, index)
        if self._pairing.open_at(index - 1):
            # A result may still come after the message right after its call (a native tool's, in a later
            # response): a cut there, made now, would leave it with no call. Anywhere later is for a call left
            # unanswered for good, which must not block every cut after it.
            self._mark_unsafe(index - 1, index)
        return answers

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
        """Whether the tail may start at `index`: no call and answer pair spans it, and it is a request unless
        `responses`."""
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

    def head_end(self, wanted: int) -> int:
        """Where a head asked to end at `wanted` (keeping the first `wanted` messages) may end: no call on one side
        of it and its answer on the other.

        It grows over a call whose answer comes later, up to that answer (a head may end before a response: the
        bridge or the tail's request follows it), and stops before a call still waiting for its answer, which
        would otherwise arrive after the head and be cut away from it. The union-find answers both, so it costs
        the distance to the answer, not the history.
        """
        end = self.first_at_or_after(wanted, responses=True)
        end = len(self._below) if end is None else end
        waiting = min(self._pairing.waiting.values(), default=end)
        return max(self._find(waiting), 0) if waiting < end else end

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
