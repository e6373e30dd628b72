"""Fixtures: a fresh database on each backend, a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from session_store import SessionStore
from session_store.cli import _runtime
from testkit.postgres import PostgresUnavailable, drop_database, fresh_database, require_postgres


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`@pytest.mark.slow_on_postgresql`: a test's PostgreSQL variant joins the slow tier; SQLite's stays quick."""
    for item in items:
        callspec = getattr(item, 'callspec', None)
        on_postgresql = callspec is not None and callspec.params.get('new_database') == 'postgresql'
        if on_postgresql and item.get_closest_marker('slow_on_postgresql') is not None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(params=['sqlite', 'postgresql'])
def new_database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> object:
    """Makes URLs of new, empty databases on one backend: SQLite files, or databases on a real PostgreSQL server.

    Without a server, PostgreSQL cases are skipped locally; under CI they fail.
    """
    made: list[str] = []
    if request.param == 'sqlite':
        yield lambda: f'sqlite+aiosqlite:///{tmp_path_factory.mktemp("db") / "sessions.db"}'
        return
    try:
        server = require_postgres()
    except PostgresUnavailable as error:
        pytest.skip(str(error))

    def create() -> str:
        made.append(fresh_database(server))
        return made[-1]

    yield create
    for url in made:
        drop_database(url)


@pytest.fixture
def db_url(new_database: Callable[[], str]) -> str:
    """A URL to a new, empty database on the backend under test."""
    return new_database()


@pytest.fixture
async def store_factory(db_url: str) -> AsyncIterator[Callable[..., SessionStore]]:
    """Opens stores on the test's database, closing them all at the end."""
    opened: list[SessionStore] = []

    def open_store(**kwargs: object) -> SessionStore:
        store = SessionStore(db_url, **kwargs)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        await store.close()


@pytest.fixture
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich wraps at 80 columns off a terminal; keep CLI lines whole for the assertions."""
    for console in (_runtime.out, _runtime.err):
        monkeypatch.setattr(console, '_width', 200)
