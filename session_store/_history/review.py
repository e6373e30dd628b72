"""Reads for review: the sessions, a session's raw archive, its summary chain and its branches.

Each read is its query and the decoding of its rows into plain values (`StoredSession`, `SummaryRecord`: usage
as its stored JSON; `StoredMessage`: a message as its stored JSON), which import no pydantic-ai, so the review
commands print them without it; the store's public reads make their pydantic-ai views (`SessionInfo`,
`StoredSummary`, `ModelMessage`) from these same values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from .._arguments import check_count
from .._codec import decode, load_usage, parse, utc
from .._db.database import Database, active_segment, find_session
from .._db.sealing import Vault
from .._parts import part_text
from .._paths import Segments, Span, spans_of
from ..results import Branch, Numbered, SessionInfo, StoredSummary, SummaryChain
from ..rows import MessageRow, SegmentRow, SessionRow, SummaryRow
from .tree import branch_segment, on_path, path_spans, summary_chain_on, usable_summaries

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = (
    'StoredMessage',
    'StoredSession',
    'SummaryRecord',
    'history_records',
    'last_prompt',
    'list_branches',
    'list_sessions',
    'newest',
    'read_history',
    'read_summaries',
    'session_records',
    'stored_summary',
    'summary_records',
)


_PREVIEW = 80
"""How many characters of a branch's last user prompt `list_branches` shows."""
_PROMPT_BATCH = 32
"""Requests read at a time, newest first, looking for a path's last user prompt."""


@dataclass(frozen=True)
class StoredSession:
    """A stored session as its row holds it: the fields of a `SessionInfo`, its usage still the stored JSON."""

    session_id: str
    scope: str | None
    message_count: int
    """The messages of its active path."""
    summary_count: int
    """The summaries of its active path: its window's chain, what `summaries` lists (not another branch's)."""
    usage: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]
    branch_count: int
    title: str | None

    def info(self) -> SessionInfo:
        """As `SessionStore.sessions()` hands it out: the usage a pydantic-ai `RunUsage`."""
        return SessionInfo(**{**vars(self), 'usage': load_usage(self.usage)})


@dataclass(frozen=True)
class SummaryRecord(Numbered):
    """A link of a summary chain as its row holds it (opened): the fields of a `StoredSummary`, its usage the stored
    JSON."""

    index: int
    covers_from: int
    covers_to: int
    text: str
    tokens: int
    model_name: str | None
    usage: dict[str, Any]
    created_at: datetime

    def summary(self) -> StoredSummary:
        """As the store hands it out: the usage a pydantic-ai `RunUsage`."""
        return StoredSummary(**{**vars(self), 'usage': load_usage(self.usage)})


@dataclass(frozen=True)
class StoredMessage:
    """An archived message as its row holds it (opened): its JSON, made a pydantic-ai message only when asked."""

    session_id: str
    position: int
    payload: str

    @cached_property
    def stored(self) -> dict[str, Any]:
        """The message in its stored JSON form, which `_parts` reads; an error naming it if its row is corrupt."""
        return parse(self.session_id, self.position, self.payload)

    def message(self) -> ModelMessage:
        """As the store hands it out: a pydantic-ai message."""
        return decode(self.session_id, self.position, self.payload)


async def list_sessions(
    database: Database, *, scope: str | None, limit: int | None, offset: int = 0
) -> list[SessionInfo]:
    """The stored sessions, most recently updated first, skipping the first `offset`; under `scope`, only its own."""
    return [record.info() for record in await session_records(database, scope=scope, limit=limit, offset=offset)]


async def session_records(
    database: Database, *, scope: str | None, limit: int | None, offset: int = 0
) -> list[StoredSession]:
    """`list_sessions`' sessions, as their rows hold them."""
    _check_page(offset, limit)
    newest_first = (SessionRow.updated_at.desc(), SessionRow.pk.desc())
    page = select(SessionRow.pk).order_by(*newest_first)
    if scope is not None:
        page = page.where(SessionRow.scope == scope)
    if limit is not None or offset:
        page = page.limit(limit).offset(offset)
    # The page is chosen first, so the counts are made for its rows only, not for every row an offset skips.
    chosen = page.subquery()
    summaries = select(func.count(SummaryRow.pk)).where(SummaryRow.session_pk == SessionRow.pk).scalar_subquery()
    branches = select(func.count(SegmentRow.pk)).where(SegmentRow.session_pk == SessionRow.pk).scalar_subquery()
    query = select(SessionRow, summaries, branches).join(chosen, chosen.c.pk == SessionRow.pk).order_by(*newest_first)
    async with database.read() as db:
        rows = (await db.execute(query)).all()
        on_path = await _summaries_on_active_paths(db, [row for row, stored, _ in rows if stored])
    sealer = database.sealer
    return [
        StoredSession(
            session_id=row.session_id,
            scope=row.scope,
            message_count=row.message_count,
            summary_count=on_path.get(row.pk, 0),
            usage=row.usage,
            created_at=utc(row.created_at),
            updated_at=utc(row.updated_at),
            metadata=sealer.open_json(row.session_id, row.pk, 'metadata', row.metadata_),
            branch_count=branch_count,
            title=None if row.title is None else sealer.open(row.session_id, row.pk, 'title', row.title),
        )
        for row, _, branch_count in rows
    ]


_COUNTED_AT_ONCE = 100
"""Sessions whose summaries one statement counts: each adds a condition per segment of its path."""


async def _summaries_on_active_paths(db: AsyncSession, rows: Sequence[SessionRow]) -> dict[int, int]:
    """How many summaries each session's active path has (by session pk; none for a session not in the answer).

    What `message_count` counts the messages of, so that a listing's two counts mean one path: the summaries its
    window's chain builds on (those wholly on the path, `usable_summaries`, ending by its window's start), which are
    what `summaries ID` lists and a session page counts. A summary of another branch is not one of them. Two
    statements for a page of sessions: their segments, and the summaries counted.
    """
    counts: dict[int, int] = {}
    for start in range(0, len(rows), _COUNTED_AT_ONCE):
        batch = rows[start : start + _COUNTED_AT_ONCE]
        trees: dict[int, Segments] = {row.pk: {} for row in batch}
        segments = select(SegmentRow.session_pk, SegmentRow.pk, SegmentRow.parent_pk, SegmentRow.starts_at)
        for session_pk, pk, parent_pk, starts_at in await db.execute(
            segments.where(SegmentRow.session_pk.in_(list(trees)))
        ):
            trees[session_pk][pk] = (parent_pk, starts_at)
        on_path = or_(
            *(
                and_(
                    SummaryRow.session_pk == row.pk,
                    SummaryRow.covers_to <= row.window_start,
                    usable_summaries(spans_of(trees[row.pk], active_segment(row), row.message_count)),
                )
                for row in batch
            )
        )
        counted = select(SummaryRow.session_pk, func.count()).where(on_path).group_by(SummaryRow.session_pk)
        counts.update({session_pk: count for session_pk, count in await db.execute(counted)})
    return counts


async def read_history(
    database: Database,
    session_id: str,
    *,
    scope: str | None,
    offset: int,
    limit: int | None,
    branch: str | int | None = None,
) -> list[ModelMessage]:
    """`limit` messages from position `offset` (`None`: all of them) of the active path, or of `branch`'s."""
    records = await history_records(database, session_id, scope=scope, offset=offset, limit=limit, branch=branch)
    return [record.message() for record in records]


async def history_records(
    database: Database,
    session_id: str,
    *,
    scope: str | None,
    offset: int,
    limit: int | None,
    branch: str | int | None = None,
) -> list[StoredMessage]:
    """`read_history`'s messages, as their rows hold them."""
    _check_page(offset, limit)
    async with database.read() as db:
        row = await find_session(db, session_id, scope)
        tip, length = (active_segment(row), row.message_count) if branch is None else await _branch_end(db, row, branch)
        spans = await path_spans(db, row.pk, tip, length)
        query = on_path(select(MessageRow.position, MessageRow.payload), spans, (offset, length))
        if limit is not None:
            query = query.limit(limit)
        rows = (await db.execute(query)).all()
    vault = database.sealer.vault(session_id, row.pk)
    return [StoredMessage(session_id, position, vault.payload(position, payload)) for position, payload in rows]


async def _branch_end(db: AsyncSession, row: SessionRow, branch: str | int) -> tuple[int, int]:
    """The segment the branch `branch` (a `Branch.tip`, or a `Branch.number`) ends in, and its path's length."""
    segment = await branch_segment(db, row, branch)
    own = await db.scalar(select(func.count()).where(MessageRow.segment_pk == segment.pk)) or 0
    return segment.pk, segment.starts_at + own


async def read_summaries(database: Database, session_id: str, *, scope: str | None) -> SummaryChain:
    """The summary chain of the session's active path, oldest first (the links its window builds on), with how
    many summaries the session stores on its other branches."""
    links, elsewhere = await summary_records(database, session_id, scope=scope)
    return SummaryChain([link.summary() for link in links], elsewhere=elsewhere)


async def summary_records(database: Database, session_id: str, *, scope: str | None) -> tuple[list[SummaryRecord], int]:
    """`read_summaries`' chain as its rows hold it, and how many summaries the session stores besides."""
    async with database.read() as db:
        row = await find_session(db, session_id, scope)
        spans = await path_spans(db, row.pk, active_segment(row), row.message_count)
        chain = await summary_chain_on(db, row.pk, spans, ending_by=row.window_start)
        stored = await db.scalar(select(func.count(SummaryRow.pk)).where(SummaryRow.session_pk == row.pk)) or 0
    vault = database.sealer.vault(session_id, row.pk)
    links = [summary_record(vault, index, summary) for index, summary in enumerate(chain)]
    return links, stored - len(links)


def stored_summary(vault: Vault, index: int, summary: SummaryRow) -> StoredSummary:
    """A summary row as the store hands it back (opened), as link `index` of its chain."""
    return summary_record(vault, index, summary).summary()


def summary_record(vault: Vault, index: int, summary: SummaryRow) -> SummaryRecord:
    """A summary row opened, as link `index` of its chain."""
    return SummaryRecord(
        index=index,
        covers_from=summary.covers_from,
        covers_to=summary.covers_to,
        text=vault.open('summary', summary.text),
        tokens=summary.tokens,
        model_name=summary.model_name,
        usage=summary.usage,
        created_at=utc(summary.created_at),
    )


def _check_page(offset: int, limit: int | None) -> None:
    """Both doors' pages (`SessionStore`'s and `Session`'s) are checked here, before any I/O."""
    check_count(offset, 'offset')
    if limit is not None:
        check_count(limit, 'limit')


async def list_branches(database: Database, session_id: str, scope: str | None) -> list[Branch]:
    """Every path of the session that ends in a segment's last message, oldest branch first, numbered from 1 in
    that order (see `branch_segment`)."""
    async with database.read() as db:
        row = await find_session(db, session_id, scope)
        vault = database.sealer.vault(session_id, row.pk)

        # A segment's positions are consecutive and appended in order, so its last message (one index seek
        # per segment) gives both its length and when it was last written: no scan of the messages.
        last_position = newest(MessageRow.position, SegmentRow.pk).correlate(SegmentRow).scalar_subquery()
        last_at = newest(MessageRow.created_at, SegmentRow.pk).correlate(SegmentRow).scalar_subquery()
        segments = (
            await db.execute(
                select(SegmentRow, last_position, last_at)
                .where(SegmentRow.session_pk == row.pk)
                .order_by(SegmentRow.pk)
            )
        ).all()
        tree = {segment.pk: (segment.parent_pk, segment.starts_at) for segment, _, _ in segments}
        branches = []
        for number, (segment, last_held, written_at) in enumerate(segments, start=1):
            length = segment.starts_at if last_held is None else last_held + 1
            spans = spans_of(tree, segment.pk, length)
            branches.append(
                Branch(
                    tip=str(segment.pk),
                    number=number,
                    active=segment.pk == row.active_segment_pk,
                    message_count=length,
                    forked_at=None if segment.parent_pk is None else segment.starts_at,
                    parent=None if segment.parent_pk is None else str(segment.parent_pk),
                    updated_at=utc(written_at if written_at is not None else segment.created_at),
                    preview=_preview(await last_prompt(db, vault, spans)),
                )
            )
    return branches


def newest(column: Any, segment_pk: Any) -> Select[Any]:
    """`column` of a segment's last message: one index seek, since a segment's positions are appended in order."""
    return select(column).where(MessageRow.segment_pk == segment_pk).order_by(MessageRow.position.desc()).limit(1)


def _preview(prompt: tuple[int, str] | None) -> str | None:
    if prompt is None:
        return None
    text = prompt[1]
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + '…'


async def last_prompt(db: AsyncSession, vault: Vault, spans: list[Span]) -> tuple[int, str] | None:
    """The last user prompt on the path: its position and its text (its media left out), flattened; read from the
    stored JSON, so listing branches imports no pydantic-ai."""
    for span in reversed(spans):
        end = span.end
        while end > span.start:
            # Newest first, a few at a time: the prompt is usually among the last requests, and a long
            # branch shouldn't be read whole to find it.
            rows = (
                await db.execute(
                    select(MessageRow.position, MessageRow.payload)
                    .where(
                        MessageRow.segment_pk == span.segment_pk,
                        MessageRow.position >= span.start,
                        MessageRow.position < end,
                        MessageRow.kind == 'request',
                    )
                    .order_by(MessageRow.position.desc())
                    .limit(_PROMPT_BATCH)
                )
            ).all()
            for at, payload in rows:
                for part in reversed(parse(vault.session_id, at, vault.payload(at, payload))['parts']):
                    if part['part_kind'] == 'user-prompt':
                        return at, ' '.join(part_text(part)[0].split())
            if len(rows) < _PROMPT_BATCH:
                break
            end = rows[-1][0]
    return None
