"""Branching a session: rewind its active path, switch to another branch, list its branches, fork it.

Nothing is deleted: a rewind starts a new segment at the rewind point and leaves the path it left
as a branch; a switch makes another branch's path active. Each path keeps its own window: a path
made active resumes from the last summary wholly on it, so no summary of another branch reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage
from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from processors.cut_points import ToolPairing

from .._codec import load_usage, now
from .._db.database import Database, active_segment, find_session
from .._db.sealing import Vault
from .._ids import new_token
from ..errors import SessionConflict
from ..rows import MessageRow, SegmentRow, SessionRow
from .archive import add_root_segment, copy_path, insert_segment, insert_summary, new_session_row
from .prompts import requests_with_id
from .records import LoadedWindow, NewSummary
from .review import last_prompt, newest
from .runs import window_on_path
from .tree import (
    Span,
    best_summary,
    branch_segment,
    entry_at,
    on_path,
    path_spans,
    session_segments,
    span_at,
    spans_of,
    summary_chain_on,
    truncated,
)
from .windows import WindowProcessor

__all__ = (
    'BeforePrompt',
    'before_prompt',
    'fork',
    'last_prompt_position',
    'move_head',
    'prompt_position',
    'rewind',
    'switch',
)


async def rewind(database: Database, session_id: str, scope: str | None, position: int) -> None:
    """Make the active path its first `position` messages; the rest stays stored as a branch.

    Raises:
        ValueError: `position` is outside the path, or would separate a tool call from its return.
        SessionConflict: Another writer changed the session meanwhile; nothing changed.
    """

    async def work(db: AsyncSession) -> None:
        row = await find_session(db, session_id, scope)
        if not isinstance(position, int) or not 0 <= position <= row.message_count:
            raise ValueError(f'position must be 0 to {row.message_count} (the active path length); got {position!r}.')
        if position == row.message_count:
            return
        spans = await path_spans(db, row.pk, active_segment(row), row.message_count)
        await _check_pair_safe(db, database.sealer.vault(session_id, row.pk), spans, position)
        parent = span_at(spans, position - 1).segment_pk if position > 0 else None
        left = await entry_at(db, active_segment(row), row.message_count - 1)
        head_end, window_start = await _window_of(db, row, truncated(spans, position), prefix=True)
        await _leave_path(db, row)
        segment_pk = await insert_segment(db, row.pk, parent, position)
        await _activate(db, row, segment_pk, position, head_end, window_start, _left(row.branches, left))

    await database.write(session_id, work)


@dataclass(frozen=True)
class BeforePrompt:
    """The active path as it stood before one of its user prompts: what a run of that prompt sent again (an edit,
    a regenerate) starts from, read without changing anything."""

    window: LoadedWindow | None
    """The window of the path before the prompt, with that path's own latest summary, as a rewind there would
    leave it; `None` for the session's first message, before which there is nothing."""
    before_window: str | None
    """The entry id of the message just before the window's first (`None` when the window opens the path)."""
    position: int
    prompt: ModelMessage
    """The prompt's request as stored."""
    prompt_id: str
    """Its entry id."""
    revision: str
    """The session's revision when this was read: a save of the new turn must find it unchanged."""
    tip: str | None
    """The entry id of the active path's newest message, which becomes a branch's tip once the new turn is saved."""
    branches: list[str]
    """The session's branch tips as its conversation record lists them."""


async def before_prompt(
    database: Database, session_id: str, scope: str | None, message_id: str, processor: WindowProcessor
) -> BeforePrompt | None:
    """The active path before its newest user prompt whose UI message id, or entry id, is `message_id`; `None`
    when the path holds no such prompt. The window is shaped by `processor`, as a run's is.

    Raises:
        SessionNotFound: No session `session_id` under `scope`.
    """
    async with database.read() as db:
        row = await find_session(db, session_id, scope)
        vault = database.sealer.vault(session_id, row.pk)
        found = await _prompt_on_path(db, vault, row, message_id)
        if found is None:
            return None
        position, prompt, prompt_id = found
        spans = await path_spans(db, row.pk, active_segment(row), row.message_count)
        window, before_window = None, None
        if position > 0:
            kept = truncated(spans, position)
            head_end, window_start = await _window_of(db, row, kept, prefix=True, continued=True)
            window = (await window_on_path(db, vault, row, kept, head_end, window_start)).loaded(processor)
            if window.positions and window.positions[0] > 0:
                before_window = await entry_at(
                    db, span_at(kept, window.positions[0] - 1).segment_pk, window.positions[0] - 1
                )
        tip = await entry_at(db, active_segment(row), row.message_count - 1)
        return BeforePrompt(
            window=window,
            before_window=before_window,
            position=position,
            prompt=prompt,
            prompt_id=prompt_id,
            revision=row.revision,
            tip=tip,
            branches=[str(t) for t in row.branches or ()],
        )


async def prompt_position(database: Database, session_id: str, message_id: str) -> int | None:
    """The position on the session's active path of its newest user prompt whose UI message id or entry id is
    `message_id`; `None` if it has none (or there is no such session)."""
    async with database.read() as db:
        row = await db.scalar(select(SessionRow).where(SessionRow.session_id == session_id))
        if row is None:
            return None
        found = await _prompt_on_path(db, database.sealer.vault(session_id, row.pk), row, message_id)
    return None if found is None else found[0]


async def _prompt_on_path(
    db: AsyncSession, vault: Vault, row: SessionRow, message_id: str
) -> tuple[int, ModelMessage, str] | None:
    """The newest request on the session's active path holding a user prompt whose UI message id or entry id is
    `message_id`: its position, message and entry id. Two index lookups; the path and the one row found are read
    only when a request anywhere in the session is known so (a new message, the common case, costs one read)."""
    found = await requests_with_id(db, vault.sealer, vault.session_pk, message_id)
    if not found:
        return None
    spans = await path_spans(db, row.pk, active_segment(row), row.message_count)
    for segment_pk, position, entry_id in found:
        if any(span.segment_pk == segment_pk and span.start <= position < span.end for span in spans):
            payload = await db.scalar(select(MessageRow.payload).where(MessageRow.entry_id == entry_id))
            assert payload is not None
            return position, vault.message(position, payload), entry_id
    return None


async def switch(database: Database, session_id: str, scope: str | None, branch: str | int) -> None:
    """Make the branch `branch` (a tip or a number, from `list_branches`) the active path; the path left stays a
    branch.

    Raises:
        ValueError: The session has no branch `branch`.
        SessionConflict: Another writer changed the session meanwhile; nothing changed.
    """

    async def work(db: AsyncSession) -> None:
        row = await find_session(db, session_id, scope)
        target = await branch_segment(db, row, branch)
        if target.pk == row.active_segment_pk:
            return
        last_held = await db.scalar(newest(MessageRow.position, target.pk))
        length = target.starts_at if last_held is None else last_held + 1
        spans = await path_spans(db, row.pk, target.pk, length)
        head_end, window_start = await _window_of(db, row, spans, saved=target)
        left = await entry_at(db, active_segment(row), row.message_count - 1)
        reached = await entry_at(db, target.pk, length - 1)
        await _leave_path(db, row)
        branches = [tip for tip in _left(row.branches, left) if tip != reached]
        await _activate(db, row, target.pk, length, head_end, window_start, branches)

    await database.write(session_id, work)


async def move_head(
    db: AsyncSession, row: SessionRow, at: tuple[int, int] | None, *, length: int, continued: bool = False
) -> tuple[int, int]:
    """Make the path ending with the message at `at` (segment, position) active; the empty path for `None`.

    What the session's conversation-store record says when its head moves: appends then continue from
    there, in that segment if the message is its last, else in a new segment forked after it (a new root
    for the empty path). The path left keeps its window, as with `switch`. The caller has already
    claimed the session row under its revision, and says the active path's `length` before the move;
    `continued` that messages are appended at once (see `_window_of`). Returns the active segment and the new
    path's length.
    """
    segments = await session_segments(db, row.pk)
    current = spans_of(segments, active_segment(row), length)
    if at is None:
        parent, length, target = None, 0, None
        spans: list[Span] = []
    else:
        parent, length = at[0], at[1] + 1
        continued = await db.scalar(
            select(MessageRow.pk).where(MessageRow.segment_pk == parent, MessageRow.position == length)
        )
        target = None if continued is not None else await db.get(SegmentRow, parent)
        spans = spans_of(segments, parent, length)
    prefix = at is not None and any(s.segment_pk == at[0] and s.start <= at[1] < s.end for s in current)
    head_end, window_start = await _window_of(db, row, spans, saved=target, prefix=prefix, continued=continued)
    await _leave_path(db, row)
    segment_pk = target.pk if target is not None else await insert_segment(db, row.pk, parent, length)
    await db.execute(
        update(SessionRow)
        .where(SessionRow.pk == row.pk)
        .values(active_segment_pk=segment_pk, message_count=length, head_end=head_end, window_start=window_start)
    )
    return segment_pk, length


async def fork(
    database: Database, session_id: str, scope: str | None, at: int, new_session_id: str, new_scope: str | None
) -> str | None:
    """A new session whose path is the first `at` messages of this one's active path, with their summaries.

    Returns the fork's scope: `new_scope`, else the source's.

    The messages are copied (the new session then lives on its own: deleting either leaves the other
    whole), and so is every summary wholly inside them, so the fork's window resumes where the source's
    would have at `at`, without calling the summarizer.

    Raises:
        ValueError: `at` is outside the active path, or would separate a tool call from its return.
        SessionConflict: `new_session_id` is taken.
    """

    async def work(db: AsyncSession) -> str | None:
        row = await find_session(db, session_id, scope)
        source = database.sealer.vault(session_id, row.pk)
        if not isinstance(at, int) or not 0 <= at <= row.message_count:
            raise ValueError(f'at must be 0 to {row.message_count} (the active path length); got {at!r}.')
        spans = await path_spans(db, row.pk, active_segment(row), row.message_count)
        if at < row.message_count:
            await _check_pair_safe(db, source, spans, at, doing='Forking at')
        kept = truncated(spans, at)
        head_end = min(row.head_end, at)
        window_start = (
            row.window_start
            if row.window_start < at
            else await _resumed_tail(db, row.pk, kept, head_end, ending_by=at - 1)
        )
        chain = await summary_chain_on(db, row.pk, kept, ending_by=window_start)
        fork_scope = new_scope if new_scope is not None else row.scope
        copy = new_session_row(
            new_session_id,
            fork_scope,
            message_count=at,
            head_end=head_end,
            window_start=window_start,
        )
        db.add(copy)
        try:
            await db.flush()
        except IntegrityError:
            raise SessionConflict(
                new_session_id, 'already exists', advice='Fork into another id, or delete that session first.'
            ) from None
        target = database.sealer.vault(new_session_id, copy.pk)
        copy.metadata_ = target.seal_json('metadata', source.open_json('metadata', row.metadata_))
        segment_pk = await add_root_segment(db, copy.pk)
        await copy_path(db, kept, at, source, target, segment_pk)
        previous: int | None = None
        for summary in chain:
            made = NewSummary(
                summary.covers_from,
                summary.covers_to,
                source.open('summary', summary.text),
                summary.tokens,
                summary.model_name,
                load_usage(summary.usage),
            )
            previous = await insert_summary(db, target, segment_pk, previous, made, summary.created_at)
        return fork_scope

    return await database.write(new_session_id, work)


async def _check_pair_safe(
    db: AsyncSession, vault: Vault, spans: list[Span], position: int, *, doing: str = 'Rewinding to'
) -> None:
    """Refuse a cut at `position` that would leave a tool call on one side and its answer on the other (paired by
    position: ids repeat across responses); the error says what was asked (`doing`: 'Rewinding to', 'Forking at')."""
    query = on_path(select(MessageRow.position, MessageRow.payload), spans, (0, spans[-1].end))
    pairing = ToolPairing()
    for at, payload in (await db.execute(query)).all():
        message = vault.message(at, payload)
        for part, call in pairing.add(at, message):
            if 0 <= call < position <= at:
                tool_call_id = getattr(message.parts[part], 'tool_call_id', None)
                raise ValueError(
                    f'{doing} position {position} would separate tool call {tool_call_id!r} from its return; '
                    'choose a position between turns, or just before an answer.'
                )


async def _leave_path(db: AsyncSession, row: SessionRow) -> None:
    """Keep the active path's window on its segment, so switching back resumes it as it was.

    A segment left before any message reached it (a rewind nobody ran from) holds nothing and is
    nobody's parent: it goes, rather than listing an empty branch.
    """
    segment_pk = active_segment(row)
    if await db.scalar(select(func.count()).where(MessageRow.segment_pk == segment_pk)):
        await db.execute(
            update(SegmentRow)
            .where(SegmentRow.pk == segment_pk)
            .values(head_end=row.head_end, window_start=row.window_start)
        )
    else:
        await db.execute(delete(SegmentRow).where(SegmentRow.pk == segment_pk))


async def _window_of(
    db: AsyncSession,
    row: SessionRow,
    spans: list[Span],
    *,
    saved: SegmentRow | None = None,
    prefix: bool = False,
    continued: bool = False,
) -> tuple[int, int]:
    """The window (head end, tail start) of the path `spans` when it becomes active.

    A branch tip resumes the window it was left with; a prefix of the active path keeps the active
    window when that still leaves it a tail; any other path resumes after its last summary wholly on it.
    `continued` says new messages follow at once (a save branching off, a prompt sent again), which then are
    the tail: a summary may end where the path does.
    """
    if saved is not None and saved.head_end is not None and saved.window_start is not None:
        return saved.head_end, saved.window_start
    length = spans[-1].end if spans else 0
    head_end = min(row.head_end, length)
    if prefix and row.window_start < length:
        return head_end, row.window_start
    return head_end, await _resumed_tail(db, row.pk, spans, head_end, ending_by=length if continued else length - 1)


async def _resumed_tail(db: AsyncSession, session_pk: int, spans: list[Span], head_end: int, *, ending_by: int) -> int:
    """Where a path's tail starts when its window is rebuilt: after the last summary wholly on it ending by
    `ending_by`, else the head.

    A path nothing follows yet needs its summary to leave a tail (to end before the path does), or the path
    would end at its summary, and an edit made there would find the summary before the one it needs: so
    `ending_by` is the path's end but one, unless new messages follow at once.
    """
    summary = await best_summary(db, session_pk, spans, ending_by=ending_by) if spans else None
    return head_end if summary is None else max(head_end, summary.covers_to)


def _left(branches: list[Any], tip: str | None) -> list[str]:
    """The record's branch tips once the path ending in `tip` is left: it becomes the newest (pydantic-ai's order)."""
    kept = [str(t) for t in branches or () if t != tip]
    return kept if tip is None else [*kept, tip]


async def _activate(
    db: AsyncSession,
    row: SessionRow,
    segment_pk: int,
    length: int,
    head_end: int,
    window_start: int,
    branches: list[str],
) -> None:
    moved = await db.execute(
        update(SessionRow)
        .where(SessionRow.pk == row.pk, SessionRow.revision == row.revision)
        .values(
            active_segment_pk=segment_pk,
            message_count=length,
            head_end=head_end,
            window_start=window_start,
            branches=branches,
            revision=new_token(),
            updated_at=now(),
        )
    )
    if moved.rowcount != 1:  # type: ignore[attr-defined]
        raise SessionConflict(row.session_id)


async def last_prompt_position(database: Database, session_id: str, scope: str | None) -> int | None:
    """The position of the last user prompt on the active path; `None` if it has none."""
    async with database.read() as db:
        row = await find_session(db, session_id, scope)
        spans = await path_spans(db, row.pk, active_segment(row), row.message_count)
        found = await last_prompt(db, database.sealer.vault(session_id, row.pk), spans)
    return None if found is None else found[0]
