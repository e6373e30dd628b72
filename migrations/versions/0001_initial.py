"""Sessions, their archived messages and their summaries.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table(
        'sessions',
        sa.Column('pk', Key, primary_key=True, autoincrement=True),
        sa.Column('session_id', sa.String(255), nullable=False, unique=True),
        sa.Column('scope', sa.String(255), nullable=True, index=True),
        sa.Column('revision', sa.String(64), nullable=False),
        sa.Column('message_count', sa.Integer, nullable=False),
        sa.Column('head_end', sa.Integer, nullable=False),
        sa.Column('window_start', sa.Integer, nullable=False),
        sa.Column('usage', sa.JSON, nullable=False),
        sa.Column('deferred_tool_requests', sa.JSON, nullable=True),
        sa.Column('forked_from', sa.String(255), nullable=True),
        sa.Column('forked_at', sa.String(64), nullable=True),
        sa.Column('branches', sa.JSON, nullable=False),
        sa.Column('metadata', sa.JSON, nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False, index=True),
    )
    op.create_table(
        'messages',
        sa.Column('pk', Key, primary_key=True, autoincrement=True),
        sa.Column('session_pk', Key, sa.ForeignKey('sessions.pk', ondelete='CASCADE'), nullable=False),
        sa.Column('position', sa.Integer, nullable=False),
        sa.Column('entry_id', sa.String(64), nullable=False, unique=True),
        sa.Column('run_id', sa.String(64), nullable=True),
        sa.Column('kind', sa.String(16), nullable=False),
        sa.Column('payload', sa.Text, nullable=False),
        sa.Column('text', sa.Text, nullable=False),
        sa.Column('tokens', sa.Integer, nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('session_pk', 'position', name='uq_messages_session_position'),
    )
    op.create_table(
        'summaries',
        sa.Column('pk', Key, primary_key=True, autoincrement=True),
        sa.Column('session_pk', Key, sa.ForeignKey('sessions.pk', ondelete='CASCADE'), nullable=False),
        sa.Column('previous_pk', Key, sa.ForeignKey('summaries.pk', ondelete='SET NULL'), nullable=True),
        sa.Column('covers_from', sa.Integer, nullable=False),
        sa.Column('covers_to', sa.Integer, nullable=False),
        sa.Column('text', sa.Text, nullable=False),
        sa.Column('tokens', sa.Integer, nullable=False),
        sa.Column('model_name', sa.String(255), nullable=True),
        sa.Column('usage', sa.JSON, nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index('ix_summaries_session_latest', 'summaries', ['session_pk', 'pk'])


def downgrade() -> None:
    op.drop_table('summaries')
    op.drop_table('messages')
    op.drop_table('sessions')
