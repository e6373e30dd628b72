"""`StoreError`, the base of the store's errors, in a module of its own: `errors` and `_conflict` both build on it, and
the URL checks raise `InvalidURL` from here without importing the rest of `errors`."""

from __future__ import annotations

__all__ = ('InvalidURL', 'StoreError')


class StoreError(Exception):
    """Base class of the store's own errors."""

    __module__ = 'session_store.errors'  # where users import it from, and tracebacks name it


class InvalidURL(StoreError, ValueError):
    """A database URL the store can't use: not a URL, another backend's, a host list or parameter that is malformed,
    or a parameter asyncpg has no equivalent of. Refused as the store is made, before anything connects; the message
    says what to write instead, and never shows the URL's password. A `ValueError` too, as URL refusals always were.
    """
