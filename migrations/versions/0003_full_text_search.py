"""Full-text search over archived messages: SQLite FTS5, PostgreSQL tsvector with a GIN index.

Both split text into runs of letters and digits, so `ORD-73519` is the words `ord` and `73519` on
either database, and both stay in step with the archive inside the writing transaction: SQLite
through triggers on `messages`, PostgreSQL through a generated column. SQLite's index also holds
each message's session as a token, so a search within one session never touches another's matches.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

INDEXED_CHARACTERS = 100_000
"""How much of one message PostgreSQL indexes: a tsvector holds at most 1 MB."""

_ROW = "'s' || {row}.session_pk, {row}.text"


def upgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        # Contentless: the text lives in `messages`; the triggers hand the index each row's values.
        op.execute(
            "CREATE VIRTUAL TABLE messages_fts USING fts5(session_tag, text, content='', tokenize='porter unicode61')"
        )
        op.execute(
            "INSERT INTO messages_fts(rowid, session_tag, text) SELECT pk, 's' || session_pk, text FROM messages"
        )
        new, old = _ROW.format(row='new'), _ROW.format(row='old')
        delete = f"INSERT INTO messages_fts(messages_fts, rowid, session_tag, text) VALUES ('delete', old.pk, {old});"
        insert = f'INSERT INTO messages_fts(rowid, session_tag, text) VALUES (new.pk, {new});'
        op.execute(f'CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN {insert} END')
        op.execute(f'CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN {delete} END')
        op.execute(f'CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN {delete} {insert} END')
    else:
        op.execute(
            'ALTER TABLE messages ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (to_tsvector('
            f"'english', regexp_replace(left(text, {INDEXED_CHARACTERS}), '[^[:alnum:]]+', ' ', 'g'))) STORED"
        )
        op.execute('CREATE INDEX ix_messages_search_vector ON messages USING gin (search_vector)')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        for trigger in ('insert', 'delete', 'update'):
            op.execute(f'DROP TRIGGER messages_fts_{trigger}')
        op.execute('DROP TABLE messages_fts')
    else:
        op.execute('DROP INDEX ix_messages_search_vector')
        op.execute('ALTER TABLE messages DROP COLUMN search_vector')
