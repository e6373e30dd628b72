"""Each request's UI message id in a column of its own, indexed per session, so a resubmitted prompt is found in one
lookup instead of by decoding the session's whole path.

A chat front end (Vercel AI's useChat, AG-UI) gives each message an id, which pydantic-ai's UI adapters keep in the
stored request's metadata, inside the payload. The new `messages.ui_message_id` holds it for every request holding
a user prompt that carries one (see `Sealer.ui_id_form`), with an index on `(session_pk, ui_message_id)`.

The upgrade fills it in for clear rows: each `request` row whose payload mentions the id's key is decoded, in
batches, as the store decodes it, and given the id its prompt carries. Sealed rows can't be: the migration has no
keys, so theirs stay NULL, and a lookup by UI id doesn't find them (one by entry id still does). A key rotation
fills them in: `session-store rekey` under a new key opens every row sealed under an older one and stores the
blind hash of its id with it. A row that doesn't decode stays NULL too, as unreadable as it was.

The downgrade drops the index and the column.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from session_store._codec import decode
from session_store._db.sealing import SEALED, Sealer
from session_store.errors import StoreError

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

BATCH = 500
"""Rows decoded at a time."""

_INDEX = 'ix_messages_session_ui_id'
_messages = sa.table(
    'messages',
    sa.column('pk', sa.Integer),
    sa.column('position', sa.Integer),
    sa.column('kind', sa.String),
    sa.column('payload', sa.Text),
    sa.column('ui_message_id', sa.String),
)


def upgrade() -> None:
    op.add_column('messages', sa.Column('ui_message_id', sa.String(255), nullable=True))
    _backfill(op.get_bind())
    op.create_index(_INDEX, 'messages', ['session_pk', 'ui_message_id'])


def _backfill(connection: sa.Connection) -> None:
    """Give each clear request whose prompt carries a UI message id that id, a batch of rows at a time."""
    clear = Sealer(None)
    candidates = (
        sa.select(_messages.c.pk, _messages.c.position, _messages.c.payload)
        .where(
            _messages.c.pk > sa.bindparam('after'),
            _messages.c.kind == 'request',
            _messages.c.payload.contains('"ui_message_id"', autoescape=True),
            _messages.c.payload.not_like(f'{SEALED}%'),
        )
        .order_by(_messages.c.pk)
        .limit(BATCH)
    )
    fill = (
        sa.update(_messages)
        .where(_messages.c.pk == sa.bindparam('b_pk'))
        .values(ui_message_id=sa.bindparam('ui_message_id'))
    )
    after = 0
    while rows := connection.execute(candidates, {'after': after}).all():
        found = []
        for pk, position, payload in rows:
            try:
                message = decode('(migration 0005)', position, payload)
            except StoreError:
                continue
            if (ui_id := clear.ui_id_form(message)) is not None:
                found.append({'b_pk': pk, 'ui_message_id': ui_id})
        if found:
            connection.execute(fill, found)
        after = rows[-1][0]


def downgrade() -> None:
    op.drop_index(_INDEX, 'messages')
    # In place on SQLite too (3.35's DROP COLUMN): rebuilding `messages` would drop its full-text triggers.
    op.drop_column('messages', 'ui_message_id')
