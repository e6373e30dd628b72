"""A window uses only summaries wholly on its path, even where another branch's summary would fit it better.

In the stock branch flows a window read that took any summary of the session would go unseen: the active
branch's own newest summary wins there anyway, as the widest and the latest. These flows are where it wouldn't:

- **A tie, switched back to.** Two branches that part before their first summary, their turns alike, make it over
  the same positions; switching back to the one that made it first resumes its saved window, which starts where
  both end. The other's summary, the newer, would win the tie: the fork's, or the trunk's, which lies on a segment
  of the fork's path but covers positions past the fork.
- **A provider's compaction.** A `CompactionPart` in a response moves the window's start past a summary that
  another branch made, the window having none of its own: none may ride in it.
- **An edit where a summary ends.** Editing the turn a summary ends at resumes the window from the summary before
  it, which a sibling's newer summary ties.

Each runs through `Session`, and through `store.conversations` where that door can reach it (its `branch` reaches
the window and the paths of the branches left, never a position before the window on the active path).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationEntry
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

from processors import SummarizationProcessor
from processors.summary import summary_text
from session_store import Session, SessionStore, SQLConversationStore
from testkit.histories import SYSTEM
from testkit.scripted import PREVIOUS, ParallelToolAssistant, RecordingSummarizer, scripted_agent

# The PostgreSQL variants run in the slow tier: the window read is one statement on both backends, and the
# SQLite variants run in the quick one.
pytestmark = pytest.mark.slow_on_postgresql


StoreFactory = Callable[..., SessionStore]

FORK = 12
"""Where the branches part: a turn boundary before a path's first summary ends, so neither branch's first summary
is on the other's path. (The scripted turns are four messages each, the trigger 20 messages, and six are kept at
most: the summary made at the sixth turn's first request, or at its load on pydantic-ai's door, covers the first
four turns, positions 0 to 15, whichever turns a path holds. The tests check the relations they need, not these
numbers, and say so when the processor's cuts no longer give them.)"""


def summarizing(summarizer: RecordingSummarizer) -> SummarizationProcessor:
    return SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 20), keep=('messages', 6))


def carried(messages: Sequence[ModelMessage]) -> list[str]:
    """The texts of the store's summaries the messages carry (a provider's compaction, in a response, isn't one)."""
    return [text for message in messages if (text := summary_text(message)) is not None]


def prompts(numbers: range) -> list[str]:
    return [f'Turn M{number}' for number in numbers]


async def active_tip(session: Session) -> str:
    return next(branch.tip for branch in await session.branches() if branch.active)


async def converse(session: Session, agent: Agent[None, str], sent: Sequence[str]) -> list[ModelMessage]:
    made: list[ModelMessage] = []
    for prompt in sent:
        made += (await session.run(agent, prompt)).new_messages()
    return made


async def door_turns(
    conversations: SQLConversationStore, agent: Agent[None, str], sent: Sequence[str]
) -> list[ConversationEntry]:
    """Turns through pydantic-ai's door, each a load (which compacts when the trigger holds), a run and a save."""
    saved: list[ConversationEntry] = []
    for prompt in sent:
        conversation = await conversations.load('c') or Conversation(conversation_id='c')
        saved += await conversations.save(await agent.run(prompt, conversation=conversation))
    return saved


async def branch_to(conversations: SQLConversationStore, entry: ConversationEntry) -> None:
    """Continue the conversation from `entry` (in its window, or on a branch it left), as a UI's switch does."""
    record = await conversations.read_record('c')
    assert record is not None
    await conversations.branch('c', from_entry=entry.id, expected_revision=record.revision)


async def door_window(conversations: SQLConversationStore) -> list[ModelMessage]:
    loaded = await conversations.load('c')
    assert loaded is not None
    return loaded.messages


def messages_of(entries: Sequence[ConversationEntry]) -> list[ModelMessage]:
    return [entry.message for entry in entries]


# A tie, switched back to.


class Numbered:
    """Prompts for each branch's next turns, numbered apart: the trunk's from 0, the fork's from 100."""

    def __init__(self) -> None:
        self.next = {'trunk': 0, 'fork': 100}

    def __call__(self, branch: str, count: int) -> list[str]:
        start = self.next[branch]
        self.next[branch] += count
        return prompts(range(start, start + count))


@pytest.mark.parametrize('first', ['trunk', 'fork'])
async def test_a_branch_switched_back_to_resumes_its_own_summary_not_a_newer_one_ending_there(
    store_factory: StoreFactory, first: str
) -> None:
    """`first` makes its first summary, then the other branch its own over the same positions; switched back to,
    `first` resumes its saved window, which starts where both end. When the newer summary is the trunk's, it lies on
    a segment of the fork's path, but covers positions past the fork."""
    summarizer = RecordingSummarizer()
    store = store_factory(processor=summarizing(summarizer))
    session = await store.session('c')
    assistant = ParallelToolAssistant()
    agent = scripted_agent(assistant)
    turns = Numbered()
    paths = {'trunk': await converse(session, agent, turns('trunk', 4))}
    tips = {'trunk': await active_tip(session)}
    await session.rewind(FORK)
    paths['fork'] = paths['trunk'][:FORK] + await converse(session, agent, turns('fork', 1))
    tips['fork'] = await active_tip(session)
    other = 'fork' if first == 'trunk' else 'trunk'
    made = {}
    for name in (first, other):
        await session.switch(tips[name])
        paths[name] += await converse(session, agent, turns(name, 2))
        [made[name]] = await store.summaries('c')
        # Each branch's first summary extends nothing, and covers the same positions as the other's.
        assert made[name].covers_from == 0 and made[name].covers_to > FORK
        assert PREVIOUS.findall(summarizer.inputs[-1]) == []
    own, newer = made[first], made[other]
    assert own.covers_to == newer.covers_to and own.text != newer.text, 'the two summaries tie'

    # `first`'s saved window starts where both summaries end: only its own is wholly on its path.
    await session.switch(tips[first])
    assert carried(await session.context()) == [own.text]
    # A store with nothing in memory reads the same window.
    assert carried((await store_factory(processor=store.processor).window('c')).messages) == [own.text]
    assistant.requests.clear()
    paths[first] += await converse(session, agent, turns(first, 1))
    assert [carried(request) for request in assistant.requests] == [[own.text], [own.text]]

    # Its next summary extends its own: the summarizer is given that one's text, and the chain links to it.
    extended = await session.compact()
    assert extended is not None and extended.covers_from == own.covers_to
    assert PREVIOUS.findall(summarizer.inputs[-1]) == [own.text]
    chain = await store.summaries('c')
    assert [(s.covers_from, s.text) for s in chain] == [(0, own.text), (own.covers_to, extended.text)]
    assert chain.elsewhere == 1

    # Nothing was lost, and the other branch still resumes its own.
    assert await session.history() == paths[first]
    assert await session.history(branch=tips[other]) == paths[other]
    await session.switch(tips[other])
    assert carried(await session.context()) == [newer.text]
    assert [s.text for s in await store.summaries('c')] == [newer.text]


@pytest.mark.parametrize('first', ['trunk', 'fork'])
async def test_pydantic_ais_door_switched_back_resumes_its_own_summary_not_a_newer_one_ending_there(
    store_factory: StoreFactory, first: str
) -> None:
    """The same tree through `store.conversations`, whose `branch` can't reach a position before the window: the
    fork leaves the trunk before either is summarized, as in the `Session` test."""
    summarizer = RecordingSummarizer()
    store = store_factory(processor=summarizing(summarizer))
    conversations = store.conversations
    assistant = ParallelToolAssistant()
    agent = scripted_agent(assistant)
    turns = Numbered()
    paths = {'trunk': await door_turns(conversations, agent, turns('trunk', 4))}
    await branch_to(conversations, paths['trunk'][FORK - 1])
    paths['fork'] = paths['trunk'][:FORK] + await door_turns(conversations, agent, turns('fork', 1))
    other = 'fork' if first == 'trunk' else 'trunk'
    made = {}
    for name in (first, other):
        await branch_to(conversations, paths[name][-1])
        paths[name] += await door_turns(conversations, agent, turns(name, 2))
        [made[name]] = await store.summaries('c')
        assert made[name].covers_from == 0 and made[name].covers_to > FORK
        assert PREVIOUS.findall(summarizer.inputs[-1]) == []
    own, newer = made[first], made[other]
    assert own.covers_to == newer.covers_to and own.text != newer.text, 'the two summaries tie'

    await branch_to(conversations, paths[first][-1])
    assert carried(await door_window(conversations)) == [own.text]
    assert carried(await door_window(store_factory(processor=store.processor).conversations)) == [own.text]
    assistant.requests.clear()
    paths[first] += await door_turns(conversations, agent, turns(first, 3))
    assert [carried(request) for request in assistant.requests] == [[own.text]] * 6

    # The load before the next turn passes the trigger: the summary it makes extends the branch's own.
    window = await door_window(conversations)
    assert PREVIOUS.findall(summarizer.inputs[-1]) == [own.text]
    chain = await store.summaries('c')
    assert [(s.covers_from, s.text) for s in chain[:1]] == [(0, own.text)]
    assert [s.covers_from for s in chain[1:]] == [own.covers_to] and chain.elsewhere == 1
    assert carried(window) == [chain[1].text]

    assert await store.history('c', limit=None) == messages_of(paths[first])
    assert messages_of(await conversations.read_history(paths[other][-1].id)) == messages_of(paths[other])
    await branch_to(conversations, paths[other][-1])
    assert carried(await door_window(conversations)) == [newer.text]


# A provider's compaction.

COMPACTING = 'P2 question'
"""The prompt whose answer opens with the provider's compaction of everything before it."""


@dataclass
class CompactingProvider:
    """Answers every prompt; its answer to `COMPACTING` opens with a compaction, as OpenAI's or Anthropic's does."""

    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        prompt = next(p.content for p in messages[-1].parts if isinstance(p, UserPromptPart))
        answer = TextPart(f'answer to {prompt}')
        if prompt == COMPACTING:
            compaction = CompactionPart(content='provider compaction of everything so far', provider_name='anthropic')
            return ModelResponse(parts=[compaction, answer], provider_name='anthropic')
        return ModelResponse(parts=[answer], provider_name='anthropic')


OPENED = FORK + 5
"""Where the compacting answer lands: after the fork's two prompts and answers and the compacting prompt. Past
the trunk's first summary's end, so that summary ends inside what the compaction replaced."""


def opened_at_compaction(window: list[ModelMessage], path: list[ModelMessage]) -> None:
    """The window is the system prompt alone, then the compacting answer and what followed it: no summary."""
    assert carried(window) == []
    assert isinstance(window[0], ModelRequest)
    [part] = window[0].parts
    assert isinstance(part, SystemPromptPart) and part.content == SYSTEM
    assert window[1:] == path[OPENED:]


async def test_a_provider_compaction_past_another_branchs_summary_opens_a_window_without_it(
    store_factory: StoreFactory,
) -> None:
    """The other branch is the trunk the fork left: its summary is on a segment of the new path, but covers
    positions past the fork."""
    summarizer = RecordingSummarizer()
    store = store_factory(processor=summarizing(summarizer))
    session = await store.session('c')
    path_x = await converse(session, scripted_agent(ParallelToolAssistant()), prompts(range(6)))
    [x1] = await store.summaries('c')
    assert x1.covers_from == 0 and FORK < x1.covers_to <= OPENED
    tip_x = await active_tip(session)

    await session.rewind(FORK)
    provider = CompactingProvider()
    agent = Agent(FunctionModel(provider), system_prompt=SYSTEM)
    path = path_x[:FORK] + await converse(session, agent, ['P0 question', 'P1 question', COMPACTING])
    assert any(isinstance(p, CompactionPart) for p in path[OPENED].parts)
    opened_at_compaction(await session.context(), path)
    opened_at_compaction((await store_factory(processor=store.processor).window('c')).messages, path)
    provider.requests.clear()
    path += await converse(session, agent, ['P3 question'])
    assert [carried(request) for request in provider.requests] == [[]]
    assert provider.requests[0][1:-1] == path[OPENED:-2]

    chain = await store.summaries('c')
    assert list(chain) == [] and chain.elsewhere == 1
    assert len(summarizer.inputs) == 1, 'the branch made no summary'

    # The branch's first summary starts its own chain: it extends no other branch's.
    path += await converse(session, agent, ['P4 question', 'P5 question', 'P6 question'])
    made = await session.compact()
    assert made is not None and made.covers_from == OPENED
    assert len(summarizer.inputs) == 2 and PREVIOUS.findall(summarizer.inputs[-1]) == []
    chain = await store.summaries('c')
    assert [(s.covers_from, s.text) for s in chain] == [(OPENED, made.text)] and chain.elsewhere == 1
    assert carried(await session.context()) == [made.text]
    assert await session.history() == path
    assert await session.history(branch=tip_x) == path_x


async def test_a_provider_compaction_through_pydantic_ais_door_opens_a_window_without_another_branchs_summary(
    store_factory: StoreFactory,
) -> None:
    """The same through `store.conversations`, whose `branch` can't reach a position before the window: the branch
    leaves the trunk before it is summarized, and the trunk's summary is made while the branch waits."""
    summarizer = RecordingSummarizer()
    store = store_factory(processor=summarizing(summarizer))
    conversations = store.conversations
    scripted = scripted_agent(ParallelToolAssistant())
    provider = CompactingProvider()
    agent = Agent(FunctionModel(provider), system_prompt=SYSTEM)
    trunk = await door_turns(conversations, scripted, prompts(range(4)))
    await branch_to(conversations, trunk[FORK - 1])
    branch = trunk[:FORK] + await door_turns(conversations, agent, ['P0 question'])
    await branch_to(conversations, trunk[-1])
    trunk += await door_turns(conversations, scripted, prompts(range(4, 6)))
    [x1] = await store.summaries('c')
    assert x1.covers_from == 0 and FORK < x1.covers_to <= OPENED

    await branch_to(conversations, branch[-1])
    branch += await door_turns(conversations, agent, ['P1 question', COMPACTING])
    path = messages_of(branch)
    opened_at_compaction(await door_window(conversations), path)
    opened_at_compaction(await door_window(store_factory(processor=store.processor).conversations), path)
    provider.requests.clear()
    branch += await door_turns(conversations, agent, ['P3 question'])
    assert [carried(request) for request in provider.requests] == [[]]

    chain = await store.summaries('c')
    assert list(chain) == [] and chain.elsewhere == 1
    assert await store.history('c', limit=None) == messages_of(branch)
    assert messages_of(await conversations.read_history(trunk[-1].id)) == messages_of(trunk)


# An edit where a summary ends.


async def test_an_edit_where_a_summary_ends_resumes_the_one_before_not_a_siblings_newer_one_ending_there(
    store_factory: StoreFactory,
) -> None:
    """The switch back finds the branch's newest summary, wider than the sibling's; the edit then resumes from the
    one before it, which the sibling's ties. (pydantic-ai's door can't branch to a position before its window.)"""
    summarizer = RecordingSummarizer()
    store = store_factory(processor=summarizing(summarizer))
    session = await store.session('c')
    assistant = ParallelToolAssistant()
    agent = scripted_agent(assistant)
    path_a = await converse(session, agent, prompts(range(6)))
    a2 = await session.compact()
    a1 = (await store.summaries('c'))[0]
    # The edit replaces the turn where the second summary ends (position 20: `compact` keeps the last turn whole).
    assert a2 is not None and FORK < a1.covers_to < a2.covers_to
    edited_at = a2.covers_to
    tip_a = await active_tip(session)
    await session.rewind(FORK)
    await converse(session, agent, prompts(range(100, 103)))
    [b1] = await store.summaries('c')
    assert b1.covers_to == a1.covers_to, 'the sibling ties the first summary'
    # The switch alone shows nothing amiss: the branch's newest summary is the widest that fits its window.
    await session.switch(tip_a)
    assert carried(await session.context()) == [a2.text]

    # The edited turn starts where the branch's newest summary ends: that one would leave the window no tail.
    assistant.requests.clear()
    edited = await session.edit(agent, edited_at, 'Turn M300')
    assert [carried(request) for request in assistant.requests] == [[a1.text], [a1.text]]
    assert carried(await session.context()) == [a1.text]
    assert carried((await store_factory(processor=store.processor).window('c')).messages) == [a1.text]
    a3 = await session.compact()
    assert a3 is not None and PREVIOUS.findall(summarizer.inputs[-1]) == [a1.text]
    chain = await store.summaries('c')
    assert [s.text for s in chain] == [a1.text, a3.text] and chain.elsewhere == 2
    assert await session.history() == path_a[:edited_at] + edited.new_messages()
    assert len(await session.branches()) == 3
