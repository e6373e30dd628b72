"""Fixtures: a new database on each backend, a real SQLite file and a real PostgreSQL server.

Migrated (copied from one template per backend and run) unless a test asks for an empty one.
"""

from __future__ import annotations

import tests._bytecode  # noqa: F401  (first: the modules imported below are compiled once, not per worker)

# isort: split
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from hypothesis import settings
from sqlalchemy.engine import make_url

from session_store import SessionStore
from session_store._db.engine import POOLER_PARAMETER
from session_store.cli import _runtime
from testkit.faults import OwnServer, PoolerUnavailable, own_server, pgbouncer
from testkit.postgres import PostgresUnavailable, fresh_database, require_postgres, share_with_child_processes
from testkit.templates import Fill, NewDatabase, Templates
from tests._hypothesis import QUICK, leaves_out_the_slow_tier

pytest_plugins = ['session_store.conformance', 'tests._tier', 'pytester']


def pytest_configure(config: pytest.Config) -> None:
    """A run that leaves the slow tier out runs each property test on its quick budget (`tests/_hypothesis.py`).

    The run's PostgreSQL server is found or started here, once, in the process that starts xdist's workers (or
    runs the tests itself), before any test runs: the workers inherit its URL. Started by a worker's first
    PostgreSQL test instead, its `initdb` and `pg_ctl` would fail that test under the quick tier's process guard
    (`tests/_tier.py`), and each worker would run a server of its own.
    """
    if leaves_out_the_slow_tier(config.option.markexpr):
        settings.load_profile(QUICK)
    if not hasattr(config, 'workerinput'):
        share_with_child_processes()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's default) starts one worker more than there are cores: a test waits on a database
    server, a subprocess or a socket for part of its time, and the extra worker keeps the cores busy then (the
    quick tier here on 2 cores: 143 s with 2 workers, 134 s with 3, 136 s with 4)."""
    return (os.cpu_count() or 1) + 1


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test on a database runs on each backend; `@pytest.mark.through_pooler` adds PostgreSQL through PgBouncer
    in transaction mode."""
    chosen = any('new_database' in str(mark.args[0]) for mark in metafunc.definition.iter_markers('parametrize'))
    if 'new_database' in metafunc.fixturenames and not chosen:  # a test may name its backends itself
        pooled = metafunc.definition.get_closest_marker('through_pooler') is not None
        metafunc.parametrize('new_database', [*BACKENDS, POOLED] if pooled else BACKENDS, indirect=True)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`@pytest.mark.slow_on_postgresql`: a test's PostgreSQL variant joins the slow tier; SQLite's stays quick.
    A variant through the pooler is in the slow tier too."""
    for item in items:
        callspec = getattr(item, 'callspec', None)
        backend = None if callspec is None else callspec.params.get('new_database')
        if backend == POOLED or (backend == 'postgresql' and item.get_closest_marker('slow_on_postgresql')):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope='session')
def templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    """This run's migrated template per backend (made when first asked for), dropped at the end."""
    made = Templates(tmp_path_factory.mktemp('template'))
    yield made
    made.close()


BACKENDS = ('sqlite', 'postgresql')
POOLED = 'postgresql-pgbouncer'
"""PostgreSQL through PgBouncer in transaction mode, the store told so (`?transaction_pooler=true`)."""


@pytest.fixture(scope='session')
def pooler() -> Iterator[Callable[[str], str]]:
    """PgBouncer in transaction mode in front of the test server, started once for the run: the URL of a
    database through it, for the URL of one on the server."""
    server = require_postgres()
    root = Path(tempfile.mkdtemp(prefix='session-store-pgbouncer-'))
    try:
        with ExitStack() as stack:
            try:
                bouncer = make_url(stack.enter_context(pgbouncer(server, root)))
            except PoolerUnavailable as error:  # a machine without it, outside CI
                pytest.skip(str(error))

            def pooled(url: str) -> str:
                direct = make_url(url)
                return (
                    direct.set(host=bouncer.host, port=bouncer.port)
                    .update_query_dict({POOLER_PARAMETER: 'true'})
                    .render_as_string(hide_password=False)
                )

            yield pooled
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def new_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, templates: Templates
) -> Iterator[NewDatabase]:
    """Makes URLs of new databases on one backend: SQLite files, or databases on a real PostgreSQL server.

    Each is at this version's schema (a copy of the run's migrated template), or with ``empty=True`` holds
    nothing at all, for a test of migrating or of refusing an unmigrated database. ``fill=`` a module-level
    coroutine function of a URL gives a copy of a template that it wrote into once for the run. Without a server,
    PostgreSQL cases are skipped locally; under CI they fail.
    """
    if request.param == 'sqlite':

        def create_file(*, empty: bool = False, fill: Fill | None = None) -> str:
            path = tmp_path_factory.mktemp('db') / 'sessions.db'
            if not empty:
                templates.sqlite_copy(path, fill)
            elif fill is not None:
                raise ValueError('an empty database holds nothing to fill')
            return f'sqlite+aiosqlite:///{path}'

        yield create_file
        return
    try:
        server = require_postgres()
    except PostgresUnavailable as error:
        pytest.skip(str(error))
    made: list[str] = []
    through: Callable[[str], str] = request.getfixturevalue('pooler') if request.param == POOLED else str

    def create(*, empty: bool = False, fill: Fill | None = None) -> str:
        if empty and fill is not None:
            raise ValueError('an empty database holds nothing to fill')
        made.append(fresh_database(server) if empty else templates.postgresql_copy(server, fill))
        return through(made[-1])

    yield create
    for url in made:
        templates.drop_later(url)


@pytest.fixture
def db_url(new_database: NewDatabase) -> str:
    """A URL to a new database at this version's schema, holding no sessions, on the backend under test."""
    return new_database()


@pytest.fixture
def empty_db_url(new_database: NewDatabase) -> str:
    """A URL to a new, empty database (no schema at all) on the backend under test."""
    return new_database(empty=True)


def _stores(url: str) -> tuple[Callable[..., SessionStore], Callable[[], Awaitable[None]]]:
    opened: list[SessionStore] = []

    def open_store(**kwargs: object) -> SessionStore:
        store = SessionStore(url, **kwargs)  # type: ignore[arg-type]
        opened.append(store)
        return store

    async def close() -> None:
        for store in opened:
            await store.close()

    return open_store, close


@pytest.fixture
async def store_factory(db_url: str) -> AsyncIterator[Callable[..., SessionStore]]:
    """Opens stores on the test's migrated database (`db_url`), closing them all at the end."""
    open_store, close = _stores(db_url)
    yield open_store
    await close()


@pytest.fixture
async def empty_store_factory(empty_db_url: str) -> AsyncIterator[Callable[..., SessionStore]]:
    """Opens stores on the test's empty database (`empty_db_url`), closing them all at the end."""
    open_store, close = _stores(empty_db_url)
    yield open_store
    await close()


@pytest.fixture
def server() -> Iterator[OwnServer]:
    """A PostgreSQL server of this test's own, to restart and reconfigure; skipped without one (failed under CI)."""
    try:
        with own_server() as own:
            yield own
    except PostgresUnavailable as error:
        if os.environ.get('CI'):
            raise
        pytest.skip(str(error))


@pytest.fixture
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich wraps at 80 columns off a terminal; keep CLI lines whole for the assertions."""
    for console in (_runtime.out, _runtime.err):
        monkeypatch.setattr(console, '_width', 200)
