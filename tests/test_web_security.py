"""The web app's rules, without a browser: loopback only, the token, the scope, same-origin writes, read-only.

Every case that reads sessions runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from session_store import SessionStore
from session_store.cli import main
from session_store.web import check_bind, create_app, is_loopback
from testkit.templates import NewDatabase, Templates
from tests._cli import fails
from tests._web import ECHO, SAME_ORIGIN, filled_database, populate, session_ids, sse_chunks, ui_message, web_client

StoreFactory = Callable[..., SessionStore]
TOKEN = 's3cret-token'
PAGE = {'Accept': 'text/html,application/xhtml+xml'}


@pytest.fixture(scope='module', params=['sqlite', 'postgresql'])
def filled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, templates: Templates
) -> Iterator[str]:
    """One populated database per backend, for the tests that only read (or are refused before writing)."""
    yield from filled_database(request.param, tmp_path_factory, templates)


@pytest.fixture
def writable(new_database: NewDatabase) -> str:
    """A populated database of the test's own, for the tests that write: a copy of one `populate` filled once."""
    return new_database(fill=populate)


# Where it listens


def test_listening_beyond_loopback_needs_a_token() -> None:
    for host in ('127.0.0.1', '127.0.0.2', 'localhost', '::1', '[::1]', 'app.localhost'):
        assert is_loopback(host), host
        check_bind(host, None)
    for host in ('0.0.0.0', '::', '192.168.1.7', 'example.com', '10.0.0.1'):
        assert not is_loopback(host), host
        with pytest.raises(ValueError, match='without a token'):
            check_bind(host, None)
        check_bind(host, TOKEN)


def test_serve_refuses_a_public_address_without_a_token(tmp_path: Any) -> None:
    runner = CliRunner()
    db = f'sqlite+aiosqlite:///{tmp_path / "sessions.db"}'
    for host in ('0.0.0.0', '192.168.1.7'):
        result = runner.invoke(main, ['serve', '--db', db, '--host', host], env={'SESSION_STORE_TOKEN': ''})
        fails(result, f"Refusing to listen on '{host}' without a token", '--token')
    assert not (tmp_path / 'sessions.db').exists()


def test_serve_without_the_web_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: None if name == 'uvicorn' else real(name, *a))
    fails(CliRunner().invoke(main, ['serve']), 'pip install "pydantic-ai-session-store[web]"', 'uvicorn')


@pytest.mark.slow_on_postgresql
def test_without_a_token_only_loopback_host_names_are_answered(filled: str) -> None:
    """A page on another site whose name was re-pointed at 127.0.0.1 (DNS rebinding) gets nothing."""
    with web_client(filled) as client:
        for host in ('127.0.0.1:8000', 'localhost:8000', '[::1]:8000', 'localhost'):
            assert client.get('/', headers={'Host': host}).status_code == 200, host
        for host in ('evil.example', 'evil.example:8000', '192.168.1.7:8000'):
            response = client.get('/api/sessions', headers={'Host': host})
            assert response.status_code == 400 and 'Invalid Host header' in response.text, host
    with web_client(filled, trusted_hosts=['review.internal']) as client:
        assert client.get('/', headers={'Host': 'review.internal:8000'}).status_code == 200
        assert client.get('/', headers={'Host': 'evil.example'}).status_code == 400


# The token


def test_with_a_token_every_request_needs_it(filled: str) -> None:
    with web_client(filled, token=TOKEN) as client:
        for path in ('/', '/sessions/alpha', '/context/alpha', '/search?q=Turn', '/export/alpha', '/api/sessions'):
            response = client.get(path)
            assert response.status_code == 401, path
            assert response.headers['www-authenticate'].startswith('Bearer')
            assert 'Turn M' not in response.text and 'alpha' not in response.text.replace('/sessions/alpha', '')
        # A browser asking for a page gets the login form, which returns it to that page.
        form = client.get('/sessions/alpha?offset=4', headers=PAGE)
        assert form.status_code == 401 and 'name="token"' in form.text
        assert 'value="/sessions/alpha?offset=4"' in form.text
        assert client.get('/api/sessions', headers=PAGE).json()['error'].startswith('This server needs its token')
        # Wrong tokens, in every place a token could be, get nothing.
        for headers in (
            {'Authorization': 'Bearer nope'},
            {'Authorization': TOKEN},
            {'Cookie': f'session_store_auth={TOKEN}'},
        ):
            assert client.get('/api/sessions', headers=headers).status_code == 401, headers
        # The right one opens every page; the login form and the static files need none.
        bearer = {'Authorization': f'Bearer {TOKEN}'}
        assert client.get('/api/sessions', headers=bearer).status_code == 200
        assert client.get('/sessions/alpha', headers=bearer).status_code == 200
        assert client.get('/login').status_code == 200
        assert client.get('/static/app.css').status_code == 200
        # The token also works from a host that is not loopback: it is what protects the server then.
        assert client.get('/api/sessions', headers={**bearer, 'Host': 'review.example:8000'}).status_code == 200


@pytest.mark.slow_on_postgresql
def test_the_login_form_sets_a_cookie_that_opens_the_pages(filled: str) -> None:
    with web_client(filled, token=TOKEN) as client:
        wrong = client.post('/login', data={'token': 'nope', 'next': '/sessions/alpha'}, headers=SAME_ORIGIN)
        assert wrong.status_code == 401 and 'That is not the token' in wrong.text
        assert 'session_store_auth' not in client.cookies
        # The form itself is a state change: it must come from this server's own page.
        assert (
            client.post('/login', data={'token': TOKEN}, headers={'Origin': 'http://evil.example'}).status_code == 403
        )
        right = client.post(
            '/login', data={'token': TOKEN, 'next': '/sessions/alpha'}, headers=SAME_ORIGIN, follow_redirects=False
        )
        assert right.status_code == 303 and right.headers['location'] == '/sessions/alpha'
        cookie = right.headers['set-cookie']
        assert 'HttpOnly' in cookie and 'SameSite=strict' in cookie and TOKEN not in cookie
        assert client.get('/sessions/alpha').status_code == 200
        assert client.get('/api/sessions').status_code == 200
        # Only a path on this server is a place to return to.
        away = client.post(
            '/login', data={'token': TOKEN, 'next': '//evil.example/x'}, headers=SAME_ORIGIN, follow_redirects=False
        )
        assert away.headers['location'] == '/'
        client.post('/logout', headers=SAME_ORIGIN)
        assert client.get('/api/sessions').status_code == 401


def test_a_token_must_not_be_empty() -> None:
    with pytest.raises(ValueError, match='must not be empty'):
        create_app(SessionStore('sqlite+aiosqlite://'), token=' ')  # the app never opens the store


# The scope


async def test_a_scope_confines_every_page_api_call_and_search(filled: str) -> None:
    before = await session_ids(filled)
    with web_client(filled, scope='user-1') as client:
        listing = client.get('/api/sessions').json()
        assert [item['session_id'] for item in listing['sessions']] == ['alpha'] and listing['scope'] == 'user-1'
        assert client.get('/api/sessions?scope=user-2').json()['sessions'] == []
        assert 'beta' not in client.get('/').text
        for path in ('/sessions/beta', '/context/beta', '/export/beta', '/api/sessions/beta', '/api/context/beta'):
            assert client.get(path).status_code == 404, path
        assert client.get('/sessions/alpha').status_code == 200
        hits = client.get('/api/search?q=Turn M1').json()['hits']
        assert hits and {hit['session_id'] for hit in hits} == {'alpha'}
        assert 'beta' not in client.get('/search?q=beta').text.split('</form>', 2)[-1]
    assert await session_ids(filled) == before


async def test_a_scoped_chat_reaches_only_its_own_sessions(writable: str) -> None:
    with web_client(writable, scope='user-1', chat_model=ECHO) as client:
        other = client.post(
            '/api/chat', json={'trigger': 'submit-message', 'id': 'beta', 'messages': [ui_message('u1', 'hi')]},
            headers=SAME_ORIGIN,
        )  # fmt: skip
        assert other.status_code == 404
        new = client.post(
            '/api/chat', json={'trigger': 'submit-message', 'id': 'fresh', 'messages': [ui_message('u1', 'hi')]},
            headers=SAME_ORIGIN,
        )  # fmt: skip
        assert new.status_code == 200 and any(c['type'] == 'data-conversation-saved' for c in sse_chunks(new.text))
    async with SessionStore(writable) as store:
        assert len(await store.history('beta', scope='user-2')) == 8  # untouched
        assert [info.session_id for info in await store.sessions(scope='user-1')] == ['fresh', 'alpha']


# Writes: same origin only, and only with chat


@pytest.mark.slow_on_postgresql
def test_state_changes_need_a_page_of_this_server(writable: str) -> None:
    body = {'trigger': 'submit-message', 'id': 'c1', 'messages': [ui_message('u1', 'hi')]}
    with web_client(writable, chat_model=ECHO) as client:
        for headers in (
            {},
            {'Origin': 'http://evil.example'},
            {'Origin': 'null'},
            {'Origin': 'http://127.0.0.1:9999'},
            {'Referer': 'http://evil.example/sessions/alpha'},
        ):
            response = client.post('/api/chat', json=body, headers=headers)
            assert response.status_code == 403, headers
        assert client.get('/api/sessions/c1').status_code == 404  # nothing was stored
        by_referer = client.post('/api/chat', json=body, headers={'Referer': 'http://127.0.0.1/sessions/alpha'})
        assert by_referer.status_code == 200
    with web_client(writable, chat_model=ECHO, token=TOKEN) as client:
        bearer = {'Authorization': f'Bearer {TOKEN}'}
        assert client.post('/api/chat', json=body, headers=SAME_ORIGIN).status_code == 401
        assert client.post('/api/chat', json=body, headers=bearer).status_code == 403
        assert client.post('/api/chat', json=body, headers={**bearer, **SAME_ORIGIN}).status_code == 200


def test_without_chat_nothing_writes(filled: str) -> None:
    body = {'trigger': 'submit-message', 'id': 'alpha', 'messages': [ui_message('u1', 'hi')]}
    with web_client(filled) as client:
        # One answer whatever the origin: there is no chat to protect, so nothing to refuse.
        for headers in ({}, SAME_ORIGIN, {'Origin': 'http://evil.example'}):
            response = client.post('/api/chat', json=body, headers=headers)
            assert (response.status_code, response.json()) == (
                404,
                {'error': 'chat is not enabled: start with --chat MODEL (create_app(chat_model=...) in code)'},
            ), headers
        html = client.get('/sessions/alpha').text
        assert 'id="chat"' not in html and 'class="link regenerate"' not in html
        assert 'id="new-chat"' not in client.get('/').text
        assert len(client.get('/api/sessions/alpha').json()['messages']) == 54


def test_a_chat_request_without_a_session_id_is_400(filled: str) -> None:
    with web_client(filled, chat_model=ECHO) as client:
        for body in ({'trigger': 'submit-message', 'messages': []}, [1, 2], {'id': ''}, {'id': 'x' * 300}):
            assert client.post('/api/chat', json=body, headers=SAME_ORIGIN).status_code == 400, body
