"""Behaviour a mutation pass over the cut points, the window read and the window engine found no test pinning down.

Each test here fails on a mutant of the library that the rest of the quick tier let through (issue 26 item 6):
the mutant is named in the test's comment, so a later pass can tell what the test is for.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import HealthCheck, example, given, settings
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from processors.cut_points import CutIndex, is_turn_start, safe_cut_points, tool_call_ids
from testkit.real_histories import histories

# Cut points: every query of a `CutIndex`, against a brute-force judge.


def _is_answer(part: object) -> bool:
    """A tool return, a native tool's result, or a retry naming its tool (a legacy one without a name answers none)."""
    return isinstance(part, BaseToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_name is not None)


def _settles(part: object, call: BaseToolCallPart) -> bool:
    """Whether `part`, coming after `call`, answers it or makes a call with its id again (which takes every later
    answer): either way `call` waits for nothing more."""
    same = getattr(part, 'tool_call_id', None) == call.tool_call_id
    return same and (_is_answer(part) or isinstance(part, BaseToolCallPart))


def _pairs(history: Sequence[ModelMessage]) -> list[tuple[int, int]]:
    """(call message, answer message) of each answer: the nearest call of its id before it, in part order (-1: none)."""
    parts = [(index, part) for index, message in enumerate(history) for part in message.parts]
    pairs = []
    for k, (index, part) in enumerate(parts):
        if _is_answer(part):
            tool_call_id = getattr(part, 'tool_call_id', None)
            calls = [i for i, p in parts[:k] if isinstance(p, BaseToolCallPart) and p.tool_call_id == tool_call_id]
            pairs.append((calls[-1] if calls else -1, index))
    return pairs


def _leaves_a_call_waiting(message: ModelMessage, after: ModelMessage) -> bool:
    """Whether a call `message` makes is neither answered nor made again (with its id) by its later parts or `after`'s:
    a call made again is answered there, never the first time."""
    later = [*message.parts, *after.parts]
    return any(
        isinstance(part, BaseToolCallPart) and not any(_settles(p, part) for p in later[k + 1 :])
        for k, part in enumerate(message.parts)
    )


def _waiting_calls(history: Sequence[ModelMessage]) -> list[int]:
    """The messages making a call that nothing after it answers or makes again: still waiting when the history ends."""
    parts = [(index, part) for index, message in enumerate(history) for part in message.parts]
    return [
        index
        for k, (index, part) in enumerate(parts)
        if isinstance(part, BaseToolCallPart) and not any(_settles(p, part) for _, p in parts[k + 1 :])
    ]


def _brute_cuts(history: Sequence[ModelMessage], *, responses: bool) -> list[int]:
    pairs = _pairs(history)
    return [
        i
        for i in range(1, len(history))
        if (responses or isinstance(history[i], ModelRequest))
        and not any(0 <= call < i <= answer for call, answer in pairs)
        and not _leaves_a_call_waiting(history[i - 1], history[i])
    ]


def check_cut_index(history: Sequence[ModelMessage]) -> None:
    """`first_at_or_after` and `last_before`, for requests only, for responses too and for turn starts, from every
    start: what a brute-force judge of each index says. (`safe_cut_points` asks only `is_safe`, for requests.)"""
    index = CutIndex()
    for message in history:
        index.append(message)
    starts = range(len(history) + 2)
    for responses in (False, True):
        safe = _brute_cuts(history, responses=responses)
        for start in starts:
            first = index.first_at_or_after(start, responses=responses)
            assert first == next((i for i in safe if i >= start), None), (responses, start, safe)
            assert index.last_before(start, responses=responses) == next((i for i in safe[::-1] if i < start), None)
    turns = [i for i in _brute_cuts(history, responses=False) if is_turn_start(history[i])]
    for start in starts:
        assert index.first_at_or_after(start, turn_start=True) == next((i for i in turns if i >= start), None), start
    # A head asked to end at `wanted` ends at the first cut from there (a response may follow it), else keeps all;
    # but never past a call still waiting: then at the last cut at or before the first such call, or keeps nothing.
    anywhere = _brute_cuts(history, responses=True)
    waiting = _waiting_calls(history)
    for wanted in range(1, len(history) + 1):
        end = next((i for i in anywhere if i >= wanted), len(history))
        if waiting and min(waiting) < end:
            end = max((i for i in anywhere if i <= min(waiting)), default=0)
        assert index.head_end(wanted) == end, (wanted, waiting)


_WAITED_ACROSS_A_PROMPT: list[ModelMessage] = [
    ModelRequest(parts=[UserPromptPart('book it')]),
    ModelResponse(parts=[ToolCallPart('book', {}, tool_call_id='call_0')]),  # waits for approval
    ModelRequest(parts=[UserPromptPart('meanwhile')]),
    ModelResponse(parts=[TextPart('still waiting')]),
    ModelRequest(parts=[ToolReturnPart('book', 'booked', tool_call_id='call_0')]),
    ModelResponse(parts=[TextPart('done')]),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories())
@example(history=_WAITED_ACROSS_A_PROMPT)
def test_every_cut_query_matches_a_brute_force_judge(history: list[ModelMessage]) -> None:
    # The quick tier checked only `is_safe` for requests this way; mutants of the rest survived it: marking
    # `(index - 2, index]` for a call left waiting (cut_points.py:121; the response making the call is still a cut
    # for a processor that cuts before responses, and for a head's end), `head_end` taking the latest waiting call
    # (:168), `last_before` starting from the history's end, skipping a candidate, or never returning 1 (:173-176).
    check_cut_index(history)


def test_a_turn_started_right_after_the_first_message_is_a_turn_start() -> None:
    # A system prompt in a request of its own, then the user's: the second message opens the first turn. (Kills the
    # mutant taking only indices past 1 as turn starts, cut_points.py:112.)
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart('be brief')]),
        ModelRequest(parts=[UserPromptPart('one')]),
        ModelResponse(parts=[TextPart('1')]),
        ModelRequest(parts=[UserPromptPart('two')]),
        ModelResponse(parts=[TextPart('2')]),
    ]
    check_cut_index(history)
    index = CutIndex()
    for message in history:
        index.append(message)
    assert index.first_at_or_after(1, turn_start=True) == 1


def test_a_call_made_again_in_the_next_response_leaves_the_first_one_waiting_for_nothing() -> None:
    # A server numbering calls call_0 in every response re-issues a native call that got no result: the result
    # answers the second call, so the first constrains no cut, and the tail may open with the second response.
    # (Kills the mutant that leaves a call made again open, cut_points.py:61.)
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart('search twice')]),
        ModelResponse(parts=[NativeToolCallPart('web_search', {'q': 'a'}, tool_call_id='call_0')]),
        ModelResponse(
            parts=[
                NativeToolCallPart('web_search', {'q': 'a'}, tool_call_id='call_0'),
                NativeToolReturnPart('web_search', 'found', tool_call_id='call_0'),
                TextPart('done'),
            ]
        ),
        ModelRequest(parts=[UserPromptPart('thanks')]),
        ModelResponse(parts=[TextPart('welcome')]),
    ]
    check_cut_index(history)
    index = CutIndex()
    for message in history:
        index.append(message)
    assert index.first_at_or_after(2, responses=True) == 2


def test_an_answer_without_a_call_blocks_no_cut() -> None:
    # A history whose call was cut away before it got here (the window engine sends such answers as text): the orphan
    # pairs with nothing, so every cut before it stays. (Kills the mutant pairing it with index -1 and marking every
    # cut up to it unsafe, cut_points.py:115.)
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart('go')]),
        ModelResponse(parts=[TextPart('working')]),
        ModelRequest(parts=[ToolReturnPart('lookup', 'late result', tool_call_id='gone')]),
        ModelResponse(parts=[TextPart('noted')]),
        ModelRequest(parts=[UserPromptPart('next')]),
        ModelResponse(parts=[TextPart('ok')]),
    ]
    check_cut_index(history)
    assert safe_cut_points(history) == [2, 4]
    call = ModelResponse(parts=[ToolCallPart('lookup', {}, tool_call_id='gone')])
    assert safe_cut_points([history[0], call, *history[2:]]) == [4]  # with its call, the answer pins it


def test_tool_call_ids_name_every_part_that_refers_to_a_call() -> None:
    # A public helper nothing inside the library calls, so no other test ran it (both mutants of its loop survived,
    # cut_points.py:32-33).
    response = ModelResponse(
        parts=[
            TextPart('looking'),
            ToolCallPart('lookup', {}, tool_call_id='call_0'),
            NativeToolCallPart('web_search', {}, tool_call_id='call_1'),
            NativeToolReturnPart('web_search', 'found', tool_call_id='call_1'),
        ]
    )
    request = ModelRequest(
        parts=[
            ToolReturnPart('lookup', 'ok', tool_call_id='call_0'),
            ToolReturnPart('lookup', 'try again', tool_call_id='call_2', outcome='retried'),
            UserPromptPart('and?'),
        ]
    )
    assert list(tool_call_ids(response)) == ['call_0', 'call_1', 'call_1']
    assert list(tool_call_ids(request)) == ['call_0', 'call_2']
    assert list(tool_call_ids(ModelRequest(parts=[UserPromptPart('hi')]))) == []
