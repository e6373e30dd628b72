"""The run cycle: a session's window loaded (from a per-process cache when it still holds), and a run stored.

A run reads the window it starts from (pinned head, latest summary, kept tail) and writes back its
messages, summaries and the window's new bounds. The store that wrote a window knows it: it keeps the
decoded rows per session, keyed by the revision it wrote, so the next run in the same process checks
one indexed row instead of re-reading and re-decoding. Every write anywhere (another process included)
gives the session a new revision, and a window whose revision is not the stored one is read again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ._archive import insert_messages, insert_summary
from ._codec import decode, dump_usage, now
from ._database import Database
from ._ids import check_id, new_token
from ._run_state import LoadedWindow, RunRecord, StoredWindow, WindowProcessor, head_read
from ._telemetry import span
from ._tree import Span, on_path, path_spans, usable_summaries
from .errors import SessionConflict, SessionNotFound
from .rows import MessageRow, SegmentRow, SessionRow, SummaryRow

__all__ = ('load_window', 'store_run')

_HEAD = (
    select(
        SessionRow.pk,
        SessionRow.scope,
        SessionRow.revision,
        SessionRow.message_count,
        SessionRow.head_end,
        SessionRow.window_start,
        SessionRow.active_segment_pk,
        SessionRow.usage,
        SegmentRow.parent_pk.label('forked'),
    )
    .outerjoin(SegmentRow, SegmentRow.pk == SessionRow.active_segment_pk)
    .where(SessionRow.session_id == bindparam('session_id'))
)
"""A session's window bounds and revision: the one indexed row a cached window is checked against."""


async def load_window(
    database: Database, session_id: str, scope: str | None, processor: WindowProcessor
) -> LoadedWindow:
    """The stored window, rebuilt from the latest summary and the kept tail; the archive is not read.

    With the window cached at the session's revision, that is one indexed row read.
    """
    check_id(session_id)
    with span('load_window', database.backend, session_id) as current:
        async with database.connect() as db:
            row = (await db.execute(_HEAD, {'session_id': session_id})).first()
            if row is None or (scope is not None and row.scope != scope):
                raise SessionNotFound(session_id, scope)
            window = database.windows.get(session_id, row.pk, row.revision)
            current.set_attribute('session_store.window.cached', window is not None)
            if window is None:
                window = await _read_window(db, session_id, row)
                database.windows.put(session_id, window)
        loaded = window.loaded(processor)
        current.set_attribute('session_store.window.messages', len(loaded.messages))
        current.set_attribute('session_store.window.tokens', sum(t for t in loaded.tokens if t is not None))
        current.set_attribute('session_store.archive.messages', loaded.message_count)
    return loaded


async def _read_window(db: AsyncConnection, session_id: str, row: Row[Any]) -> StoredWindow:
    """The window read from the archive: range scans along the active path, the archive between them skipped."""
    segment_pk = row.active_segment_pk
    assert segment_pk is not None, f'session {session_id!r} has no active segment'
    # A path that never left its root segment needs no walk through the tree.
    linear = [Span(segment_pk, 0, row.message_count)]
    spans = linear if row.forked is None else await path_spans(db, row.pk, segment_pk, row.message_count)
    summary, next_summary_at = await _summaries_around(db, row.pk, spans, row.window_start)
    head = (0, head_read(row.head_end, row.window_start))
    query = select(MessageRow.position, MessageRow.payload, MessageRow.tokens)
    rows = (await db.execute(on_path(query, spans, head, (row.window_start, row.message_count)))).all()
    return StoredWindow(
        session_pk=row.pk,
        segment_pk=segment_pk,
        revision=row.revision,
        message_count=row.message_count,
        head_end=row.head_end,
        window_start=row.window_start,
        summary=summary,
        next_summary_at=next_summary_at,
        entries=tuple((position, decode(session_id, position, payload), tokens) for position, payload, tokens in rows),
        usage=row.usage or {},
    )


async def _summaries_around(
    db: AsyncConnection, session_pk: int, spans: list[Span], window_start: int
) -> tuple[tuple[int, str] | None, int | None]:
    """The summary a window starting at `window_start` builds on, and where the next one on the path ends.

    One query: the summaries wholly on the path from the widest ending by `window_start` on. Later ones
    exist only where a path was made active mid-chain; knowing where the first ends lets a cached window
    tell whether moving its start would reach it.
    """
    on_path_ = (SummaryRow.session_pk == session_pk, usable_summaries(spans))
    widest = select(func.max(SummaryRow.covers_to)).where(*on_path_, SummaryRow.covers_to <= window_start)
    rows = (
        await db.execute(
            select(SummaryRow.pk, SummaryRow.text, SummaryRow.covers_to).where(
                *on_path_, SummaryRow.covers_to >= func.coalesce(widest.scalar_subquery(), -1)
            )
        )
    ).all()
    before = [(covers_to, pk, text) for pk, text, covers_to in rows if covers_to <= window_start]
    after = [covers_to for _, _, covers_to in rows if covers_to > window_start]
    best = max(before, default=None)
    return (None if best is None else (best[1], best[2])), min(after, default=None)


_ADVANCE = (
    update(SessionRow)
    .where(SessionRow.pk == bindparam('b_pk'), SessionRow.revision == bindparam('b_revision'))
    .values(
        revision=bindparam('revision'),
        message_count=bindparam('message_count'),
        head_end=bindparam('head_end'),
        window_start=bindparam('window_start'),
        usage=bindparam('usage'),
        deferred_tool_requests=bindparam('deferred_tool_requests'),
        updated_at=bindparam('updated_at'),
    )
)
"""A run's move of its session: the revision check and the new bounds in one statement."""


async def store_run(database: Database, session_id: str, loaded: LoadedWindow, record: RunRecord) -> None:
    """Append a run's messages and summaries, and move the window, in one transaction.

    Raises:
        SessionConflict: Another run was stored since `loaded` was read; nothing was written.
    """
    revision = new_token()
    summary_pks: list[int] = []

    async def append(db: AsyncConnection) -> None:
        summary_pks.clear()
        moved = await db.execute(
            _ADVANCE,
            {
                'b_pk': loaded.session_pk,
                'b_revision': loaded.revision,
                'revision': revision,
                'message_count': loaded.message_count + len(record.messages),
                'head_end': record.head_end,
                'window_start': record.window_start,
                'usage': dump_usage(record.usage),
                'deferred_tool_requests': record.deferred_tool_requests,
                'updated_at': now(),
            },
        )
        if moved.rowcount != 1:
            raise SessionConflict(session_id)
        await insert_messages(
            db, loaded.session_pk, loaded.segment_pk, loaded.message_count, record.messages, record.tokens
        )
        previous = loaded.summary_pk
        for summary in record.summaries:
            previous = await insert_summary(db, loaded.session_pk, loaded.segment_pk, previous, summary, now())
            summary_pks.append(previous)

    with span(
        'store_run',
        database.backend,
        session_id,
        messages=len(record.messages),
        tokens=sum(record.tokens),
        summaries=len(record.summaries),
    ):
        await database.write_core(session_id, append)
    cached = database.windows.get(session_id, loaded.session_pk, loaded.revision)
    database.windows.put(session_id, None if cached is None else cached.after(revision, record, summary_pks))
