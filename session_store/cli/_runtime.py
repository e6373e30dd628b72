"""What every command shares: its settings, its consoles, opening the store, and the one place errors become a line.

Anything a user can cause or fix (an unknown session, a bad URL, a database that needs migrating or
can't be opened, a server that doesn't answer, a missing provider key) ends the command with exit
code 1 and one line on stderr, never a traceback: see `run`.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from functools import update_wrapper
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import click
from rich.console import Console
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError

from .._db._urls import hosts_in_query
from .._db.database import Database
from .._db.engine import sqlite_path
from .._db.opening import database_at
from ..encryption import Encryption
from ..errors import StoreError
from ._app import ENV_URL, Failure, Options

if TYPE_CHECKING:
    from ..store import SessionStore, WindowProcessor

__all__ = (
    'ENV_URL',
    'Access',
    'Failure',
    'Settings',
    'err',
    'explained',
    'open_store',
    'out',
    'pass_settings',
    'read',
    'review',
    'run',
)

T = TypeVar('T')

_DRIVERS = ('aiosqlite', 'asyncpg')
"""The database drivers a store may need: an error importing one is the database's, not a model's."""

out = Console(highlight=False, emoji=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, emoji=False, soft_wrap=True)

Access = Literal['read', 'write', 'create']
"""How a command opens the store: only to read it; to change an existing one; or making it if new."""


@dataclass
class Settings(Options):
    """What every subcommand shares: the group's options, and what is done with them (keys, URLs, commands)."""

    def encryption(self) -> Encryption | None:
        """The keys the store is opened with; a line saying what is wrong with them if they can't be read."""
        try:
            return Encryption.from_file(self.key_file) if self.key_file is not None else Encryption.from_env()
        except (ValueError, ImportError) as error:
            raise Failure(str(error)) from None

    @property
    def shown_url(self) -> str:
        """The URL without its password, for messages."""
        parsed = self._parsed()
        return self.url if parsed is None else parsed.render_as_string(hide_password=True)

    @property
    def secret(self) -> bool:
        """The URL holds a password, which suggested commands must not print."""
        parsed = self._parsed()
        return parsed is not None and parsed.password is not None

    def _parsed(self) -> URL | None:
        """The URL as SQLAlchemy reads it, libpq's several hosts in its address moved to its query as the store
        moves them; `None` when it is no URL (a file's path, or one the store refuses with its own message)."""
        try:
            return make_url(hosts_in_query(self.url))
        except (ArgumentError, ValueError):
            return None

    def command(self, *words: str) -> str:
        """A `session-store` command line that reaches this same database.

        A URL given as --db is repeated, unless it holds a password: then the command relies on
        $SESSION_STORE_URL, and the caller says so (see `env_note`). A --key-file given is repeated too.
        """
        line = ['session-store', *words]
        if self.named and not self.secret:
            line += ['--db', self.url]
        if self.key_file is not None:
            line += ['--key-file', self.key_file]
        return shlex.join(line)

    @property
    def env_note(self) -> str | None:
        """What to set before running suggested commands that could not name the database."""
        if self.named and self.secret:
            return f'(set ${ENV_URL} to your database URL first: these commands leave out its password)'
        return None


def pass_settings(command: Callable[..., T]) -> Callable[..., T]:
    """Give a command's callback the `Settings` of the options the group and the command parsed, as its first
    argument (as `click.make_pass_decorator` would, from the group's light `Options`)."""

    def with_settings(*args: Any, **kwargs: Any) -> T:
        context = click.get_current_context()
        settings = Settings(**asdict(context.ensure_object(Options)))
        return context.invoke(command, settings, *args, **kwargs)

    return update_wrapper(with_settings, command)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _loaded(module: str, *names: str, also: tuple[type[BaseException], ...] = ()) -> tuple[type[BaseException], ...]:
    """The exception classes `names` of `module` if it was imported (else none), after those `also`.

    An exception of one of them can only have been raised if its module was imported: the review commands, which
    import neither pydantic-ai nor alembic, map errors without importing them.
    """
    found = sys.modules.get(module)
    return also if found is None else (*also, *(getattr(found, name) for name in names))


def run(settings: Settings, work: Coroutine[Any, Any, T]) -> T:
    """Run a subcommand's async body, turning every failure the user can cause or fix into one line and exit 1.

    This is the only place errors are mapped, so every subcommand fails the same way. Anything not
    listed here is a bug in session-store and keeps its traceback.
    """
    try:
        return asyncio.run(work)
    except click.ClickException:
        raise
    except _loaded('pydantic_ai.conversation_store', 'ConversationConflict', also=(StoreError,)) as error:
        # SessionNotFound, SchemaMismatch, a corrupt row, a conflict: their messages already say what to do.
        raise Failure(str(error)) from None
    except _loaded('alembic.util.exc', 'CommandError') as error:  # e.g. a revision this version doesn't know
        raise Failure(f'Cannot migrate {settings.shown_url}: {_first_line(error)}') from None
    except SQLAlchemyError as error:
        cause = getattr(error, 'orig', None) or error
        raise Failure(f'Database error at {settings.shown_url}: {_first_line(cause)}') from None
    except OSError as error:
        reason = error.strerror or _first_line(error)
        raise Failure(f'Cannot reach the database at {settings.shown_url}: {reason}') from None
    except _loaded('pydantic_ai.exceptions', 'UserError', 'AgentRunError', also=(ImportError,)) as error:
        # A model name, provider package or key problem.
        if isinstance(error, ImportError) and error.name in _DRIVERS:  # the database's, which says what to install
            raise Failure(_first_line(error)) from None
        raise Failure(f'Model error: {_first_line(error)}') from None
    except ValueError as error:  # bad URLs, ids, offsets and import files, as the store reports them
        raise Failure(_first_line(error)) from None


def _sqlite_file(url: URL) -> Path | None:
    """The SQLite file at `url`; `None` for servers, in-memory databases and `file:` URIs."""
    path = sqlite_path(url)
    return None if path is None or str(path).startswith('file:') else path


def _unopenable(path: Path, access: Access) -> str | None:
    """Why a SQLite file can't be opened for `access` (or, for `create`, made), if the file system can tell; `None`
    if it can't."""
    folder = path.resolve().parent
    if not path.exists():
        if access != 'create':
            return None
        if not folder.is_dir():
            return f'the directory {folder} does not exist (make it first, or point --db elsewhere)'
        if not os.access(folder, os.W_OK | os.X_OK):
            return f'{_read_only(folder)}, and a new database is a file made there (point --db elsewhere)'
        return None
    if path.is_dir():
        return f'{path} is a directory, not a database file'
    if not os.access(folder, os.X_OK):
        return f'the directory {folder} cannot be entered by this user'
    if not os.access(path, os.R_OK):
        return f'{path} is not readable by this user (reading needs read permission on the file)'
    for sidecar in (Path(f'{path}-wal'), Path(f'{path}-shm')):
        if sidecar.exists() and not os.access(sidecar, os.R_OK):
            return f'its write-ahead log file {sidecar} is not readable by this user'
    if access == 'read':
        return None
    if not os.access(path, os.W_OK):
        return f'{path} is read-only for this user, and this command writes to it'
    if not os.access(folder, os.W_OK):
        return (
            f"{_read_only(folder)}, and writing needs SQLite's journal files beside the database (only the review "
            'commands work on read-only media)'
        )
    return None


def _read_only(folder: Path) -> str:
    return f'the directory {folder} is read-only for this user'


def _check_file(settings: Settings, url: URL, access: Access) -> None:
    """Refuse, in a line saying why, a SQLite file that opening would create, or could not open for `access`."""
    path = _sqlite_file(url)
    if path is None:
        return
    if access != 'create' and not path.exists():
        raise Failure(
            f'No database file at {path} ({settings.shown_url}). Run `session-store demo` to make one, '
            f'or point --db / ${ENV_URL} at your database.'
        )
    # Only what would stop any reader: SQLite may still manage a write where the file system looks unwilling.
    if (reason := _unopenable(path, 'read')) is not None:
        raise Failure(f'Cannot open the database at {settings.shown_url}: {reason}.')


class _Opened(Protocol):
    """What `_ready` opens: a `SessionStore`, or for the review commands its `Database` alone."""

    @property
    def url(self) -> URL: ...

    async def ready(self) -> None: ...

    async def close(self) -> None: ...


OpenedT = TypeVar('OpenedT', bound=_Opened)


@contextmanager
def explained(settings: Settings, url: URL, access: Access) -> Iterator[None]:
    """Opening the database at `url` for `access`, where SQLite's refusal to open its file (only "unable to open
    database file") becomes a line saying why, when the file system can tell."""
    try:
        yield
    except OperationalError:
        path = _sqlite_file(url)
        if path is None or (reason := _unopenable(path, access)) is None:
            raise
        raise Failure(f'Cannot open the database at {settings.shown_url}: {reason}.') from None


@asynccontextmanager
async def _ready(settings: Settings, opened: OpenedT, access: Access) -> AsyncIterator[OpenedT]:
    """`opened`, its file checked and its schema, closed after (also when opening failed)."""
    try:
        _check_file(settings, opened.url, access)
        with explained(settings, opened.url, access):
            await opened.ready()
        yield opened
    finally:
        await opened.close()


@asynccontextmanager
async def open_store(
    settings: Settings, access: Access = 'read', *, processor: WindowProcessor | None = None
) -> AsyncIterator[SessionStore]:
    """The store at `--db`, schema checked.

    `read` opens it read-only (a SQLite file in `mode=ro`, so read-only media work) and `write` opens
    an existing one to change it: neither creates a database file or a schema, so pointing one at a
    mistyped path says so instead of leaving an empty database there. `create` makes and migrates a
    new database.
    """
    from ..store import SessionStore  # it imports pydantic-ai, which the review commands do without

    store = SessionStore(
        settings.url,
        processor=processor,
        migrate=access == 'create',
        read_only=access == 'read',
        encryption=settings.encryption(),
    )
    async with _ready(settings, store, access) as opened:
        yield opened


async def read(settings: Settings, query: Callable[[SessionStore], Awaitable[T]]) -> T:
    """One read against the store at `--db`: open it read-only (never creating it), ask, close."""
    async with open_store(settings) as store:
        return await query(store)


async def review(settings: Settings, query: Callable[[Database], Awaitable[T]]) -> T:
    """One read of the store's own queries (`_history.review`) against the database at `--db`, opened read-only as
    `read` opens its store, without the rest of a `SessionStore` (and pydantic-ai with it)."""
    database = database_at(settings.url, migrate=False, read_only=True, encryption=settings.encryption())
    async with _ready(settings, database, 'read') as opened:
        return await query(opened)
