"""The conformance suite (`session_store.conformance`, loaded by tests/conftest.py) on pydantic-ai's reference store
and on `SessionStore(...).conversations`: SQLite, PostgreSQL, PostgreSQL through PgBouncer in transaction mode, with
and without a store processor. The reference and SQLite's in-process checks run in the quick tier with a small
hypothesis budget; PostgreSQL, the pooler, the processor variants and the process-level checks in the slow tier.

With a processor, `load` hands back the processor's window (a sliding window here: the system prompt and the kept
tail once the trigger holds), not the whole history, and `read_history` of the head reads that window; saving
still appends to the whole archive. The checks that compare a loaded history with what was saved therefore
diverge, each declared with its reason and run as a strict xfail, so a check that stops diverging fails.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.conversation_store import ConversationStore, InMemoryConversationStore
from sqlalchemy.engine import make_url

from processors import SlidingWindowProcessor
from session_store import SessionStore
from session_store._db.engine import POOLER_PARAMETER
from session_store.conformance import ConformanceBackend, Factory, conformance_backend
from testkit.faults import PoolerUnavailable, pgbouncer
from testkit.postgres import drop_database, fresh_database, require_postgres
from tests._hypothesis import examples


def _quick(**declared: Any) -> Callable[[Factory], ConformanceBackend]:
    """A backend in the quick tier: a small hypothesis budget for the semantics state machine."""
    return conformance_backend(examples=examples(3), steps=12, **declared)


def _slow(**declared: Any) -> Callable[[Factory], ConformanceBackend]:
    """A backend in the slow tier, every check of it, with a larger budget."""
    return conformance_backend(examples=10, steps=20, marks=[pytest.mark.slow], **declared)


_WINDOW = {
    'semantics': 'load hands back the sliding window (8 messages, 4 kept), not the whole history the reference loads',
    'concurrency': "load hands back the window: a writer's history past the trigger is not what load returns",
    'concurrency_processes': 'load hands back the window, as in the in-process concurrency check',
    'atomicity': 'load hands back the window: a conversation saved past the trigger does not load as saved',
    'atomicity_killed_process': 'load hands back the window: the turns stored are not all loaded',
    'revisions': 'load hands back the window: the winning saves, past the trigger, load as its last 4 messages',
    'scopes': "branch(at=) counts the loaded window's messages, not the whole history's",
}
"""What a processor changes, check by check: durability and bad input compare store with store, or hold fewer
messages than its trigger, and pass."""


def _processor() -> SlidingWindowProcessor:
    return SlidingWindowProcessor(trigger=('messages', 8), keep=('messages', 4))


@conformance_backend(examples=examples(6), steps=15, erases=True)
def reference(folder: Path) -> ConversationStore:
    return InMemoryConversationStore()


@_quick(persistent=True, erases=True, process_marks=[pytest.mark.slow])
async def sqlite(folder: Path) -> AsyncIterator[ConversationStore]:
    async with SessionStore(f'sqlite+aiosqlite:///{folder}/sessions.db') as store:
        yield store.conversations


@_slow(persistent=True, erases=True, divergences=_WINDOW)
async def sqlite_window(folder: Path) -> AsyncIterator[ConversationStore]:
    async with SessionStore(f'sqlite+aiosqlite:///{folder}/sessions.db', processor=_processor()) as store:
        yield store.conversations


def _database(folder: Path, *, pooled: bool = False) -> str:
    """The URL of the PostgreSQL database holding `folder`'s data: made on first use (empty, so the store migrates
    it), kept in the folder, so a second store and a child process find the same one."""
    kept = folder / 'url'
    if not kept.exists():
        made = fresh_database(require_postgres())
        _MADE.append(made)
        kept.write_text(_through_pooler(made) if pooled else made)
    return kept.read_text()


_MADE: list[str] = []
"""The databases this process made, dropped when the module's tests are done."""
_POOLER = contextlib.ExitStack()
_POOLED: list[str] = []


@pytest.fixture(scope='module', autouse=True)
def _drop_databases_after() -> Iterator[None]:
    """Drop the databases the factories made, and stop the pooler, once this module's tests are done."""
    yield
    _POOLER.close()
    _POOLED.clear()
    while _MADE:
        drop_database(_MADE.pop())


def _through_pooler(url: str) -> str:
    """`url` through PgBouncer in transaction mode (started once, for this process, in front of the server)."""
    if not _POOLED:
        folder = Path(_POOLER.enter_context(tempfile.TemporaryDirectory(prefix='conformance-pgbouncer-')))
        try:
            _POOLED.append(_POOLER.enter_context(pgbouncer(require_postgres(), folder)))
        except PoolerUnavailable as error:  # a machine without it, outside CI
            pytest.skip(str(error))
    bouncer = make_url(_POOLED[0])
    return (
        make_url(url)
        .set(host=bouncer.host, port=bouncer.port)
        .update_query_dict({POOLER_PARAMETER: 'true'})
        .render_as_string(hide_password=False)
    )


@_slow(persistent=True, erases=True)
async def postgresql(folder: Path) -> AsyncIterator[ConversationStore]:
    async with SessionStore(_database(folder)) as store:
        yield store.conversations


@_slow(persistent=True, erases=True)
async def postgresql_pgbouncer(folder: Path) -> AsyncIterator[ConversationStore]:
    async with SessionStore(_database(folder, pooled=True)) as store:
        yield store.conversations


@_slow(persistent=True, erases=True, divergences=_WINDOW)
async def postgresql_window(folder: Path) -> AsyncIterator[ConversationStore]:
    async with SessionStore(_database(folder), processor=_processor()) as store:
        yield store.conversations
