"""A real Agent, driven by FunctionModel, through the Summarization capability over a long tool-using conversation."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest
from pydantic_ai.models.function import FunctionModel

from processors import Summarization, SummarizationProcessor, Summary
from testkit.histories import SYSTEM, pair_violations, system_prompts
from testkit.scripted import MARKER, NEW_MESSAGES, PREVIOUS, ParallelToolAssistant, RecordingSummarizer, scripted_agent


def build(summarizer: RecordingSummarizer, assistant: ParallelToolAssistant, made: list[Summary]) -> Agent[None, str]:
    summarization = Summarization(
        model=FunctionModel(summarizer), trigger=('messages', 30), keep=('messages', 10), on_summary=made.append
    )
    return scripted_agent(assistant, capabilities=[summarization])


async def test_sixty_turns_of_three_tool_calls_each_message_summarized_at_most_once() -> None:
    summarizer, assistant = RecordingSummarizer(), ParallelToolAssistant()
    made: list[Summary] = []
    agent = build(summarizer, assistant, made)
    history: list[ModelMessage] = []
    archive: list[ModelMessage] = []
    for turn in range(60):
        result = await agent.run(f'Turn M{turn} please', message_history=history)
        archive += result.new_messages()
        history = result.all_messages()

    # The run's history stays raw: compression changed only what was sent.
    assert archive == history
    assert len(history) == 60 * 4
    assert not any(isinstance(p, CompactionPart) for m in history for p in m.parts)

    # Each message reached the summarizer at most once over the whole conversation ...
    assert len(summarizer.inputs) >= 10
    seen: set[str] = set()
    for prompt in summarizer.inputs:
        (block,) = NEW_MESSAGES.findall(prompt)
        markers = set(MARKER.findall(block))
        assert markers, prompt
        assert not markers & seen, f'summarized twice: {sorted(markers & seen)}'
        seen |= markers
    # ... and each later input held the previous summary, whole.
    assert not PREVIOUS.findall(summarizer.inputs[0])
    for earlier, later in zip(made, summarizer.inputs[1:], strict=False):
        assert PREVIOUS.findall(later) == [earlier.text]
    assert [s.previous_text for s in made[1:]] == [s.text for s in made[:-1]]
    assert all(s.usage.requests == 1 for s in made)

    # Every request the model received was pair-safe, kept the system prompt, and stayed bounded.
    for request in assistant.requests:
        assert pair_violations(request, history) == []
        assert system_prompts(request)[:1] == [SYSTEM]
        assert len(request) <= 31


async def test_at_most_one_summarizer_call_per_request_even_if_the_trigger_still_fires() -> None:
    # keep asks for more than the trigger allows: a naive processor would summarize on every request.
    summarizer, assistant = RecordingSummarizer(), ParallelToolAssistant()
    summarization = Summarization(model=FunctionModel(summarizer), trigger=('tokens', 120), keep=('messages', 20))
    agent = scripted_agent(assistant, capabilities=[summarization])

    history: list[ModelMessage] = []
    for turn in range(7):
        history = (await agent.run(f'Turn M{turn}', message_history=history)).all_messages()
    assert len(summarizer.inputs) <= len(assistant.requests)
    # Compacting below the trigger means most requests need no summary at all.
    assert len(summarizer.inputs) <= len(assistant.requests) // 2


async def test_process_history_mode_extends_the_summary_it_wrote_earlier() -> None:
    # As a plain history processor under pydantic-ai's ProcessHistory, the history it gets back is the
    # window it produced; the summary in it is recognised and extended, not redone.
    summarizer, assistant = RecordingSummarizer(), ParallelToolAssistant()
    processor = SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 20), keep=('messages', 6))
    agent = scripted_agent(assistant, capabilities=[ProcessHistory(processor)])

    history: list[ModelMessage] = []
    for turn in range(20):
        history = (await agent.run(f'Turn M{turn}', message_history=history)).all_messages()
    assert len(summarizer.inputs) >= 3
    seen: set[str] = set()
    for index, prompt in enumerate(summarizer.inputs):
        (block,) = NEW_MESSAGES.findall(prompt)
        markers = set(MARKER.findall(block))
        assert not markers & seen
        seen |= markers
        if index:
            assert PREVIOUS.findall(prompt) == [f'SUMMARY-{index} of the conversation so far']
    assert system_prompts(history)[:1] == [SYSTEM]
    assert isinstance(history[0], ModelRequest)
