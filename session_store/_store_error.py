"""`StoreError`, the base of the store's errors, in a module of its own: `errors` and `_conflict` both build on it."""

from __future__ import annotations

__all__ = ('StoreError',)


class StoreError(Exception):
    """Base class of the store's own errors."""

    __module__ = 'session_store.errors'  # where users import it from, and tracebacks name it
