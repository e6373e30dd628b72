"""Every use the benchmarks make of `session_store`'s internals, one small function per internal.

The benchmarks time the store's own steps (reading a window, appending a run) and fill archives faster
than runs could, so they call what is not public API: the store's run cycle (`Runs.load_window` and
`Runs.store`, in `session_store._history.runs`), `insert_messages`, `new_session_row` and
`add_root_segment` (`session_store._history.archive`) on the store's `Database`, and the data carriers
`RunRecord` and `NewSummary`. This file is the one place that reaches them; nothing else in `benchmarks/` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage
from sqlalchemy import select, update

from session_store import SessionStore
from session_store._db.database import Database
from session_store._history import archive as _archive
from session_store._history.records import LoadedWindow, NewSummary, RunRecord
from session_store.rows import SessionRow

__all__ = (
    'LoadedWindow',
    'NewSummary',
    'add_sessions',
    'append_messages',
    'load_window',
    'new_summary',
    'session_pks',
    'store_run',
)


def new_summary(covers_from: int, covers_to: int, text: str, tokens: int, model_name: str) -> NewSummary:
    """A summary to store with a run, covering archive positions `covers_from..covers_to`."""
    return NewSummary(
        covers_from=covers_from, covers_to=covers_to, text=text, tokens=tokens, model_name=model_name, usage=RunUsage()
    )


async def load_window(store: SessionStore, session_id: str) -> LoadedWindow:
    """What a run on the (unscoped) session starts from: its stored window and the revision it was read at."""
    return await store._runs.load_window(session_id, None, store.processor)


async def store_run(
    store: SessionStore,
    session_id: str,
    loaded: LoadedWindow,
    messages: Sequence[ModelMessage],
    tokens: Sequence[int],
    *,
    window_start: int,
    summaries: Sequence[NewSummary] = (),
) -> None:
    """Append `messages` (with their token counts) and `summaries` after `loaded`, in one transaction, moving
    the window to start at `window_start`, as a run would; the session's usage is left as it was."""
    record = RunRecord(
        messages=messages,
        tokens=tokens,
        head_end=0,
        window_start=window_start,
        summaries=summaries,
        usage=loaded.usage,
        deferred_tool_requests=None,
    )
    await store._runs.store(session_id, loaded, record)


def _database(store: SessionStore) -> Database:
    """The database behind the store's public API."""
    return store._database


async def session_pks(store: SessionStore) -> dict[str, int]:
    """Every session's primary key, by session id."""
    async with _database(store).read() as db:
        rows = (await db.execute(select(SessionRow.session_id, SessionRow.pk))).all()
    return {session_id: pk for session_id, pk in rows}


async def append_messages(
    store: SessionStore, session_pk: int, start: int, messages: Sequence[ModelMessage], tokens: Sequence[int]
) -> None:
    """Write `messages` at archive positions `start..` of a session and set its message count, in one
    transaction, without reading or moving its window: the fastest way to fill an archive."""
    async with _database(store).read() as db, db.begin():
        segment_pk = await db.scalar(select(SessionRow.active_segment_pk).where(SessionRow.pk == session_pk))
        assert segment_pk is not None
        vault = _database(store).sealer.vault(f'(session {session_pk})', session_pk)
        await _archive.insert_messages(db, _archive.message_rows(vault, segment_pk, start, messages, tokens))
        await db.execute(
            update(SessionRow).where(SessionRow.pk == session_pk).values(message_count=start + len(messages))
        )


async def add_sessions(
    store: SessionStore,
    session_ids: Sequence[str],
    scope: str | None,
    messages: Sequence[ModelMessage],
    tokens: Sequence[int],
) -> None:
    """New sessions, each holding `messages` (with their token counts) as its whole archive, in one
    transaction: the fastest way to fill a store with many sessions."""
    async with _database(store).read() as db, db.begin():
        for session_id in session_ids:
            row = _archive.new_session_row(session_id, scope, message_count=len(messages))
            db.add(row)
            await db.flush()
            segment_pk = await _archive.add_root_segment(db, row.pk)
            vault = _database(store).sealer.vault(session_id, row.pk)
            await _archive.insert_messages(db, _archive.message_rows(vault, segment_pk, 0, messages, tokens))
