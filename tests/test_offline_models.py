"""The offline models named `test` (`session_store._offline`): one chat model and one summarizer everywhere.

`--summarizer test` must store summaries that hold the conversation's content (the user's requests and
the tool results), each extending the last; `chat --model test` and `serve --chat test` must answer alike.
Through click's `CliRunner` and the web app's test client, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio

import pytest
from click.testing import CliRunner, Result

from processors import SummarizationProcessor
from session_store import SessionStore
from session_store._offline import HEADING, extractive_summarizer
from session_store.cli import main
from testkit.scripted import ParallelToolAssistant, scripted_agent
from tests._cli import ok
from tests._web import SAME_ORIGIN, sse_chunks, ui_message, web_client

pytestmark = pytest.mark.usefixtures('wide_console')


def invoke(url: str, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ['--db', url, *args], input=stdin)


def run_turns(url: str, session_id: str, turns: range) -> None:
    """`Turn M<n> about ORDER-<1000+n>` for each turn: three parallel `lookup` calls (`M<n>-r<i> found`), an answer."""

    async def go() -> None:
        async with SessionStore(url) as store:
            session = await store.session(session_id)
            for turn in turns:
                await session.run(scripted_agent(ParallelToolAssistant()), f'Turn M{turn} about ORDER-{1000 + turn}')

    asyncio.run(go())


def summary_texts(url: str, session_id: str) -> list[str]:
    async def go() -> list[str]:
        async with SessionStore(url) as store:
            return [summary.text for summary in await store.summaries(session_id)]

    return asyncio.run(go())


@pytest.mark.slow_on_postgresql
def test_compact_with_the_test_summarizer_stores_what_the_conversation_said(db_url: str) -> None:
    run_turns(db_url, 's', range(3))
    ok(invoke(db_url, 'compact', 's', '--summarizer', 'test', '--keep', '4'))
    (first,) = summary_texts(db_url, 's')
    assert 'success (no tool calls)' not in first
    assert first.splitlines() == [
        HEADING,
        '- User asked: Turn M0 about ORDER-1000',
        *(f'- lookup returned: M0-r{i} found' for i in range(3)),
        '- User asked: Turn M1 about ORDER-1001',
        *(f'- lookup returned: M1-r{i} found' for i in range(3)),
    ]

    # The next link extends it: the previous summary's points, then only what the new cut folds in.
    run_turns(db_url, 's', range(3, 5))
    ok(invoke(db_url, 'compact', 's', '--summarizer', 'test', '--keep', '4'))
    assert summary_texts(db_url, 's') == [
        first,
        '\n'.join(
            [
                first,
                *(
                    line
                    for turn in (2, 3)
                    for line in (
                        f'- User asked: Turn M{turn} about ORDER-{1000 + turn}',
                        *(f'- lookup returned: M{turn}-r{i} found' for i in range(3)),
                    )
                ),
            ]
        ),
    ]
    # The window the model gets next carries that content.
    context = ok(invoke(db_url, 'context', 's', '--full'))
    assert 'User asked: Turn M0 about ORDER-1000' in context and 'lookup returned: M3-r2 found' in context


async def test_the_extractive_summary_stays_within_its_budget_dropping_the_oldest_points(db_url: str) -> None:
    budget = 600
    processor = SummarizationProcessor(extractive_summarizer(budget), trigger=('messages', 12), keep=('messages', 4))
    async with SessionStore(db_url, processor=processor) as store:
        session = await store.session('long')
        for turn in range(12):
            await session.run(scripted_agent(ParallelToolAssistant()), f'Turn M{turn} about ORDER-{1000 + turn}')
        chain = await store.summaries('long')
    assert len(chain) >= 3
    for summary in chain:
        assert len(summary.text) <= budget and summary.text.startswith(HEADING)
    last = chain[-1].text.splitlines()
    # The newest points are kept whole; a note counts the oldest ones left out, carried across links. Each
    # turn is four messages making four points (a request, three results), so none went missing either way.
    note = last[1]
    assert note.startswith('- (') and note.endswith('earlier points left out to stay within 600 characters)')
    assert '- User asked: Turn M0 about ORDER-1000' not in last
    newest_turn = chain[-1].covers_to // 4 - 1
    assert last[-1] == f'- lookup returned: M{newest_turn}-r2 found'
    assert int(note.removeprefix('- (').split()[0]) + len(last) - 2 == chain[-1].covers_to


def test_chat_and_serve_answer_alike_with_the_test_model(db_url: str) -> None:
    said = ok(invoke(db_url, 'chat', 'c', '--model', 'test', stdin='where is ORDER-1042?\n'))
    assert said.splitlines() == ['[1] assistant: (test model, offline) You said: where is ORDER-1042?']

    with web_client(db_url, chat_model='test') as client:
        response = client.post(
            '/api/chat',
            json={'trigger': 'submit-message', 'id': 'w', 'messages': [ui_message('u1', 'where is ORDER-1042?')]},
            headers=SAME_ORIGIN,
        )
    streamed = ''.join(c['delta'] for c in sse_chunks(response.text) if c['type'] == 'text-delta')
    assert streamed == '(test model, offline) You said: where is ORDER-1042?'
