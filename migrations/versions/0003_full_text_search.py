"""Full-text search over archived messages: SQLite FTS5, PostgreSQL tsvector with a GIN index.

Both stay in step with the archive inside the writing transaction: SQLite through triggers on
`messages`, PostgreSQL through a generated column.

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


def upgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        op.execute(
            "CREATE VIRTUAL TABLE messages_fts USING fts5("
            "text, content='messages', content_rowid='pk', tokenize='porter unicode61')"
        )
        op.execute('INSERT INTO messages_fts(rowid, text) SELECT pk, text FROM messages')
        op.execute(
            'CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN '
            'INSERT INTO messages_fts(rowid, text) VALUES (new.pk, new.text); END'
        )
        op.execute(
            'CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN '
            "INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.pk, old.text); END"
        )
        op.execute(
            'CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN '
            "INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.pk, old.text); "
            'INSERT INTO messages_fts(rowid, text) VALUES (new.pk, new.text); END'
        )
    else:
        op.execute(
            'ALTER TABLE messages ADD COLUMN search_vector tsvector GENERATED ALWAYS AS '
            f"(to_tsvector('english', left(text, {INDEXED_CHARACTERS}))) STORED"
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
