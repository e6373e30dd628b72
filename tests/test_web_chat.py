"""Chat through the web app, without a browser: the request the session page sends, streamed, stored, regenerated
and edited, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import UsageLimits
from starlette.testclient import TestClient

from session_store import SessionStore
from session_store._offline import echo_model
from testkit.templates import NewDatabase
from tests._web import ECHO, SAME_ORIGIN, populate, sse_chunks, ui_message, web_client

StoreFactory = Callable[..., SessionStore]


@pytest.fixture
def filled(new_database: NewDatabase) -> str:
    """A populated database of the test's own: a copy of one that `populate` filled once for the run."""
    return new_database(fill=populate)


def send(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Post a chat request as the page's script does; its chunks, after checking the run was stored."""
    response = client.post('/api/chat', json=body, headers=SAME_ORIGIN)
    assert response.status_code == 200, response.text
    assert response.headers['content-type'].startswith('text/event-stream')
    chunks = sse_chunks(response.text)
    assert not [c for c in chunks if c['type'] == 'error'], chunks
    assert any(c['type'] == 'data-conversation-saved' for c in chunks), chunks
    return chunks


def answer(chunks: list[dict[str, Any]]) -> str:
    return ''.join(c['delta'] for c in chunks if c['type'] == 'text-delta')


def texts(api: dict[str, Any]) -> list[str]:
    """Each stored prompt and answer text on the page's messages, in order."""
    found = []
    for item in api['messages']:
        for part in item['message']['parts']:
            if part['part_kind'] in ('user-prompt', 'text') and isinstance(part['content'], str):
                found.append(part['content'])
    return found


async def test_a_message_streams_and_is_stored_in_the_session(filled: str) -> None:
    with web_client(filled, chat_model=ECHO) as client:
        chunks = send(client, {'trigger': 'submit-message', 'id': 'alpha', 'messages': [ui_message('w1', 'Hello <b>')]})
        # Streamed: the answer arrives in many deltas, a word at a time.
        deltas = [c for c in chunks if c['type'] == 'text-delta']
        assert len(deltas) > 3
        assert answer(chunks) == '(test model, offline) You said: Hello <b>'
        page = client.get('/api/sessions/alpha').json()
        html = client.get('/sessions/alpha').text
    assert page['message_count'] == 56
    assert texts(page)[-2:] == ['Hello <b>', '(test model, offline) You said: Hello <b>']
    # The prompt sent from the page can be edited or regenerated: its buttons resend it under its UI message id.
    assert page['messages'][-2]['ui_message_id'] == page['messages'][-2]['message_id'] == 'w1'
    assert '<span class="actions" data-message-id="w1" data-prompt="Hello &lt;b&gt;">' in html
    assert 'class="link edit"' in html and 'class="link regenerate"' in html
    # The session keeps its scope, though the app has none.
    async with SessionStore(filled) as store:
        assert [(i.session_id, i.scope) for i in await store.sessions(scope='user-1')] == [('alpha', 'user-1')]
        last = (await store.history('alpha', scope='user-1'))[-1]
    assert isinstance(last, ModelResponse) and last.model_name == 'test'


@pytest.mark.slow_on_postgresql
async def test_regenerate_and_edit_keep_the_replaced_turns_as_branches(filled: str) -> None:
    with web_client(filled, chat_model=ECHO) as client:
        send(client, {'trigger': 'submit-message', 'id': 'beta', 'messages': [ui_message('w1', 'first question')]})
        send(client, {'trigger': 'submit-message', 'id': 'beta', 'messages': [ui_message('w2', 'second question')]})
        html = client.get('/sessions/beta').text
        # What the page's Regenerate button on the second prompt sends.
        (prompt,) = re.findall(r'class="actions" data-message-id="w2" data-prompt="([^"]*)"', html)
        regenerated = send(
            client, {'trigger': 'regenerate-message', 'id': 'beta', 'messages': [ui_message('w2', prompt)]}
        )
        assert answer(regenerated) == '(test model, offline) You said: second question'
        # What its Edit button sends: the first prompt's id, with new text.
        send(client, {'trigger': 'submit-message', 'id': 'beta', 'messages': [ui_message('w1', 'first, edited')]})
        api = client.get('/api/sessions/beta').json()
        html = client.get('/sessions/beta').text
        old_tip = next(b['tip'] for b in api['branches'] if b['message_count'] == 12 and not b['active'])
        old = client.get(f'/api/sessions/beta?branch={old_tip}').json()
        old_html = client.get(f'/sessions/beta?branch={old_tip}').text
    # The active path is the edit; the two replaced turns are branches, shown by the selector.
    assert texts(api)[-2:] == ['first, edited', '(test model, offline) You said: first, edited']
    assert api['message_count'] == 10 and len(api['branches']) == 3
    assert 'id="branch-select"' in html and html.count('<option value=') == 3
    assert old['branch'] == old_tip and texts(old)[-2:][0] == 'second question'
    assert 'This is branch' in old_html and 'id="chat"' not in old_html and 'id="window"' not in old_html
    async with SessionStore(filled) as store:
        info = {i.session_id: i for i in await store.sessions()}['beta']
    assert info.branch_count == 3 and info.scope == 'user-2'


def test_a_new_session_starts_from_the_chat_endpoint(filled: str) -> None:
    with web_client(filled, chat_model=ECHO) as client:
        assert 'id="new-chat"' in client.get('/').text
        send(client, {'trigger': 'submit-message', 'id': 'brand-new', 'messages': [ui_message('n1', 'hello')]})
        listing = {i['session_id']: i for i in client.get('/api/sessions').json()['sessions']}
    assert listing['brand-new']['scope'] is None and listing['brand-new']['message_count'] == 2


@pytest.mark.slow_on_postgresql
def test_any_model_or_agent_can_chat(filled: str) -> None:
    agent = Agent(echo_model(delay=0), instructions='Be brief.')
    with web_client(filled, chat_model=agent) as client:
        chunks = send(client, {'trigger': 'submit-message', 'id': 'gamma', 'messages': [ui_message('g1', 'hi')]})
        assert answer(chunks).endswith('You said: hi')
        stored = client.get('/api/sessions/gamma').json()['messages']
    request = stored[0]['message']
    assert request['instructions'] == 'Be brief.'
    assert [p['content'] for p in request['parts'] if p['part_kind'] == 'user-prompt'] == ['hi']


@pytest.mark.slow_on_postgresql
async def test_a_session_that_made_many_requests_before_can_still_chat(
    db_url: str, store_factory: StoreFactory
) -> None:
    """The run adds to the stored usage; pydantic-ai's request limit must count only this run's requests."""
    default_limit = UsageLimits().request_limit
    assert default_limit is not None
    store = store_factory()
    session = await store.session('busy')
    agent = Agent(TestModel())
    for turn in range(default_limit + 1):
        await session.run(agent, f'turn {turn}')
    with web_client(db_url, chat_model=ECHO) as client:
        chunks = send(
            client, {'trigger': 'submit-message', 'id': 'busy', 'messages': [ui_message('b1', 'still there?')]}
        )
    assert answer(chunks).endswith('You said: still there?')
    (info,) = await store_factory().sessions()
    assert info.usage.requests == default_limit + 2
