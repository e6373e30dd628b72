"""Paths through a session's tree of segments: which segment holds which positions, and reads along a path.

A path is read as one range scan per segment it crosses, so its cost grows with the number of branch
points on it, never with the size of the tree or the archive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVarTuple

from sqlalchemy import (
    CTE,
    ColumnElement,
    CompoundSelect,
    Row,
    Select,
    and_,
    bindparam,
    desc,
    false,
    func,
    or_,
    select,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute, aliased

from .._paths import Segments, Span, span_at, spans_of
from ..rows import MessageRow, SegmentRow, SessionRow, SummaryRow

Ts = TypeVarTuple('Ts')

__all__ = (
    'ENTRY_AT',
    'Segments',
    'Span',
    'active_paths',
    'best_summary',
    'best_summary_query',
    'branch_segment',
    'entry_at',
    'entry_before_window',
    'on_path',
    'path_spans',
    'segments_of',
    'segments_query',
    'session_segments',
    'span_at',
    'spans_of',
    'summary_chain_on',
    'tip_entry_id',
    'truncated',
    'usable_summaries',
    'wholly_on',
)


# Table columns rather than mapped attributes: the hot path's reads compile without the ORM's machinery.
_messages = MessageRow.__table__.c
_summaries = SummaryRow.__table__.c
_segments = SegmentRow.__table__.c


def segments_query(session_pk: int) -> Select[int, int | None, int]:
    """Reads the session's segments, each with its parent and the position it starts at (see `segments_of`)."""
    return select(_segments.pk, _segments.parent_pk, _segments.starts_at).where(_segments.session_pk == session_pk)


def segments_of(rows: Iterable[Row[int, int | None, int]]) -> Segments:
    """The rows `segments_query` read, as `Segments`."""
    return {pk: (parent, starts_at) for pk, parent, starts_at in rows}


async def session_segments(db: AsyncSession, session_pk: int) -> Segments:
    """The session's segments, each with its parent and the position it starts at: one SELECT."""
    return segments_of((await db.execute(segments_query(session_pk))).all())


async def branch_segment(db: AsyncSession, row: SessionRow, branch: str | int) -> SegmentRow:
    """The segment the session's branch `branch` ends in: its `Branch.tip` (a string), or its `Branch.number` (the
    session's segments numbered from 1 in the order they were made, which is their keys' order).

    Raises:
        ValueError: The session has no such branch, saying what it has.
    """
    query = select(SegmentRow).where(SegmentRow.session_pk == row.pk)
    segment = None
    if isinstance(branch, int) and not isinstance(branch, bool):
        if branch >= 1:
            segment = await db.scalar(query.order_by(SegmentRow.pk).offset(branch - 1).limit(1))
    elif isinstance(branch, str) and branch.isdigit() and len(branch) < 19:  # a bigint, on every backend
        segment = await db.scalar(query.where(SegmentRow.pk == int(branch)))
    if segment is None:
        count = await db.scalar(select(func.count()).where(SegmentRow.session_pk == row.pk)) or 0
        numbers = 'one branch, number 1' if count == 1 else f'branches numbered 1 to {count}'
        raise ValueError(
            f'Session {row.session_id!r} has no branch {branch!r}: it has {numbers} (a branch is its number, or its '
            'tip as a string, as branches() list them).'
        )
    return segment


async def path_spans(db: AsyncSession, session_pk: int, segment_pk: int, length: int) -> list[Span]:
    """The first `length` positions of the path ending in `segment_pk`, as spans from the root on."""
    return spans_of(await session_segments(db, session_pk), segment_pk, length)


def _entry_in(
    segment_pk: ColumnElement[int | None] | InstrumentedAttribute[int | None], position: ColumnElement[int]
) -> ColumnElement[str | None]:
    """The entry id at `position` of the path ending in `segment_pk`, as a scalar subquery: NULL if none.

    A segment's parent holds the position just before the segment starts, so the two rows asked for (the
    segment's own, else its parent's) cover every position a caller asks for: a path's last message, possibly in
    the segment it forked from, or the one just before a window.
    """
    child = aliased(SegmentRow, name='child')
    own = select(MessageRow.entry_id).where(MessageRow.segment_pk == segment_pk, MessageRow.position == position)
    inherited = (
        select(MessageRow.entry_id)
        .join(child, child.parent_pk == MessageRow.segment_pk)
        .where(child.pk == segment_pk, MessageRow.position == position)
    )
    return func.coalesce(own.scalar_subquery(), inherited.scalar_subquery())


ENTRY_AT = select(_entry_in(bindparam('segment_pk'), bindparam('position')))
"""The entry id at `position` of the path ending in `segment_pk` (see `_entry_in`)."""


async def entry_at(db: AsyncSession, segment_pk: int, position: int) -> str | None:
    """`ENTRY_AT`'s answer; `None` below position 0."""
    if position < 0:
        return None
    found = await db.scalar(ENTRY_AT, {'segment_pk': segment_pk, 'position': position})
    return None if found is None else str(found)


def tip_entry_id() -> ColumnElement[str | None]:
    """The `entry_id` of a session's newest message on its active path, as a correlated scalar subquery.

    That message is in the active segment, or, right after a rewind (the segment still empty), in the
    segment it forked from. NULL when the path is empty.
    """
    return _entry_in(SessionRow.active_segment_pk, SessionRow.message_count - 1)


def entry_before_window() -> ColumnElement[str | None]:
    """The `entry_id` of the message just before a session's window starts on its active path, as a correlated
    scalar subquery: the parent of the first entry a window without a head hands out. NULL at position 0."""
    return _entry_in(SessionRow.active_segment_pk, SessionRow.window_start - 1)


def on_path(query: Select[*Ts], spans: Sequence[Span], *ranges: tuple[int, int]) -> Select[*Ts] | CompoundSelect[*Ts]:
    """`query` over `messages` at the path's positions in `ranges` (each `[start, end)`), in position order.

    One range scan per span and range, unioned: each stays on the (segment, position) index, which
    one OR'd condition would not.
    """
    parts = [
        query.where(
            _messages.segment_pk == span.segment_pk,
            _messages.position >= max(start, span.start),
            _messages.position < min(end, span.end),
        )
        for start, end in ranges
        for span in spans
        if max(start, span.start) < min(end, span.end)
    ]
    if len(parts) > 1:
        return union_all(*parts).order_by('position')
    return (parts[0] if parts else query.where(_messages.position < 0)).order_by(_messages.position)


def usable_summaries(spans: Sequence[Span]) -> ColumnElement[bool]:
    """Summaries whose covered messages all lie on the path: made on one of its segments, ending before it leaves."""
    return wholly_on((span.segment_pk, span.end) for span in spans)


def wholly_on(segments: Iterable[tuple[Any, Any]]) -> ColumnElement[bool]:
    """Summaries whose covered messages all lie on a path given as `(segment, end)` pairs (values or bound
    parameters): made on one of its segments, ending by where the path leaves that segment. The one rule of which
    summaries a path may use, for every read of one."""
    return or_(false(), *(and_(_summaries.segment_pk == pk, _summaries.covers_to <= end) for pk, end in segments))


def best_summary_query(session_pk: int, spans: Sequence[Span], *, ending_by: int) -> Select[SummaryRow]:
    """The summary a window on the path starts from: of those wholly on it, ending by `ending_by`, the widest."""
    return (
        select(SummaryRow)
        .where(SummaryRow.session_pk == session_pk, usable_summaries(spans), SummaryRow.covers_to <= ending_by)
        .order_by(desc(SummaryRow.covers_to), desc(SummaryRow.pk))
        .limit(1)
    )


async def best_summary(
    db: AsyncSession, session_pk: int, spans: Sequence[Span], *, ending_by: int
) -> SummaryRow | None:
    """The summary a window on the path starts from (see `best_summary_query`)."""
    return await db.scalar(best_summary_query(session_pk, spans, ending_by=ending_by))


async def summary_chain_on(
    db: AsyncSession, session_pk: int, spans: Sequence[Span], *, ending_by: int
) -> list[SummaryRow]:
    """The summary chain a window on the path builds on, oldest first: its best summary and those it extends."""
    latest = await best_summary(db, session_pk, spans, ending_by=ending_by)
    if latest is None:
        return []
    rows = (await db.scalars(select(SummaryRow).where(SummaryRow.session_pk == session_pk))).all()
    by_pk = {summary.pk: summary for summary in rows}
    links: list[SummaryRow] = []
    link: SummaryRow | None = by_pk[latest.pk]
    while link is not None:
        links.append(link)
        link = None if link.previous_pk is None else by_pk.get(link.previous_pk)
    return links[::-1]


def truncated(spans: Sequence[Span], length: int) -> list[Span]:
    """The spans of the path's first `length` positions."""
    return [Span(span.segment_pk, span.start, min(span.end, length)) for span in spans if span.start < length]


def active_paths(session_pk: int | None = None) -> CTE:
    """Every session's active path (or one session's) as rows (session, segment, start, end): a recursive CTE.

    Each row is one span: the active segment up to the session's length, then each parent up to where
    its child starts. A message is on its session's active path when one of these rows holds it.
    """
    tip = aliased(SegmentRow, name='tip')
    base = select(
        SessionRow.pk.label('session_pk'),
        tip.pk.label('segment_pk'),
        tip.parent_pk.label('parent_pk'),
        tip.starts_at.label('start'),
        SessionRow.message_count.label('end'),
    ).join(tip, tip.pk == SessionRow.active_segment_pk)
    if session_pk is not None:
        base = base.where(SessionRow.pk == session_pk)
    paths = base.cte('active_paths', recursive=True)
    parent = aliased(SegmentRow, name='up')
    return paths.union_all(
        select(paths.c.session_pk, parent.pk, parent.parent_pk, parent.starts_at, paths.c.start).join(
            parent, parent.pk == paths.c.parent_pk
        )
    )
