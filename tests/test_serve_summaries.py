"""`session-store serve --chat MODEL --summarizer MODEL [--trigger N] [--keep N]`: the browser chat is compacted.

The app `serve` runs (`served_app`, on a store opened as `serve` opens it) takes chat turns through `/api/chat`,
pydantic-ai's VercelAIAdapter over `store.conversations`; past the trigger its windows are summarized, each
summary stored as the next link of the chain, shown as a band on the session page, and holding what the
earlier prompts said. On SQLite and PostgreSQL; the options' checks through click's `CliRunner`.
"""

from __future__ import annotations

import httpx
from click.testing import CliRunner, Result

from session_store import SessionStore
from session_store._offline import HEADING
from session_store.cli import main
from session_store.cli._runtime import Settings
from session_store.cli._summarizer import KEEP, TRIGGER, summarizing
from session_store.cli.serve import served_app
from tests._cli import fails
from tests._web import ECHO, SAME_ORIGIN, sse_chunks, ui_message

TURNS = 12


def prompt(turn: int) -> str:
    return f'Where is my order ORDER-{1000 + turn}?'


async def test_serve_with_a_summarizer_stores_summaries_of_the_browser_chat(db_url: str) -> None:
    async with SessionStore(db_url):  # a new database, migrated, as `serve` expects one
        pass
    settings = Settings(url=db_url, named=True)
    processor = summarizing('test', 10, 4)
    async with (  # `--chat test`'s model without its pauses (by name: test_offline_models)
        served_app(settings, scope=None, token=None, chat_model=ECHO, processor=processor) as app,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://127.0.0.1') as client,
    ):
        for turn in range(TURNS):
            body = {'trigger': 'submit-message', 'id': 'web', 'messages': [ui_message(f'u{turn}', prompt(turn))]}
            response = await client.post('/api/chat', json=body, headers=SAME_ORIGIN)
            chunks = sse_chunks(response.text)
            assert response.status_code == 200 and not [c for c in chunks if c['type'] == 'error'], response.text
            answer = ''.join(c['delta'] for c in chunks if c['type'] == 'text-delta')
            assert answer == f'(test model, offline) You said: {prompt(turn)}'
        html = (await client.get('/sessions/web')).text
        api = (await client.get('/api/sessions/web')).json()

    async with SessionStore(db_url) as store:
        chain = await store.summaries('web')
        archived = await store.history('web')
    # The archive keeps every message; the chain is incremental, each link folding in only new messages.
    assert len(archived) == 2 * TURNS and api['message_count'] == 2 * TURNS
    assert len(chain) >= 2 and api['summary_count'] == len(chain)
    assert [s.covers_from for s in chain[1:]] == [s.covers_to for s in chain[:-1]]
    # The page shows a band per summary over the messages it covers.
    assert html.count('class="band band-') == len(chain) and 'Summary #1</span>' in html
    # What the summaries hold: every earlier prompt, not junk.
    last = chain[-1]
    assert last.text.startswith(HEADING) and 'success (no tool calls)' not in last.text
    for turn in range(last.covers_to // 2):
        assert f'User asked: {prompt(turn)}' in last.text


def test_the_summarizer_options_are_checked_in_one_line() -> None:
    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, ['--db', 'sqlite+aiosqlite:///unused.db', *args])

    fails(invoke('serve', '--summarizer', 'test'), '--summarizer needs --chat MODEL')
    fails(invoke('serve', '--chat', 'test', '--trigger', '20'), '--trigger only apply with --summarizer MODEL')
    fails(
        invoke('serve', '--chat', 'test', '--summarizer', 'test', '--keep', '8', '--trigger', '8'),
        '--keep (8) must be less than --trigger (8)',
    )
    fails(
        invoke('serve', '--chat', 'test', '--summarizer', 'test', '--trigger', '1'),
        '--trigger must be from 2 to 1,000,000,000; got 1.',
    )
    fails(invoke('chat', 'c', '--model', 'test', '--keep', '3'), '--keep only apply with --summarizer MODEL')
    fails(
        invoke('chat', 'c', '--model', 'test', '--summarizer', 'test', '--keep', str(TRIGGER)),
        f'--keep ({TRIGGER}) must be less than --trigger ({TRIGGER})',
    )
    assert (TRIGGER, KEEP) == (40, 12)


def test_chat_and_serve_summarize_with_the_same_defaults() -> None:
    processor = summarizing('test', None, None)
    assert processor is not None
    assert (processor.trigger, processor.keep) == (('messages', TRIGGER), ('messages', KEEP))
