"""The web app's pages and JSON API, without a browser: what each shows, escaping, 404s, paging and the export.

Every case runs on SQLite and on PostgreSQL, through Starlette's test client; the cases that only read share
one populated database per backend.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.test import TestModel
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from session_store import SessionExport, SessionStore
from session_store.web import MESSAGES_PER_PAGE, create_app
from testkit.templates import Templates
from tests._web import HOSTILE, filled_database, session_ids, web_client

StoreFactory = Callable[..., SessionStore]
DASH = '\N{EN DASH}'


@pytest.fixture(scope='module', params=['sqlite', 'postgresql'])
def filled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, templates: Templates
) -> Iterator[str]:
    """One populated database per backend, which this module's tests only read."""
    yield from filled_database(request.param, tmp_path_factory, templates)


def scripts_and_images(html: str) -> list[str]:
    """Every `<script` and `<img` tag in a page: only the app's own may be there."""
    return re.findall(r'<(?:script|img)\b[^>]*>', html, flags=re.IGNORECASE)


OWN_TAGS = ['<script src="/static/app.js" defer>', '<img src="/static/icon.svg" alt="" width="20" height="20">']


# Escaping


@pytest.mark.slow_on_postgresql
def test_hostile_text_renders_as_text_on_every_page(filled: str) -> None:
    pages = [
        '/',
        '/sessions/alpha',
        '/sessions/alpha?offset=0',
        '/context/alpha',
        '/search?q=script',
        '/search?q=onerror&match=words',
        f'/sessions/{HOSTILE["session"].replace("/", "%2F")}',
        f'/sessions/{HOSTILE["session"]}?at=0',
    ]
    with web_client(filled) as client:
        for path in pages:
            response = client.get(path)
            assert response.status_code == 200, (path, response.text[:300])
            assert response.headers['content-type'].startswith('text/html')
            assert scripts_and_images(response.text) == OWN_TAGS, path
        session = client.get('/sessions/alpha').text
        # Each hostile text is on the page, escaped: in a message, a tool call, a retry, a summary band, ...
        for kind in ('instructions', 'prompt', 'thinking', 'retry', 'answer', 'summary'):
            assert HOSTILE[kind].replace('<', '&lt;').replace('>', '&gt;').replace('"', '&#34;') in session, kind
        assert '&lt;script&gt;alert(&#34;call&#34;)&lt;/script&gt;' in session  # in the call's arguments
        # A session id that is markup links percent-encoded, and shows escaped.
        index = client.get('/').text
        assert '/sessions/%3Cimg%20src%3Dx%20onerror%3Dalert%28%22id%22%29%3E' in index
        assert '&lt;img src=x onerror=alert(&#34;id&#34;)&gt;' in index
        # Pages may run only the app's own script and styles, whatever slipped through.
        policy = client.get('/sessions/alpha').headers['content-security-policy']
        assert "script-src 'self'" in policy and "default-src 'none'" in policy


def test_the_json_api_keeps_hostile_text_as_json_strings(filled: str) -> None:
    """The JSON API is JSON: hostile text stays a string, served as application/json, never HTML."""
    with web_client(filled) as client:
        response = client.get('/api/sessions/alpha')
        assert response.headers['content-type'] == 'application/json'
        texts = str(response.json()['messages'])
        assert HOSTILE['answer'] in texts


# What the session page shows


def test_the_session_page_shows_turns_tools_thinking_retries_summaries_and_the_window(filled: str) -> None:
    with web_client(filled) as client:
        html = client.get('/sessions/alpha').text
        api = client.get('/api/sessions/alpha').json()
    assert api['message_count'] == 54 and api['offset'] == 0 and len(api['messages']) == 54
    # User and assistant turns, the system prompt, thinking, tool calls with arguments, returns and a retry.
    for marker in (
        'class="msg role-user',
        'class="msg role-assistant',
        'class="msg role-tool',
        'class="part system',
        'class="part thinking"',
        'class="part tool-call"',
        'class="part retry"',
        'Turn M3 about ORDER-1003',
        'lookup(q=&#39;M3-c0&#39;)',
    ):
        assert marker in html, marker
    # A long tool return starts collapsed, with a one-line preview; a short one shows whole.
    assert re.search(r'<details class="part tool-return">\s*<summary>.*?ORDER-1042', html, re.S)
    assert (
        '<div class="part tool-return"><span class="arrow">⇐</span> <span class="tag">lookup</span> <code>M3-r0 found'
        in html
    )
    # Each summary is a band over the range it covers, expandable to its text; covered messages are marked.
    summaries = api['summaries']
    assert len(summaries) >= 2 and api['summary_count'] == len(summaries)
    for summary in summaries:
        band = f'id="summary-{summary["number"]}"'
        assert band in html
        start = summary['covers_from']
        assert html.index(band) < html.index(f'id="m{start}"')
        assert f'stands in for messages {start}{DASH}{summary["covers_to"] - 1}' in html
    assert 'class="msg role-user covered covered-0' in html
    # The window marker sits before the first message of the kept tail, with its size.
    window = api['window']
    assert window['start'] == summaries[-1]['covers_to'] and window['summary_number'] == summaries[-1]['number']
    assert html.index('class="window-marker"') < html.index(f'id="m{window["start"]}"')
    assert f'next request: {window["messages"]} messages · {window["tokens"]:,} tokens' in html
    assert window['tokens'] > 0
    # One branch: no selector; the export and context links are there.
    assert 'id="branch-select"' not in html
    assert 'href="/export/alpha"' in html and 'href="/context/alpha"' in html


async def test_the_context_page_shows_exactly_the_window_the_next_request_sends(filled: str) -> None:
    async with SessionStore(filled) as store:
        window = await store.window('alpha', scope='user-1')
    with web_client(filled) as client:
        html = client.get('/context/alpha').text
        api = client.get('/api/context/alpha').json()
    assert [m['position'] for m in api['messages']] == window.positions
    assert ModelMessagesTypeAdapter.validate_python([m['message'] for m in api['messages']]) == window.messages
    assert api['archived_messages'] == window.message_count == 54
    assert api['tokens'] == sum(m['tokens'] for m in api['messages']) > 0
    assert api['window']['start'] == window.positions[-1] - len(window.positions) + 1 + len(api['window']['head'])
    for position, item in zip(window.positions, api['messages'], strict=True):
        assert f'id="m{position}"' in html
        assert f'{item["tokens"]:,} tokens' in html
    assert f'these <b>{len(window.messages)}</b> of 54 archived messages' in html
    # The request carrying the summary shows it.
    assert 'class="part summary-part"' in html


# Not found: unknown ids, other scopes, and nothing is created by asking


async def test_unknown_sessions_are_404_everywhere_and_asking_creates_nothing(filled: str) -> None:
    before = await session_ids(filled)
    with web_client(filled) as client:
        for path in (
            '/sessions/nope',
            '/context/nope',
            '/export/nope',
            '/sessions/nope?branch=1',
            '/sessions/' + 'x' * 300,
        ):
            response = client.get(path)
            assert response.status_code == 404, path
            assert 'text/html' in response.headers['content-type']
            assert 'No session' in response.text
        for path in ('/api/sessions/nope', '/api/context/nope'):
            response = client.get(path)
            assert response.status_code == 404 and response.json() == {'error': "No session 'nope'."}
        assert client.get('/no/such/page').status_code == 404
        # A branch the session doesn't have is not found either.
        assert client.get('/sessions/alpha?branch=999999').status_code == 404
    assert await session_ids(filled) == before


def test_bad_parameters_are_400(filled: str) -> None:
    with web_client(filled) as client:
        for path in ('/sessions/alpha?offset=x', '/sessions/alpha?limit=0', '/sessions/alpha?limit=501', '/?offset=-1'):
            assert client.get(path).status_code == 400, path
        assert client.get('/api/sessions?limit=abc').json()['error'].startswith('limit must be a whole number')


# JSON shapes


def test_the_json_api_has_the_pages_data(filled: str) -> None:
    with web_client(filled) as client:
        listing = client.get('/api/sessions').json()
        session = client.get('/api/sessions/alpha?offset=40&limit=10').json()
        found = client.get('/api/search?q=ORDER-1003').json()
    assert set(listing) == {'scope', 'offset', 'limit', 'next_offset', 'sessions'}
    assert listing['next_offset'] is None and listing['limit'] == 50
    by_id = {item['session_id']: item for item in listing['sessions']}
    assert set(by_id) == {'alpha', 'beta', HOSTILE['session']}
    alpha = by_id['alpha']
    assert set(alpha) == {
        'session_id', 'title', 'scope', 'message_count', 'summary_count', 'branch_count', 'usage', 'created_at',
        'updated_at', 'metadata',
    }  # fmt: skip
    assert alpha['title'] is None  # untitled (tests/test_web_titles.py has titled ones)
    assert (alpha['scope'], alpha['message_count'], alpha['branch_count']) == ('user-1', 54, 1)
    assert alpha['summary_count'] >= 2 and alpha['usage']['requests'] > 0
    assert set(session) == {
        'session_id', 'title', 'scope', 'branch', 'message_count', 'offset', 'limit', 'next_offset', 'messages',
        'summary_count', 'summaries', 'window', 'branch_count', 'branches',
    }  # fmt: skip
    assert [m['position'] for m in session['messages']] == list(range(40, 50)) and session['next_offset'] == 50
    assert {m['role'] for m in session['messages']} == {'user', 'assistant', 'tool'}
    ModelMessagesTypeAdapter.validate_python([m['message'] for m in session['messages']])
    assert set(session['window']) == {'start', 'messages', 'tokens', 'head', 'summary_number'}
    assert set(session['summaries'][0]) >= {'number', 'covers_from', 'covers_to', 'text', 'tokens', 'model_name'}
    # A session that never branched has one path: no branch list to read.
    assert session['branch_count'] == 1 and session['branches'] == []
    assert [(hit['session_id'], hit['position']) for hit in found['hits']] == [('alpha', 12)]
    assert found['hits'][0]['message']['kind'] == 'request' and found['match'] == 'phrase'


# Paging


@pytest.mark.slow_on_postgresql
def test_the_sessions_page_pages_through_every_session(filled: str) -> None:
    with web_client(filled) as client:
        first = client.get('/api/sessions?limit=2').json()
        second = client.get(f'/api/sessions?limit=2&offset={first["next_offset"]}').json()
        html = client.get('/?limit=2').text
        later = client.get('/?limit=2&offset=2').text
    assert first['next_offset'] == 2 and second['next_offset'] is None
    ids = [item['session_id'] for item in first['sessions'] + second['sessions']]
    assert sorted(ids) == sorted(['alpha', 'beta', HOSTILE['session']])
    assert 'href="/?offset=2"' in html and f'sessions 1{DASH}2' in html
    assert 'href="/?offset=0"' in later and f'sessions 3{DASH}3' in later


def test_a_long_session_opens_on_its_last_page_and_pages_back(filled: str) -> None:
    with web_client(filled) as client:
        last = client.get('/api/sessions/alpha?limit=20').json()
        html = client.get('/sessions/alpha?limit=20').text
        at = client.get('/api/sessions/alpha?limit=20&at=25').json()
        first = client.get('/sessions/alpha?limit=20&offset=0').text
    assert last['offset'] == 34 and len(last['messages']) == 20 and last['next_offset'] is None
    assert f'messages 34{DASH}53 of 54' in html and 'href="/sessions/alpha?offset=14"' in html
    assert at['offset'] == 20 and [m['position'] for m in at['messages']][5] == 25
    assert 'href="/sessions/alpha?offset=20"' in first and f'messages 0{DASH}19 of 54' in first
    assert MESSAGES_PER_PAGE == 100


def test_search_hits_link_to_their_place_in_the_conversation(filled: str) -> None:
    with web_client(filled) as client:
        html = client.get('/search?q=ORDER-1007').text
        jumped = client.get('/sessions/alpha?at=28').text
        words = client.get('/search?q=about+ORDER-1007&match=words').text
    assert 'href="/sessions/alpha?at=28#m28"' in html
    assert '<mark>ORDER-1007</mark>' in html
    assert re.search(r'<article class="msg role-user [^"]*target" id="m28"', jumped)
    assert 'href="/sessions/alpha?at=28#m28"' in words


def test_the_export_downloads_the_whole_session(filled: str) -> None:
    with web_client(filled) as client:
        response = client.get('/export/alpha')
    assert response.status_code == 200
    assert response.headers['content-disposition'].startswith('attachment; filename="alpha.jsonl"')
    document = SessionExport.from_json_lines(response.text.splitlines())
    assert document.session_id == 'alpha' and document.archived == 54
    assert json.loads(response.text.splitlines()[0])['session_id'] == 'alpha'


def test_pages_work_on_a_read_only_store(filled: str) -> None:
    """What `serve` does without `--chat`: a SQLite file opened read-only, read-only transactions on PostgreSQL."""
    with web_client(filled, read_only=True) as client:
        for path in ('/', '/sessions/alpha', '/context/alpha', '/search?q=Turn', '/export/alpha', '/api/sessions/beta'):
            assert client.get(path).status_code == 200, path


def test_the_app_mounts_under_a_path_in_another_server(filled: str) -> None:
    store = SessionStore(filled)
    outer = Starlette(routes=[Mount('/review', create_app(store, token='t0ken'))])
    with TestClient(outer, base_url='http://127.0.0.1') as client:
        try:
            page = client.get('/review/sessions/alpha', headers={'Authorization': 'Bearer t0ken'})
            assert page.status_code == 200
            assert 'href="/review/context/alpha"' in page.text and 'src="/review/static/app.js"' in page.text
            assert client.get('/review/static/app.js').status_code == 200
            login = client.get('/review/sessions/alpha', headers={'Accept': 'text/html'})
            assert login.status_code == 401 and 'action="/review/login"' in login.text
            assert 'value="/sessions/alpha"' in login.text
        finally:
            assert client.portal is not None
            client.portal.call(store.close)


@pytest.mark.slow_on_postgresql
async def test_a_rewound_session_shows_its_branches(db_url: str, store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.session('before', scope='user-9')  # so that the tree's tips (database-wide ids) are not its numbers
    session = await store.session('tree', scope='user-9')
    agent = Agent(TestModel(custom_output_text='an answer'))
    await session.run(agent, 'first')
    await session.run(agent, 'second')
    await session.rewind(2)
    await session.run(agent, 'second, again')
    with web_client(db_url) as client:
        api = client.get('/api/sessions/tree').json()
        html = client.get('/sessions/tree').text
        old = next(b for b in api['branches'] if not b['active'])
        shown = client.get(f'/api/sessions/tree?branch={old["tip"]}').json()
        shown_html = client.get(f'/sessions/tree?branch={old["tip"]}').text
    assert api['branch_count'] == 2 and len(api['branches']) == 2
    assert [(b['number'], b['active']) for b in api['branches']] == [(1, False), (2, True)] and old['tip'] != '1'
    # A person reads numbers; the links carry the tips.
    options = re.findall(r'<option value="([^"]+)"[^>]*>\s*(.*?):', html)
    assert options == [(old['tip'], 'branch 1'), (api['branches'][1]['tip'], '● branch 2')]
    assert 'This is branch 1, not the active path (branch 2)' in shown_html
    assert shown['branch'] == old['tip'] and shown['window'] is None and shown['message_count'] == 4
    assert [m['message']['parts'][0]['content'] for m in shown['messages'] if m['role'] == 'user'] == [
        'first',
        'second',
    ]
