"""A provider's own compaction (a `CompactionPart` in a response, as pydantic-ai's `OpenAICompaction` and
`AnthropicCompaction` capabilities bring back) opens the window in both doors: nothing before it is sent or read
again, the system prompt is kept, and the archive keeps every message."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from session_store import SessionStore

StoreFactory = Callable[..., SessionStore]
SYSTEM = 'You are the compaction test.'
COMPACTED_AT = 6
"""The turn whose answer carries the provider's compaction of everything before it."""
_MARK = re.compile(r'\bT\d+\b')


@dataclass
class Provider:
    """Answers each `T<n>` prompt; on turn `COMPACTED_AT` its response opens with a compaction, as a provider's."""

    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        prompt = next(p.content for p in messages[-1].parts if isinstance(p, UserPromptPart))
        assert isinstance(prompt, str)
        answer = TextPart(f'answer to {prompt}')
        if prompt.startswith(f'T{COMPACTED_AT} '):
            earlier = ' '.join(f'T{turn}' for turn in range(COMPACTED_AT))
            compaction = CompactionPart(content=f'provider summary of {earlier}', provider_name='anthropic')
            return ModelResponse(parts=[compaction, answer], provider_name='anthropic')
        return ModelResponse(parts=[answer], provider_name='anthropic')


def marks(messages: list[ModelMessage]) -> set[str]:
    """The turn markers the messages carry outside any compaction part."""
    return {
        mark
        for message in messages
        for part in message.parts
        if not isinstance(part, CompactionPart)
        for mark in _MARK.findall(str(getattr(part, 'content', '')))
    }


def check_window(window: list[ModelMessage], archive: list[ModelMessage]) -> None:
    """The window: the system prompt alone, then the compacting response and what followed it, verbatim."""
    opened = next(i for i, m in enumerate(archive) if any(isinstance(p, CompactionPart) for p in m.parts))
    assert isinstance(window[0], ModelRequest) and [type(p) for p in window[0].parts] == [SystemPromptPart]
    assert window[0].parts[0].content == SYSTEM  # type: ignore[union-attr]
    assert window[1:] == archive[opened:]
    assert marks(window) == {f'T{turn}' for turn in range(COMPACTED_AT, 10)}


async def test_a_provider_compaction_opens_a_sessions_window(store_factory: StoreFactory) -> None:
    provider = Provider()
    agent = Agent(FunctionModel(provider), system_prompt=SYSTEM)
    store = store_factory()  # the default sliding window, which never reaches its trigger here
    session = await store.session('s')
    for turn in range(10):
        await session.run(agent, f'T{turn} question')
    archive = await store.history('s', limit=None)
    assert len(archive) == 20 and marks(archive) == {f'T{turn}' for turn in range(10)}
    check_window((await store.window('s')).messages, archive)
    # After the compaction the model is sent nothing from before it but the system prompt.
    for request in provider.requests[COMPACTED_AT + 1 :]:
        assert not marks(request) & {f'T{turn}' for turn in range(COMPACTED_AT)}
        assert any(isinstance(p, CompactionPart) for m in request for p in m.parts)
    # A fresh store reads the same window, from the compaction on.
    check_window((await store_factory().window('s')).messages, archive)


async def test_a_provider_compaction_opens_the_conversation_doors_window(store_factory: StoreFactory) -> None:
    """A store without a processor hands out whole histories, as pydantic-ai's own stores do, until a compaction:
    from then on nothing before it is read, and a save still appends after the stored head."""
    provider = Provider()
    agent = Agent(FunctionModel(provider), system_prompt=SYSTEM)
    store = store_factory()
    conversations = store.conversations
    lengths = []
    for turn in range(10):
        conversation = await conversations.load('c') or Conversation(conversation_id='c')
        lengths.append(len(conversation.messages))
        result = await agent.run(f'T{turn} question', conversation=conversation, usage_limits=UsageLimits())
        await conversations.save(result)
    archive = await store.history('c', limit=None)
    assert len(archive) == 20 and marks(archive) == {f'T{turn}' for turn in range(10)}
    assert lengths[: COMPACTED_AT + 1] == [2 * turn for turn in range(COMPACTED_AT + 1)]
    assert lengths[COMPACTED_AT + 1] == 2, 'the system prompt, then the response that compacted'
    loaded = await store_factory().conversations.load('c')
    assert loaded is not None
    check_window(loaded.messages, archive)
    assert loaded.messages == (await (await store.session('c')).context())
