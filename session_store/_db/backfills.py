"""What a migration leaves for after its commit: filling a new column in, and building an index, in steps short
enough that no writer waits on them.

A revision that expands the schema only adds (a nullable column, a table): it commits at once, and the processes of
the release before keep writing. What takes time on a big archive comes after, here, run by every `migrate` once
the revisions committed: each batch of a backfill is a transaction of its own (writers wait for one batch at most,
and only for the rows it touches), and PostgreSQL builds an index `CONCURRENTLY`, without blocking writes. Every
step is idempotent and starts over where the rows say it is, so a `migrate` stopped half-way is finished by the
next one, and rows that older releases wrote while the new one rolled out (they know nothing of the new column)
are filled in by the `migrate` run after the rollout.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, column, select, table, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from .._codec import decode
from ..errors import StoreError
from .engine import SQLITE_BEGIN
from .sealing import SEALED, Sealer

__all__ = ('BATCH', 'UI_ID_INDEX', 'fill_in')

BATCH = 500
"""Rows a backfill reads, decodes and updates in one transaction."""

UI_ID_INDEX = 'ix_messages_ui_id'
"""The lookup of a resubmitted prompt by its UI message id, per session: partial, holding only the rows with an id
(a user's prompts from a front end), so the other messages (most of them) cost no index entry when stored."""
_FULL_UI_ID_INDEX = 'ix_messages_session_ui_id'
"""The index releases before revision 0007 built, on every row (NULLs included), which `UI_ID_INDEX` replaces."""

_messages = table(
    'messages',
    column('pk'),
    column('session_pk'),
    column('position'),
    column('kind'),
    column('payload'),
    column('ui_message_id'),
)
_UNFILLED = (
    select(_messages.c.pk, _messages.c.position, _messages.c.payload)
    .where(
        _messages.c.pk > bindparam('after'),
        _messages.c.kind == 'request',
        _messages.c.ui_message_id.is_(None),
        _messages.c.payload.contains('"ui_message_id"', autoescape=True),
        _messages.c.payload.not_like(f'{SEALED}%'),
    )
    .order_by(_messages.c.pk)
    .limit(BATCH)
)
"""A batch of clear requests that may carry a UI message id and have none in the column."""
_FILL = update(_messages).where(_messages.c.pk == bindparam('b_pk')).values(ui_message_id=bindparam('ui_message_id'))


async def fill_in(engine: AsyncEngine) -> None:
    """Finish what the revisions left: the UI message ids of clear requests (0005), then their index."""
    await _fill_ui_ids(engine)
    await _build_ui_id_index(engine)


async def _fill_ui_ids(engine: AsyncEngine) -> None:
    """Give each clear request whose prompt carries a UI message id that id, a batch per transaction.

    Sealed rows can't be filled in (there are no keys here): a key rotation does it (`session-store rekey`). A row
    that doesn't decode stays as unreadable as it was, and without an id.
    """
    after: int | None = 0
    while after is not None:
        async with engine.connect() as connection:
            connection = await connection.execution_options(**{SQLITE_BEGIN: 'IMMEDIATE'})
            async with connection.begin():
                after = await connection.run_sync(_fill_batch, after)


def _fill_batch(connection: Connection, after: int | None, /) -> int | None:
    """Fill one batch in after primary key `after`; the last key it read, `None` when there was nothing left."""
    rows = connection.execute(_UNFILLED, {'after': after}).all()
    if not rows:
        return None
    clear = Sealer(None)
    found = []
    for pk, position, payload in rows:
        try:
            message = decode('(a backfill)', position, payload)
        except StoreError:
            continue
        if (ui_id := clear.ui_id_form(message)) is not None:
            found.append({'b_pk': pk, 'ui_message_id': ui_id})
    if found:
        connection.execute(_FILL, found)
    last: int = rows[-1][0]
    return last


async def _build_ui_id_index(engine: AsyncEngine) -> None:
    """Build the UI id index if it isn't there, then drop the full one it replaces: on PostgreSQL `CONCURRENTLY`
    (outside a transaction, writes carry on), replacing one a build stopped half-way left invalid."""
    create = (
        f'CREATE INDEX {{}} IF NOT EXISTS {UI_ID_INDEX} ON messages (session_pk, ui_message_id) '
        'WHERE ui_message_id IS NOT NULL'
    )
    if engine.dialect.name != 'postgresql':
        async with engine.begin() as connection:
            await connection.execute(text(create.format('')))
            await connection.execute(text(f'DROP INDEX IF EXISTS {_FULL_UI_ID_INDEX}'))
        return
    async with engine.connect() as connection:
        connection = await connection.execution_options(isolation_level='AUTOCOMMIT')
        valid = await connection.scalar(
            text(
                'SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid '
                'WHERE c.relname = :name AND c.relnamespace = current_schema()::regnamespace'
            ),
            {'name': UI_ID_INDEX},
        )
        if valid is False:  # a concurrent build that failed or was stopped leaves an invalid index behind
            await connection.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS {UI_ID_INDEX}'))
        if not valid:
            await connection.execute(text(create.format('CONCURRENTLY')))
        await connection.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS {_FULL_UI_ID_INDEX}'))
