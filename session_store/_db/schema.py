"""The schema revision check on open, and the upgrade that makes or updates the schema.

The schema is made only by the alembic migrations, which ship inside this package as
`session_store.migrations` (in a checkout they live in the top-level `migrations/`, mapped there by
the packaging) and are found through `importlib.resources`. A new, empty database is migrated on
first open; one at an older revision is refused with the command that upgrades it; one at a revision
this version doesn't know (made by a newer session-store) is refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, String, column, inspect, select, table, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..errors import SchemaMismatch
from .engine import SQLITE_BEGIN, in_memory
from .textual import textual

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

__all__ = ('SCHEMA_REVISION', 'check_schema', 'head_revision', 'migrations_dir', 'stamped_revision', 'upgrade')

_MIGRATIONS_PACKAGE = 'session_store.migrations'

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


def _state(connection: Connection) -> tuple[str | None, bool]:
    """The database's revision, and whether it has any tables at all."""
    from alembic.runtime.migration import MigrationContext

    revision = MigrationContext.configure(connection).get_current_revision()
    return revision, bool(inspect(connection).get_table_names())


_MIGRATION_LOCK = 7_240_331
"""The PostgreSQL advisory lock key that serializes session-store migrations."""


async def upgrade(engine: AsyncEngine) -> None:
    """Bring the schema to `head_revision()`, safely when several processes try at once (see `_migrating`)."""
    async with _migrating(engine) as connection:
        await connection.run_sync(_upgrade)


def _upgrade(connection: Connection) -> None:
    from alembic import command

    command.upgrade(_config(connection), 'head')


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


SCHEMA_REVISION = '0006'
"""The head revision of the migrations this version ships (a test holds it to them): an open that finds the
database at it reads one row, without loading the migration scripts."""
_VERSION = textual(select(column('version_num', String)).select_from(table('alembic_version')))
"""The stamp's read, as text (`textual`): every store reads it once, on its first call."""


def stamped_revision(connection: Connection) -> str | None:
    """The revision alembic stamped the database with; `None` when it has no stamp (or can't be read: the full
    check in `check_schema` then says why)."""
    try:
        return connection.execute(_VERSION).scalar()
    except DBAPIError:
        return None


async def check_schema(engine: AsyncEngine, url: URL, *, migrate_empty: bool = True) -> None:
    """Migrate an empty database; refuse one at any other revision than ours, saying what to do.

    The revision and the tables are read under the migration lock (with `migrate_empty`, in the transaction that
    migrates): several processes opening one empty database at once find it either empty (the first, which
    migrates) or migrated (the others, once it committed), never half-made; one that may not migrate waits for a
    migration under way and then opens.
    """
    if migrate_empty:
        async with _migrating(engine) as connection:
            revision, has_tables = await connection.run_sync(_state)
            if revision is None and not has_tables:
                await connection.run_sync(_upgrade)
                return
    else:
        # Under the lock too: read without it, the revision and the tables could straddle another process's
        # migration committing (no revision yet, then its tables), and a migrated database be called a foreign one.
        async with _migrating(engine, reading=True) as connection:
            revision, has_tables = await connection.run_sync(_state)
    head = head_revision()
    shown = url.render_as_string(hide_password=True)
    if revision == head:
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
    raise SchemaMismatch(
        f'The database at {shown} is at schema revision {revision}, which this version of session-store does not '
        f'know (it expects {head}): a newer session-store wrote it. Upgrade session-store to open it.'
    )
