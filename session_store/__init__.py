"""Persistent pydantic-ai sessions: a complete SQL archive of every message, stored incremental summaries,
and windows rebuilt from them without reading the archive."""

from ._engine import DEFAULT_URL
from ._run_state import WindowProcessor
from .conversations import SQLConversationStore
from .encryption import Encryption
from .errors import KeyUnavailable, SchemaMismatch, SessionConflict, SessionNotFound, StoreError
from .exports import ExportedSegment, ExportedSummary, ExportError, SessionExport
from .recall import Recall
from .results import Removed, Resealed, SearchHit, SessionInfo, SessionWindow, StoredSummary
from .session import Session
from .store import SessionStore

__all__ = (
    'DEFAULT_URL',
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
    'Session',
    'SessionConflict',
    'SessionExport',
    'SessionInfo',
    'SessionNotFound',
    'SessionStore',
    'SessionWindow',
    'StoreError',
    'StoredSummary',
    'WindowProcessor',
)
