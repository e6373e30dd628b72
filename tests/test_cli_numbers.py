"""Numbers the command line and the browser view give about one session agree: a window's tokens, the summaries'
numbering, and how many summaries a rewound session holds where.

On the demo conversation (`_demo_run.run_turns`, a summary every 10 turns), on SQLite and PostgreSQL: the
commands through click's `CliRunner`, the web app as `serve` builds it (`served_app`) through httpx.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from session_store.cli import main
from session_store.cli._runtime import Settings
from session_store.cli.serve import served_app
from testkit.templates import NewDatabase
from tests._cli import ok
from tests._demo import twenty_four_demo_turns

pytestmark = pytest.mark.usefixtures('wide_console')


def invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, ['--db', url, *args])


def web(url: str, *paths: str) -> list[httpx.Response]:
    """GET each path from the read-only app `serve` runs on `url`."""

    async def go() -> list[httpx.Response]:
        settings = Settings(url=url, named=True)
        async with (
            served_app(settings, scope=None, token=None, chat_model=None, processor=None) as app,
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://127.0.0.1') as client,
        ):
            return [await client.get(path) for path in paths]

    return asyncio.run(go())


@pytest.fixture
def demo(new_database: NewDatabase) -> str:
    """`demo` (scope `demo`): 24 turns of the demo conversation, 96 messages, two summaries."""
    return new_database(fill=twenty_four_demo_turns)


@pytest.mark.slow_on_postgresql
def test_context_the_web_page_and_api_context_count_a_window_alike(demo: str) -> None:
    cli: dict[str, Any] = json.loads(ok(invoke(demo, 'context', 'demo', '--json')))
    text = ok(invoke(demo, 'context', 'demo'))
    api, page, session_api = web(demo, '/api/context/demo', '/context/demo', '/api/sessions/demo')
    tokens = sum(cli['tokens'])
    said = re.search(r'archived messages \(([\d,]+) tokens', text)
    assert said is not None and said[1] == f'{tokens:,}'
    assert api.json()['tokens'] == tokens and [m['tokens'] for m in api.json()['messages']] == cli['tokens']
    assert f'<b>{tokens:,}</b> tokens' in page.text
    assert session_api.json()['window']['tokens'] == tokens


@pytest.mark.slow_on_postgresql
def test_summaries_are_numbered_from_1_everywhere(demo: str) -> None:
    said = ok(invoke(demo, 'compact', 'demo', '--summarizer', 'test'))
    assert "Compacted 'demo': summary 3 folds in messages" in said
    listed = ok(invoke(demo, 'summaries', 'demo'))
    links: list[dict[str, Any]] = json.loads(ok(invoke(demo, 'summaries', 'demo', '--json')))
    page, api, context = web(demo, '/sessions/demo?offset=0&limit=500', '/api/sessions/demo?offset=0', '/context/demo')
    assert [link['number'] for link in links] == [1, 2, 3] and 'index' not in links[0]
    assert [s['number'] for s in api.json()['summaries']] == [1, 2, 3]
    assert api.json()['window']['summary_number'] == 3
    # The demo's own summarizer numbers its texts as it goes: `Summary 1: ...`, `Summary 2: ...`.
    assert [link['text'].split(':')[0] for link in links[:2]] == ['Summary 1', 'Summary 2']
    assert '#1  messages 0-' in listed and ', the first' in listed
    assert '#2  messages' in listed and 'extends #1' in listed and 'extends #2' in listed and '#0' not in listed
    assert [f'Summary #{n}</span>' in page.text for n in (1, 2, 3)] == [True, True, True]
    assert 'extends #2' in page.text and 'Summary #0' not in page.text
    assert 'with summary #3 standing in' in page.text and 'summary #3 stands in for messages 0' in context.text


def test_summaries_after_a_rewind_say_what_is_on_the_active_path_and_what_is_elsewhere(demo: str) -> None:
    chain: list[dict[str, Any]] = json.loads(ok(invoke(demo, 'summaries', 'demo', '--json')))
    assert len(chain) == 2
    # Back past the second summary's range: the first stays on the path, the second on the branch left.
    see = Settings(url=demo, named=True).command('branches', 'demo')  # without --db when the URL has a password
    ok(invoke(demo, 'rewind', 'demo', str(chain[1]['covers_to'] - 4)))
    partly = ok(invoke(demo, 'summaries', 'demo'))
    assert partly.startswith(
        f"Session 'demo': 1 summary on its active path, covering messages 0-{chain[0]['covers_to'] - 1}; "
        f'1 more summary stored on its other branches (see `{see}`).'
    )
    assert [s['summary_count'] for s in json.loads(ok(invoke(demo, 'sessions', '--json')))] == [1]
    # Back before the first: none on the path, and it says where the two are.
    ok(invoke(demo, 'rewind', 'demo', '8'))
    none = ok(invoke(demo, 'summaries', 'demo')).strip()
    assert none == (
        "Session 'demo' has no summaries on its active path: 2 more summaries stored on its other branches "
        f'(see `{see}`).'
    )
    # `sessions` counts the same path's summaries, as it counts its messages (issue 47).
    listing = json.loads(ok(invoke(demo, 'sessions', '--json')))
    assert [(s['session_id'], s['message_count'], s['summary_count']) for s in listing] == [('demo', 8, 0)]
