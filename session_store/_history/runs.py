"""The run cycle (`Runs`): a session's window loaded, from the store's cache while it holds, and a run stored.

A run reads the window it starts from (pinned head, latest summary, kept tail) and writes back its
messages, summaries and the window's new bounds. The store that wrote a window knows it: it keeps the
decoded rows per session, keyed by the revision it wrote, so the next run in the same process checks
one indexed row instead of re-reading and re-decoding. Every write anywhere (another process included)
gives the session a new revision, and a window whose revision is not the stored one is read again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from pydantic_ai.messages import post_compaction_window
from sqlalchemy import (
    Connection,
    Integer,
    Select,
    TextualSelect,
    and_,
    bindparam,
    func,
    insert,
    literal_column,
    null,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from processors.state import Lineage

from .._codec import dump_usage, now
from .._db.database import Database
from .._db.sealing import Vault
from .._db.textual import textual
from .._ids import check_id, new_token
from .._telemetry import span
from ..errors import SessionConflict, SessionNotFound, StoreUnavailable
from ..rows import MessageRow, SegmentRow, SessionRow, SummaryRow
from .archive import MESSAGE_INSERT, SUMMARY_COLUMNS, SUMMARY_INSERT, message_rows, summary_row
from .compactions import compaction_text, summaries_in_line
from .records import Entry, LoadedWindow, RunRecord
from .tree import Span, best_summary, path_spans, segments_of, segments_query, spans_of, tip_entry_id, wholly_on
from .window_cache import WindowCache
from .windows import StoredRun, StoredWindow, WindowEngine, WindowProcessor, head_read

__all__ = ('HEAD', 'Runs', 'SessionHead', 'window_on_path')


class _Head(NamedTuple):
    """A session's window bounds and revision: the one indexed row a cached window is checked against."""

    pk: int
    scope: str | None
    revision: str
    message_count: int
    head_end: int
    window_start: int
    active_segment_pk: int | None
    usage: dict[str, Any] | None
    deferred_tool_requests: dict[str, Any] | str | None
    forked: int | None
    """The active segment's parent: `None` while the path never left its root segment."""


_sessions, _segments, _messages, _summaries = (
    SessionRow.__table__,
    SegmentRow.__table__,
    MessageRow.__table__,
    SummaryRow.__table__,
)
_HEAD = textual(
    select(
        _sessions.c.pk,
        _sessions.c.scope,
        _sessions.c.revision,
        _sessions.c.message_count,
        _sessions.c.head_end,
        _sessions.c.window_start,
        _sessions.c.active_segment_pk,
        _sessions.c.usage,
        _sessions.c.deferred_tool_requests,
        _segments.c.parent_pk,
    )
    .select_from(_sessions.outerjoin(_segments, _segments.c.pk == _sessions.c.active_segment_pk))
    .where(_sessions.c.session_id == bindparam('session_id'))
)
"""Reads a `_Head` (as text: every first open reads it, `textual`)."""


class SessionHead(NamedTuple):
    """What appending after a session's newest message needs of its row: `HEAD` reads it."""

    pk: int
    revision: str
    message_count: int
    head_end: int
    window_start: int
    active_segment_pk: int | None
    tip: str | None
    """The entry id of the active path's newest message (`None` while the path is empty)."""


HEAD = select(
    _sessions.c.pk,
    _sessions.c.revision,
    _sessions.c.message_count,
    _sessions.c.head_end,
    _sessions.c.window_start,
    _sessions.c.active_segment_pk,
    tip_entry_id().label('tip'),
).where(_sessions.c.session_id == bindparam('session_id'))
"""Reads a `SessionHead`: the session's row, as the columns a `SessionHead` names (more may follow)."""

_RELOAD = 'Load the conversation again and retry.'

_REVISION = select(_sessions.c.revision).where(_sessions.c.pk == bindparam('pk'))


_Rows = Sequence[Sequence[Any]]


class Runs:
    """A store's run cycle: `load_window` before a run, `store` after it, and the windows kept between them."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.windows = WindowCache()
        """The windows this store read or wrote last, decoded, each valid at its revision."""

    async def load_window(
        self, session_id: str, scope: str | None, processor: WindowProcessor, *, for_run: bool = False
    ) -> LoadedWindow:
        """The stored window, rebuilt from the latest summary and the kept tail; the archive is not read.

        One hop to the database: the session's row, then, unless the window is cached at its revision, the
        window's rows (one statement, two on a path that left its root segment). `for_run`: read for a run, so
        that the database out of reach says nothing of the run was stored.
        """
        check_id(session_id)
        database = self.database
        with span('load_window', database.backend, session_id) as current:
            cached = self.windows.peek(session_id)
            row, rows = await database.glance(
                lambda db: _read(db, session_id, scope, cached), session_id=session_id, writing=for_run
            )
            if row is None:
                raise SessionNotFound(session_id, scope)
            current.set_attribute('session_store.window.cached', rows is None)
            if rows is None:
                assert cached is not None
                window = cached
                self.windows.get(session_id)  # just used
            else:
                window = _stored_window(database.sealer.vault(session_id, row.pk), row, rows)
                self.windows.put(session_id, window)
            loaded = window.loaded(processor)
            current.set_attribute('session_store.window.messages', len(loaded.messages))
            current.set_attribute('session_store.window.tokens', sum(t for t in loaded.tokens if t is not None))
            current.set_attribute('session_store.archive.messages', loaded.message_count)
            # OpenTelemetry's GenAI conventions: the request is sent compacted history (a summary, or a cut).
            current.set_attribute('gen_ai.conversation.compacted', loaded.window_start > loaded.head_end)
        return loaded

    async def store(
        self,
        session_id: str,
        loaded: LoadedWindow,
        record: RunRecord,
        *,
        revision: str | None = None,
        indexed: tuple[WindowEngine, Lineage] | None = None,
    ) -> StoredRun:
        """Append a run's messages and summaries, and move the window, in one transaction; the session's
        revision becomes `revision` (a new token unless given: pydantic-ai's stores make their own). `indexed`:
        how the run's processor (a copy of the first) indexed its history, kept with the window for the next.

        On PostgreSQL a run with at most one summary (every run but a compaction on request that made several) is
        one statement, so one round trip to the server.

        Raises:
            SessionConflict: Another run was stored since `loaded` was read; nothing was written.
        """
        revision = revision or new_token()
        updated_at = now()
        # The span holds all of the store's part of a run: encoding and sealing the rows, the write, the cache.
        with span('store_run', self.database.backend, session_id) as current:
            record = _opened_at_compaction(loaded, summaries_in_line(loaded, record))
            current.set_attribute('session_store.messages', len(record.messages))
            current.set_attribute('session_store.tokens', sum(record.tokens))
            current.set_attribute('session_store.summaries', len(record.summaries))
            try:
                stored = await _write_run(self.database, session_id, loaded, record, revision, updated_at)
            except (SessionConflict, StoreUnavailable) as error:
                # A write retried after its connection was lost (or lost as it committed) may have landed the first
                # time: the session then carries this run's own revision, which no other writer could have made.
                if isinstance(error, StoreUnavailable) and error.stored is False:
                    raise
                if await self._revision_of(loaded.session_pk) != revision:
                    raise
                self.windows.put(session_id, None)
                return StoredRun([], [], dump_usage(record.usage), revision, updated_at)
            cached = self.windows.at(session_id, loaded.session_pk, loaded.revision)
            self.windows.put(session_id, None if cached is None else cached.after(revision, record, stored, indexed))
        return stored

    async def _revision_of(self, session_pk: int) -> str | None:
        """The session's revision now; `None` when it can't be read either (the server still away)."""
        try:
            return await self.database.statements(lambda db: db.execute(_REVISION, {'pk': session_pk}).scalar())
        except StoreUnavailable:
            return None

    def window_at(self, session_id: str, revision: str, processor: WindowProcessor) -> LoadedWindow | None:
        """The session's window as kept in memory, if it is the one at `revision` (read just now by the caller,
        with the session's row): no trip to the database."""
        window = self.kept(session_id, revision)
        return None if window is None else window.loaded(processor)

    def kept(self, session_id: str, revision: str) -> StoredWindow | None:
        """The session's window kept in memory, as stored, if it is the one at `revision`."""
        window = self.windows.peek(session_id)
        return None if window is None or window.revision != revision else window

    async def append(
        self,
        session_id: str,
        after: str | None,
        record: RunRecord,
        *,
        expected_revision: str,
        revision: str,
        head: SessionHead | None = None,
    ) -> StoredRun | None:
        """Append `record`'s messages after the session's newest message, whose entry id must be `after`, as a
        run's store does (its window's bounds left where they are); `None`, with nothing written, when `after` is
        not the newest (the caller branches there instead). `head` is the session's row at `expected_revision`,
        when the caller read it; else it is read here.

        Raises:
            SessionConflict: The session is gone, or not at `expected_revision`; nothing was written.
        """
        if head is None or head.revision != expected_revision:
            found = await self.database.statements(
                lambda db: db.execute(HEAD, {'session_id': session_id}).first(), session_id=session_id, writing=True
            )
            head = None if found is None else SessionHead._make(found)
        if head is None or head.revision != expected_revision:
            raise SessionConflict(session_id, 'was saved or deleted since it was loaded', advice=_RELOAD)
        if head.tip != after:
            return None
        assert head.active_segment_pk is not None
        # A summary among the messages (a compaction's, see `compactions`) extends the chain's newest link.
        extends = await self._newest_link(head) if any(map(compaction_text, record.messages)) else None
        loaded = LoadedWindow(
            session_pk=head.pk,
            segment_pk=head.active_segment_pk,
            revision=head.revision,
            message_count=head.message_count,
            head_end=head.head_end,
            window_start=head.window_start,
            summary_pk=extends,
            messages=[],
            positions=[],
            tokens=[],
            entry_ids=[],
            usage=record.usage,
        )
        bounded = replace(record, head_end=head.head_end, window_start=head.window_start, summaries=())
        # The write checks the revision again: a writer since `head` was read makes it a conflict.
        return await self.store(session_id, loaded, bounded, revision=revision)

    async def _newest_link(self, head: SessionHead) -> int | None:
        """The primary key of the newest link of the summary chain the session's window builds on, if any."""
        assert head.active_segment_pk is not None
        async with self.database.read() as db:
            spans = await path_spans(db, head.pk, head.active_segment_pk, head.message_count)
            newest = await best_summary(db, head.pk, spans, ending_by=head.window_start)
        return None if newest is None else newest.pk

    def forget(self, session_ids: Iterable[str]) -> None:
        """Drop what is kept of these sessions (deleted ones: nothing of them stays in memory either)."""
        for session_id in session_ids:
            self.windows.put(session_id, None)


def _read(
    db: Connection, session_id: str, scope: str | None, cached: StoredWindow | None
) -> tuple[_Head | None, _Rows | None]:
    """The session's row (`None` if it isn't visible under `scope`), and the window's rows, unless `cached`
    is the window at the row's revision (`None` then): range scans along the active path, the archive
    between them skipped."""
    found = db.execute(_HEAD, {'session_id': session_id}).first()
    row = None if found is None else _Head._make(found)
    if row is None or (scope is not None and row.scope != scope):
        return None, None
    if cached is not None and cached.session_pk == row.pk and cached.revision == row.revision:
        return row, None
    segment_pk = row.active_segment_pk
    assert segment_pk is not None, f'session {session_id!r} has no active segment'
    if row.forked is None:  # a path that never left its root segment needs no walk through the tree
        spans = [Span(segment_pk, 0, row.message_count)]
    else:
        spans = spans_of(segments_of(db.execute(segments_query(row.pk)).all()), segment_pk, row.message_count)
    return row, db.execute(_window_read(len(spans)), _window_values(row, spans)).all()


def _window_values(row: _Head, spans: Sequence[Span]) -> dict[str, Any]:
    """`_window_read`'s parameters for the window `row` bounds on the path `spans`."""
    head = head_read(row.head_end, row.window_start)
    values: dict[str, Any] = {'session_pk': row.pk, 'window_start': row.window_start}
    for i, on in enumerate(spans):
        values |= {
            f's{i}': on.segment_pk,
            f'e{i}': on.end,
            f'h{i}_from': on.start,
            f'h{i}_to': min(head, on.end),
            f't{i}_from': max(row.window_start, on.start),
            f't{i}_to': on.end,
        }
    return values


async def window_on_path(
    db: AsyncSession,
    vault: Vault,
    session: SessionRow,
    spans: Sequence[Span],
    head_end: int,
    window_start: int,
) -> StoredWindow:
    """The window with bounds `head_end`, `window_start` on the path `spans` of `session`, read as a run's is (one
    statement): a path the session is not on (yet), such as the one before a prompt sent again."""
    assert spans, 'a window is read on a path that holds messages'
    row = _Head(
        pk=session.pk,
        scope=session.scope,
        revision=session.revision,
        message_count=spans[-1].end,
        head_end=head_end,
        window_start=window_start,
        active_segment_pk=spans[-1].segment_pk,
        usage=session.usage,
        deferred_tool_requests=None,
        forked=None,
    )
    rows = (await db.execute(_window_read(len(spans)), _window_values(row, spans))).all()
    return _stored_window(vault, row, rows)


def _stored_window(vault: Vault, row: _Head, rows: _Rows) -> StoredWindow:
    """The window `_read` found, its messages and summary opened."""
    entries: list[Entry] = []
    before: list[tuple[int, int, str]] = []
    after: list[int] = []
    for kind, position, body, number, entry_id in rows:
        if kind == _MESSAGE:
            entries.append(Entry(position, vault.message(position, body), number, entry_id))
        elif position <= row.window_start:
            before.append((position, number, body))
        else:
            after.append(position)
    best = max(before, default=None)
    assert row.active_segment_pk is not None
    return StoredWindow(
        session_pk=row.pk,
        segment_pk=row.active_segment_pk,
        revision=row.revision,
        message_count=row.message_count,
        head_end=row.head_end,
        window_start=row.window_start,
        summary=None if best is None else (best[1], vault.open('summary', best[2])),
        next_summary_at=min(after, default=None),
        entries=tuple(entries),
        usage=row.usage or {},
        deferred_tool_requests=vault.open_json('deferred tool requests', row.deferred_tool_requests),
    )


_MESSAGE, _SUMMARY = 0, 1


@cache
def _window_read(spans: int) -> TextualSelect:
    """The cold read of a window on a path of `spans` segments, as rows (kind, position, body, number, entry id), as
    text (`textual`: a new store's first open would otherwise compile this union for its own engine):

    - `_MESSAGE`, position, payload, token count, entry id: the head (`h{i}_from..h{i}_to`) and the tail
      (`t{i}_from..t{i}_to`) scanned on each segment `s{i}` of the path, one range scan each (a range may be
      empty), on the (segment, position) index;
    - `_SUMMARY`, covers_to, text, key, NULL: the summaries wholly on the path (made on a segment `s{i}`, ending by
      `e{i}`, where the path leaves it) from the widest ending by `window_start` on. Later ones exist only
      where a path was made active mid-chain; knowing where the first ends lets a cached window tell
      whether moving its start would reach it.
    """
    scans = [
        select(
            literal_column(str(_MESSAGE), Integer).label('kind'),
            _messages.c.position.label('position'),
            _messages.c.payload.label('body'),
            _messages.c.tokens.label('number'),
            _messages.c.entry_id.label('entry_id'),
        ).where(
            _messages.c.segment_pk == bindparam(f's{i}'),
            _messages.c.position >= bindparam(f'{scan}{i}_from'),
            _messages.c.position < bindparam(f'{scan}{i}_to'),
        )
        for i in range(spans)
        for scan in ('h', 't')
    ]
    on_path = wholly_on((bindparam(f's{i}'), bindparam(f'e{i}')) for i in range(spans))
    mine = and_(_summaries.c.session_pk == bindparam('session_pk'), on_path)
    widest = select(func.max(_summaries.c.covers_to)).where(mine, _summaries.c.covers_to <= bindparam('window_start'))
    summaries = select(
        literal_column(str(_SUMMARY), Integer),
        _summaries.c.covers_to,
        _summaries.c.text,
        _summaries.c.pk,
        null(),
    ).where(mine, _summaries.c.covers_to >= func.coalesce(widest.scalar_subquery(), -1))
    return textual(union_all(*scans, summaries).order_by('kind', 'position'))


_ADVANCE = (
    update(SessionRow)
    .where(_sessions.c.pk == bindparam('b_pk'), _sessions.c.revision == bindparam('b_revision'))
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


def _advance_and_append(summarized: bool) -> Select[Any]:
    """PostgreSQL: `_ADVANCE` and the run's messages appended (and its one summary, if `summarized`), as one
    statement: one round trip, atomic on its own.

    The messages come as one array per column (`a_position`, ...; named apart from the sessions' columns, which
    an UPDATE would take as more to set), with `a_segment_pk` and `a_created_at`; the summary as `s_{column}`. It
    gives the sessions moved (0 when the revision check failed, and then it writes nothing), and the summary's key.
    """
    moved = _ADVANCE.returning(_sessions.c.pk).cte('moved')
    arrays = (
        func.unnest(*(bindparam(f'a_{name}', type_=ARRAY(_messages.c[name].type)) for name in _APPENDED_COLUMNS))
        .table_valued(*_APPENDED_COLUMNS)
        .render_derived(name='appended_rows')
    )
    rows = select(
        moved.c.pk,
        bindparam('a_segment_pk', type_=_messages.c.segment_pk.type),
        *(arrays.c[name] for name in _APPENDED_COLUMNS),
        bindparam('a_created_at', type_=_messages.c.created_at.type),
    ).select_from(moved.join(arrays, true()))
    appended = insert(MessageRow).from_select(['session_pk', 'segment_pk', *_APPENDED_COLUMNS, 'created_at'], rows)
    counted = select(func.count()).select_from(moved).scalar_subquery()
    if not summarized:
        return select(counted).add_cte(appended.cte('appended'))
    summary = select(moved.c.pk, *(bindparam(f's_{name}', type_=_summaries.c[name].type) for name in _SUMMARY_COLUMNS))
    inserted = (
        insert(SummaryRow)
        .from_select(['session_pk', *_SUMMARY_COLUMNS], summary.select_from(moved))
        .returning(_summaries.c.pk)
        .cte('summarized')
    )
    return select(counted, select(inserted.c.pk).scalar_subquery()).add_cte(appended.cte('appended'))


_APPENDED_COLUMNS = ('position', 'entry_id', 'run_id', 'kind', 'payload', 'text', 'tokens', 'ui_message_id')
_SUMMARY_COLUMNS = SUMMARY_COLUMNS[1:]
"""A summary's columns but its session's, which the statement takes from the session it moved."""
_ADVANCE_AND_APPEND = {summarized: _advance_and_append(summarized) for summarized in (False, True)}


def _opened_at_compaction(loaded: LoadedWindow, record: RunRecord) -> RunRecord:
    """`record` with its window opening where the latest compaction among its messages does, if one does.

    A provider's `CompactionPart` (OpenAI's, Anthropic's) replaces everything before it, and pydantic-ai's own
    `post_compaction_window` rule says where it opens the window: the model is sent nothing before it (but the
    standing system prompt, which the window's head keeps), so neither is a window read. The archive keeps all.
    """
    opened = post_compaction_window(record.messages)
    if len(opened) == len(record.messages):
        return record
    start = loaded.message_count + len(record.messages) - len(opened)
    if start <= record.window_start:
        return record
    return replace(record, window_start=start, head_end=min(record.head_end, start))


async def _write_run(
    database: Database, session_id: str, loaded: LoadedWindow, record: RunRecord, revision: str, updated_at: datetime
) -> StoredRun:
    """`Runs.store`'s transaction."""
    vault = database.sealer.vault(session_id, loaded.session_pk)
    usage = dump_usage(record.usage)
    moving = {
        'b_pk': loaded.session_pk,
        'b_revision': loaded.revision,
        'revision': revision,
        'message_count': loaded.message_count + len(record.messages),
        'head_end': record.head_end,
        'window_start': record.window_start,
        'usage': usage,
        'deferred_tool_requests': vault.seal_json('deferred tool requests', record.deferred_tool_requests),
        'updated_at': updated_at,
    }
    rows = message_rows(
        vault, loaded.segment_pk, loaded.message_count, record.messages, record.tokens, record.entry_ids
    )
    summaries = [summary_row(vault, loaded.segment_pk, None, summary, now()) for summary in record.summaries]
    postgresql = database.backend == 'postgresql'
    if postgresql:
        moving |= {f'a_{name}': [row[name] for row in rows] for name in _APPENDED_COLUMNS}
        moving |= {'a_segment_pk': loaded.segment_pk, 'a_created_at': moving['updated_at']}

    one_statement = postgresql and len(summaries) <= 1
    if one_statement and summaries:
        moving |= {f's_{name}': value for name, value in summaries[0].items() if name != 'session_pk'}
        moving['s_previous_pk'] = loaded.summary_pk

    def append(db: Connection) -> list[int]:
        if one_statement:
            moved, *summary_pks = db.execute(_ADVANCE_AND_APPEND[bool(summaries)], moving).one()
            if moved != 1:
                raise SessionConflict(session_id)
            return summary_pks
        if postgresql:
            moved = db.execute(_ADVANCE_AND_APPEND[False], moving).scalar_one()
        else:
            moved = db.execute(_ADVANCE, moving).rowcount
            if moved == 1 and rows:
                db.execute(MESSAGE_INSERT, rows)
        if moved != 1:
            raise SessionConflict(session_id)
        summary_pks, previous = [], loaded.summary_pk
        for row in summaries:
            previous = db.execute(SUMMARY_INSERT, {**row, 'previous_pk': previous}).scalar_one()
            summary_pks.append(previous)
        return summary_pks

    if one_statement:  # atomic on its own
        summary_pks = await database.statements(append, session_id=session_id, writing=True)
    else:
        summary_pks = await database.transaction(session_id, append)
    return StoredRun(summary_pks, [row['entry_id'] for row in rows], usage, revision, updated_at)
