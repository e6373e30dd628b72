"""The schema revision check on open, and the upgrade that makes or updates the schema.

The schema is made only by the alembic migrations, which ship inside this package as
`session_store.migrations` (in a checkout they live in the top-level `migrations/`, mapped there by
the packaging) and are found through `importlib.resources`. A new, empty database is migrated on
first open; one at an older revision is refused with the command that upgrades it; one at a revision
this version doesn't know (made by a newer session-store) is refused, unless the newer release stamped it safe for
this one to use.

The stamp (migration 0006's `schema_compatibility`): for a revision, `compatible_from`, the oldest revision a release
may run at and still use a database at it. An additive revision (expand) names an older one, so releases before it
keep opening the database while a rolling upgrade runs; one that takes away what they need (contract) names itself,
or writes no row. A release at revision H opens a database at a revision it doesn't know when the stamp of that
revision names H or a revision before it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import Connection, String, bindparam, column, inspect, select, table, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..errors import SchemaMismatch
from .backfills import fill_in
from .engine import SQLITE_BEGIN, in_memory
from .textual import textual

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

__all__ = (
    'SCHEMA_REVISION',
    'Stamp',
    'check_schema',
    'head_revision',
    'is_newer',
    'migrations_dir',
    'read_stamp',
    'upgrade',
)

_MIGRATIONS_PACKAGE = 'session_store.migrations'

_STAMPS = 'schema_compatibility'
"""The compatibility stamps' table (migration 0006): a row per revision that stamps one."""
_stamps = table(_STAMPS, column('revision', String), column('compatible_from', String))
_COMPATIBLE_FROM = select(_stamps.c.compatible_from).where(_stamps.c.revision == bindparam('revision'))

_files = ExitStack()


@cache
def migrations_dir() -> Path:
    """The alembic environment's directory, as a real path (alembic reads its scripts from files)."""
    return _files.enter_context(resources.as_file(resources.files(_MIGRATIONS_PACKAGE)))


def _config(connection: Connection | None = None) -> Config:
    # alembic is imported by what migrates or explains a revision, never by an open that finds `SCHEMA_REVISION`.
    from alembic.config import Config

    config = Config()
    config.set_main_option('script_location', str(migrations_dir()))
    config.attributes['connection'] = connection
    return config


@cache
def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    """The revision this version of session-store's schema is at."""
    head = _scripts().get_current_head()
    assert head is not None
    return head


@cache
def _known_revisions() -> frozenset[str]:
    return frozenset(script.revision for script in _scripts().walk_revisions())


def is_newer(revision: str | None) -> bool:
    """Whether a database's revision is one this version doesn't know: a newer session-store's."""
    return revision is not None and revision not in _known_revisions()


def _state(connection: Connection) -> tuple[str | None, bool, str | None]:
    """The database's revision, whether it has any tables at all, and the revision its stamp says releases may run at
    to use it (`None` when it has no stamp for its revision)."""
    from alembic.runtime.migration import MigrationContext

    revision = MigrationContext.configure(connection).get_current_revision()
    tables = inspect(connection).get_table_names()
    compatible_from = None
    if revision is not None and _STAMPS in tables:
        compatible_from = connection.execute(_COMPATIBLE_FROM, {'revision': revision}).scalar()
    return revision, bool(tables), compatible_from


def _usable(revision: str | None, compatible_from: str | None) -> bool:
    """Whether this version may use a database at `revision` whose stamp says `compatible_from`: its own revision,
    or a newer one stamped safe for this version's revision or one before it."""
    if revision == head_revision():
        return True
    return is_newer(revision) and compatible_from is not None and compatible_from in _known_revisions()


_MIGRATION_LOCK = 7_240_331
"""The PostgreSQL advisory lock key that serializes session-store migrations."""


async def upgrade(engine: AsyncEngine) -> None:
    """Bring the schema to `head_revision()`, safely when several processes try at once (see `_migrating`), then
    finish what the revisions leave for after their commit (`fill_in`), also on a database already at it.

    Raises:
        SchemaMismatch: A newer session-store migrated the database past what this one knows, and said nothing
            of this one being able to use it.
    """
    async with _migrating(engine) as connection:
        await connection.run_sync(_upgrade)
    await fill_in(engine)


def _upgrade(connection: Connection) -> None:
    from alembic import command

    revision, _, compatible_from = _state(connection)
    if _usable(revision, compatible_from):
        return  # at this version's revision, or a newer one stamped safe for it: nothing to do
    if revision is not None and revision not in _known_revisions():
        raise _newer(connection.engine.url, revision)
    command.upgrade(_config(connection), 'head')


def _newer(url: URL, revision: str) -> SchemaMismatch:
    """The refusal of a database at `revision`, which a newer session-store wrote."""
    shown = url.render_as_string(hide_password=True)
    return SchemaMismatch(
        f'The database at {shown} is at schema revision {revision}, which this version of session-store does not '
        f'know (it expects {head_revision()}): a newer session-store wrote it. Upgrade session-store to open it.'
    )


@asynccontextmanager
async def _migrating(engine: AsyncEngine, *, reading: bool = False) -> AsyncIterator[AsyncConnection]:
    """One transaction holding the migration lock: SQLite's write lock, taken IMMEDIATE, or a PostgreSQL advisory
    lock. A second process waits for the first to commit, then reads the schema it made.

    `reading` only reads the schema: on PostgreSQL it takes the lock shared, so it waits for a migration under way
    to commit but not for other readers; on SQLite a deferred transaction's one snapshot shows the schema whole
    (a migration is one transaction), without the write lock a read-only store may not take.
    """
    async with engine.connect() as connection:
        if engine.dialect.name == 'sqlite' and not reading:
            connection = await connection.execution_options(**{SQLITE_BEGIN: 'IMMEDIATE'})
        async with connection.begin():
            if engine.dialect.name == 'postgresql':
                lock = 'pg_advisory_xact_lock_shared' if reading else 'pg_advisory_xact_lock'
                await connection.execute(text(f'SELECT {lock}(:key)'), {'key': _MIGRATION_LOCK})
            yield connection


async def revision(engine: AsyncEngine) -> str | None:
    """The database's schema revision; `None` if it has none (empty, or not a session-store database)."""
    async with engine.connect() as connection:
        return (await connection.run_sync(_state))[0]


SCHEMA_REVISION = '0007'
"""The head revision of the migrations this version ships (a test holds it to them): an open that finds the
database at it, or at a newer one stamped safe for it, reads one row, without loading the migration scripts."""
_versions = table('alembic_version', column('version_num', String))
_VERSION = textual(
    select(
        _versions.c.version_num,
        select(_stamps.c.compatible_from)
        .where(_stamps.c.revision == _versions.c.version_num)
        .scalar_subquery()
        .label('compatible_from'),
    )
)
"""The revision and its stamp, in one statement, as text (`textual`): every store reads it once, on its first call."""


class Stamp(NamedTuple):
    """What a database says of its schema: alembic's revision, and the oldest revision a release may run at to use
    it (`None` without a stamp for that revision)."""

    revision: str | None
    compatible_from: str | None

    @property
    def current(self) -> bool:
        """Whether this version may use the database as it is, known without loading a migration script: it is at
        `SCHEMA_REVISION`, or stamped safe for it."""
        return SCHEMA_REVISION in (self.revision, self.compatible_from)


def read_stamp(connection: Connection) -> Stamp | None:
    """The database's revision with its stamp; `None` when they can't be read (no schema, or one from before
    stamps: the full check in `check_schema` then says what to do)."""
    try:
        found = connection.execute(_VERSION).first()
    except DBAPIError:
        return None
    return None if found is None else Stamp(*found)


async def check_schema(engine: AsyncEngine, url: URL, *, migrate_empty: bool = True) -> None:
    """Migrate an empty database; refuse one at any other revision than ours (but a newer one stamped safe for
    ours), saying what to do.

    The revision and the tables are read under the migration lock (with `migrate_empty`, in the transaction that
    migrates): several processes opening one empty database at once find it either empty (the first, which
    migrates) or migrated (the others, once it committed), never half-made; one that may not migrate waits for a
    migration under way and then opens.
    """
    if migrate_empty:
        async with _migrating(engine) as connection:
            revision, has_tables, compatible_from = await connection.run_sync(_state)
            made = revision is None and not has_tables
            if made:
                await connection.run_sync(_upgrade)
        if made:
            await fill_in(engine)
            return
    else:
        # Under the lock too: read without it, the revision and the tables could straddle another process's
        # migration committing (no revision yet, then its tables), and a migrated database be called a foreign one.
        async with _migrating(engine, reading=True) as connection:
            revision, has_tables, compatible_from = await connection.run_sync(_state)
    head = head_revision()
    shown = url.render_as_string(hide_password=True)
    if _usable(revision, compatible_from):
        return
    if revision is None and not has_tables:
        if in_memory(url):
            raise SchemaMismatch(
                'An in-memory SQLite database starts empty with every connection, so there is nothing to read. '
                'Name a database file or server instead.'
            )
        raise SchemaMismatch(
            f'The database at {shown} is empty. Make its schema with `await store.migrate()` or '
            f'`session-store migrate --db {shown}`.'
        )
    if revision is None:
        raise SchemaMismatch(
            f'The database at {shown} has tables but no session-store schema revision; it is not a session-store '
            'database, or it predates migrations. Point the store at another database.'
        )
    if revision in _known_revisions():
        raise SchemaMismatch(
            f'The database at {shown} is at schema revision {revision}, older than {head}. Upgrade it with '
            f'`await store.migrate()` or `session-store migrate --db {shown}`, then open it again.'
        )
    raise _newer(url, revision)
