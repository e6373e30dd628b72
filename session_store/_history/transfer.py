"""Sessions out of and into the database as `SessionExport` documents: a whole tree each way, in one transaction.

An export reads every segment, message and summary of the session, numbering them as the document does; an
import recreates them under fresh keys and entry ids, through the same writes runs use (`archive`), so
search text and token counts are stored as for any message, each dated by its own timestamp.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from .._codec import dump_usage, load_usage, utc
from .._db.database import Database, active_segment, find_session
from .._ids import new_token
from ..errors import SessionConflict, StoreError
from ..exports import ExportedSegment, ExportedSummary, SessionExport, path_of
from ..rows import MessageRow, SegmentRow, SummaryRow
from .archive import insert_messages, insert_segment, insert_summary, message_rows, new_session_row
from .records import NewSummary
from .review import stored_summary

__all__ = ('read_export', 'write_import')


async def read_export(database: Database, session_id: str, scope: str | None) -> SessionExport:
    """The session as a document, its whole tree, read in one transaction."""
    async with database.read() as db:
        row = await find_session(db, session_id, scope)
        vault = database.sealer.vault(session_id, row.pk)
        segment_rows = (
            await db.scalars(select(SegmentRow).where(SegmentRow.session_pk == row.pk).order_by(SegmentRow.pk))
        ).all()
        # Export-local keys: a segment's place in pk order, which puts every parent before its children.
        keys = {segment.pk: key for key, segment in enumerate(segment_rows)}
        segments = [
            ExportedSegment(
                parent=None if segment.parent_pk is None else keys[segment.parent_pk],
                starts_at=segment.starts_at,
                messages=[],
                tokens=[],
                head_end=segment.head_end,
                window_start=segment.window_start,
            )
            for segment in segment_rows
        ]
        rows = await db.execute(
            select(
                MessageRow.segment_pk, MessageRow.position, MessageRow.payload, MessageRow.tokens, MessageRow.created_at
            )
            .where(MessageRow.segment_pk.in_(keys))
            .order_by(MessageRow.segment_pk, MessageRow.position)
        )
        for segment_pk, position, payload, count, stored_at in rows:
            segment = segments[keys[segment_pk]]
            if position != segment.end:
                raise StoreError(
                    f'Session {session_id!r}: a branch has no message at position {segment.end}; nothing was exported.'
                )
            segment.messages.append(vault.message(position, payload))
            segment.tokens.append(count)
            segment.stored_at.append(utc(stored_at))
        summary_rows = (
            await db.scalars(select(SummaryRow).where(SummaryRow.session_pk == row.pk).order_by(SummaryRow.pk))
        ).all()
        numbers = {summary.pk: index for index, summary in enumerate(summary_rows)}
        # The record's branch tips, as (segment, position); one it names that the session no longer holds is dropped.
        tips = select(MessageRow.entry_id, MessageRow.segment_pk, MessageRow.position).where(
            MessageRow.session_pk == row.pk, MessageRow.entry_id.in_(row.branches)
        )
        located = {entry_id: (keys[pk], position) for entry_id, pk, position in await db.execute(tips)}
    active = keys[active_segment(row)]
    messages, tokens = path_of(segments, active)
    return SessionExport(
        session_id=row.session_id,
        scope=row.scope,
        messages=messages,
        tokens=tokens,
        summaries=[
            ExportedSummary(
                **vars(stored_summary(vault, index, summary)),
                segment=keys[summary.segment_pk],
                previous=None if summary.previous_pk is None else numbers.get(summary.previous_pk),
            )
            for index, summary in enumerate(summary_rows)
        ],
        head_end=row.head_end,
        window_start=row.window_start,
        usage=load_usage(row.usage),
        metadata=vault.open_json('metadata', row.metadata_),
        segments=segments,
        active_segment=active,
        branches=[located[tip] for tip in row.branches if tip in located],
        forked_from=row.forked_from,
        forked_at=row.forked_at,
        deferred_tool_requests=vault.open_json('deferred tool requests', row.deferred_tool_requests),
        title=None if row.title is None else vault.open('title', row.title),
    )


async def write_import(database: Database, document: SessionExport, session_id: str, scope: str | None) -> None:
    """Store `document` as a new session `session_id` under `scope`, its whole tree, in one transaction.

    Raises:
        ExportError: The document is inconsistent; nothing was stored.
        SessionConflict: A session with this id exists.
    """
    document.check()
    # Fresh entry ids, so the copy never collides with the session it came from.
    entry_ids = [[new_token() for _ in segment.messages] for segment in document.segments]

    async def store(db: AsyncSession) -> None:
        row = new_session_row(
            session_id,
            scope,
            message_count=len(document.messages),
            head_end=document.head_end,
            window_start=document.window_start,
            usage=dump_usage(document.usage),
        )
        row.branches = [
            entry_ids[segment][position - document.segments[segment].starts_at]
            for segment, position in document.branches
        ]
        row.forked_from, row.forked_at = document.forked_from, document.forked_at
        db.add(row)
        try:
            await db.flush()
        except IntegrityError:
            raise SessionConflict(
                session_id,
                'already exists',
                advice='Import it under another id, or delete the existing session first.',
            ) from None
        # Sealed under the session's own key, which comes from the primary key the flush gave it.
        vault = database.sealer.vault(session_id, row.pk)
        row.metadata_ = vault.seal_json('metadata', document.metadata)
        row.deferred_tool_requests = vault.seal_json('deferred tool requests', document.deferred_tool_requests)
        row.title = None if document.title is None else vault.seal('title', document.title)
        segment_pks: list[int] = []
        for key, segment in enumerate(document.segments):
            parent_pk = None if segment.parent is None else segment_pks[segment.parent]
            segment_pks.append(
                await insert_segment(
                    db,
                    row.pk,
                    parent_pk,
                    segment.starts_at,
                    head_end=segment.head_end,
                    window_start=segment.window_start,
                )
            )
            rows = message_rows(
                vault, segment_pks[-1], segment.starts_at, segment.messages, segment.tokens, entry_ids[key]
            )
            for position, (stored, message) in enumerate(zip(rows, segment.messages, strict=True)):
                # Stored as of when it was stored before (an older document holds no storing times: as of when it
                # was made), so a branch's last update stays the conversation's, not the import's.
                if segment.stored_at:
                    stored['created_at'] = segment.stored_at[position]
                elif message.timestamp is not None:
                    stored['created_at'] = utc(message.timestamp)
            await insert_messages(db, rows)
        row.active_segment_pk = segment_pks[document.active_segment]
        summary_pks: list[int] = []
        for s in document.summaries:
            summary = NewSummary(s.covers_from, s.covers_to, s.text, s.tokens, s.model_name, s.usage)
            previous = None if s.previous is None else summary_pks[s.previous]
            segment_pk = segment_pks[s.segment]
            summary_pks.append(await insert_summary(db, vault, segment_pk, previous, summary, s.created_at))

    await database.write(session_id, store)
