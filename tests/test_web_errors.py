"""The browser view's answers to odd requests: an export of a non-ASCII id, an unknown branch, an offset out of range.

Each was a 500 or a misleading message: `/export/<id with 日本>` failed encoding its header in latin-1,
`?branch=99` said the session did not exist, `?offset=-5` said "between 0 and any". On SQLite and PostgreSQL.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest

from session_store import SessionExport, SessionStore
from testkit.scripted import ParallelToolAssistant, scripted_agent
from testkit.templates import NewDatabase
from tests._web import web_client

UNICODE_ID = '日本の注文 #7/β'


async def two_sessions(url: str) -> None:
    """`demo`, and a session whose id holds CJK characters, a space, `#` and `/`: one scripted turn each."""
    async with SessionStore(url) as store:
        for session_id in ('demo', UNICODE_ID):
            session = await store.session(session_id)
            await session.run(scripted_agent(ParallelToolAssistant()), 'Turn M1 about ORDER-1001')


@pytest.fixture
def sessions(new_database: NewDatabase) -> str:
    """A copy of the database `two_sessions` wrote once for the run."""
    return new_database(fill=two_sessions)


def test_an_export_of_a_non_ascii_id_downloads_under_its_own_name(sessions: str) -> None:
    with web_client(sessions) as client:
        response = client.get(f'/export/{quote(UNICODE_ID, safe="")}')
    assert response.status_code == 200
    disposition = response.headers['content-disposition']
    assert disposition.isascii()
    assert f"filename*=UTF-8''{quote(UNICODE_ID, safe='')}.jsonl" in disposition
    assert unquote(disposition.split("UTF-8''")[1]) == f'{UNICODE_ID}.jsonl'
    assert 'filename="_______7__.jsonl"' in disposition  # the ASCII stand-in for clients without filename*
    document = SessionExport.from_json_lines(response.text.splitlines())
    assert document.session_id == UNICODE_ID and len(document.messages) == 4


def test_an_unknown_branch_is_named(sessions: str) -> None:
    with web_client(sessions) as client:
        api = client.get('/api/sessions/demo?branch=99')
        page = client.get('/sessions/demo?branch=99')
    assert api.status_code == 404 and page.status_code == 404
    said = api.json()['error']
    assert said.startswith("Session 'demo' has no branch '99'; its branches' tips are ") and 'No session' not in said
    assert 'has no branch &#39;99&#39;' in page.text


@pytest.mark.parametrize(
    ('path', 'said'),
    [
        ('/api/sessions/demo?offset=-5', 'offset must be from 0 to 1,000,000,000; got -5.'),
        (
            '/api/sessions?offset=99999999999999999999',
            'offset must be from 0 to 1,000,000,000; got 99999999999999999999.',
        ),
        ('/api/sessions/demo?at=99999999999999999999', 'at must be from 0 to 1,000,000,000; got 99999999999999999999.'),
        ('/api/sessions/demo?limit=0', 'limit must be from 1 to 500; got 0.'),
    ],
)
def test_a_number_out_of_range_names_the_range(sessions: str, path: str, said: str) -> None:
    with web_client(sessions) as client:
        response = client.get(path)
    assert response.status_code == 400 and response.json() == {'error': said}
