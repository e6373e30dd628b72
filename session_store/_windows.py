"""The run cycle: a session's window loaded (from a per-process cache when it still holds), and a run stored.

A run reads the window it starts from (pinned head, latest summary, kept tail) and writes back its
messages, summaries and the window's new bounds. The store that wrote a window knows it: it keeps the
decoded rows per session, keyed by the revision it wrote, so the next run in the same process checks
one indexed row instead of re-reading and re-decoding. Every write anywhere (another process included)
gives the session a new revision, and a window whose revision is not the stored one is read again.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from sqlalchemy import JSON, BigInteger, DateTime, Integer, Text, bindparam, column, text, update
from sqlalchemy.sql.expression import TextualSelect

from ._archive import MESSAGE_INSERT, SUMMARY_INSERT, message_rows, summary_row
from ._codec import dump_usage, now
from ._database import Database
from ._driver import Execute, ExecuteMany, Scalar, Work, fetch_row, fetch_rows
from ._ids import check_id, new_token
from ._run_state import Entry, LoadedWindow, RunRecord, StoredWindow, WindowProcessor, head_read
from ._sealing import Vault
from ._telemetry import span
from ._tree import Span, path_spans
from .errors import SessionConflict, SessionNotFound
from .rows import SegmentRow, SessionRow

__all__ = ('load_window', 'store_run')


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
    deferred_tool_requests: dict[str, Any] | None
    forked: int | None
    """The active segment's parent: `None` while the path never left its root segment."""


_sessions, _segments = SessionRow.__table__, SegmentRow.__table__
_HEAD = text(
    'SELECT sessions.pk, sessions.scope, sessions.revision, sessions.message_count, sessions.head_end, '
    'sessions.window_start, sessions.active_segment_pk, sessions.usage, sessions.deferred_tool_requests, '
    'segments.parent_pk FROM sessions LEFT OUTER JOIN segments ON segments.pk = sessions.active_segment_pk '
    'WHERE sessions.session_id = :session_id'
).columns(
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
"""Reads a `_Head`; plain SQL, so a first open compiles it in no time (the columns still decode the values)."""


async def load_window(
    database: Database, session_id: str, scope: str | None, processor: WindowProcessor
) -> LoadedWindow:
    """The stored window, rebuilt from the latest summary and the kept tail; the archive is not read.

    With the window cached at the session's revision, that is one indexed row read.
    """
    check_id(session_id)
    with span('load_window', database.backend, session_id) as current:
        await database.ready()
        found = await fetch_row(database.engine, _HEAD, {'session_id': session_id})
        row = None if found is None else _Head(*found)
        if row is None or (scope is not None and row.scope != scope):
            raise SessionNotFound(session_id, scope)
        window = database.windows.get(session_id, row.pk, row.revision)
        current.set_attribute('session_store.window.cached', window is not None)
        if window is None:
            window = await _read_window(database, database.sealer.vault(session_id, row.pk), row)
            database.windows.put(session_id, window)
        loaded = window.loaded(processor)
        current.set_attribute('session_store.window.messages', len(loaded.messages))
        current.set_attribute('session_store.window.tokens', sum(t for t in loaded.tokens if t is not None))
        current.set_attribute('session_store.archive.messages', loaded.message_count)
    return loaded


async def _read_window(database: Database, vault: Vault, row: _Head) -> StoredWindow:
    """The window read from the archive: range scans along the active path, the archive between them skipped.

    One statement, sent straight to the driver: the head and tail scans of every segment on the path, and
    the summaries around the window's start.
    """
    segment_pk = row.active_segment_pk
    assert segment_pk is not None, f'session {vault.session_id!r} has no active segment'
    if row.forked is None:  # a path that never left its root segment needs no walk through the tree
        spans = [Span(segment_pk, 0, row.message_count)]
    else:
        async with database.connect() as db:
            spans = await path_spans(db, row.pk, segment_pk, row.message_count)
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
    entries: list[Entry] = []
    before: list[tuple[int, int, str]] = []
    after: list[int] = []
    for kind, position, body, number in await fetch_rows(database.engine, _window_read(len(spans)), values):
        if kind == _MESSAGE:
            entries.append((position, vault.message(position, body), number))
        elif position <= row.window_start:
            before.append((position, number, body))
        else:
            after.append(position)
    best = max(before, default=None)
    return StoredWindow(
        session_pk=row.pk,
        segment_pk=segment_pk,
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
    """The cold read of a window on a path of `spans` segments, as rows (kind, position, body, number):

    - `_MESSAGE`, position, payload, token count: the head (`h{i}_from..h{i}_to`) and the tail
      (`t{i}_from..t{i}_to`) scanned on each segment `s{i}` of the path, one range scan each (a range may be
      empty), on the (segment, position) index;
    - `_SUMMARY`, covers_to, text, key: the summaries wholly on the path (made on a segment `s{i}`, ending by
      `e{i}`, where the path leaves it) from the widest ending by `window_start` on. Later ones exist only
      where a path was made active mid-chain; knowing where the first ends lets a cached window tell
      whether moving its start would reach it.

    Plain SQL both backends read alike, so that a first open compiles it in no time.
    """
    scans = ' UNION ALL '.join(
        f'SELECT {_MESSAGE}, position, payload, tokens FROM messages '
        f'WHERE segment_pk = :s{i} AND position >= :{scan}{i}_from AND position < :{scan}{i}_to'
        for i in range(spans)
        for scan in ('h', 't')
    )
    on_path = ' OR '.join(f'(segment_pk = :s{i} AND covers_to <= :e{i})' for i in range(spans))
    widest = (
        f'SELECT max(covers_to) FROM summaries WHERE session_pk = :session_pk AND ({on_path}) '
        'AND covers_to <= :window_start'
    )
    summaries = (
        f'SELECT {_SUMMARY}, covers_to, text, pk FROM summaries WHERE session_pk = :session_pk AND ({on_path}) '
        f'AND covers_to >= COALESCE(({widest}), -1)'
    )
    return text(f'{scans} UNION ALL {summaries} ORDER BY 1, 2').columns(
        column('kind', Integer), column('position', Integer), column('body', Text), column('number', BigInteger)
    )


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


_ADVANCE_AND_APPEND = (
    text(
        """
    WITH moved AS (
        UPDATE sessions SET revision = :revision, message_count = :message_count, head_end = :head_end,
            window_start = :window_start, usage = :usage, deferred_tool_requests = :deferred_tool_requests,
            updated_at = :updated_at
        WHERE pk = :b_pk AND revision = :b_revision
        RETURNING pk
    ), appended AS (
        INSERT INTO messages (session_pk, segment_pk, position, entry_id, run_id, kind, payload, text, tokens,
            created_at)
        SELECT moved.pk, :segment_pk, m.position, m.entry_id, m.run_id, m.kind, m.payload, m.text, m.tokens,
            :created_at
        FROM moved, unnest(
            CAST(:position AS INTEGER[]), CAST(:entry_id AS VARCHAR[]), CAST(:run_id AS VARCHAR[]),
            CAST(:kind AS VARCHAR[]), CAST(:payload AS TEXT[]), CAST(:text AS TEXT[]), CAST(:tokens AS INTEGER[])
        ) AS m(position, entry_id, run_id, kind, payload, text, tokens)
        RETURNING 1
    )
    SELECT count(*) AS moved FROM moved
    """
    )
    .bindparams(
        bindparam('usage', type_=JSON),
        bindparam('deferred_tool_requests', type_=JSON),
        bindparam('updated_at', type_=DateTime(timezone=True)),
        bindparam('created_at', type_=DateTime(timezone=True)),
    )
    .columns(column('moved', Integer))
)
"""PostgreSQL: `_ADVANCE` and the run's messages appended, as one statement: one round trip, atomic on its own."""
_APPENDED_COLUMNS = ('position', 'entry_id', 'run_id', 'kind', 'payload', 'text', 'tokens')


async def store_run(database: Database, session_id: str, loaded: LoadedWindow, record: RunRecord) -> None:
    """Append a run's messages and summaries, and move the window, in one transaction.

    On PostgreSQL a run without summaries (most runs) is one statement, so one round trip to the server.

    Raises:
        SessionConflict: Another run was stored since `loaded` was read; nothing was written.
    """
    revision = new_token()
    vault = database.sealer.vault(session_id, loaded.session_pk)
    summary_pks: list[int] = []
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
        'updated_at': now(),
    }
    rows = message_rows(vault, loaded.segment_pk, loaded.message_count, record.messages, record.tokens)
    # Sealed here, on the event loop's thread: the transaction may run on SQLite's, and only links them.
    summaries = [summary_row(vault, loaded.segment_pk, None, summary, now()) for summary in record.summaries]

    def append() -> Work[None]:
        summary_pks.clear()
        if (yield Execute(_ADVANCE, moving)) != 1:
            raise SessionConflict(session_id)
        if rows:
            yield ExecuteMany(MESSAGE_INSERT, rows)
        previous = loaded.summary_pk
        for row in summaries:
            previous = int((yield Scalar(SUMMARY_INSERT, {**row, 'previous_pk': previous})))
            summary_pks.append(previous)

    with span(
        'store_run',
        database.backend,
        session_id,
        messages=len(record.messages),
        tokens=sum(record.tokens),
        summaries=len(record.summaries),
    ):
        if database.backend == 'postgresql' and not record.summaries:
            columns = {name: [row[name] for row in rows] for name in _APPENDED_COLUMNS}
            values = {**moving, **columns, 'segment_pk': loaded.segment_pk, 'created_at': moving['updated_at']}
            found = await fetch_row(database.engine, _ADVANCE_AND_APPEND, values)
            if found is None or found[0] != 1:
                raise SessionConflict(session_id)
        else:
            await database.write_direct(session_id, append)
    cached = database.windows.get(session_id, loaded.session_pk, loaded.revision)
    database.windows.put(session_id, None if cached is None else cached.after(revision, record, summary_pks, usage))
