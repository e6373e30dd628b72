"""Identifiers: the checks a session id or scope must pass, and fresh tokens for revisions, entries and leases."""

from __future__ import annotations

import uuid

__all__ = ('check_id', 'new_token')


def check_id(value: object, name: str = 'session_id') -> str:
    """A session id (or scope): 1 to 255 printable characters, not all blank."""
    if not isinstance(value, str) or not 1 <= len(value) <= 255 or not value.isprintable() or not value.strip():
        shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else f'{value[:60]!r}...'
        raise ValueError(f'{name} must be 1 to 255 printable characters, not all blank; got {shown}.')
    return value


def new_token() -> str:
    return uuid.uuid4().hex
