"""Conversation titles in the web app (issue 48), without a browser: the sessions list and the session page show a
session's title as text, the JSON has it, and the page's rename form writes it with the title the page showed as
`expected_title`, so a rename made meanwhile elsewhere is never overwritten unseen.

A rename is a write: like a chat, it needs the token, a page of this server (same origin) and a server started
with chat (`serve --chat MODEL`, the only mode whose store is opened for writing), and it reaches only sessions in
the app's scope. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import quote

import httpx2
import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from session_store import SessionStore
from session_store.web import MAX_TITLE
from testkit.templates import NewDatabase
from tests._web import ECHO, HOSTILE, SAME_ORIGIN, populate, web_client

TOKEN = 's3cret-token'
HOSTILE_TITLE = '<script>alert("title")</script> Order <b>1042</b> & co'
"""A title that would run script if a page put it into HTML unescaped."""
BETA = 'Refund for ORDER-7'
ODD = HOSTILE['session']
"""`populate`'s session whose id is markup: it stays untitled."""


async def titled(url: str) -> None:
    """`populate`'s sessions, with `alpha` titled in markup, `beta` titled plainly and the odd one untitled."""
    await populate(url)
    async with SessionStore(url) as store:
        await store.conversations.update('alpha', title=HOSTILE_TITLE, scope='user-1')
        await store.conversations.update('beta', title=BETA, scope='user-2')


@pytest.fixture
def sessions(new_database: NewDatabase) -> str:
    """A copy of the database `titled` filled once for the run."""
    return new_database(fill=titled)


def path(session_id: str) -> str:
    return quote(session_id, safe='')


def rename(
    client: TestClient,
    session_id: str,
    title: str,
    expected: str | None,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    """What the page's rename form posts: the new title and, when the page showed one, that title as expected."""
    form = {'title': title} if expected is None else {'title': title, 'expected_title': expected}
    return client.post(
        f'/rename/{path(session_id)}',
        data=form,
        headers=SAME_ORIGIN if headers is None else headers,
        follow_redirects=False,
    )


def heading(html: str) -> tuple[str, str | None]:
    """The session page's heading as text, and the session id shown beside it (`None` when the heading is the id)."""
    match = re.search(r'<h1[^>]*>(.*?)</h1>\s*(?:<span class="sid"[^>]*>(.*?)</span>)?', html, re.S)
    assert match is not None, html[:2000]
    return unescape(match[1]), None if match[2] is None else unescape(match[2])


def form_fields(html: str) -> dict[str, str]:
    """The rename form's inputs: name to value, as a browser would send them."""
    match = re.search(r'<form class="rename-form"[^>]*>(.*?)</form>', html, re.S)
    assert match is not None, 'no rename form'
    return {
        unescape(name): unescape(value)
        for name, value in re.findall(r'<input[^>]*\bname="([^"]*)"[^>]*\bvalue="([^"]*)"', match[1])
    }


def scripts_and_images(html: str) -> list[str]:
    return re.findall(r'<(?:script|img)\b[^>]*>', html, flags=re.IGNORECASE)


async def titles(url: str) -> dict[str, str | None]:
    async with SessionStore(url) as store:
        return {info.session_id: info.title for info in await store.sessions()}


# Shown


def test_the_list_and_the_page_show_titles_as_text(sessions: str) -> None:
    with web_client(sessions, chat_model=ECHO) as client:
        index = client.get('/').text
        alpha = client.get('/sessions/alpha').text
        beta = client.get('/sessions/beta').text
        odd = client.get(f'/sessions/{path(ODD)}').text
    # A title with markup is text on every page, and in the rename form's value: no script, no tag of its own.
    for html in (index, alpha, beta, odd):
        assert scripts_and_images(html) == [
            '<script src="/static/app.js" defer>',
            '<img src="/static/icon.svg" alt="" width="20" height="20">',
        ]
        assert '<b>1042</b>' not in html
    assert escape(HOSTILE_TITLE) in index and escape(HOSTILE_TITLE) in alpha
    # The list: a titled session's link is its title, with its id beside it; an untitled one is its id, as before.
    assert re.search(
        r'<a class="title" href="/sessions/beta">Refund for ORDER-7</a>\s*<span class="sid">beta</span>', index
    )
    assert f'<a href="/sessions/{path(ODD)}">{escape(ODD)}</a>' in index
    # The page: the title is the heading, the id beside it (and the window's title); untitled, the id is the heading.
    assert heading(beta) == (BETA, 'beta') and '<title>Refund for ORDER-7 · session-store</title>' in beta
    assert heading(alpha) == (HOSTILE_TITLE, 'alpha')
    assert heading(odd) == (ODD, None)
    # The rename form starts from the title shown, and carries it as the expected one; untitled, it carries none.
    assert form_fields(beta) == {'expected_title': BETA, 'title': BETA}
    assert form_fields(alpha) == {'expected_title': HOSTILE_TITLE, 'title': HOSTILE_TITLE}
    assert form_fields(odd) == {'title': ''}
    assert f'action="/rename/{path(ODD)}"' in odd and f'maxlength="{MAX_TITLE}"' in odd


def test_the_json_has_each_title(sessions: str) -> None:
    with web_client(sessions) as client:
        listing = {item['session_id']: item for item in client.get('/api/sessions').json()['sessions']}
        alpha = client.get('/api/sessions/alpha').json()
        odd = client.get(f'/api/sessions/{path(ODD)}').json()
    assert {key: item['title'] for key, item in listing.items()} == {'alpha': HOSTILE_TITLE, 'beta': BETA, ODD: None}
    assert alpha['title'] == HOSTILE_TITLE and odd['title'] is None


# Renamed


async def test_a_rename_stores_the_title_and_the_page_shows_it(sessions: str) -> None:
    before = await titles(sessions)
    async with SessionStore(sessions) as store:
        order = [info.session_id for info in await store.sessions()]
    with web_client(sessions, chat_model=ECHO) as client:
        renamed = rename(client, 'beta', '  Refund, then a replacement  ', expected=BETA)
        assert (renamed.status_code, renamed.headers['location']) == (303, '/sessions/beta')
        page = client.get('/sessions/beta').text
        # An untitled session is renamed with no expected title.
        first = rename(client, ODD, 'The odd one', expected=None)
        assert (first.status_code, first.headers['location']) == (303, f'/sessions/{path(ODD)}')
        odd = client.get(f'/sessions/{path(ODD)}').text
        listing = {item['session_id']: item['title'] for item in client.get('/api/sessions').json()['sessions']}
    # Trimmed, stored, and shown, as the heading and as the form's expected title for the next rename.
    assert heading(page) == ('Refund, then a replacement', 'beta')
    assert form_fields(page) == {'expected_title': 'Refund, then a replacement', 'title': 'Refund, then a replacement'}
    assert heading(odd) == ('The odd one', ODD)
    assert listing == {**before, 'beta': 'Refund, then a replacement', ODD: 'The odd one'}
    assert await titles(sessions) == listing
    # A rename is not an update of the conversation: the list's order (by last update) stays.
    async with SessionStore(sessions) as store:
        assert [info.session_id for info in await store.sessions()] == order


async def test_a_blank_title_clears_it(sessions: str) -> None:
    with web_client(sessions, chat_model=ECHO) as client:
        cleared = rename(client, 'beta', '   ', expected=BETA)
        page = client.get('/sessions/beta').text
        index = client.get('/').text
    assert cleared.status_code == 303
    assert heading(page) == ('beta', None) and form_fields(page) == {'title': ''}
    assert '<a href="/sessions/beta">beta</a>' in index
    assert (await titles(sessions))['beta'] is None


async def test_a_title_too_long_or_not_one_line_is_refused_and_nothing_changes(sessions: str) -> None:
    longest = 'x' * MAX_TITLE
    with web_client(sessions, chat_model=ECHO) as client:
        too_long = rename(client, 'beta', longest + 'y', expected=BETA)
        two_lines = rename(client, 'beta', 'first line\nsecond line', expected=BETA)
        nothing = client.post('/rename/beta', data={'expected_title': BETA}, headers=SAME_ORIGIN)
        assert (await titles(sessions))['beta'] == BETA
        fits = rename(client, 'beta', longest, expected=BETA)
    assert too_long.status_code == 400
    assert f'A title is at most {MAX_TITLE} characters; this one has {MAX_TITLE + 1}.' in too_long.text
    # The page shows the session as it is, and the form keeps what was typed, to shorten it.
    assert heading(too_long.text) == (BETA, 'beta')
    assert form_fields(too_long.text) == {'expected_title': BETA, 'title': longest + 'y'}
    assert two_lines.status_code == 400 and 'A title is one line' in two_lines.text
    assert nothing.status_code == 400 and 'The rename form sends a title' in nothing.text
    assert fits.status_code == 303 and (await titles(sessions))['beta'] == longest


async def test_a_stale_rename_conflicts_says_so_and_shows_the_current_title(sessions: str) -> None:
    with web_client(sessions, chat_model=ECHO) as client:
        shown = form_fields(client.get('/sessions/beta').text)
        # Someone else renames it after the page was shown.
        async with SessionStore(sessions) as other:
            await other.conversations.update('beta', title='Replacement for ORDER-7', scope='user-2')
        stale = rename(client, 'beta', 'Mine', expected=shown['expected_title'])
        assert (await titles(sessions))['beta'] == 'Replacement for ORDER-7'
        # The page it answers with is the form to try again: sent as it is, it replaces the title now shown.
        again = form_fields(stale.text)
        retried = rename(client, 'beta', again['title'], expected=again['expected_title'])
        # An untitled session titled meanwhile conflicts too: the form expected none.
        async with SessionStore(sessions) as other:
            await other.conversations.update(ODD, title='Titled elsewhere')
        untitled = rename(client, ODD, 'Mine too', expected=None)
        # And one whose title was cleared meanwhile.
        async with SessionStore(sessions) as other:
            await other.conversations.update('alpha', title=None, scope='user-1')
        cleared = rename(client, 'alpha', 'Mine three', expected=HOSTILE_TITLE)
    assert stale.status_code == 409
    assert (
        'Not renamed: this session was renamed to “Replacement for ORDER-7” since the page was shown (as “Refund for '
        'ORDER-7”).' in stale.text
    )
    assert heading(stale.text) == ('Replacement for ORDER-7', 'beta')
    assert again == {'expected_title': 'Replacement for ORDER-7', 'title': 'Mine'}
    assert retried.status_code == 303
    assert (
        untitled.status_code == 409
        and 'renamed to “Titled elsewhere” since the page was shown (untitled)' in unescape(untitled.text)
    )
    assert heading(untitled.text) == ('Titled elsewhere', ODD)
    assert cleared.status_code == 409 and 'its title was removed since the page was shown' in unescape(cleared.text)
    assert heading(cleared.text) == ('alpha', None) and form_fields(cleared.text) == {'title': 'Mine three'}
    assert await titles(sessions) == {'alpha': None, 'beta': 'Mine', ODD: 'Titled elsewhere'}


# Guarded as every write is


async def test_a_rename_needs_a_page_of_this_server_and_the_token(sessions: str) -> None:
    with web_client(sessions, chat_model=ECHO) as client:
        for headers in (
            {},
            {'Origin': 'http://evil.example'},
            {'Origin': 'null'},
            {'Origin': 'http://127.0.0.1:9999'},
            {'Referer': 'http://evil.example/sessions/beta'},
        ):
            refused = rename(client, 'beta', 'Forged', expected=BETA, headers=headers)
            assert refused.status_code == 403, headers
    with web_client(sessions, chat_model=ECHO, token=TOKEN) as client:
        bearer = {'Authorization': f'Bearer {TOKEN}'}
        assert rename(client, 'beta', 'Forged', expected=BETA).status_code == 401
        assert rename(client, 'beta', 'Forged', expected=BETA, headers=bearer).status_code == 403
        assert (await titles(sessions))['beta'] == BETA
        allowed = rename(client, 'beta', 'With the token', expected=BETA, headers={**bearer, **SAME_ORIGIN})
    assert allowed.status_code == 303 and (await titles(sessions))['beta'] == 'With the token'


async def test_without_chat_a_rename_is_not_served_and_no_form_is_shown(sessions: str) -> None:
    """Without `--chat` the server is read-only (`serve` opens the store read-only): there is nothing to rename
    with, so one answer from any origin, as a chat gets."""
    with web_client(sessions, read_only=True) as client:
        for headers in ({}, SAME_ORIGIN, {'Origin': 'http://evil.example'}):
            response = rename(client, 'beta', 'Read-only?', expected=BETA, headers=headers)
            assert (response.status_code, response.json()) == (
                404,
                {'error': 'renaming is not enabled: start with --chat MODEL (create_app(chat_model=...) in code)'},
            ), headers
        page = client.get('/sessions/beta').text
    assert heading(page) == (BETA, 'beta') and 'rename-form' not in page
    assert (await titles(sessions))['beta'] == BETA


async def test_a_scoped_app_renames_only_its_own_sessions(sessions: str) -> None:
    with web_client(sessions, scope='user-1', chat_model=ECHO) as client:
        other = rename(client, 'beta', 'Not mine', expected=BETA)
        unknown = rename(client, 'nobody', 'Nobody', expected=None)
        own = rename(client, 'alpha', 'Mine', expected=HOSTILE_TITLE)
    assert other.status_code == 404 and 'No session' in other.text
    assert unknown.status_code == 404
    assert own.status_code == 303
    assert await titles(sessions) == {'alpha': 'Mine', 'beta': BETA, ODD: None}
