"""Each request's UI message id in a column of its own, indexed per session, so a resubmitted prompt is found in one
lookup instead of by decoding the session's whole path.

A chat front end (Vercel AI's useChat, AG-UI) gives each message an id, which pydantic-ai's UI adapters keep in the
stored request's metadata, inside the payload. The new `messages.ui_message_id` holds it for every request holding
a user prompt that carries one (see `Sealer.ui_id_form`), with an index on `(session_pk, ui_message_id)`.

The upgrade only adds the column, so it commits at once. What takes time on a big archive runs after it commits,
in `session_store._db.backfills`: each clear `request` row whose payload mentions the id's key is decoded, a batch
per transaction, and given the id its prompt carries, then the index is built (on PostgreSQL `CONCURRENTLY`).
Sealed rows can't be filled in: the migration has no keys, so theirs stay NULL, and a lookup by UI id doesn't find
them (one by entry id still does). A key rotation fills them in: `session-store rekey` under a new key opens every
row sealed under an older one and stores the blind hash of its id with it. A row that doesn't decode stays NULL
too, as unreadable as it was.

The downgrade drops the index and the column.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('messages', sa.Column('ui_message_id', sa.String(255), nullable=True))


def downgrade() -> None:
    # The index is built after the revision commits, so a downgrade may come before it was: under its name from
    # before revision 0007, or its partial successor's.
    op.execute('DROP INDEX IF EXISTS ix_messages_session_ui_id')
    op.execute('DROP INDEX IF EXISTS ix_messages_ui_id')
    # In place on SQLite too (3.35's DROP COLUMN): rebuilding `messages` would drop its full-text triggers.
    op.drop_column('messages', 'ui_message_id')
