"""Behaviour a mutation pass over the cut points, the window read and the window engine found no test pinning down.

Each test here fails on a mutant of the library that the rest of the quick tier let through (issue 26 item 6):
the mutant is named in the test's comment, so a later pass can tell what the test is for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, example, given, settings
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from processors import ContextSize, SlidingWindowProcessor, SummarizationProcessor
from processors.cut_points import CutIndex, is_turn_start, safe_cut_points, tool_call_ids
from processors.summary import summary_request, summary_text
from session_store import Session, SessionNotFound, SessionStore
from testkit.histories import pair_violations
from testkit.real_histories import histories
from testkit.scripted import PREVIOUS, ParallelToolAssistant, RecordingSummarizer, scripted_agent
from tests._hypothesis import examples

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


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


# The window read: what a store reads, and keeps between runs, is the window a fresh read of the path gives.

StoreFactory = Callable[..., SessionStore]


def carried(messages: Sequence[ModelMessage]) -> list[str]:
    """The texts of the store's summaries the messages carry."""
    return [text for message in messages if (text := summary_text(message)) is not None]


async def active_tip(session: Session) -> str:
    return next(branch.tip for branch in await session.branches() if branch.active)


def forced(summarizer: RecordingSummarizer, keep: int) -> SummarizationProcessor:
    """Summarizes only when asked (`Session.compact`), keeping `keep` messages."""
    return SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 1_000), keep=('messages', keep))


@pytest.mark.slow_on_postgresql
async def test_a_window_is_read_only_for_a_session_that_exists_under_its_scope(store_factory: StoreFactory) -> None:
    # `SessionStore.window` is the one public read that reaches the window read's own scope check (a session opens
    # through `store.session`, which checks first). Mutants letting another scope's window through, or failing
    # with a TypeError for a missing session, survived (runs.py:265-266).
    store = store_factory()
    session = await store.session('theirs', scope='user-2')
    await session.run(scripted_agent(ParallelToolAssistant()), 'Turn M1')
    assert len((await store.window('theirs', scope='user-2')).messages) == 4
    with pytest.raises(SessionNotFound, match="No session 'theirs' under scope 'user-1'"):
        await store.window('theirs', scope='user-1')
    with pytest.raises(SessionNotFound):
        await store.window('nobody')


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize('move', ['sliding', 'provider compaction'])
async def test_a_kept_window_whose_start_moves_past_a_summary_of_its_path_takes_it(
    store_factory: StoreFactory, move: str
) -> None:
    """A branch switched back to can have summaries of its path ahead of its window: the trunk summarized the prefix
    the branches share after the fork was left. A run moving the window's start past them, without a summary of
    its own that reaches as far, must leave the store holding the window a fresh read gives, which takes the
    widest of them; the store that ran it keeps the window only while it knows which summary that is."""
    summarizer = RecordingSummarizer()
    store = store_factory(processor=forced(summarizer, keep=8))
    session = await store.session('c')
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(4):  # four messages a turn: turns start at 0, 4, 8 and 12
        await session.run(agent, f'Turn M{turn}')
    trunk = await active_tip(session)
    await session.rewind(12)
    await session.run(agent, 'Turn M100')
    fork = await active_tip(session)
    await session.switch(trunk)
    first = await session.compact()
    second = await (await store_factory(processor=forced(summarizer, keep=4)).session('c')).compact()
    assert first is not None and second is not None
    assert (first.covers_from, second.covers_from) == (0, first.covers_to)
    assert first.covers_to < second.covers_to <= 12, 'both lie on the shared prefix, so on the fork path too'

    if move == 'sliding':
        # No summary: the window's start moves to where the first ends (keeping 9 of 17 cuts at 8). Mutants that
        # lost where the summaries ahead end, or took the last of them, or missed one ending exactly at the new start,
        # kept the window without it (runs.py:300, :311, :357; windows.py:61).
        processor: SlidingWindowProcessor | SummarizationProcessor = SlidingWindowProcessor(
            trigger=('messages', 17), keep=('messages', 9)
        )
        running, widest = agent, first
    else:
        # The run's own summary ends before both (keeping 13 of 17 cuts at 4), and the provider's compaction in its
        # response moves the start past them. A mutant taking the run's own summary wherever it ended kept the
        # window with it (windows.py:64).
        processor = SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 17), keep=('messages', 13))
        running, widest = Agent(FunctionModel(_compacting)), second
    moving = store_factory(processor=processor)
    moved = await moving.session('c')
    await moved.switch(fork)
    before = await moving.window('c')
    assert before.positions[0] == 0 and carried(before.messages) == [], 'the fork was left before any summary'
    await moved.run(running, 'Turn M101')
    kept, read = await moving.window('c'), await store_factory(processor=processor).window('c')
    assert (kept.messages, kept.positions) == (read.messages, read.positions)
    assert carried(read.messages) == [widest.text] and read.positions[0] >= widest.covers_to


def _compacting(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A provider compacting everything before its answer, as Anthropic's and OpenAI's compaction bring back."""
    return ModelResponse(parts=[CompactionPart(content='provider summary', provider_name='anthropic'), TextPart('ok')])


@pytest.mark.slow_on_postgresql
async def test_a_tie_on_one_path_is_taken_alike_by_the_window_and_the_summary_chain(
    store_factory: StoreFactory,
) -> None:
    """The fork and the trunk each summarize the prefix they share, over the same positions: both summaries lie
    wholly on the fork's path and tie there. The window switched back to, a fresh read of it and the summary chain
    take the same one, and the next summary extends that one. (A mutant taking the other of a tie in the window read
    alone survived, runs.py:301.)"""
    summarizer = RecordingSummarizer()
    store = store_factory(processor=forced(summarizer, keep=4))
    session = await store.session('c')
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(4):
        await session.run(agent, f'Turn M{turn}')
    trunk = await active_tip(session)
    await session.rewind(12)
    await session.run(agent, 'Turn M100')
    fork = await active_tip(session)
    own = await session.compact()
    await session.switch(trunk)
    other = await session.compact()
    assert own is not None and other is not None
    assert (own.covers_from, own.covers_to) == (other.covers_from, other.covers_to) and own.text != other.text
    assert own.covers_to <= 12, 'the trunk summary covers only what the fork shares'

    await session.switch(fork)
    chain = await store.summaries('c')
    assert len(chain) == 1 and chain[0].text in (own.text, other.text)
    assert carried(await session.context()) == [chain[0].text]
    assert carried((await store_factory(processor=store.processor).window('c')).messages) == [chain[0].text]
    await session.run(agent, 'Turn M101')
    extended = await session.compact()
    assert extended is not None and extended.covers_from == own.covers_to
    assert PREVIOUS.findall(summarizer.inputs[-1]) == [chain[0].text]
    assert [s.text for s in await store.summaries('c')] == [chain[0].text, extended.text]


@pytest.mark.slow_on_postgresql
async def test_a_run_summarizing_twice_and_past_a_provider_compaction_is_stored_and_extended(
    store_factory: StoreFactory,
) -> None:
    """One run of chained tool calls, its first response a provider's compaction, through a processor that cuts before
    responses: it summarizes at more than one request, the last time past the compaction. It is stored (a mutant
    failing on a window already past the compaction survived, runs.py:416), and the chain the next compaction extends
    is whole (a mutant keeping the run's first summary as the window's survived, windows.py:66)."""
    summarizer = RecordingSummarizer()
    processor = SummarizationProcessor(
        FunctionModel(summarizer), trigger=('messages', 8), keep=('messages', 2), cut_before_responses=True
    )
    agent = Agent(FunctionModel(_chained), system_prompt='You compact.')

    @agent.tool_plain
    def step(n: int) -> str:
        return str(n)

    store = store_factory(processor=processor)
    session = await store.session('c')
    for turn in range(3):
        await session.run(agent, f'T{turn}')
    before = len(await store.summaries('c'))
    await session.run(agent, 'compact and work')
    archive = await store.history('c', limit=None)
    compacted = next(i for i, m in enumerate(archive) if any(isinstance(p, CompactionPart) for p in m.parts))
    chain = await store.summaries('c')
    assert len(chain) - before >= 2, 'the run summarized more than once'
    window = await store.window('c')
    assert window.positions[0] > compacted, 'the last summary ends past the compaction'
    # The next run's summary extends the last one the run made: the chain runs whole from the first message.
    await session.run(agent, 'T9')
    extended = await store.summaries('c')
    assert len(extended) > len(chain)
    assert [s.covers_from for s in extended] == [0, *(s.covers_to for s in extended[:-1])]
    assert extended.elsewhere == 0


def _chained(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Answers a prompt; 'compact and work' opens with a provider's compaction and chains six calls of `step`."""
    last = messages[-1]
    prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
    if prompt == 'compact and work':
        compaction = CompactionPart(content='provider summary', provider_name='anthropic')
        return ModelResponse(parts=[compaction, ToolCallPart('step', {'n': 0}, tool_call_id='call_0')])
    if prompt is not None:
        return ModelResponse(parts=[TextPart(f'answer to {prompt}')])
    done = int(next(str(p.content) for p in last.parts if isinstance(p, ToolReturnPart)))
    if done < 5:
        return ModelResponse(parts=[ToolCallPart('step', {'n': done + 1}, tool_call_id='call_0')])
    return ModelResponse(parts=[TextPart('done')])


# The window engine: what a trigger counts, and how answers separated from their calls are sent.


def _ten(messages: Sequence[ModelMessage]) -> int:
    """Ten tokens a message, whatever it holds: windows whose sizes read off their lengths."""
    return 10 * len(messages)


def _chat(length: int) -> list[ModelMessage]:
    """Prompts and answers in turn, the system prompt in the first prompt."""
    history: list[ModelMessage] = []
    for i in range(length):
        if i % 2:
            history.append(ModelResponse(parts=[TextPart(f'answer {i}')]))
        else:
            system = [SystemPromptPart('Be brief.')] if i == 0 else []
            history.append(ModelRequest(parts=[*system, UserPromptPart(f'question {i}')]))
    return history


def _ask(request: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(request)])


def _say(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


async def test_a_token_trigger_counts_the_whole_window_and_fires_on_reaching_it() -> None:
    # Mutants counting every window a token short or a token over (the running sums' start, the provider overhead's,
    # _window_engine.py:67 and :84), sizing a first cut with a head of -1 messages (:70) or taking the bridge's tokens
    # off instead of adding them (:123) survived: no test put a window at a token trigger exactly.
    history = _chat(11)
    assert (
        len(await SlidingWindowProcessor(trigger=('tokens', 50), keep=('messages', 4), token_counter=_ten)(history[:5]))
        < 5
    )
    above = SlidingWindowProcessor(trigger=('tokens', 51), keep=('messages', 4), token_counter=_ten)
    assert await above(history[:5]) == history[:5]

    # Keeping 30 tokens keeps the last three messages, as keeping three messages does. (A mutant aiming a token
    # keep past the history's end, which then keeps only what follows the last safe cut, survived, :459.)
    keeps: list[ContextSize] = [('messages', 2), ('messages', 4), ('tokens', 30)]
    for keep in keeps:
        processor = SlidingWindowProcessor(trigger=('tokens', 50), keep=keep, token_counter=_ten)
        for end in (5, 7, 9, 11):  # request by request, as a run sends them
            window = await processor(history[:end])
            # The system prompt's message was cut: it rides alone before the tail, and counts as a message.
            assert [type(part) for part in window[0].parts] == [SystemPromptPart]
            assert _ten(window) < 50, (keep, end)
            if end == 5:
                # The first cut keeps what `keep` asks for, from the first safe cut at or after it: it fits.
                kept = int(keep[1]) if keep[0] == 'messages' else int(keep[1]) // 10
                assert window[1:] == history[min(i for i in safe_cut_points(history[:5]) if i >= 5 - kept) : 5]


async def test_an_answer_to_a_call_right_after_the_head_cut_while_it_waited_is_sent_as_text() -> None:
    # The head stops before a call still waiting (for approval, say); the cut then passes the call, and its answer
    # comes after: it must reach the model as text, not as a return without its call. A mutant converting only
    # answers to calls past the head's end survived (_window_engine.py:136).
    call = ModelResponse(parts=[ToolCallPart('book', {}, tool_call_id='call_0')])
    answer = ModelRequest(parts=[ToolReturnPart('book', 'booked', tool_call_id='call_0')])
    history: list[ModelMessage] = [_ask('q0'), _say('a1'), _ask('q2'), call, _ask('q4'), _say('a5'), _ask('q6')]
    history += [_say('a7'), answer, _say('a9'), _ask('q10')]
    processor = SlidingWindowProcessor(trigger=('messages', 6), keep=('messages', 2), keep_head=('messages', 3))
    texts = []
    for end in range(1, len(history) + 1):
        if isinstance(history[end - 1], ModelRequest):  # request by request, as a run sends them
            window = await processor(history[:end])
            assert pair_violations(window, history[:end]) == [], end
            texts += [str(p.content) for m in window for p in m.parts if isinstance(p, UserPromptPart)]
    assert any('booked' in text for text in texts), 'the answer reached the model'


async def test_an_answer_no_call_in_the_history_made_is_sent_as_text_once_compacted() -> None:
    # A history that reached the processor without the call (cut elsewhere): once the window is compacted the orphan
    # return in its tail goes out as text. A mutant leaving answers with no call (-1) as returns survived
    # (_window_engine.py:136).
    orphan = ModelRequest(parts=[ToolReturnPart('lookup', 'late result', tool_call_id='gone')])
    history: list[ModelMessage] = [_ask('q0'), _say('a1'), _ask('q2'), _say('a3'), orphan, _say('a5'), _ask('q6')]
    window = await SlidingWindowProcessor(trigger=('messages', 6), keep=('messages', 3))(history)
    assert len(window) < len(history)
    parts = [part for message in window for part in message.parts]
    assert not any(isinstance(part, ToolReturnPart) for part in parts)
    assert any(isinstance(part, UserPromptPart) and 'late result' in str(part.content) for part in parts)


async def test_a_token_trigger_overrides_keep_but_never_cuts_into_the_head() -> None:
    # `keep` asks for more than the history holds, but the window is at its token trigger: the cut goes past the
    # head anyway, to the first safe cut after it. Mutants planning from the lower of the head's end and the last
    # cut, or from where `keep` points without the head's floor, cut inside the head, so the window was the whole
    # history still at its trigger (_window_engine.py:454, :462).
    history = _chat(5)
    processor = SlidingWindowProcessor(
        trigger=('tokens', 50), keep=('messages', 10), keep_head=('messages', 2), token_counter=_ten
    )
    window = await processor(history)
    assert window[:2] == history[:2] and len(window) < len(history) and _ten(window) < 50


async def test_a_history_fed_back_in_with_its_summary_merged_into_a_request_starts_its_tail_there() -> None:
    # A stored window comes back as head, then the tail whose first request carries the summary (pydantic-ai merges
    # consecutive requests). Below every trigger nothing is compacted, and the state a store persists says the tail
    # still starts at that request. A mutant leaving the tail's start at 0 survived (_window_engine.py:408).
    merged = ModelRequest(parts=[*summary_request([], 'what came before').parts, UserPromptPart('question 2')])
    history = [*_chat(2), merged, _say('answer 3'), _ask('question 4')]
    processor = SlidingWindowProcessor(trigger=('messages', 20), keep=('messages', 2), keep_head=('messages', 2))
    assert await processor(history) == history
    state = processor.compaction_state(history)
    assert state is not None and (state.head_end, state.tail_start, state.summary) == (2, 2, 'what came before')


async def test_a_cut_prefers_a_turn_start_that_keeps_half_of_what_keep_asks() -> None:
    # The first safe cut `keep` reaches is a request of validation feedback, inside a turn; the next turn starts two
    # messages on and still keeps more than half of the five asked for, so the window opens with that turn. (A mutant
    # weighing the turn against `n + target` instead of `n - target`, so never preferring it, survived,
    # _window_engine.py:467.)
    feedback = ModelRequest(
        parts=[RetryFeedbackPart('the output failed validation', retry=RetryInfo('validation_error'))]
    )
    history = [*_chat(4), feedback, _say('answer 5'), _ask('question 6'), _say('answer 7'), _ask('question 8')]
    assert 4 in safe_cut_points(history) and not is_turn_start(history[4])
    window = await SlidingWindowProcessor(trigger=('messages', 9), keep=('messages', 5))(history)
    assert window[1:] == history[6:]  # after the system prompt, which rides alone


@pytest.mark.parametrize(('budget', 'head'), [(5, 0), (19, 1), (20, 2)])
async def test_a_head_kept_in_tokens_holds_the_leading_messages_that_fit_its_budget(budget: int, head: int) -> None:
    # `keep_head` in tokens: as many leading messages as fit the budget (none when the first does not). No test
    # kept a head in tokens; mutants keeping one that overruns its budget by a token, or a head of -1 messages,
    # survived (_window_engine.py:491, :493).
    history = _chat(9)
    processor = SlidingWindowProcessor(
        trigger=('messages', 9), keep=('messages', 2), keep_head=('tokens', budget), token_counter=_ten
    )
    window = await processor(history)
    state = processor.compaction_state(history)
    assert state is not None and state.head_end == head
    assert window == [*history[:head], *history[state.tail_start :]] and state.tail_start > head


async def test_a_plan_with_a_head_summarizes_only_what_follows_the_head() -> None:
    # The first compaction of a history with `keep_head` evicts what lies between the head and the cut: the plan says
    # so before the summarizer runs. (A mutant planning from the history's start survived, _window_engine.py:297.)
    history = _chat(9)
    processor = SummarizationProcessor(
        FunctionModel(RecordingSummarizer()), trigger=('messages', 50), keep=('messages', 2), keep_head=('messages', 2)
    )
    plan = await processor.plan_compression(history, force=True)
    assert plan is not None
    assert plan.messages_to_summarize == history[2 : plan.cutoff_index]
    assert plan.preserved_messages == history[plan.cutoff_index :]


async def test_usage_reported_for_a_first_request_of_one_message_anchors_the_next_count() -> None:
    # The first request of a conversation is one message; the provider reports what it really cost (instructions,
    # tool definitions). With `anchor_on_usage` the next count adds that gap, and here the trigger fires. A mutant
    # that never found a one-message history again, so forgot what it sent, survived (_window_engine.py:97).
    first = ModelResponse(parts=[TextPart('answer 1')], usage=RequestUsage(input_tokens=500))
    history: list[ModelMessage] = [_ask('question 0'), first, _ask('question 2')]
    processor = SlidingWindowProcessor(
        trigger=('tokens', 100), keep=('messages', 1), token_counter=_ten, anchor_on_usage=True
    )
    assert await processor(history[:1]) == history[:1]
    assert await processor(history) == history[2:]


async def test_a_first_compaction_with_a_head_leaves_the_window_below_its_trigger() -> None:
    # The first cut used to be sized with no head (it is settled only once the cut is made), so the window could
    # sit at its trigger and compact again on the next request; found reading why a Lineage.head_end mutant mattered.
    history = _chat(7)
    processor = SlidingWindowProcessor(
        trigger=('tokens', 50), keep=('messages', 3), keep_head=('messages', 2), token_counter=_ten
    )
    window = await processor(history)
    assert window[:2] == history[:2]  # the head
    assert _ten(window) < 50, [history.index(message) for message in window]
