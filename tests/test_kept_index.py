"""A history's index handed from one run's processor to the next's: the windows are exactly a fresh index's, and an
index that is not the start of the history it is offered for (another message anywhere, a summary past it, a
compaction planned on it) is never taken over.

A store keeps the index its last run's processor made (token counts, cut points, where the summary is) with the
window it wrote, at the session's revision, so the next run indexes only the messages new since. These tests hold
the processors to that contract; tests/test_window_cache.py holds the store to it.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic_ai.messages import ModelRequest, UserPromptPart
from pydantic_ai.models.function import FunctionModel

from processors import SlidingWindowProcessor, SummarizationProcessor
from processors.summary import summary_request
from testkit.histories import tool_history, tool_turn
from testkit.scripted import RecordingSummarizer


def sliding() -> SlidingWindowProcessor:
    return SlidingWindowProcessor(trigger=('tokens', 160), keep=('tokens', 70))


def summarizing() -> SummarizationProcessor:
    return SummarizationProcessor(FunctionModel(RecordingSummarizer()), trigger=('tokens', 160), keep=('tokens', 70))


async def test_a_taken_over_index_gives_the_windows_a_fresh_index_gives() -> None:
    for make in (sliding, summarizing):
        history = tool_history(12, calls=1)
        taken_over = compacted = 0
        for start in range(4, len(history) - 4, 4):
            # The last run's processor saw the window up to its last request; the next run's gets it grown by a turn.
            before, grown = history[: start - 1], history[: start + 3]
            last = make()
            await last.window(before)
            indexed = last.indexed(before)
            if indexed is None:
                continue  # a compaction was planned on it: nothing to take over
            kept = len(indexed.messages)
            taking, fresh = make(), make()
            await taking.remember(grown, [None] * len(grown), indexed)
            await fresh.remember(grown, [None] * len(grown))
            assert taking.token_counts(grown) == fresh.token_counts(grown)
            assert await taking.window(grown) == await fresh.window(grown), (make.__name__, start)
            # Taking an index over copies it: the kept one is left as it was, for any other run to take over too.
            assert len(indexed.messages) == kept and last.indexed(before) is indexed
            taken_over += 1
            compacted += taking.compaction_state(grown) is not None
        assert taken_over >= 2 and compacted >= 1, (make.__name__, taken_over, compacted)


async def test_an_index_of_other_messages_is_not_taken_over() -> None:
    """The next history must hold the very messages the index was made of: a message edited, or an equal one made
    again (the archive read after another writer), makes the history another one, indexed afresh."""
    by_count = (
        lambda: SlidingWindowProcessor(trigger=('messages', 12), keep=('messages', 10)),
        lambda: SummarizationProcessor(
            FunctionModel(RecordingSummarizer()), trigger=('messages', 12), keep=('messages', 10)
        ),
    )
    for make in by_count:
        before = tool_history(2, calls=1)  # 8 messages: under the trigger
        last = make()
        await last.window(before)
        indexed = last.indexed(before)
        assert indexed is not None
        prompt = ModelRequest(parts=[UserPromptPart('Turn M9: the edited prompt, which the window must carry')])
        for replaced in (prompt, replace(before[4])):
            grown = [*before[:4], replaced, *before[5:], *tool_turn(2, calls=1)]  # 12: cut before the prompt
            taking, fresh = make(), make()
            await taking.remember(grown, [None] * len(grown), indexed)
            window = await taking.window(grown)
            assert window == await fresh.window(grown)
            assert taking.compaction_state(grown) is not None
            assert any(message is replaced for message in window) and not any(m is before[4] for m in window)


async def test_an_index_is_not_taken_over_past_a_summary_it_never_read() -> None:
    """A summary in a message past the index (a compaction stored meanwhile) gives the history another shape: the
    window then opens from that summary, as a fresh processor's does."""
    before = tool_history(3, calls=1)
    last = sliding()
    await last.window(before)
    indexed = last.indexed(before)
    assert indexed is not None
    bridge = summary_request([], 'Summary: orders M0 to M2 are on their way.')
    grown = [*before, *tool_turn(3, calls=1), bridge, *tool_turn(4, calls=1)]
    taking, fresh = sliding(), sliding()
    await taking.remember(grown, [None] * len(grown), indexed)
    assert await taking.window(grown) == await fresh.window(grown)
    assert taking.compaction_state(grown) == fresh.compaction_state(grown)
    assert taking.compaction_state(grown) is not None


async def test_no_index_is_kept_of_a_history_a_compaction_was_planned_on() -> None:
    for make in (sliding, summarizing):
        processor = make()
        short, long = tool_history(2, calls=1), tool_history(12, calls=1)
        await processor.window(short)
        assert processor.indexed(short) is not None  # under the trigger: nothing planned
        await processor.window(long)
        assert processor.compaction_state(long) is not None
        assert processor.indexed(long) is None
