"""Conversation records and entries as the session tables hold them: the statements that read them, and the
values made of their rows (pydantic-ai's `ConversationRecord` and `ConversationEntry`), for `SQLConversationStore`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import pydantic
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import DeferredToolRequests
from sqlalchemy import ColumnElement, Row, Select, String, and_, bindparam, case, select
from sqlalchemy.orm import aliased

from ._codec import copied, dump_usage, load_usage, utc
from ._db.sealing import Sealer
from ._db.textual import textual
from ._history.records import LoadedWindow
from ._history.runs import HEAD
from ._history.tree import entry_before_window, tip_entry_id
from ._history.windows import StoredRun, StoredWindow
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
    'record_read',
    'window_entries',
    'written_row',
)

DEFERRED: pydantic.TypeAdapter[DeferredToolRequests] = pydantic.TypeAdapter(DeferredToolRequests)
"""The same JSON `Session` stores a paused run's requests in, so either side can read the other's."""

_sessions = SessionRow.__table__.c


def _known_or(name: str, looked_up: ColumnElement[str | None]) -> ColumnElement[str | None]:
    """`looked_up` (a lookup in `messages`), unless the reader passes the value as `known_{name}`, holding a row
    read or written at the stored revision (`known_revision`): the server then skips the lookup."""
    known = bindparam(f'known_{name}', type_=String())
    return case((_sessions.revision == bindparam('known_revision', type_=String()), known), else_=looked_up)


RECORD = textual(
    select(
        *(column for column in HEAD.selected_columns if column.key != 'tip'),
        _known_or('tip', tip_entry_id()).label('tip'),
        _known_or('before_window', entry_before_window()).label('before_window'),
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
    ).where(_sessions.session_id == bindparam('session_id'))
)
"""A session's row as a record is made of it: a `SessionHead` (its tip the record's head), the entry just before
its window (which a window without a head opens after), then the rest. `RecordRow` holds it, and `record_read`
gives its parameters. As text (`textual`): a door's first load after a restart reads it.

The tip and the entry before the window are each a lookup in `messages` (an index descent and a heap page): at
100,000 archived messages they were two thirds of the statement's shared blocks, and the read outweighed the
peer's, whose turn touched fewer blocks in all. A door that read or wrote the row last knows both."""


def record_read(session_id: str, known: RecordRow | None) -> dict[str, str | None]:
    """`RECORD`'s parameters: the session, and what `known` (the row as this process read or wrote it last, if
    kept) says of its lookups, which count only while the stored revision is still `known`'s (a fresh token on
    every write, so no other session's or write's row can pass for it)."""
    if known is None:
        return {'session_id': session_id, 'known_revision': None, 'known_tip': None, 'known_before_window': None}
    return {
        'session_id': session_id,
        'known_revision': known.revision,
        'known_tip': known.tip,
        'known_before_window': known.before_window,
    }


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


def record_of(sealer: Sealer, row: SessionRow | RecordRow, head_id: str | None) -> ConversationRecord:
    """The record `row` holds."""
    deferred = sealer.open_json(row.session_id, row.pk, 'deferred tool requests', row.deferred_tool_requests)
    title, metadata = details_of(sealer, row.session_id, row.pk, row.title, row.metadata_)
    return ConversationRecord(
        conversation_id=row.session_id,
        head_id=head_id,
        usage=load_usage(row.usage),
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
        copied(opened) if opened else None,
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


def written_row(
    row: RecordRow,
    before: StoredWindow | None,
    after: StoredWindow | None,
    stored: StoredRun,
    added: Sequence[ConversationEntry] = (),
) -> RecordRow | None:
    """`row` as a write of this process left it: a compaction of the window at its revision (`before`, if kept),
    or a run appending `added` after its tip, which `stored` and made the window kept now (`after`). `None` when
    `after` is not that write's window, or the entry the new window opens after is in neither window nor in
    `added` (the row is read again then). A paused run's requests, sealed by the write, are not known here."""
    count = row.message_count + len(added)
    if after is None or after.revision != stored.revision or after.message_count != count:
        return None
    if added and after.deferred_tool_requests is not None:
        return None
    if after.window_start in (0, row.window_start):
        before_window = None if after.window_start == 0 else row.before_window
    else:
        kept = () if before is None or before.revision != row.revision else before.entries
        known = {entry.position: entry.entry_id for entry in kept}
        known.update((row.message_count + i, entry.id) for i, entry in enumerate(added))
        if (before_window := known.get(after.window_start - 1)) is None:
            return None
    return row._replace(
        revision=stored.revision,
        message_count=count,
        head_end=after.head_end,
        window_start=after.window_start,
        tip=added[-1].id if added else row.tip,
        before_window=before_window,
        usage=stored.usage,
        deferred_tool_requests=None if added else row.deferred_tool_requests,
        updated_at=stored.updated_at,
    )


def window_entries(
    window: LoadedWindow, parent: str | None, messages: Sequence[ModelMessage] | None = None
) -> list[ConversationEntry]:
    """A stored window as the entries a conversation load hands out, the first following entry `parent`; holding
    `messages` (copies of the window's) when given."""
    entries: list[ConversationEntry] = []
    for message, entry_id in zip(window.messages if messages is None else messages, window.entry_ids, strict=True):
        # A bridge standing alone (before a tail that opens with a response) is no archived message.
        entry = ConversationEntry(id=entry_id or f'summary-{window.summary_pk}', parent_id=parent, message=message)
        entries.append(entry)
        parent = entry.id
    return entries
