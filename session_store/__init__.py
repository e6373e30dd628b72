"""Persistent pydantic-ai sessions: a complete SQL archive of every message, stored incremental summaries,
and windows rebuilt from them without reading the archive."""

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
from .results import Branch, Removed, Resealed, SearchHit, SessionInfo, SessionWindow, StoredSummary, SummaryChain
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
    'WindowProcessor',
    'dispatch_chat',
    'run_limits',
)
