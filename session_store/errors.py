"""What can go wrong with a store, each error saying which session and what to do.

Every error the store raises for a reason of its own is a `StoreError`; a conflict is also pydantic-ai's
`ConversationConflict`, and a refused export also a `ValueError`, so code written against either catches it.

This module imports no pydantic-ai: `SessionConflict`, the one error built on a pydantic-ai class, is defined in
`_conflict` and imported from there on first use, so the command line can map errors without importing pydantic-ai.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._store_error import StoreError

if TYPE_CHECKING:
    from ._conflict import SessionConflict

__all__ = (
    'DatabaseLocked',
    'ExportError',
    'KeyUnavailable',
    'SchemaMismatch',
    'ServerRefused',
    'SessionConflict',
    'SessionNotFound',
    'StorageFull',
    'StoreError',
    'StoreUnavailable',
    'SummarizerFailed',
)


class SchemaMismatch(StoreError):
    """The database's schema is not the revision this version of session-store uses."""


class KeyUnavailable(StoreError):
    """A stored value is encrypted with a key this store was not given, or with another secret under its id.

    Nothing is skipped: the read that met it fails as a whole, naming the session and the key id.
    """

    def __init__(self, session_id: str, key_id: str, message: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.key_id = key_id


class SessionNotFound(StoreError, LookupError):
    """No session with this id is visible under this scope."""

    def __init__(self, session_id: str, scope: str | None) -> None:
        self.session_id = session_id
        self.scope = scope
        under = '' if scope is None else f' under scope {scope!r}'
        super().__init__(f'No session {session_id!r}{under}.')


class DatabaseLocked(StoreError):
    """SQLite's write lock stayed taken by other writers through every retry; nothing was written."""

    def __init__(self, session_id: str, tries: int) -> None:
        super().__init__(
            f'Session {session_id!r}: the SQLite database stayed locked by other writers through {tries} tries; '
            'nothing was written. Try again, or move to PostgreSQL for many concurrent writers.'
        )
        self.session_id = session_id


class StoreUnavailable(StoreError):
    """The database could not be reached, or the connection to it was lost, and one more try on a fresh connection
    failed too: the server is down, restarting or failing over. Nothing of the call was stored: a call that writes
    says so (and where a write's outcome could not be known, says that instead); a read says only that the database
    could not be reached. Calls work again as soon as the server is back."""

    def __init__(
        self,
        database: str,
        session_id: str | None,
        detail: str,
        *,
        stored: bool | None = False,
        writing: bool = True,
        advice: str = 'The next call tries again on a fresh connection: retry once the server is back.',
    ) -> None:
        about = 'Cannot reach' if session_id is None else f'Session {session_id!r}: cannot reach'
        super().__init__(f'{about} the database at {database} ({detail}){_outcome(writing, stored)} {advice}')
        self.session_id = session_id
        self.stored = stored
        """False when nothing was stored; `None` when the connection was lost as a write committed, so that the
        next read of the session shows whether it was."""
        self.writing = writing
        """Whether the call was one that writes (a run, a save, opening a session that may be new, a delete):
        False for a read (a listing, a history, a search, an export), whose message says nothing of storing."""


class ServerRefused(StoreError):
    """The PostgreSQL server (or a pooler in front of it) refused the store's connection or a statement, for a reason
    that trying again will not change: nothing of the call was stored (a call that writes says so), and the message
    says what to change.

    `reason` says which refusal it was:

    - `authentication`: the user, password or client certificate was not accepted (the password is never shown);
    - `database`: the database the URL names does not exist;
    - `tls`: TLS could not be set up as the URL asks: the server does not take it, or its certificate did not verify;
    - `read_only`: the server takes no writes (a hot standby, or `default_transaction_read_only`);
    - `statement_timeout`: a statement ran past the server's `statement_timeout` (or was cancelled);
    - `transaction_pooler`: the server is reached through a pooler in transaction mode the store was not told about;
    - `startup_parameter`: a pooler does not take one of the URL's startup parameters (PgBouncer takes no `options`).
    """

    def __init__(
        self, database: str, session_id: str | None, reason: str, detail: str, advice: str, *, writing: bool = True
    ) -> None:
        about = 'The database' if session_id is None else f'Session {session_id!r}: the database'
        super().__init__(f'{about} at {database} refused the store ({detail}){_outcome(writing, False)} {advice}')
        self.session_id = session_id
        self.reason = reason
        self.writing = writing
        """Whether the call refused was one that writes (see `StoreUnavailable.writing`)."""


def _outcome(writing: bool, stored: bool | None) -> str:
    """What a failed call's message says of what it stored, ending its first sentence: nothing, for a read, which
    stores nothing and whose user must not be led to think something was lost."""
    if not writing:
        return '.'
    if stored is False:
        return '; nothing was stored.'
    return '; the write may or may not have been stored (the next read of the session shows which).'


class StorageFull(StoreError):
    """The database's disk is full: the write was rolled back whole. Reads still work; writes work again once space
    is freed, on the same store."""

    def __init__(self, database: str, session_id: str | None, detail: str) -> None:
        about = '' if session_id is None else f'Session {session_id!r}: '
        super().__init__(
            f'{about}the database at {database} has no space left ({detail}); nothing was stored. Free some disk '
            'space, then try again: the store keeps working.'
        )
        self.session_id = session_id


class SummarizerFailed(StoreError):
    """A summary asked for (`Session.compact`) could not be made; nothing was stored, and the window is as it was.

    A summarizer failing *during a run* never raises: the run goes on with the sliding window.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f'Session {session_id!r}: the summarizer failed, so nothing was compacted or stored; the window is '
            'as it was. Try again later.'
        )
        self.session_id = session_id


class ExportError(StoreError, ValueError):
    """A file or document that is not a whole, consistent session export; says where and what is wrong."""


def __getattr__(name: str) -> Any:
    # `SessionConflict` subclasses pydantic-ai's `ConversationConflict`: importing it imports pydantic-ai.
    if name == 'SessionConflict':
        from ._conflict import SessionConflict

        return SessionConflict
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
    return sorted({*globals(), 'SessionConflict'})
