"""Persistent pydantic-ai sessions: a complete SQL archive of every message, stored incremental summaries,
and windows rebuilt from them without reading the archive.

Each public name is imported from its module on first use, so that importing a part of the package (the command
line's help, `session_store.errors`) does not import pydantic-ai, SQLAlchemy and alembic with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._db.engine import DEFAULT_URL
    from ._history.windows import WindowProcessor
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
    from .exports import ExportedSegment, ExportedSummary, SessionExport
    from .recall import Recall
    from .results import (
        Branch,
        Removed,
        Resealed,
        SearchHit,
        SessionInfo,
        SessionWindow,
        StoredSummary,
        SummaryChain,
        Vacuumed,
    )
    from .session import Session
    from .store import SessionStore

__all__ = (
    'DEFAULT_URL',
    'Branch',
    'DatabaseLocked',
    'Encryption',
    'ExportError',
    'ExportedSegment',
    'ExportedSummary',
    'KeyUnavailable',
    'Recall',
    'Removed',
    'Resealed',
    'SQLConversationStore',
    'SchemaMismatch',
    'SearchHit',
    'ServerRefused',
    'Session',
    'SessionConflict',
    'SessionExport',
    'SessionInfo',
    'SessionNotFound',
    'SessionStore',
    'SessionWindow',
    'StorageFull',
    'StoreError',
    'StoreUnavailable',
    'StoredSummary',
    'SummarizerFailed',
    'SummaryChain',
    'Vacuumed',
    'WindowProcessor',
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
_RESULTS = (
    'Branch',
    'Removed',
    'Resealed',
    'SearchHit',
    'SessionInfo',
    'SessionWindow',
    'StoredSummary',
    'SummaryChain',
    'Vacuumed',
)
_HOMES: dict[str, str] = {
    'DEFAULT_URL': '._db.engine',
    'WindowProcessor': '._history.windows',
    'dispatch_chat': '.chat',
    'run_limits': '.chat',
    'SQLConversationStore': '.conversations',
    'Encryption': '.encryption',
    **dict.fromkeys(_ERRORS, '.errors'),
    'ExportedSegment': '.exports',
    'ExportedSummary': '.exports',
    'SessionExport': '.exports',
    'Recall': '.recall',
    **dict.fromkeys(_RESULTS, '.results'),
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
