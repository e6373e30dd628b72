"""Conversations as trees: rewind, regenerate, switch and restart, each branch with its own summary chain."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ImageUrl, ModelMessage, TextContent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel

from processors import SummarizationProcessor
from session_store import Session, SessionConflict, SessionStore
from session_store._history.records import RunRecord
from session_store.results import SearchHit
from testkit.scripted import MARKER, NEW_MESSAGES, ParallelToolAssistant, RecordingSummarizer, scripted_agent

StoreFactory = Callable[..., SessionStore]


def summarizing(summarizer: RecordingSummarizer) -> SummarizationProcessor:
    return SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 20), keep=('messages', 6))


def turns_seen(messages: Sequence[ModelMessage]) -> set[int]:
    """The turn numbers whose markers (`M<turn>...`) the messages carry."""
    return {int(marker[1:].split('-')[0]) for marker in MARKER.findall(' '.join(map(str, messages)))}


async def converse(session: Session, assistant: ParallelToolAssistant, turns: range) -> list[ModelMessage]:
    agent = scripted_agent(assistant)
    made: list[ModelMessage] = []
    for turn in turns:
        made += (await session.run(agent, f'Turn M{turn}')).new_messages()
    return made


@pytest.mark.parametrize(
    ('turns_a', 'turns_b'),
    [(16, 10), pytest.param(40, 20, marks=pytest.mark.slow, id='40-turns-then-20')],
)
async def test_each_branch_sees_only_its_own_path_and_summaries(
    store_factory: StoreFactory, turns_a: int, turns_b: int
) -> None:
    """A summarizing session of `turns_a` turns, rewound to its middle, `turns_b` turns on the new branch, its
    last answer regenerated, a restart, a switch back, and 12 more turns on the first branch."""
    middle = turns_a // 2
    summarizer = RecordingSummarizer()
    store = store_factory(processor=summarizing(summarizer))
    session = await store.session('tree')
    assistant = ParallelToolAssistant()
    path_a = await converse(session, assistant, range(turns_a))
    chain_a = await store.summaries('tree')
    assert len(chain_a) >= 3

    # Rewind to the start of the middle turn: the turns after it stay stored, as a branch.
    fork = 4 * middle
    await session.rewind(fork)
    assert await session.history() == path_a[:fork]
    a_only = {summary.text for summary in chain_a if summary.covers_to > fork}
    assert a_only, 'some summaries of the first branch covered what the rewind left behind'

    assistant.requests.clear()
    made_on_a = len(summarizer.inputs)  # summaries are numbered on: texts stay distinct across branches
    path_b = path_a[:fork] + await converse(session, assistant, range(100, 100 + turns_b))
    for request in assistant.requests:
        assert not turns_seen(request) & set(range(middle, turns_a)), (
            'a request on the new branch saw the branch it left'
        )
        assert not {text for text in a_only if text in str(request)}, 'a summary of the other branch leaked'
    made_on_b = summarizer.inputs[made_on_a:]
    assert made_on_b, 'the new branch was summarized too'
    for prompt in made_on_b:
        assert not turns_seen([prompt]) & set(range(middle, turns_a))  # type: ignore[list-item]
        assert not {text for text in a_only if text in prompt}, 'a summary of the other branch was extended'
    summarized = [set(MARKER.findall(block)) for prompt in made_on_b for block in NEW_MESSAGES.findall(prompt)]
    assert all(not (a & b) for i, a in enumerate(summarized) for b in summarized[i + 1 :]), 'a message summarized twice'
    assert await session.history() == path_b
    chain_b = await store.summaries('tree')
    assert all(b.covers_from == a.covers_to for a, b in pairwise(chain_b))
    assert not {summary.text for summary in chain_b} & a_only

    # Regenerate the last answer: the old one stays a branch.
    agent = scripted_agent(assistant)
    regenerated = await session.regenerate(agent)
    last_prompt = 4 * (middle + turns_b - 1)
    path_b2 = path_b[: last_prompt + 1] + regenerated.new_messages()
    assert await session.history() == path_b2
    await store.close()

    # Restart: a new store finds the three branches, switches back to the first and carries on.
    summarizer_2 = RecordingSummarizer()
    store_2 = store_factory(processor=summarizing(summarizer_2))
    session_2 = await store_2.session('tree')
    assert await session_2.history() == path_b2
    branches = await session_2.branches()
    assert len(branches) == 3
    assert [b.active for b in branches] == [False, False, True]
    first = next(b for b in branches if b.forked_at is None)
    assert first.message_count == len(path_a) and first.preview == f'Turn M{turns_a - 1}'
    assert {b.forked_at for b in branches} == {None, fork, last_prompt + 1}
    assert {b.parent for b in branches} == {None, first.tip, next(b.tip for b in branches if b.forked_at == fork)}

    await session_2.switch(first.tip)
    assert await session_2.history() == path_a
    assert await store_2.summaries('tree') == chain_a
    window = await session_2.context()
    assert not turns_seen(window) & set(range(100, 100 + turns_b))

    assistant_2 = ParallelToolAssistant()
    path_a2 = path_a + await converse(session_2, assistant_2, range(200, 212))
    for request in assistant_2.requests:
        assert not turns_seen(request) & set(range(100, 100 + turns_b)), (
            'a request on the first branch saw another branch'
        )
    for prompt in summarizer_2.inputs:
        assert not turns_seen([prompt]) & set(range(100, 100 + turns_b))  # type: ignore[list-item]
    assert await session_2.history() == path_a2
    assert len(await session_2.branches()) == 3


async def test_a_rewind_must_not_split_a_tool_call_from_its_return(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('s')
        await converse(session, ParallelToolAssistant(), range(2))
        before = await session.history()
        with pytest.raises(ValueError, match=r"position 2 would separate tool call '.*' from its return"):
            await session.rewind(2)  # between the calls (position 1) and their returns (position 2)
        with pytest.raises(ValueError, match='position must be 0 to 8'):
            await session.rewind(9)
        with pytest.raises(ValueError, match="no branch '12345'"):
            await session.switch('12345')
        assert await session.history() == before
        assert len(await session.branches()) == 1


async def test_a_branch_previews_its_last_prompt_as_text_its_media_left_out(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('s')
        image = ImageUrl(url='https://example.com/cat.png')
        await session.run(Agent(TestModel()), ['What is   in', image, TextContent(content='this picture?')])
        (branch,) = await session.branches()
        assert branch.preview == 'What is in this picture?'


@pytest.mark.slow_on_postgresql
async def test_branches_are_numbered_per_session_in_the_order_they_were_made(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        other = await store.session('other')
        await converse(other, ParallelToolAssistant(), range(1))
        await other.rewind(0)
        session = await store.session('s')
        assert [(b.number, b.active) for b in await session.branches()] == [(1, True)]  # not the database's id
        await converse(session, ParallelToolAssistant(), range(3))
        await session.rewind(4)
        await converse(session, ParallelToolAssistant(), range(10, 11))
        await session.rewind(8)  # left the rewound path: branch 2
        await session.rewind(4)  # nothing ran from the last rewind: its branch goes, and this one takes its number
        listed = await session.branches()
        assert [(b.number, b.message_count, b.forked_at, b.active) for b in listed] == [
            (1, 12, None, False),
            (2, 8, 4, False),
            (3, 4, 4, True),
        ]
        assert listed[0].tip != '1', "another session's branches came first: tips are not numbers"

        # A number or a tip names the same branch, to read and to switch to; numbers survive switching.
        assert await store.history('s', branch=2) == await store.history('s', branch=listed[1].tip)
        await session.switch(1)
        assert [(b.number, b.active) for b in await session.branches()] == [(1, True), (2, False)]
        assert len(await session.history()) == 12
        await session.switch(listed[1].tip)
        assert [(b.number, b.tip, b.active) for b in await session.branches()] == [
            (1, listed[0].tip, False),
            (2, listed[1].tip, True),
        ]
        for bad in (0, 3, -1, True):
            with pytest.raises(ValueError, match=rf'has no branch {bad!r}: it has branches numbered 1 to 2'):
                await session.switch(bad)

        # An import into another database, or beside its source, numbers the branches as the source does.
        copy = await store.session(await store.import_(await store.export('s'), session_id='copy'))
        imported = await copy.branches()
        assert [(b.number, b.message_count, b.active) for b in imported] == [(1, 12, False), (2, 8, True)]
        assert await copy.history(branch=1) == await session.history(branch=1)


async def test_a_run_that_read_the_window_before_a_rewind_stores_nothing(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('s')
        await converse(session, ParallelToolAssistant(), range(2))
        loaded = await store._runs.load_window('s', None, session.processor)
        await session.rewind(4)
        record = RunRecord(
            messages=[],
            tokens=[],
            head_end=0,
            window_start=0,
            summaries=[],
            usage=loaded.usage,
            deferred_tool_requests=None,
        )
        with pytest.raises(SessionConflict):
            await store._runs.store('s', loaded, record)
        assert len(await session.history()) == 4
        assert [b.message_count for b in await session.branches()] == [8, 4]
        # Nothing ran from the rewind, so its branch holds no message of its own: leaving it (another
        # rewind, then a switch) drops it rather than listing a copy of a prefix.
        await session.rewind(0)
        assert await session.history() == []
        assert [(b.message_count, b.active) for b in await session.branches()] == [(8, False), (0, True)]
        first = (await session.branches())[0]
        await session.switch(first.tip)
        assert [(b.message_count, b.active) for b in await session.branches()] == [(8, True)]
        assert len(await session.history()) == 8


@pytest.mark.slow_on_postgresql
async def test_a_fork_starts_from_the_summary_its_source_had_there(
    store_factory: StoreFactory, new_database: Callable[[], str]
) -> None:
    summarizer = RecordingSummarizer()
    async with store_factory(processor=summarizing(summarizer)) as store:
        session = await store.session('source', scope='team')
        path = await converse(session, ParallelToolAssistant(), range(12))
        chain = await store.summaries('source')
        calls = len(summarizer.inputs)
        fork = await store.fork('source', at=32, new_session_id='copy')
        assert fork.scope == 'team' and await fork.history() == path[:32]
        # Every summary ending before 32: one ending at 32 would leave the window no tail to ride in.
        kept = [summary for summary in chain if summary.covers_to < 32]
        assert len(kept) == 1 < len(chain)
        assert [(s.covers_from, s.covers_to, s.text) for s in await fork.summaries()] == [
            (s.covers_from, s.covers_to, s.text) for s in kept
        ]
        window = await fork.context()
        assert kept[-1].text in str(window)
        assert len(summarizer.inputs) == calls, 'forking calls no summarizer'
        # Each lives on its own: deleting the source leaves the fork whole, and the fork runs on.
        await store.delete('source')
        assert await fork.history() == path[:32]
        await converse(fork, ParallelToolAssistant(), range(50, 52))
        assert len(await fork.history()) == 40
        with pytest.raises(SessionConflict, match="'copy' already exists"):
            await store.fork('copy', at=0, new_session_id='copy')
        with pytest.raises(ValueError, match='would separate tool call'):
            await store.fork('copy', at=2, new_session_id='other')


async def test_search_reads_the_active_path_unless_asked_for_every_branch(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('s')
        other = await store.session('other')
        await converse(session, ParallelToolAssistant(), range(4))
        await converse(other, ParallelToolAssistant(), range(2, 4))
        await session.rewind(8)
        await converse(session, ParallelToolAssistant(), range(40, 42))

        def found(hits: Sequence[SearchHit]) -> set[tuple[str, int]]:
            return {(hit.session_id, hit.position) for hit in hits}

        # Turn 3 was left behind on a branch of 's'; the other session's turn 3 is on its active path.
        assert found(await store.search('M3-a')) == {('other', 7)}
        assert found(await store.search('M3-a', session_id='s')) == set()
        assert found(await store.search('M3-a', branches='all')) == {('other', 7), ('s', 15)}
        assert found(await store.search('M41-a', session_id='s')) == {('s', 15)}
        assert found(await store.search('M1-a', session_id='s')) == {('s', 7)}
        # Full-text search keeps to the active paths the same way.
        assert {hit.session_id for hit in await store.search('M3', match='words')} == {'other'}
        assert {hit.session_id for hit in await store.search('M3', match='words', branches='all')} == {'other', 's'}
        assert await store.search('M3', match='words', session_id='s') == []
        with pytest.raises(ValueError, match="branches must be 'active' or 'all'"):
            await store.search('x', branches='some')  # type: ignore[arg-type]
