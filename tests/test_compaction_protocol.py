"""The summarizer as pydantic-ai's compaction handler (its `compact_history` hook), and the store keeping what the
framework reports.

A chat model here rejects any request over `LIMIT` messages with `ModelContextWindowExceededError`, as a provider
rejects one over its context window, while the summarizer's trigger is set far above it (a wrong context window):
only pydantic-ai's compaction on overflow, served by our handler, lets the conversation go on. Every user prompt
and tool output carries a marker (`M<turn>...`), so a test reads off the summarizer's inputs which messages each
summary folded in: none may be folded in twice, and each summary after the first extends the one before it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, CompactionRequest, CompactionResult
from pydantic_ai.conversation import Conversation
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.usage import UsageLimits
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from processors import Summarization, SummarizationProcessor
from processors.capabilities import SUMMARIZATION_HANDLER
from session_store import SessionStore, dispatch_chat
from testkit.histories import SYSTEM
from testkit.scripted import PREVIOUS, ParallelToolAssistant, RecordingSummarizer, summarized_markers
from testkit.templates import NewDatabase

LIMIT = 14
"""The most messages the chat model takes in one request: three and a half turns of four messages."""
TURNS = 30
FAR_ABOVE = ('messages', 1_000)
"""The summarizer's trigger: never reached, as when it was set from a context window larger than the model's."""
KEEP = ('messages', 4)
UNLIMITED = UsageLimits(request_limit=None)
"""A conversation carries its usage from run to run: 30 turns make more requests than pydantic-ai's default allows."""


class Overflowing:
    """The scripted tool-using assistant behind a context window of `LIMIT` messages, streamed or not."""

    def __init__(self) -> None:
        self.assistant = ParallelToolAssistant()
        self.rejected = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > LIMIT:
            self.rejected += 1
            raise ModelContextWindowExceededError(
                model_name='overflowing', message=f'{len(messages)} messages: over the context window'
            )
        return self.assistant(messages, info)

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        response = self(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}


def overflowing_agent(model: Overflowing, capabilities: Sequence[Any] = ()) -> Agent[None, str]:
    agent = Agent(
        FunctionModel(model, stream_function=model.stream), system_prompt=SYSTEM, capabilities=list(capabilities)
    )

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f'{q.replace("-c", "-r")} found'

    return agent


def summarizer_settings(summarizer: RecordingSummarizer) -> dict[str, Any]:
    return {'model': FunctionModel(summarizer), 'trigger': FAR_ABOVE, 'keep': KEEP}


def check_each_summary_extends_the_last_and_reads_each_message_once(summarizer: RecordingSummarizer) -> None:
    folded = summarized_markers(summarizer.inputs)
    assert len(folded) == len(summarizer.inputs) > 0
    seen: set[str] = set()
    for markers in folded:
        assert markers, 'a summary folded in no message'
        assert not markers & seen, f'summarized twice: {sorted(markers & seen)}'
        seen |= markers
    for number, prompt in enumerate(summarizer.inputs[1:], start=1):
        assert PREVIOUS.findall(prompt) == [f'SUMMARY-{number} of the conversation so far']


async def test_an_overflow_is_compacted_and_sent_again_through_the_capability_alone() -> None:
    model, summarizer = Overflowing(), RecordingSummarizer()
    agent = overflowing_agent(model, [Summarization(**summarizer_settings(summarizer))])
    history: list[ModelMessage] = []
    compactions = 0
    for turn in range(TURNS):
        result = await agent.run(f'ask M{turn}', message_history=history)
        assert result.output == f'Answer M{turn}-a done'
        assert {(c.handler, c.reason) for c in result.compactions} <= {(SUMMARIZATION_HANDLER, 'context_overflow')}
        compactions += len(result.compactions)
        history = result.all_messages()
    assert model.rejected == compactions >= TURNS * 4 // LIMIT
    assert len(summarizer.inputs) == compactions
    assert all(len(request) <= LIMIT for request in model.assistant.requests)
    check_each_summary_extends_the_last_and_reads_each_message_once(summarizer)


async def test_an_overflow_in_a_session_run_is_stored_as_the_next_link(new_database: NewDatabase) -> None:
    model, summarizer = Overflowing(), RecordingSummarizer()
    agent = overflowing_agent(model)
    processor = SummarizationProcessor(**summarizer_settings(summarizer))
    compactions = 0
    async with SessionStore(new_database(), processor=processor) as store:
        session = await store.session('overflow')
        for turn in range(TURNS):
            result = await session.run(agent, f'ask M{turn}')
            assert result.output == f'Answer M{turn}-a done'
            compactions += len(result.compactions)
        archive = await store.history('overflow')
        chain = await store.summaries('overflow')
        window = await store.window('overflow')
    assert compactions >= TURNS * 4 // LIMIT
    made = [f'SUMMARY-{n} of the conversation so far' for n in range(1, compactions + 1)]
    check_the_archive_and_chain(archive, chain, made)
    # The next window opens at the newest link.
    assert window.positions[0] >= chain[-1].covers_to
    assert [p.content for p in window.messages[0].parts if isinstance(p, CompactionPart)] == [chain[-1].text]
    check_each_summary_extends_the_last_and_reads_each_message_once(summarizer)


async def test_compaction_on_request_puts_the_focus_in_the_summarizer_prompt() -> None:
    model, summarizer = Overflowing(), RecordingSummarizer()
    agent = overflowing_agent(model, [Summarization(**summarizer_settings(summarizer))])

    @agent.tool
    def compact_now(ctx: RunContext[None], focus: str) -> str:
        ctx.request_compaction(reason='model_requested', focus=focus)
        return 'Compaction requested.'

    history = (await agent.run('ask M0')).all_messages()
    history = (await agent.run('ask M1', message_history=history)).all_messages()
    idle = await agent.compact_history(history, focus='ORD-1042')
    assert [(c.handler, c.reason) for c in idle.compactions] == [(SUMMARIZATION_HANDLER, 'manual')]
    assert 'ORD-1042' in summarizer.inputs[-1]

    result = await agent.run('ask M2', message_history=history, compact={'focus': 'the refund'})
    assert [c.reason for c in result.compactions] == ['manual']
    assert 'the refund' in summarizer.inputs[-1]


@pytest.mark.parametrize('how', ['compact=', 'request_compaction'])
async def test_a_compaction_asked_for_in_a_session_run_is_stored(new_database: NewDatabase, how: str) -> None:
    summarizer = RecordingSummarizer()
    agent = overflowing_agent(Overflowing())

    @agent.tool
    def compact_now(ctx: RunContext[None]) -> str:
        ctx.request_compaction(reason='model_requested', focus='ORD-1042')
        return 'Compaction requested.'

    processor = SummarizationProcessor(**summarizer_settings(summarizer))
    async with SessionStore(new_database(), processor=processor) as store:
        session = await store.session('asked')
        for turn in range(3):
            await session.run(agent, f'ask M{turn}')
        assert await store.summaries('asked') == []
        if how == 'compact=':
            result = await session.run(agent, 'ask M3', compact={'focus': 'ORD-1042'})
        else:
            forced = FunctionModel(_calls_compact_now)
            result = await session.run(agent, 'ask M3', model=forced)
        assert len(result.compactions) == 1
        chain = await store.summaries('asked')
        window = await store.window('asked')
        archive = await store.history('asked')
    assert 'ORD-1042' in summarizer.inputs[-1]
    assert [s.text for s in chain] == ['SUMMARY-1 of the conversation so far']
    assert chain[0].covers_from == 0 and window.positions[0] == chain[0].covers_to
    assert [p.content for p in window.messages[0].parts if isinstance(p, CompactionPart)] == [chain[0].text]
    assert not any(isinstance(p, CompactionPart) for message in archive for p in message.parts)


def _calls_compact_now(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A model that asks for a compaction through the tool, then answers."""
    if any(isinstance(p, ToolReturnPart) and p.tool_name == 'compact_now' for p in messages[-1].parts):
        return ModelResponse(parts=[TextPart('Compacted, and done.')])
    return ModelResponse(parts=[ToolCallPart('compact_now', {}, tool_call_id='call_0')])


class ForeignSummarizer(AbstractCapability[None]):
    """Another library's compaction handler: one summary for everything before the turn in flight."""

    def __init__(self) -> None:
        self.made = 0

    async def compact_history(self, ctx: RunContext[None], request: CompactionRequest) -> CompactionResult | None:
        self.made += 1
        part = CompactionPart(content=f'FOREIGN-{self.made}')
        history = request.messages
        first = history[0]
        system = [p for p in first.parts if isinstance(p, SystemPromptPart)] if isinstance(first, ModelRequest) else []
        turn = max(i for i, m in enumerate(history) if any(isinstance(p, UserPromptPart) for p in m.parts))
        messages: list[ModelMessage] = [ModelRequest(parts=[*system, part]), *history[turn:]]
        return CompactionResult(messages=messages, part=part, handler='another-library', kept_from=1)


def check_the_archive_and_chain(archive: list[ModelMessage], chain: Sequence[Any], texts: list[str]) -> None:
    """Every raw message once, in order, none of them a summary; a link per compaction, each covering what the one
    before it left."""
    requests = [m for m in archive if isinstance(m, ModelRequest)]
    prompts = [p.content for m in requests for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == [f'ask M{turn}' for turn in range(TURNS)]
    assert len(archive) == TURNS * 4
    assert not any(isinstance(p, CompactionPart) for m in archive for p in m.parts)
    assert [s.text for s in chain] == texts
    assert chain[0].covers_from == 0
    assert [s.covers_from for s in chain[1:]] == [s.covers_to for s in chain[:-1]]


@pytest.mark.parametrize('handler', ['ours', 'foreign'])
async def test_an_overflow_through_the_conversation_door_is_stored(new_database: NewDatabase, handler: str) -> None:
    """The agent carries the summarizer, as pydantic-ai's docs show; the store has no processor of its own."""
    model, summarizer, foreign = Overflowing(), RecordingSummarizer(), ForeignSummarizer()
    capability = Summarization(**summarizer_settings(summarizer)) if handler == 'ours' else foreign
    agent = overflowing_agent(model, [capability])
    compactions = 0
    async with SessionStore(new_database()) as store:
        for turn in range(TURNS):
            conversation = await store.conversations.load('door') or Conversation(conversation_id='door')
            assert len(conversation.messages) <= LIMIT
            result = await agent.run(f'ask M{turn}', conversation=conversation, usage_limits=UNLIMITED)
            assert result.output == f'Answer M{turn}-a done'
            compactions += len(result.compactions)
            await store.conversations.save(result)
        archive = await store.history('door')
        chain = await store.summaries('door')
    assert compactions >= TURNS * 4 // LIMIT
    if handler == 'ours':
        check_the_archive_and_chain(
            archive, chain, [f'SUMMARY-{n} of the conversation so far' for n in range(1, compactions + 1)]
        )
        check_each_summary_extends_the_last_and_reads_each_message_once(summarizer)
    else:
        check_the_archive_and_chain(archive, chain, [f'FOREIGN-{n}' for n in range(1, compactions + 1)])


async def test_an_overflow_through_dispatch_chat_is_stored(new_database: NewDatabase) -> None:
    model, summarizer = Overflowing(), RecordingSummarizer()
    agent = overflowing_agent(model, [Summarization(**summarizer_settings(summarizer))])
    url = new_database()

    async def chat(request: Request) -> Response:
        async with SessionStore(url) as store:
            return await dispatch_chat(VercelAIAdapter, request, agent=agent, store=store)

    with TestClient(Starlette(routes=[Route('/chat', chat, methods=['POST'])])) as client:
        for turn in range(TURNS):
            prompt = {'id': f'u{turn}', 'role': 'user', 'parts': [{'type': 'text', 'text': f'ask M{turn}'}]}
            response = client.post('/chat', json={'trigger': 'submit-message', 'id': 'chat', 'messages': [prompt]})
            assert response.status_code == 200, response.text
            chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith('data: {')]
            assert not [c for c in chunks if c['type'] == 'error'], chunks
            assert ''.join(c['delta'] for c in chunks if c['type'] == 'text-delta') == f'Answer M{turn}-a done'
    async with SessionStore(url) as store:
        archive = await store.history('chat')
        chain = await store.summaries('chat')
    assert model.rejected >= TURNS * 4 // LIMIT
    check_the_archive_and_chain(
        archive, chain, [f'SUMMARY-{n} of the conversation so far' for n in range(1, len(chain) + 1)]
    )
    assert len(chain) == model.rejected
    check_each_summary_extends_the_last_and_reads_each_message_once(summarizer)


@pytest.mark.parametrize('handler', ['ours', 'foreign'])
async def test_idle_compaction_of_a_stored_session_is_the_next_link(new_database: NewDatabase, handler: str) -> None:
    """`agent.compact_history()` on a stored conversation, as a chat app does while the user is idle, through the
    session that stores it: the agent's handler, or the session's processor where the agent has none."""
    summarizer, foreign = RecordingSummarizer(), ForeignSummarizer()
    agent = overflowing_agent(Overflowing(), [foreign] if handler == 'foreign' else [])
    processor = SummarizationProcessor(**summarizer_settings(summarizer))
    async with SessionStore(new_database(), processor=processor) as store:
        session = await store.session('idle')
        for turn in range(3):
            await session.run(agent, f'ask M{turn}')
        made = await session.compact('ORD-1042', agent=agent)
        chain = await store.summaries('idle')
        window = await store.window('idle')
        archive = await store.history('idle')
        result = await session.run(agent, 'ask M3')
    text = 'SUMMARY-1 of the conversation so far' if handler == 'ours' else 'FOREIGN-1'
    assert made is not None and made.text == text and [s.text for s in chain] == [text]
    if handler == 'ours':
        assert 'ORD-1042' in summarizer.inputs[-1]
    assert chain[0].covers_from == 0 and window.positions[0] == chain[0].covers_to > 0
    assert [p.content for p in window.messages[0].parts if isinstance(p, CompactionPart)] == [text]
    if handler == 'ours':  # `keep` counts the conversation's messages, not the request the idle run adds
        assert window.positions == [8, 9, 10, 11]
    assert len(archive) == 12 and not any(isinstance(p, CompactionPart) for m in archive for p in m.parts)
    assert result.output == 'Answer M3-a done'
