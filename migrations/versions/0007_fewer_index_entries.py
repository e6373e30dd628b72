"""A stored message costs the server fewer index lookups: on PostgreSQL, `messages.session_pk` no longer has a
foreign key of its own.

A message belongs to its segment (`messages.segment_pk`, a foreign key with `ON DELETE CASCADE`), and the segment to
its session (`segments.session_pk`, likewise), so a session deleted still takes its messages with it, and no
message can name a segment that isn't there. The second key checked, on every message stored, that the session
exists too: a lookup in `sessions`' primary key per row, 3 of the 99 shared blocks a 4-message door turn cost the
server (benchmarks/server_share.py). `session_pk` stays, filled in by the store, for the lookups by session.
SQLite keeps the key: dropping it there rebuilds `messages`, which would take its full-text triggers with it, and
its checks are in-process.

The UI id index is made partial in the same release (`session_store._db.backfills`, built `CONCURRENTLY` after the
revisions commit), so it holds the rows with an id only.

Releases from 0006 on may use a database at this revision: nothing they read or write is gone.

The downgrade puts the key back (validated on PostgreSQL: every message's session exists).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

_KEY = 'messages_session_pk_fkey'


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(f'ALTER TABLE messages DROP CONSTRAINT IF EXISTS {_KEY}')
    op.execute("INSERT INTO schema_compatibility (revision, compatible_from) VALUES ('0007', '0006')")


def downgrade() -> None:
    op.execute("DELETE FROM schema_compatibility WHERE revision = '0007'")
    if op.get_bind().dialect.name == 'postgresql':
        op.create_foreign_key(_KEY, 'messages', 'sessions', ['session_pk'], ['pk'], ondelete='CASCADE')
