"""Persistent pydantic-ai sessions: a complete SQL archive of every message, stored incremental summaries,
and windows rebuilt from them without reading the archive."""

from .conversations import SQLConversationStore
from .errors import SchemaMismatch, SessionConflict, SessionNotFound, StoreError
from .models import SearchHit, SessionInfo, StoredSummary
from .recall import Recall
from .session import Session
from .store import DEFAULT_URL, SessionStore, WindowProcessor

__all__ = (
    'DEFAULT_URL',
    'Recall',
    'SQLConversationStore',
    'SchemaMismatch',
    'SearchHit',
    'Session',
    'SessionConflict',
    'SessionInfo',
    'SessionNotFound',
    'SessionStore',
    'StoreError',
    'StoredSummary',
    'WindowProcessor',
)
