"""Conversations as trees: segments, the branches a session's archive is made of.

A segment is a run of messages at consecutive positions; one forked from another (its parent) starts
at the position where it leaves the parent's path. A message is keyed by (segment, position) instead of
(session, position), a summary belongs to the segment it was made on, and a session points at the
segment its active path ends in. Every existing session becomes a one-segment tree: nothing moves.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')

_FTS_ROW = "'s' || {row}.session_pk, {row}.text"


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == 'sqlite'
    op.create_table(
        'segments',
        sa.Column('pk', Key, primary_key=True, autoincrement=True),
        sa.Column('session_pk', Key, sa.ForeignKey('sessions.pk', ondelete='CASCADE'), nullable=False),
        sa.Column('parent_pk', Key, sa.ForeignKey('segments.pk', ondelete='CASCADE'), nullable=True),
        sa.Column('starts_at', sa.Integer, nullable=False),
        sa.Column('head_end', sa.Integer, nullable=True),
        sa.Column('window_start', sa.Integer, nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index('ix_segments_session', 'segments', ['session_pk'])
    op.execute(
        'INSERT INTO segments (session_pk, parent_pk, starts_at, created_at) '
        'SELECT pk, NULL, 0, created_at FROM sessions ORDER BY pk'
    )
    root = '(SELECT segments.pk FROM segments WHERE segments.session_pk = {session})'

    # Added nullable in place (no table rebuild), filled, then made NOT NULL with their keys.
    op.add_column('sessions', sa.Column('active_segment_pk', Key, nullable=True))
    op.execute(f'UPDATE sessions SET active_segment_pk = {root.format(session="sessions.pk")}')

    # Summaries keep their table: rebuilding it on SQLite would drop the old one, and its self-reference
    # (previous_pk, ON DELETE SET NULL) would unlink every chain. The key is added in place instead, and
    # stays nullable on SQLite, which can't add NOT NULL to an existing column without a rebuild.
    if sqlite:
        op.execute('ALTER TABLE summaries ADD COLUMN segment_pk INTEGER REFERENCES segments (pk) ON DELETE CASCADE')
    else:
        op.add_column('summaries', sa.Column('segment_pk', Key, sa.ForeignKey('segments.pk', ondelete='CASCADE')))
    op.execute(f'UPDATE summaries SET segment_pk = {root.format(session="summaries.session_pk")}')
    op.create_index('ix_summaries_segment', 'summaries', ['segment_pk', 'covers_to'])

    op.add_column('messages', sa.Column('segment_pk', Key, nullable=True))
    op.execute(f'UPDATE messages SET segment_pk = {root.format(session="messages.session_pk")}')
    with op.batch_alter_table('messages', recreate='always' if sqlite else 'never') as batch:
        batch.alter_column('segment_pk', existing_type=Key, nullable=False)
        batch.create_foreign_key('fk_messages_segment', 'segments', ['segment_pk'], ['pk'], ondelete='CASCADE')
        batch.drop_constraint('uq_messages_session_position', type_='unique')
        batch.create_unique_constraint('uq_messages_segment_position', ['segment_pk', 'position'])
    if sqlite:
        _create_fts_triggers()  # SQLite dropped them with the table it rebuilt; the index's rows kept their keys
    else:
        op.alter_column('summaries', 'segment_pk', existing_type=Key, nullable=False)


def _create_fts_triggers() -> None:
    new, old = _FTS_ROW.format(row='new'), _FTS_ROW.format(row='old')
    delete = f"INSERT INTO messages_fts(messages_fts, rowid, session_tag, text) VALUES ('delete', old.pk, {old});"
    insert = f'INSERT INTO messages_fts(rowid, session_tag, text) VALUES (new.pk, {new});'
    op.execute(f'CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN {insert} END')
    op.execute(f'CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN {delete} END')
    op.execute(f'CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN {delete} {insert} END')


def downgrade() -> None:
    # Only a tree of one segment per session goes back to the linear schema.
    sqlite = op.get_bind().dialect.name == 'sqlite'
    # Rebuilding summaries on SQLite nulls its self-references (see upgrade): keep the chain aside.
    op.drop_index('ix_summaries_segment', 'summaries')
    op.execute('CREATE TEMPORARY TABLE summary_links AS SELECT pk, previous_pk FROM summaries')
    with op.batch_alter_table('summaries', recreate='always' if sqlite else 'never') as batch:
        batch.drop_column('segment_pk')
    op.execute(
        'UPDATE summaries SET previous_pk = (SELECT summary_links.previous_pk FROM summary_links '
        'WHERE summary_links.pk = summaries.pk)'
    )
    op.execute('DROP TABLE summary_links')
    with op.batch_alter_table('messages', recreate='always' if sqlite else 'never') as batch:
        batch.drop_constraint('uq_messages_segment_position', type_='unique')
        batch.create_unique_constraint('uq_messages_session_position', ['session_pk', 'position'])
        batch.drop_constraint('fk_messages_segment', type_='foreignkey')
        batch.drop_column('segment_pk')
    # In place, not rebuilt: dropping the old sessions table would cascade to every message and summary.
    op.drop_column('sessions', 'active_segment_pk')
    op.drop_index('ix_segments_session', 'segments')
    op.drop_table('segments')
    if sqlite:
        _create_fts_triggers()
