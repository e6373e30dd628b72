"""Recall: the agent looks up, in its own session's archive, what the summaries left out."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import SummarizationProcessor
from session_store import Recall, SessionStore
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, scripted_agent

pytestmark = pytest.mark.through_pooler  # the store's concurrency, summaries and search, behind PgBouncer too

StoreFactory = Callable[..., SessionStore]
ORDER = re.compile(r'ORD-\d+')


@dataclass
class RecallingAssistant:
    """Asked a question, searches the archive with `query`, then answers with the order numbers it found."""

    query: str
    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    tool_answers: list[str] = field(default_factory=list[str])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart('search_history', {'query': self.query, 'limit': 3})])
        self.tool_answers.append(str(returns[0].content))
        found = sorted(set(ORDER.findall(self.tool_answers[-1])))
        return ModelResponse(parts=[TextPart(f'Your order numbers: {", ".join(found) or "none found"}')])


def text_of(messages: list[ModelMessage]) -> str:
    return ' '.join(str(getattr(part, 'content', '')) for message in messages for part in message.parts)


@pytest.mark.slow
async def test_an_order_number_summarized_away_is_recalled_after_200_turns(store_factory: StoreFactory) -> None:
    summarizer = RecordingSummarizer()  # its summaries never carry order numbers
    processor = SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 40), keep=('messages', 12))
    async with store_factory(processor=processor) as store:
        session = await store.session('support-42', scope='user-7', recall=True)
        chatter = scripted_agent(ParallelToolAssistant())
        for turn in range(200):
            detail = ' My order number is ORD-73519, it has not arrived.' if turn == 3 else ''
            await session.run(chatter, f'Turn M{turn} please.{detail}')

        summaries = await store.summaries('support-42', scope='user-7')
        assert summaries and summaries[-1].covers_to > 20  # turn 3 was summarized away ...
        assert not any('ORD-73519' in s.text for s in summaries)  # ... and the summary lost it
        assert 'ORD-73519' not in text_of(await session.context())

        recalling = RecallingAssistant(query='order number arrived')
        result = await session.run(Agent(FunctionModel(recalling)), 'What was my order number again?')
        assert 'ORD-73519' not in text_of(recalling.requests[0])  # the model could not have seen it
        assert 'ORD-73519' in recalling.tool_answers[0]
        assert result.output == 'Your order numbers: ORD-73519'


async def test_recall_never_reaches_another_session_or_scope(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        chatter = scripted_agent(ParallelToolAssistant())
        for session_id, scope, order in (
            ('mine', 'user-1', 'ORD-11111'),
            ('other-session', 'user-1', 'ORD-22222'),
            ('other-scope', 'user-2', 'ORD-33333'),
            ('unscoped', None, 'ORD-44444'),
        ):
            session = await store.session(session_id, scope=scope)
            await session.run(chatter, f'Turn M1 my order number is {order}')

        recalling = RecallingAssistant(query='order number')
        mine = await store.session('mine', scope='user-1', recall=Recall(max_hits=8))
        result = await mine.run(Agent(FunctionModel(recalling)), 'Which orders do I have?')
        assert result.output == 'Your order numbers: ORD-11111'
        assert set(ORDER.findall(recalling.tool_answers[0])) == {'ORD-11111'}


async def test_recall_answers_fit_their_budget_and_read_ranges(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('long', recall=Recall(max_tokens=300, max_hits=8))
        chatter = scripted_agent(ParallelToolAssistant())
        for turn in range(10):
            await session.run(chatter, f'Turn M{turn} about refunds ' + 'details ' * 100)

        answers: list[str] = []

        def reader(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
            if not returns:
                prompt = next(p.content for p in messages[-1].parts if isinstance(p, UserPromptPart))
                if prompt == 'search':
                    return ModelResponse(parts=[ToolCallPart('search_history', {'query': 'refunds', 'limit': 50})])
                return ModelResponse(parts=[ToolCallPart('read_history', {'start': 4, 'end': 6})])
            answers.append(str(returns[0].content))
            return ModelResponse(parts=[TextPart('ok')])

        agent = Agent(FunctionModel(reader))
        await session.run(agent, 'search')
        await session.run(agent, 'read')
        assert len(answers[0]) <= 300 * 4
        assert 'more was found than fits' in answers[0]
        assert answers[0].count('>> [') >= 1
        assert answers[1].startswith('[4] User: Turn M1 about refunds')
        assert '[5] Tool call' in answers[1]


@pytest.mark.parametrize('bad', [{'max_tokens': 0}, {'max_hits': 0}, {'context': -1}])
def test_recall_settings_are_validated(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=f'Recall\\({next(iter(bad))}='):
        Recall(**bad)


async def test_full_text_search_ranks_and_matches_stems(store_factory: StoreFactory) -> None:
    async with store_factory() as store:
        session = await store.session('s')
        chatter = scripted_agent(ParallelToolAssistant())
        await session.run(chatter, 'Turn M1 the parcel shipped yesterday')
        await session.run(chatter, 'Turn M2 shipping to Oslo and shipping insurance for the parcel')
        await session.run(chatter, 'Turn M3 my order ORD-73519 was lost')
        hits = await store.search('shipping parcel', match='words')
        assert [h.position for h in hits[:2]] == [4, 0]  # both words twice beats both once
        # Both databases split on punctuation alike, so the number alone finds the order.
        for query in ('73519', 'ORD-73519', 'lost order 73519'):
            assert [h.position for h in await store.search(query, match='words', session_id='s')][:1] == [8]
        # Every word if any message has them all; else any word.
        assert [h.position for h in await store.search('parcel yesterday', match='words')] == [0]
        assert sorted(h.position for h in await store.search('yesterday insurance', match='words')) == [0, 4]
        assert await store.search('"; DROP TABLE messages; --', match='words') == []
        assert await store.search('***', match='words') == []
