"""Edit in a real headless Chromium (issue 27): the first message of the summarized demo session edited on its
page, then the archive and the page checked; and a page left open while the session moved, whose resend the page
reports as what the store did with it (appended), not as the edit it meant.

Setup as in `tests/test_web_browser.py` (the system's Chromium through Playwright, skipped without one except
under CI), with a server of this module's own, `session-store serve --chat test --summarizer test`, on a demo
session of its own: these tests move the session's active path. Set `SESSION_STORE_WEB_EDIT_SCREENSHOT` to a path
to keep the screenshot of the page after the edit.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from session_store import SessionStore
from session_store.results import Branch
from tests.test_web_browser import CHROMIUM_FLAGS, chromium, environment, free_port

pytestmark = pytest.mark.slow

T = TypeVar('T')
SCREENSHOT_ENV = 'SESSION_STORE_WEB_EDIT_SCREENSHOT'
ANSWER = '(test model, offline) You said: '


def in_a_thread(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`work()` run to its end on an event loop of its own: Playwright's sync API keeps one running in this thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(work())).result()


class Served:
    def __init__(self, base: str, db: str) -> None:
        self.base = base
        self.db = db

    def read(self, session_id: str) -> tuple[list[ModelMessage], list[Branch], int]:
        """The session's active path, its branches and its summaries' count, read from the archive itself."""

        async def read() -> tuple[list[ModelMessage], list[Branch], int]:
            async with SessionStore(self.db) as store:
                session = await store.session(session_id)
                return await store.history(session_id), await session.branches(), len(await store.summaries(session_id))

        return in_a_thread(read)

    def history(self, session_id: str, branch: str) -> list[ModelMessage]:
        async def read() -> list[ModelMessage]:
            async with SessionStore(self.db) as store:
                return await store.history(session_id, branch=branch)

        return in_a_thread(read)

    def chat(self, session_id: str, message_id: str, text: str) -> None:
        """One chat turn through `POST /api/chat`, as another tab would send it."""
        body = {'trigger': 'submit-message', 'id': session_id, 'messages': [user(message_id, text)]}
        request = urllib.request.Request(
            f'{self.base}/api/chat',
            data=json.dumps(body).encode(),
            headers={'Content-Type': 'application/json', 'Origin': self.base},
            method='POST',
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            stream = answer.read().decode()
        assert '"type":"data-conversation-saved"' in stream.replace(' ', ''), stream


def user(message_id: str, text: str) -> dict[str, Any]:
    return {'id': message_id, 'role': 'user', 'parts': [{'type': 'text', 'text': text}]}


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str)
    ]


@pytest.fixture(scope='module')
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`session-store serve --chat test --summarizer test` on a 30-turn demo session; its base URL and database."""
    folder = tmp_path_factory.mktemp('web-edit')
    db = f'sqlite+aiosqlite:///{folder / "sessions.db"}'
    command = [sys.executable, '-m', 'session_store.cli']
    demo = subprocess.run(
        [*command, 'demo', '--turns', '30', '--db', db],
        cwd=folder,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stderr

    async def copy() -> None:  # a second session with the same history, summaries and no UI message ids
        async with SessionStore(db) as store:
            await store.fork('demo', at=120, new_session_id='regen', scope='demo')

    in_a_thread(copy)
    port = free_port()
    process = subprocess.Popen(
        [*command, 'serve', '--db', db, '--port', str(port), '--chat', 'test', '--summarizer', 'test'],
        cwd=folder,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f'http://127.0.0.1:{port}'
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f'{base}/api/sessions', timeout=2) as answer:
                    assert answer.status == 200
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f'serve did not start: {process.communicate(timeout=5)}') from None
                time.sleep(0.2)
        yield Served(base, db)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope='module')
def browser(served: Served) -> Iterator[Browser]:
    executable = chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            launched.close()


def new_page(browser: Browser, errors: list[str]) -> Page:
    context = browser.new_context(viewport={'width': 1200, 'height': 1000})
    opened = context.new_page()
    opened.on('pageerror', lambda error: errors.append(str(error)))
    opened.on('console', lambda message: errors.append(message.text) if message.type == 'error' else None)
    return opened


@pytest.fixture
def errors() -> Iterator[list[str]]:
    """What the pages' scripts reported: nothing, by the end of the test (no script error, no resource refused)."""
    found: list[str] = []
    yield found
    assert found == [], found


def test_edit_the_first_message_of_a_summarized_session(
    served: Served, browser: Browser, errors: list[str], tmp_path: Path
) -> None:
    before, branches_before, summarized = served.read('demo')
    assert summarized >= 2 and len(before) == 120 and len(branches_before) == 1
    page = new_page(browser, errors)
    page.goto(f'{served.base}/sessions/demo?offset=0')
    first = page.locator('#m0')
    # Stored by Session.run, so it has no UI message id: its buttons resend it under its entry id.
    assert first.get_attribute('data-ui-id') is None
    entry_id = first.get_attribute('data-entry-id')
    assert entry_id and first.locator('.actions').get_attribute('data-message-id') == entry_id
    assert 'role-user' in (first.get_attribute('class') or '') and 'covered' in (first.get_attribute('class') or '')

    edited = 'Where is ORDER-2000? (edited on the page)'
    first.locator('button.edit').click()
    box = first.locator('.edit-box textarea')
    assert box.input_value() == prompts(before[:1])[0]
    box.fill(edited)
    first.locator('.edit-box button', has_text='Send edit').click()
    note = page.locator('#live .note.resend:not([data-outcome="pending"])')
    note.wait_for(timeout=30_000)

    # The archive: the active path starts with the edited prompt; the old path, whole, is a branch.
    after, branches, _ = served.read('demo')
    assert prompts(after) == [edited] and len(after) == 2
    (new,) = [b for b in branches if b.active]
    (old,) = [b for b in branches if not b.active]
    assert new.forked_at is None and new.message_count == 2 and old.message_count == 120
    assert served.history('demo', old.tip) == before

    # The page: the edited turn, answered and stored, and a note saying what the store did.
    assert note.get_attribute('data-outcome') == 'branched' and note.get_attribute('data-stale') == 'false'
    assert note.inner_text().startswith(
        f'Edited #0: the store started branch {new.number} from the start, now the active path (2 messages); '
        f'the turns it replaced stay on branch {old.number} (120 messages).'
    )
    live = page.locator('#live')
    assert live.locator('.msg.role-user .text').last.inner_text() == edited
    answer = live.locator('.msg.role-assistant[data-state="saved"] .part.assistant .text')
    assert answer.inner_text() == ANSWER + edited
    # What the page showed above is the path left behind now: greyed out, without buttons.
    assert page.locator('#conversation .msg.replaced').count() == page.locator('#conversation .msg').count()
    assert page.locator('#conversation .msg .actions').count() == 0
    shot = tmp_path / 'edited.png'
    page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    if target := os.environ.get(SCREENSHOT_ENV):
        shutil.copyfile(shot, target)

    # The note's link shows the edited turn in the stored conversation, with both branches to choose from.
    note.locator('a').click()
    page.wait_for_url(f'{served.base}/sessions/demo?at=0#m0')
    assert edited in page.locator('#m0').inner_text() and ANSWER + edited in page.locator('#m1').inner_text()
    options = page.locator('#branch-select option').all_inner_texts()
    assert len(options) == 2 and sum('(active)' in option for option in options) == 1
    page.context.close()


def test_regenerate_an_old_summarized_answer(served: Served, browser: Browser, errors: list[str]) -> None:
    before, _, summarized = served.read('regen')
    assert summarized >= 2 and len(before) == 120
    page = new_page(browser, errors)
    page.goto(f'{served.base}/sessions/regen?offset=0')
    second = page.locator('#m4')
    assert 'covered' in (second.get_attribute('class') or '') and second.get_attribute('data-ui-id') is None
    second.locator('button.regenerate').click()
    note = page.locator('#live .note.resend:not([data-outcome="pending"])')
    note.wait_for(timeout=30_000)
    after, branches, _ = served.read('regen')
    (new,) = [b for b in branches if b.active]
    (old,) = [b for b in branches if not b.active]
    assert after[:4] == before[:4] and prompts(after) == prompts(before)[:2] and len(after) == 6
    assert new.forked_at == 4 and served.history('regen', old.tip) == before
    assert note.get_attribute('data-outcome') == 'branched'
    assert note.inner_text().startswith(
        f'Answered #4 again: the store started branch {new.number} at #4, now the active path (6 messages); '
        f'the answer it replaced stays on branch {old.number} (120 messages).'
    )
    answer = page.locator('#live .msg.role-assistant[data-state="saved"] .part.assistant .text')
    assert answer.inner_text() == ANSWER + prompts(before)[1]
    # #0 to #3 are still on the active path, with their buttons; #4 on are on the branch left.
    assert page.locator('#conversation .msg.replaced').first.get_attribute('data-position') == '4'
    assert page.locator('#m0 .actions').count() == 1 and page.locator('#m4 .actions').count() == 0
    page.context.close()


def test_a_page_left_open_says_what_the_store_did_with_what_it_could_not_replace(
    served: Served, browser: Browser, errors: list[str]
) -> None:
    for turn in range(2):
        served.chat('stale', f's{turn}', f'Where is ORDER-30{turn}?')
    page = new_page(browser, errors)
    page.goto(f'{served.base}/sessions/stale')
    assert page.locator('#m2 .actions').get_attribute('data-message-id') == 's1'
    # Another tab edits the first message: the page's #1 to #3 are no longer on the active path.
    served.chat('stale', 's0', 'Where is ORDER-300, really?')
    moved, _, _ = served.read('stale')
    notes = page.locator('#live .note.resend:not([data-outcome="pending"])')

    # Regenerate #2: the store refuses it (the active path holds no such message) and stores nothing.
    page.locator('#m2 button.regenerate').click()
    notes.first.wait_for(timeout=30_000)
    assert (
        notes.first.get_attribute('data-outcome') == 'unchanged' and notes.first.get_attribute('data-stale') == 'true'
    )
    assert notes.first.inner_text() == (
        'This page was out of date: the session had changed since it was shown. '
        'Nothing was stored: the session is as it was before #2 was sent again.'
    )
    status = page.locator('#live .msg.role-assistant[data-state="failed"] .status')
    assert "The message to regenerate ('s1') is not in the stored conversation" in status.inner_text()
    assert served.read('stale')[0] == moved

    # Edit #2: the store appends it (nothing to replace); the page knows the session as it now is.
    page.locator('#m2 button.edit').click()
    page.locator('#m2 .edit-box textarea').fill('Where is ORDER-301, from the stale page?')
    page.locator('#m2 .edit-box button', has_text='Send edit').click()
    appended = notes.nth(1)
    appended.wait_for(timeout=30_000)
    after, branches, _ = served.read('stale')
    assert prompts(after) == ['Where is ORDER-300, really?', 'Where is ORDER-301, from the stale page?']
    assert after[:2] == moved and len(branches) == 2
    assert appended.get_attribute('data-outcome') == 'appended' and appended.get_attribute('data-stale') == 'false'
    assert appended.inner_text().startswith(
        'The store did not replace #2: it appended the edited message as a new turn at #2, on the same path, '
        'and no branch was made.'
    )
    assert page.locator('#conversation .msg.replaced').count() == 0
    page.context.close()
