"""`SessionStore`: sessions, their complete archive and their summary chains, in one SQL database.

The class is the public API and nothing more: each method checks its arguments and hands the work
to the module that holds its concept: `_history.runs` for windows, `_history.archive` for opening
sessions, `_history.review` for reads, `_history.search`, `_history.branches` for forks, `_history.transfer`
for exports and imports, `_upkeep` for retention and resealing; `Session` for runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Literal, Self

from pydantic_ai.messages import ModelMessage
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from processors import SlidingWindowProcessor

from ._arguments import check_seconds
from ._codec import now
from ._db.engine import DEFAULT_URL
from ._db.opening import database_at
from ._history.archive import open_session, write_metadata
from ._history.branches import fork
from ._history.leases import Leases
from ._history.review import list_sessions, read_history, read_summaries
from ._history.runs import Runs
from ._history.search import search
from ._history.transfer import read_export, write_import
from ._history.windows import WindowProcessor
from ._ids import check_id
from ._telemetry import span
from ._upkeep.resealing import reseal
from ._upkeep.retention import remove_sessions, vacuum
from .conversations import SQLConversationStore
from .encryption import Encryption
from .exports import SessionExport
from .recall import Recall
from .results import Removed, Resealed, SearchHit, SessionInfo, SessionWindow, SummaryChain, Vacuumed
from .session import Session

__all__ = ('DEFAULT_URL', 'SessionStore', 'WindowProcessor')


class SessionStore:
    """Sessions with a complete archive and stored summaries, in SQLite or PostgreSQL.

    Args:
        url: An async SQLAlchemy URL: `sqlite+aiosqlite:///path.db` (the default is
            `./sessions.db`) or `postgresql+asyncpg://user:pass@host/db` (with the `postgresql`
            extra). Plain `sqlite://` and `postgresql://` URLs get the async driver. A SQLite file's path is
            taken as that file: a `Path`, or a string that names a directory (`./chat.db`, `~/chat.db`) or ends
            in `.db`, `.sqlite` or `.sqlite3` (`chat.db`), made absolute. libpq's query parameters, as
            hosting providers write them (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`, `application_name`,
            `connect_timeout`, `options`, `target_session_attrs`), are translated for asyncpg; one it has no
            equivalent of raises `ValueError`, saying what to write instead.
        processor: How sessions compress what the model sees, unless a session says otherwise:
            a `SlidingWindowProcessor` (the default), a `SummarizationProcessor` or a `ContextManagerCapability`.
        migrate: Make the schema in a new, empty database on first use. A database at another
            schema revision is never changed implicitly: `migrate()` upgrades it.
        read_only: Open the database only to read it: a SQLite file is opened read-only (it must
            exist; read-only media work), nothing is ever migrated, and any write fails.
        transaction_pooler: The PostgreSQL server is reached through a pooler in transaction mode (PgBouncer's
            `pool_mode = transaction`, a managed pooler): no prepared statement outlives its transaction and every
            statement runs in one, which a pooler needs. `?transaction_pooler=true` in the URL says the same.
        engine_options: More arguments for SQLAlchemy's `create_async_engine` (`pool_size`, `max_overflow`,
            `pool_recycle`, `connect_args`, ...). Numeric asyncpg settings may also be given in the URL
            (`?command_timeout=10`); they reach asyncpg as numbers.
        encryption: Encrypt the archive at rest under these keys (the `encryption` extra): message
            payloads, summaries, session metadata and deferred tool requests are sealed per session
            with AES-256-GCM, and search runs on a blind index of whole words. Ids, scopes, positions,
            counts and times stay clear. A store opened without it still reads clear rows, and fails
            on a sealed one with `KeyUnavailable`, never with an empty history.
    """

    def __init__(
        self,
        url: str | os.PathLike[str] | URL = DEFAULT_URL,
        *,
        processor: WindowProcessor | None = None,
        migrate: bool = True,
        read_only: bool = False,
        encryption: Encryption | None = None,
        transaction_pooler: bool = False,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        if encryption is not None and not isinstance(encryption, Encryption):
            raise TypeError(f'encryption must be an Encryption(keys=...); got {type(encryption).__name__}.')
        if not isinstance(transaction_pooler, bool):
            raise TypeError(f'transaction_pooler must be True or False; got {transaction_pooler!r}.')
        if engine_options is not None and not isinstance(engine_options, Mapping):
            raise TypeError(
                f'engine_options must be a mapping of create_async_engine arguments; got {engine_options!r}.'
            )
        self._database = database_at(
            url,
            migrate=migrate,
            read_only=read_only,
            encryption=encryption,
            transaction_pooler=transaction_pooler,
            engine_options=engine_options,
        )
        self.url = self._database.url
        self.processor: WindowProcessor = processor if processor is not None else SlidingWindowProcessor()
        self._runs = Runs(self._database)
        self._leases = Leases(self._database)
        # Only a processor given makes pydantic-ai's door hand out windows and summaries (whole histories without).
        # One door per store, so what it keeps in memory between a load and a save serves every caller.
        self._conversations = SQLConversationStore(self._runs, self.processor.token_counter, processor)

    def __repr__(self) -> str:
        return f'SessionStore({self.display_url!r})'

    @property
    def display_url(self) -> str:
        """The URL without its password, for messages."""
        return self._database.display_url

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine, for queries of your own over the tables in `session_store.rows`."""
        return self._database.engine

    async def __aenter__(self) -> Self:
        await self.ready()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the database connections."""
        await self._database.close()

    async def migrate(self) -> str | None:
        """Upgrade the database's schema to this version of session-store's; the revision it was at before (`None` for
        an empty database)."""
        return await self._database.migrate()

    async def ready(self) -> None:
        """Check the schema (migrating an empty database); every method does so before its first query.

        Raises:
            StoreUnavailable: The database can't be reached; on a store opened to write, saying nothing was stored.
        """
        await self._database.ready()

    @property
    def conversations(self) -> SQLConversationStore:
        """The same archive as a pydantic-ai `ConversationStore`.

        For `agent.run(conversation=await store.conversations.load(id))` users and pydantic-ai's UI adapters
        (`conversation_store=store.conversations`): a save that rewrites the stored history branches off where
        they part, as pydantic-ai's own stores do, and the replaced turns stay stored as a branch; `fork()` makes
        a new session with copies. New messages are counted with this store's processor's `token_counter`.
        """
        return self._conversations

    async def session(
        self,
        session_id: str,
        *,
        scope: str | None = None,
        processor: WindowProcessor | None = None,
        wait: bool = False,
        timeout: float | None = 60.0,
        recall: bool | Recall = False,
    ) -> Session:
        """Open a session, creating it if new.

        Args:
            session_id: 1 to 255 printable characters.
            scope: Whose session it is. A session saved with another scope can't be opened under this one.
            processor: How this session compresses what the model sees, instead of the store's.
            wait: When another run on the session is in progress, wait for it instead of failing with
                `SessionConflict`. Waiting runs queue behind each other through a lease on the session.
            timeout: How long a waiting run waits, in seconds (`None`: as long as it takes).
            recall: Hand the agent tools that search this session's own archive (`search_history`,
                `read_history`) for details summaries left out; a `Recall` sets their budget.
        """
        check_id(session_id)
        if scope is not None:
            check_id(scope, 'scope')
        if not isinstance(wait, bool):
            raise TypeError(f'wait must be True or False; got {wait!r}.')
        check_seconds(timeout, 'timeout')
        with span('open_session', self._database.backend, session_id):
            await open_session(self._database, session_id, scope)
        return Session(
            self._runs,
            self._leases,
            session_id,
            scope=scope,
            processor=processor or self.processor,
            wait=wait,
            timeout=timeout,
            recall=Recall() if recall is True else recall or None,
        )

    async def sessions(
        self, *, scope: str | None = None, limit: int | None = None, offset: int = 0
    ) -> list[SessionInfo]:
        """The stored sessions, most recently updated first; under `scope`, only those saved with it.

        `offset` skips that many of them and `limit` keeps at most that many, for reading the list page by page.
        """
        return await list_sessions(self._database, scope=scope, limit=limit, offset=offset)

    async def set_metadata(self, session_id: str, metadata: dict[str, Any], *, scope: str | None = None) -> None:
        """Replace the session's metadata (what `sessions()` lists with it) with `metadata`, a JSON object.

        Raises:
            ValueError: `metadata` is not a dict that JSON can hold.
            SessionNotFound: No such session (under `scope`).
        """
        await write_metadata(self._database, session_id, scope, metadata)

    async def history(
        self,
        session_id: str,
        *,
        scope: str | None = None,
        offset: int = 0,
        limit: int | None = None,
        branch: str | int | None = None,
    ) -> list[ModelMessage]:
        """The raw archive, in order: every message from position `offset`, or at most `limit` of them.

        It reads the active path, or with `branch` (a `Branch.tip` from `Session.branches()`, or a `Branch.number`)
        that branch's.
        """
        return await read_history(self._database, session_id, scope=scope, offset=offset, limit=limit, branch=branch)

    async def summaries(self, session_id: str, *, scope: str | None = None) -> SummaryChain:
        """The session's summary chain, oldest first."""
        return await read_summaries(self._database, session_id, scope=scope)

    async def window(self, session_id: str, *, scope: str | None = None) -> SessionWindow:
        """The window the session's next run starts from, rebuilt as a run would; never creates the session."""
        loaded = await self._runs.load_window(session_id, scope, self.processor)
        return SessionWindow(
            messages=loaded.messages,
            positions=loaded.positions,
            tokens=loaded.tokens,
            message_count=loaded.message_count,
        )

    async def search(
        self,
        text: str,
        *,
        scope: str | None = None,
        session_id: str | None = None,
        limit: int = 50,
        match: Literal['phrase', 'words'] = 'phrase',
        branches: Literal['active', 'all'] = 'active',
    ) -> list[SearchHit]:
        """Search the archive.

        Args:
            text: What to look for.
            scope: Only sessions saved with this scope.
            session_id: Only this session (`SessionNotFound` if there is none under `scope`).
            limit: At most this many hits.
            match: `'phrase'`: messages containing `text` as typed (case-insensitive), newest first.
                `'words'`: full-text, through the database's index: messages with all of `text`'s
                words (stemmed), or if none has them all, with any; best match first.
            branches: `'active'`: each session's active path, what its history reads; `'all'`: every
                branch too (a hit's position is then on the path of the branch holding it).

        In an encrypted store the index holds blind words: both kinds of match then need whole words
        (no stemming), and a phrase is found among the messages with each of its words, opened and
        checked; see "Encryption at rest" in the docs (docs/encryption-and-retention.md).
        """
        return await search(
            self._database, text, scope=scope, session_id=session_id, limit=limit, match=match, branches=branches
        )

    async def delete(self, session_id: str | None = None, *, scope: str | None = None) -> Removed:
        """Delete a session whole: its archive, every branch, its summaries. Under `scope`, only one saved with it.

        With no `session_id`, every session saved under `scope`, in one transaction: erasing one user's
        data. What was removed comes back. The rows are gone at once; `vacuum()` then makes sure
        nothing of them survives in the database's files, or says it could not.

        Raises:
            ValueError: Neither a session id nor a scope: `delete()` doesn't remove every session.
            SessionNotFound: `session_id` names no session (under `scope`).
        """
        if session_id is None and scope is None:
            raise ValueError('delete() needs a session_id, or a scope to delete every session saved under it.')
        removed = await remove_sessions(self._database, session_id=session_id, scope=scope)
        self._runs.forget(removed.sessions)
        return removed

    async def prune(
        self, *, older_than: timedelta | datetime, scope: str | None = None, dry_run: bool = False
    ) -> Removed:
        """Delete the sessions not updated for `older_than` (or since that moment), whole; under `scope`, only its.

        `dry_run` reports what would go and deletes nothing. Follow with `vacuum()` for the bytes.

        Raises:
            ValueError: `older_than` is not a positive timedelta or a datetime with a timezone.
        """
        if isinstance(older_than, timedelta):
            if older_than <= timedelta(0):
                raise ValueError(f'older_than must be a positive timedelta; got {older_than!r}.')
            cutoff = now() - older_than
        elif isinstance(older_than, datetime) and older_than.tzinfo is not None:
            cutoff = older_than
        else:
            raise ValueError(f'older_than must be a timedelta or a timezone-aware datetime; got {older_than!r}.')
        removed = await remove_sessions(self._database, scope=scope, updated_before=cutoff, dry_run=dry_run)
        if not dry_run:
            self._runs.forget(removed.sessions)
        return removed

    async def vacuum(self) -> Vacuumed:
        """Rewrite what could still hold deleted text, so the database's files keep none of what `delete`, `prune`
        and resealing removed; what it could not rewrite comes back.

        SQLite: the full-text index's segments, the free pages and the WAL. PostgreSQL: `VACUUM FULL` on the
        store's tables, which writes each anew with its indexes, holding its lock (runs wait) while it does. The
        server lets only the tables' owner (or the database's owner, or a superuser) vacuum them: opened as another
        role, the store reclaims nothing, and `Vacuumed.reclaimed` is false, with the tables it skipped and their
        owner, who can run it.
        """
        return await vacuum(self._database)

    async def rekey(self, *, batch_size: int = 500, on_batch: Callable[[Resealed], None] | None = None) -> Resealed:
        """Seal every stored value again under the current key (the first of `Encryption.keys`).

        Run it after putting a new key first: once it returns, nothing is under an older key, and
        those keys can be dropped. It works in batches of `batch_size` rows, each its own transaction,
        while the store stays in use; killed part way, running it again finishes the job. Clear values
        are sealed too (`Resealed.sealed_clear` counts them). `on_batch` hears the tally after every batch. Follow
        with `vacuum()`, so the old ciphertexts and search words leave the database's bytes.

        Warning: once a clear value is sealed, only these keys read it: keep them (and a backup) before running
        this on a store that held clear data. Losing the keys loses the data.

        Raises:
            StoreError: The store was opened without `encryption`.
            KeyUnavailable: A value is sealed under a key the store wasn't given.
        """
        return await reseal(self._database, clear_only=False, batch_size=batch_size, on_batch=on_batch)

    async def encrypt(self, *, batch_size: int = 500, on_batch: Callable[[Resealed], None] | None = None) -> Resealed:
        """Seal every value still stored clear, in place: how an existing store becomes an encrypted one.

        Batched and resumable as `rekey()` is; while it runs, clear and sealed rows both read correctly.
        Follow with `vacuum()`, so no clear text survives in the database's bytes. `Resealed.sealed_clear` counts
        what it sealed.

        Warning: from then on only these keys read the store: keep them (and a backup) before running this.
        Losing the keys loses the data.
        """
        return await reseal(self._database, clear_only=True, batch_size=batch_size, on_batch=on_batch)

    async def fork(
        self,
        session_id: str,
        *,
        at: int,
        new_session_id: str,
        scope: str | None = None,
        new_scope: str | None = None,
    ) -> Session:
        """A new session starting from the first `at` messages of `session_id`'s active path; returns it open.

        The fork gets copies of those messages and of the summary chain a window over them builds on, so
        its first run resumes from a stored summary, without calling the summarizer.
        `new_scope` defaults to the source's scope.

        Raises:
            ValueError: `at` is outside the path, or would separate a tool call from its return.
            SessionConflict: `new_session_id` is taken.
        """
        check_id(new_session_id, 'new_session_id')
        if new_scope is not None:
            check_id(new_scope, 'new_scope')
        fork_scope = await fork(self._database, session_id, scope, at, new_session_id, new_scope)
        return await self.session(new_session_id, scope=fork_scope)

    async def export(self, session_id: str, *, scope: str | None = None) -> SessionExport:
        """The whole session as a document: every branch with its messages, every summary, the active path's window.

        `document.to_json_lines()` writes it as a file that `SessionExport.from_json_lines()` reads back.
        """
        return await read_export(self._database, session_id, scope)

    async def import_(self, document: SessionExport, *, session_id: str | None = None, scope: str | None = None) -> str:
        """Store an exported session, its whole tree, under its own id or `session_id`; returns the id.

        The id must be free. Messages get fresh entry ids, so a session can be imported next to its source.

        Raises:
            ExportError: The document is inconsistent (its tree, window, summaries or branch tips don't fit).
            SessionConflict: A session with that id exists; nothing was stored.
        """
        if not isinstance(document, SessionExport):
            raise TypeError(
                f'import_ takes a SessionExport (from export(), or SessionExport.from_json_lines(file)); '
                f'got {type(document).__name__}.'
            )
        target = check_id(session_id if session_id is not None else document.session_id)
        if scope is not None:
            check_id(scope, 'scope')
        await write_import(self._database, document, target, scope if scope is not None else document.scope)
        return target
