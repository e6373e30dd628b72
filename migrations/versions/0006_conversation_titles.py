"""A conversation's title in a column of its own, and the compatibility stamp that lets releases roll.

`sessions.title` holds pydantic-ai's `ConversationRecord.title` (set with `ConversationStore.update`), sealed under
the session's key when the store encrypts, as its metadata is. It is nullable and nothing fills it in: every session
starts untitled. The release before this one never reads or writes it.

`schema_compatibility` holds, for a revision, the oldest revision a release may run at and still use a database at
it (`compatible_from`): a row per revision that stamps one, written by that revision's upgrade. A release opens a
database at a revision it doesn't know (a newer release migrated it) when the row for that revision names a
revision it has (`session_store._db.schema`). This revision says its own releases may use it; an additive revision
after it says so again (`compatible_from` 0006), and one that takes away what older releases need (contract) names
itself, or stamps nothing: a revision with no row is refused by every older release, as before stamps.

Every role that may read the schema revision (`alembic_version`) may read the stamps: a running role granted the
tables it uses one by one, without default privileges, would otherwise be refused at its next start.

The downgrade drops both.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

_STAMPS = 'schema_compatibility'


def upgrade() -> None:
    op.add_column('sessions', sa.Column('title', sa.Text, nullable=True))
    stamps = op.create_table(
        _STAMPS,
        sa.Column('revision', sa.String(32), primary_key=True),
        sa.Column('compatible_from', sa.String(32), nullable=False),
    )
    op.bulk_insert(stamps, [{'revision': revision, 'compatible_from': revision}])
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(_READ_AS_THE_REVISION)


_READ_AS_THE_REVISION = f"""
DO $$
DECLARE reader record;
BEGIN
    FOR reader IN
        SELECT DISTINCT grantee FROM information_schema.role_table_grants
        WHERE table_schema = current_schema() AND table_name = 'alembic_version' AND privilege_type = 'SELECT'
            AND grantee <> current_user
    LOOP
        EXECUTE format('GRANT SELECT ON {_STAMPS} TO %I', reader.grantee);
    END LOOP;
END $$
"""


def downgrade() -> None:
    op.drop_table(_STAMPS)
    # In place on SQLite too (3.35's DROP COLUMN), as 0005 drops its column.
    op.drop_column('sessions', 'title')
