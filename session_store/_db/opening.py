"""Where a store's `Database` is made from what its user gave: the URL (or path), the server options, the keys."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import URL

from ..encryption import Encryption
from .database import Database
from .engine import ServerOptions, database_url, server_options

__all__ = ('database_at',)


def database_at(
    url: str | os.PathLike[str] | URL,
    *,
    migrate: bool = True,
    read_only: bool = False,
    encryption: Encryption | None = None,
    transaction_pooler: bool = False,
    engine_options: Mapping[str, Any] | None = None,
) -> Database:
    """The database at `url`, as `SessionStore` opens it; the review commands open it so, without the rest of one."""
    parsed, server = server_options(database_url(url), ServerOptions(transaction_pooler, engine_options or {}))
    return Database(parsed, migrate_empty=migrate, read_only=read_only, encryption=encryption, server=server)
