"""Conversation records and entries as the session tables hold them: the statements that read them, and the
values made of their rows (pydantic-ai's `ConversationRecord` and `ConversationEntry`), for `SQLConversationStore`."""

from __future__ import annotations

from copy import deepcopy
from datetime import datetime
from typing import Any, NamedTuple

import pydantic
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RunUsage
from sqlalchemy import Row, Select, and_, case, select
from sqlalchemy.orm import aliased

from ._codec import dump_usage, load_usage, utc
from ._db.sealing import Sealer
from ._db.textual import textual
from ._history.records import LoadedWindow
from ._history.runs import HEAD
from ._history.tree import entry_before_window
from .rows import MessageRow, SegmentRow, SessionRow

__all__ = (
    'DEFERRED',
    'RECORD',
    'RecordRow',
    'details_of',
    'entries_query',
    'entry_of',
    'record_columns',
    'record_of',
    'window_entries',
)

DEFERRED: pydantic.TypeAdapter[DeferredToolRequests] = pydantic.TypeAdapter(DeferredToolRequests)
"""The same JSON `Session` stores a paused run's requests in, so either side can read the other's."""

_sessions = SessionRow.__table__.c
RECORD = textual(
    HEAD.add_columns(
        entry_before_window().label('before_window'),
        _sessions.session_id,
        _sessions.scope,
        _sessions.usage,
        _sessions.deferred_tool_requests,
        _sessions.forked_from,
        _sessions.forked_at,
        _sessions.branches,
        _sessions.updated_at,
        _sessions.title,
        _sessions.metadata.label('metadata_'),
    )
)
"""A session's row as a record is made of it: a `SessionHead` (its tip the record's head), the entry just before
its window (which a window without a head opens after), then the rest. `RecordRow` holds it. As text (`textual`):
a door's first load after a restart reads it."""


class RecordRow(NamedTuple):
    """A row `RECORD` read, in its column order (a `SessionHead` first), or that row as a write of this process
    left it."""

    pk: int
    revision: str
    message_count: int
    head_end: int
    window_start: int
    active_segment_pk: int | None
    tip: str | None
    before_window: str | None
    session_id: str
    scope: str | None
    usage: dict[str, Any] | None
    deferred_tool_requests: dict[str, Any] | str | None
    forked_from: str | None
    forked_at: str | None
    branches: list[Any] | None
    updated_at: datetime
    title: str | None
    metadata_: dict[str, Any] | str | None


_Parent = aliased(MessageRow, name='parent')
"""The message before another one on its path, whose `entry_id` is that one's `parent_id`."""
_Own = aliased(SegmentRow, name='own')
"""The segment a message is in."""


def entries_query() -> Select[str, int, int, str, str | None, str]:
    """Message rows as entries: (session_id, session pk, position, entry_id, parent entry_id, payload).

    A segment's first message continues the segment it forked from; any other, its own segment.
    """
    parent_segment = case((MessageRow.position > _Own.starts_at, MessageRow.segment_pk), else_=_Own.parent_pk)
    return (
        select(
            SessionRow.session_id,
            SessionRow.pk,
            MessageRow.position.label('position'),  # named, for the union `on_path` orders by it
            MessageRow.entry_id,
            _Parent.entry_id.label('parent_id'),
            MessageRow.payload,
        )
        .select_from(MessageRow)
        .join(SessionRow, SessionRow.pk == MessageRow.session_pk)
        .join(_Own, _Own.pk == MessageRow.segment_pk)
        .outerjoin(_Parent, and_(_Parent.segment_pk == parent_segment, _Parent.position == MessageRow.position - 1))
    )


def entry_of(sealer: Sealer, row: Row[str, int, int, str, str | None, str]) -> ConversationEntry:
    session_id, session_pk, position, entry_id, parent_id, payload = row
    message = sealer.message(session_id, session_pk, position, payload)
    return ConversationEntry(id=entry_id, parent_id=parent_id, message=message)


def record_of(
    sealer: Sealer, row: SessionRow | RecordRow, head_id: str | None, usage: RunUsage | None = None
) -> ConversationRecord:
    """The record `row` holds; `usage`, when the caller holds the row's usage parsed already."""
    deferred = sealer.open_json(row.session_id, row.pk, 'deferred tool requests', row.deferred_tool_requests)
    title, metadata = details_of(sealer, row.session_id, row.pk, row.title, row.metadata_)
    return ConversationRecord(
        conversation_id=row.session_id,
        head_id=head_id,
        usage=load_usage(row.usage) if usage is None else usage,
        deferred_tool_requests=None if deferred is None else DEFERRED.validate_python(deferred),
        scope=row.scope,
        forked_from=row.forked_from,
        forked_at=row.forked_at,
        branches=[str(tip) for tip in row.branches or ()],
        title=title,
        metadata=metadata,
        revision=row.revision,
        updated_at=utc(row.updated_at),
    )


def details_of(
    sealer: Sealer, session_id: str, session_pk: int, title: str | None, metadata: Any
) -> tuple[str | None, dict[str, Any] | None]:
    """A session row's stored `title` and `metadata` as a conversation's record holds them: opened, the metadata a
    copy of its own, `None` for the `{}` of a session without any."""
    opened = sealer.open_json(session_id, session_pk, 'metadata', metadata)
    return (
        None if title is None else sealer.open(session_id, session_pk, 'title', title),
        deepcopy(opened) if opened else None,
    )


def record_columns(record: ConversationRecord) -> dict[str, Any]:
    """The session columns a record carries, but its deferred tool requests (sealed once the row's key is known).

    The head is not one either: it is derived from `message_count`.
    """
    return {
        'session_id': record.conversation_id,
        'scope': record.scope,
        'revision': record.revision,
        'usage': dump_usage(record.usage),
        'deferred_tool_requests': None,
        'forked_from': record.forked_from,
        'forked_at': record.forked_at,
        'branches': list(record.branches),
        'updated_at': record.updated_at,
    }


def window_entries(window: LoadedWindow, parent: str | None) -> list[ConversationEntry]:
    """A stored window as the entries a conversation load hands out, the first following entry `parent`."""
    entries: list[ConversationEntry] = []
    for message, entry_id in zip(window.messages, window.entry_ids, strict=True):
        # A bridge standing alone (before a tail that opens with a response) is no archived message.
        entry = ConversationEntry(id=entry_id or f'summary-{window.summary_pk}', parent_id=parent, message=message)
        entries.append(entry)
        parent = entry.id
    return entries
