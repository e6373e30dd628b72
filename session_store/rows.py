"""The tables: sessions, the segments (branches) of their archive, its raw messages, and summaries.

One schema for SQLite and PostgreSQL.

The schema is made only by the alembic migrations in `migrations/`; these rows describe it for
queries. Messages are stored once each, in order, as pydantic-ai's own JSON, with the text they
carry (for search) and their token count (so it is never recomputed).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ('Base', 'MessageRow', 'SegmentRow', 'SessionRow', 'SummaryRow')

# BIGINT keys on PostgreSQL; SQLite's INTEGER PRIMARY KEY is its rowid, and only that autoincrements.
Key = BigInteger().with_variant(Integer(), 'sqlite')


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: DateTime(timezone=True),
        dict[str, Any]: JSON,
        list[Any]: JSON,
    }


class SessionRow(Base):
    """A conversation: its identity, where its window stands, and its optimistic-concurrency revision."""

    __tablename__ = 'sessions'

    pk: Mapped[int] = mapped_column(Key, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(String(255), unique=True)
    scope: Mapped[str | None] = mapped_column(String(255), index=True)
    revision: Mapped[str] = mapped_column(String(64))
    """A fresh token on every write; a writer holding an older one has lost the race."""
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    head_end: Mapped[int] = mapped_column(Integer, default=0)
    """Messages before this position open every window verbatim."""
    window_start: Mapped[int] = mapped_column(Integer, default=0)
    """The position the window's tail starts at; what lies between is summarized or dropped."""
    usage: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    deferred_tool_requests: Mapped[dict[str, Any] | str | None] = mapped_column(JSON)
    """The tool calls a paused run waits on; in an encrypted store, sealed (a JSON string, see `_db.sealing`)."""
    forked_from: Mapped[str | None] = mapped_column(String(255))
    forked_at: Mapped[str | None] = mapped_column(String(64))
    branches: Mapped[list[Any]] = mapped_column(JSON, default=list)
    metadata_: Mapped[dict[str, Any] | str] = mapped_column('metadata', JSON, default=dict)
    """The user's own data about the session; in an encrypted store, sealed (a JSON string). A conversation's record
    holds it as its `metadata` (`None` for `{}`)."""
    title: Mapped[str | None] = mapped_column(Text)
    """What the conversation is about (pydantic-ai's `ConversationRecord.title`); in an encrypted store, sealed."""
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime] = mapped_column(index=True)
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    """The run holding the session while writers that asked to wait queue behind it."""
    lease_expires: Mapped[datetime | None]
    """When that lease lapses unless renewed; a crashed holder's lease lapses on its own."""
    active_segment_pk: Mapped[int | None] = mapped_column(Key)
    """The segment the active path ends in; its first `message_count` positions are the active path."""


class SegmentRow(Base):
    """A branch of a session's archive: messages at consecutive positions, forked from a parent segment.

    Its path is its ancestors' messages up to where each child leaves them, then its own: a segment
    that starts at position p takes positions below p from its parent's path.
    """

    __tablename__ = 'segments'

    pk: Mapped[int] = mapped_column(Key, primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(Key, ForeignKey('sessions.pk', ondelete='CASCADE'), index=True)
    parent_pk: Mapped[int | None] = mapped_column(Key, ForeignKey('segments.pk', ondelete='CASCADE'))
    starts_at: Mapped[int] = mapped_column(Integer)
    """The position of its first message: where it leaves its parent's path (0 for a root)."""
    head_end: Mapped[int | None] = mapped_column(Integer)
    """Its path's window head when another path was made active; the session's own columns hold the active one's."""
    window_start: Mapped[int | None] = mapped_column(Integer)
    """Its path's window tail start when another path was made active."""
    created_at: Mapped[datetime]


class MessageRow(Base):
    """One archived message, at its position in its session."""

    __tablename__ = 'messages'
    __table_args__ = (
        UniqueConstraint('segment_pk', 'position', name='uq_messages_segment_position'),
        # Only the rows with an id (a front end's prompts), built after the revisions (`_db.backfills`).
        Index(
            'ix_messages_ui_id',
            'session_pk',
            'ui_message_id',
            postgresql_where=text('ui_message_id IS NOT NULL'),
            sqlite_where=text('ui_message_id IS NOT NULL'),
        ),
    )

    pk: Mapped[int] = mapped_column(Key, primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(Key)
    """Its segment's session (no key of its own on PostgreSQL since revision 0007: the segment's holds it)."""
    segment_pk: Mapped[int] = mapped_column(Key, ForeignKey('segments.pk', ondelete='CASCADE'))
    position: Mapped[int] = mapped_column(Integer)
    entry_id: Mapped[str] = mapped_column(String(64), unique=True)
    """The message's id as a pydantic-ai `ConversationEntry`."""
    run_id: Mapped[str | None] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    payload: Mapped[str] = mapped_column(Text)
    """The message as `ModelMessagesTypeAdapter` JSON, byte for byte; in an encrypted store, sealed."""
    text: Mapped[str] = mapped_column(Text)
    """The text the message carries, for search; in an encrypted store, the blind hashes of its words."""
    tokens: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]
    ui_message_id: Mapped[str | None] = mapped_column(String(255))
    """The UI message id a request holding a user prompt carries (`Sealer.ui_id_form`), for finding a resubmitted
    prompt in one index lookup; in an encrypted store, its blind hash. `None` for every other message."""


class SummaryRow(Base):
    """A summary: the one it extends, and exactly which archived messages it newly covers."""

    __tablename__ = 'summaries'
    __table_args__ = (
        Index('ix_summaries_session_latest', 'session_pk', 'pk'),
        Index('ix_summaries_segment', 'segment_pk', 'covers_to'),
    )

    pk: Mapped[int] = mapped_column(Key, primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(Key, ForeignKey('sessions.pk', ondelete='CASCADE'))
    segment_pk: Mapped[int] = mapped_column(Key, ForeignKey('segments.pk', ondelete='CASCADE'))
    """The segment whose path it was made on: it covers positions of that path."""
    previous_pk: Mapped[int | None] = mapped_column(Key, ForeignKey('summaries.pk', ondelete='SET NULL'))
    covers_from: Mapped[int] = mapped_column(Integer)
    """The first position this summary folds in (the previous summary covers everything before)."""
    covers_to: Mapped[int] = mapped_column(Integer)
    """One past the last position it folds in: the window's tail starts here."""
    text: Mapped[str] = mapped_column(Text)
    """The summary; in an encrypted store, sealed."""
    tokens: Mapped[int] = mapped_column(Integer)
    model_name: Mapped[str | None] = mapped_column(String(255))
    usage: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime]
