"""The chat app of the docs (`docs/examples/chat_app.py`, shown on docs/chat-app.md) as a program: the file itself
served by uvicorn and driven over HTTP as a `useChat` front end would, on SQLite and PostgreSQL, and the same app
object in this process for a quick check.

What a reader copies it for must hold: a chat past pydantic-ai's 50-request default, summaries stored, an edit and a
regenerate of a turn long summarized away, and one user's chat out of another's reach.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from docs.examples import chat_app
from session_store import SessionStore

EXAMPLE = Path(chat_app.__file__)
TOKENS = {'alice': 'alice-token', 'bob': 'bob-token'}
ECHO = '(test model, offline) You said: '
"""How the offline `test` model answers: it quotes the prompt."""


def settings(db_url: str) -> dict[str, str]:
    """The environment the app is started with: offline models, the test's database, two users."""
    return {
        'CHAT_DATABASE_URL': db_url,
        'CHAT_MODEL': 'test',
        'CHAT_SUMMARIZER': 'test',
        'CHAT_TOKENS': ','.join(f'{token}={user}' for user, token in TOKENS.items()),
    }


def prompt(message_id: str, text: str) -> dict[str, Any]:
    """A user message as `useChat` sends it."""
    return {'id': message_id, 'role': 'user', 'parts': [{'type': 'text', 'text': text}]}


def chunks(body: str) -> list[dict[str, Any]]:
    """The JSON chunks of a UI message stream (`data: {...}` lines), after checking it ends as the protocol says."""
    assert body.rstrip().endswith('data: [DONE]'), body
    return [json.loads(line.removeprefix('data: ')) for line in body.splitlines() if line.startswith('data: {')]


def answer(body: str) -> str:
    """The answer a stream carries, after checking it was stored and holds no error."""
    streamed = chunks(body)
    assert [c for c in streamed if c['type'] == 'error'] == [], streamed
    assert [c['type'] for c in streamed if c['type'] == 'data-conversation-saved'] == ['data-conversation-saved']
    return ''.join(c['delta'] for c in streamed if c['type'] == 'text-delta')


def as_user(user: str) -> dict[str, str]:
    return {'Authorization': f'Bearer {TOKENS[user]}'}


def texts(messages: list[ModelMessage]) -> list[str]:
    """Each prompt and answer text of stored messages, in order."""
    found = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart | TextPart) and isinstance(part.content, str):
                found.append(part.content)
    return found


def turns(*numbers: int) -> list[str]:
    """The prompts and answers of the turns `turn N` of these numbers, as `texts` reads them."""
    return [text for n in numbers for text in (f'turn {n}', f'{ECHO}turn {n}')]


# In this process: the app object, over httpx's ASGI transport


@asynccontextmanager
async def in_process(db_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    """The example's app with its lifespan running (the store open), and a client on it."""
    for name, value in settings(db_url).items():
        monkeypatch.setenv(name, value)
    app = chat_app.app
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url='http://chat.test') as client:
            yield client


@pytest.mark.slow_on_postgresql  # the SQLite variant, in the quick tier, runs the same app
async def test_the_app_object_chats_edits_regenerates_and_keeps_users_apart(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process(db_url, monkeypatch) as client:

        async def send(body: dict[str, Any], user: str = 'alice') -> str:
            response = await client.post('/api/chat', json=body, headers=as_user(user))
            assert response.status_code == 200, response.text
            assert response.headers['content-type'].startswith('text/event-stream')
            return answer(response.text)

        for n in range(2):
            said = await send({'trigger': 'submit-message', 'id': 'c1', 'messages': [prompt(f'u{n}', f'turn {n}')]})
            assert said == f'{ECHO}turn {n}'
        # An edit of the first prompt (its id again, new text), then a regenerate of it.
        edit = {'trigger': 'submit-message', 'id': 'c1', 'messages': [prompt('u0', 'turn 0, edited')]}
        assert await send(edit) == f'{ECHO}turn 0, edited'
        regenerate = {'trigger': 'regenerate-message', 'id': 'c1', 'messages': [prompt('u0', 'turn 0, edited')]}
        assert await send(regenerate) == f'{ECHO}turn 0, edited'
        reloaded = await client.get('/api/chat/c1', headers=as_user('alice'))
        # Bob reaches none of it, and nobody without a token reaches anything.
        mine = {**edit, 'messages': [prompt('b0', 'mine?')]}
        bobs = await client.post('/api/chat', json=mine, headers=as_user('bob'))
        bob_reads = await client.get('/api/chat/c1', headers=as_user('bob'))
        anonymous = await client.post('/api/chat', json=edit)
        wrong_token = await client.get('/api/chat/c1', headers={'Authorization': 'Bearer guess'})
    assert [(m['id'], m['role'], m['parts'][0]['text']) for m in reloaded.json()['messages']] == [
        ('u0', 'user', 'turn 0, edited'),
        (reloaded.json()['messages'][1]['id'], 'assistant', f'{ECHO}turn 0, edited'),
    ]
    assert bobs.status_code == 404 and bob_reads.status_code == 404
    assert anonymous.status_code == 401 and wrong_token.status_code == 401
    async with SessionStore(db_url) as store:
        (info,) = await store.sessions()
        session = await store.session('c1', scope='alice')
        branches = await session.branches()
    assert (info.session_id, info.scope, info.message_count, info.branch_count) == ('c1', 'alice', 2, 3)
    old = next(b for b in branches if b.message_count == 4)
    assert old.forked_at is None and not old.active


@pytest.mark.slow_on_postgresql
async def test_a_chat_out_of_reach_is_the_same_404_read_or_written(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob asking for Alice's chat, or for one nobody has, gets one answer whichever way he asks: the shape
    pydantic-ai's adapter answers a POST with (Starlette's `{"detail": ...}`), on GET too."""
    async with in_process(db_url, monkeypatch) as client:
        first = {'trigger': 'submit-message', 'id': 'c1', 'messages': [prompt('u0', 'turn 0')]}
        answer((await client.post('/api/chat', json=first, headers=as_user('alice'))).text)
        bobs = {**first, 'messages': [prompt('b0', 'mine?')]}
        answers = [
            await client.post('/api/chat', json=bobs, headers=as_user('bob')),
            await client.get('/api/chat/c1', headers=as_user('bob')),
            await client.get('/api/chat/nobodys', headers=as_user('bob')),
            await client.get('/api/chat/%00', headers=as_user('bob')),  # no id a chat can have
        ]
        anonymous = [await client.post('/api/chat', json=first), await client.get('/api/chat/c1')]
    assert [(a.status_code, a.json()) for a in answers] == [(404, {'detail': 'Conversation not found.'})] * 4
    assert {a.status_code for a in anonymous} == {401} and all(set(a.json()) == {'detail'} for a in anonymous)


FIRST = 'Where is my order ORDER-1042? It was due on Tuesday, and the tracking page says it never left.'
"""A first message longer than a title: the app titles the chat with its first words."""
FIRST_TITLE = 'Where is my order ORDER-1042? It was due on Tuesday, and…'


@pytest.mark.slow_on_postgresql
async def test_a_new_chat_is_titled_from_its_first_message_and_a_users_title_is_kept(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a chat's first answer the app titles it with the first message, shortened, with `expected_title=None`:
    only if it has no title yet. Later turns leave the title alone; a title the user gave it is never replaced, even
    by an edit of the first message (which runs from an empty chat again). GET of a chat and the chat list have it."""
    assert chat_app.TITLE_LENGTH == 60 and len(FIRST_TITLE) <= 60
    async with in_process(db_url, monkeypatch) as client:

        async def send(chat_id: str, message_id: str, text: str, user: str = 'alice') -> str:
            body = {'trigger': 'submit-message', 'id': chat_id, 'messages': [prompt(message_id, text)]}
            return answer((await client.post('/api/chat', json=body, headers=as_user(user))).text)

        async def title(chat_id: str, user: str = 'alice') -> Any:
            return (await client.get(f'/api/chat/{chat_id}', headers=as_user(user))).json()['title']

        await send('c1', 'u0', FIRST)
        first = await title('c1')
        await send('c1', 'u1', 'And ORDER-1043?')
        second = await title('c1')
        await send('short', 's0', '  Hello\n  there  ')
        # The user names the chat (a rename of the front end's, or `session-store serve`'s), then edits their first
        # message: the app's title after that first turn again comes too late, and the user's stays.
        async with SessionStore(db_url) as store:
            await store.conversations.update('c1', title='My late parcel', scope='alice')
        await send('c1', 'u0', 'Where is ORDER-1042?')
        kept = await title('c1')
        await send('bobs', 'b0', 'Hi from Bob', user='bob')
        alices = (await client.get('/api/chats', headers=as_user('alice'))).json()
        bobs = (await client.get('/api/chats', headers=as_user('bob'))).json()
        anonymous = await client.get('/api/chats')
    assert (first, second, kept) == (FIRST_TITLE, FIRST_TITLE, 'My late parcel')
    # Each user's chats, newest first, with their titles; nobody else's.
    assert [(c['id'], c['title']) for c in alices['chats']] == [('c1', 'My late parcel'), ('short', 'Hello there')]
    assert [(c['id'], c['title']) for c in bobs['chats']] == [('bobs', 'Hi from Bob')]
    assert set(alices['chats'][0]) == {'id', 'title', 'updated_at'}
    assert anonymous.status_code == 401


def test_a_title_is_the_first_words_of_the_first_message() -> None:
    assert chat_app.title_from(FIRST) == FIRST_TITLE
    assert chat_app.title_from(' Hello\n\tthere ') == 'Hello there'
    assert chat_app.title_from('x' * 100) == 'x' * 59 + '…'  # one long word is cut where it must be
    assert chat_app.title_from('  \n ') is None


async def test_the_app_opens_its_store_at_the_first_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started, the app has not touched its database: uvicorn runs the lifespan before it binds its port, so a port
    already taken would otherwise fail after the database was made and migrated. The first request opens it."""
    database = tmp_path / 'chats.db'
    async with in_process(f'sqlite+aiosqlite:///{database}', monkeypatch) as client:
        assert not database.exists()
        unknown = await client.get('/api/chat/c1', headers=as_user('alice'))
        assert unknown.status_code == 404 and database.exists()
        first = {'trigger': 'submit-message', 'id': 'c1', 'messages': [prompt('u0', 'turn 0')]}
        said = answer((await client.post('/api/chat', json=first, headers=as_user('alice'))).text)
    assert said == f'{ECHO}turn 0'


# As a program: the file served by uvicorn, over HTTP


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


@contextmanager
def served(db_url: str, folder: Path) -> Iterator[str]:
    """`uvicorn chat_app:app` on the example file, as its docstring runs it; the base URL."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(('SESSION_STORE_', 'CHAT_'))}
    process = subprocess.Popen(
        [sys.executable, '-m', 'uvicorn', 'chat_app:app', '--app-dir', str(EXAMPLE.parent), '--port', str(port)],
        cwd=folder,
        env={**environment, **settings(db_url)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f'http://127.0.0.1:{port}'
    try:
        deadline = time.monotonic() + 60
        while True:  # uvicorn listens once the lifespan has run; the first request opens the store
            try:
                assert httpx.get(f'{base}/api/chat/none', timeout=2).status_code == 401
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f'the app did not start: {process.communicate(timeout=5)}') from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            _, errors = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            _, errors = process.communicate()
    assert 'Traceback' not in errors, errors


@pytest.mark.slow  # uvicorn in a process of its own
def test_the_app_file_on_a_port_already_taken_fails_before_touching_the_database(tmp_path: Path) -> None:
    """As docs/chat-app.md runs it, with the store's default URL (`./chats.db`), on a port something else holds
    (`session-store serve` on 8000, once): uvicorn says the address is in use, and no database was made."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(('SESSION_STORE_', 'CHAT_'))}
    offline = {name: value for name, value in settings('').items() if name != 'CHAT_DATABASE_URL'}
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = subprocess.run(
            [sys.executable, '-m', 'uvicorn', 'chat_app:app', '--app-dir', str(EXAMPLE.parent), '--port', port],
            cwd=tmp_path,
            env={**environment, **offline},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0 and 'address already in use' in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


TURNS = 60


@pytest.mark.slow  # a server process, and 60 turns of a model that streams a word every 20 ms
async def test_the_app_file_serves_a_long_chat_with_edits_and_regenerates_of_old_turns(
    db_url: str, tmp_path: Path
) -> None:
    with served(db_url, tmp_path) as base, httpx.Client(base_url=base, timeout=60) as client:

        def send(body: dict[str, Any], user: str = 'alice') -> str:
            response = client.post('/api/chat', json=body, headers=as_user(user))
            assert response.status_code == 200, response.text
            return answer(response.text)

        # 60 turns, each sending only its new message: past pydantic-ai's default limit of 50 requests.
        for n in range(TURNS):
            said = send({'trigger': 'submit-message', 'id': 'long', 'messages': [prompt(f'u{n}', f'turn {n}')]})
            assert said == f'{ECHO}turn {n}'
        async with SessionStore(db_url) as store:
            (info,) = await store.sessions()
            first_chain = await store.summaries('long', scope='alice')
        # A regenerate of turn 30, long summarized away, sent as `useChat` sends it after a reload: the chat as
        # GET gave it, up to that prompt, with the id of the answer to replace.
        reloaded = client.get('/api/chat/long', headers=as_user('alice')).json()
        assert reloaded['title'] == 'turn 0'  # the first message, as the app titled the chat after its first answer
        held = reloaded['messages']
        assert [m['id'] for m in held[::2]] == [f'u{n}' for n in range(TURNS)]
        regenerate = {'trigger': 'regenerate-message', 'id': 'long', 'messages': held[:61], 'messageId': held[61]['id']}
        assert send(regenerate) == f'{ECHO}turn 30'
        async with SessionStore(db_url) as store:
            regenerated = await store.history('long', scope='alice')
            regenerated_chain = await store.summaries('long', scope='alice')
            regenerated_window = await store.window('long', scope='alice')
        # An edit of turn 5, sending only the edited message (its id, new text).
        edit = {'trigger': 'submit-message', 'id': 'long', 'messages': [prompt('u5', 'turn 5, edited')]}
        assert send(edit) == f'{ECHO}turn 5, edited'
        # Bob, with the same chat id: not found, whether he writes or reads; his own chat works.
        bobs = client.post('/api/chat', json={**edit, 'messages': [prompt('b0', 'hello')]}, headers=as_user('bob'))
        bob_reads = client.get('/api/chat/long', headers=as_user('bob'))
        said = send({'trigger': 'submit-message', 'id': 'bobs', 'messages': [prompt('b0', 'hello')]}, user='bob')
        assert said == f'{ECHO}hello'
    assert bobs.status_code == 404 and bob_reads.status_code == 404
    # Each turn had its own budget: the chat made 60 requests, past the 50 one run may make.
    assert (info.message_count, info.usage.requests) == (2 * TURNS, TURNS)
    # Summaries were stored as the chat went, each extending the one before.
    assert len(first_chain) >= 3 and first_chain[0].covers_from == 0
    assert all(a.covers_to == b.covers_from for a, b in pairwise(first_chain))
    assert all(s.model_name == 'test' and s.text for s in first_chain)
    # The regenerate replaced turn 30 and ran on the path before it: its own summaries, none covering turn 30.
    assert texts(regenerated) == turns(*range(31))
    before_turn_30 = [s for s in first_chain if s.covers_to <= 60]
    assert before_turn_30 and regenerated_chain[: len(before_turn_30)] == before_turn_30
    assert all(s.covers_to <= 60 for s in regenerated_chain)
    assert isinstance(regenerated_window.messages[0], ModelRequest)
    assert any(isinstance(p, CompactionPart) for m in regenerated_window.messages for p in m.parts)
    async with SessionStore(db_url) as store:
        active = await store.history('long', scope='alice')
        session = await store.session('long', scope='alice')
        branches = {b.message_count: b for b in await session.branches()}
        whole = await store.history('long', scope='alice', branch=branches[2 * TURNS].tip)
        sessions = {i.session_id: i.scope for i in await store.sessions()}
    # The edit branched at turn 5: the turns before it, then the edited prompt and its answer.
    assert texts(active) == [*turns(0, 1, 2, 3, 4), 'turn 5, edited', f'{ECHO}turn 5, edited']
    assert isinstance(active[-1], ModelResponse)
    # The first path is a branch with all 60 turns; the regenerated one (31 turns) is another.
    assert sorted(branches) == [12, 62, 2 * TURNS] and branches[12].active
    assert texts(whole) == turns(*range(TURNS))
    assert sessions == {'long': 'alice', 'bobs': 'bob'}
