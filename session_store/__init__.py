"""Persistent pydantic-ai sessions: a complete SQL archive of every message, stored incremental summaries,
and windows rebuilt from them without reading the archive.

`__all__` is what a new user needs: the store and its sessions, pydantic-ai's conversation store, the settings
for encryption and recall, the export document, the helpers for chat front ends and the errors. What the store
hands back lives in `session_store.results`, an export's parts in `session_store.exports`, and the default URL
and the processor type in `session_store.store`.

Each public name is imported from its module on first use, so that importing a part of the package (the command
line's help, `session_store.errors`) does not import pydantic-ai, SQLAlchemy and alembic with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .chat import dispatch_chat, run_limits
    from .conversations import SQLConversationStore
    from .encryption import Encryption
    from .errors import (
        DatabaseLocked,
        ExportError,
        KeyUnavailable,
        SchemaMismatch,
        ServerRefused,
        SessionConflict,
        SessionNotFound,
        StorageFull,
        StoreError,
        StoreUnavailable,
        SummarizerFailed,
    )
    from .exports import SessionExport
    from .recall import Recall
    from .session import Session
    from .store import SessionStore

__all__ = (
    'DatabaseLocked',
    'Encryption',
    'ExportError',
    'KeyUnavailable',
    'Recall',
    'SQLConversationStore',
    'SchemaMismatch',
    'ServerRefused',
    'Session',
    'SessionConflict',
    'SessionExport',
    'SessionNotFound',
    'SessionStore',
    'StorageFull',
    'StoreError',
    'StoreUnavailable',
    'SummarizerFailed',
    'dispatch_chat',
    'run_limits',
)

_ERRORS = (
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
_HOMES: dict[str, str] = {
    'dispatch_chat': '.chat',
    'run_limits': '.chat',
    'SQLConversationStore': '.conversations',
    'Encryption': '.encryption',
    **dict.fromkeys(_ERRORS, '.errors'),
    'SessionExport': '.exports',
    'Recall': '.recall',
    'Session': '.session',
    'SessionStore': '.store',
}
"""The module each public name lives in (the imports above, for type checkers and the API reference, say the same)."""


def __getattr__(name: str) -> Any:
    # Only on a name not yet imported: each is then kept in the package's namespace, so this runs once per name.
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}; its public names are in __all__')
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
