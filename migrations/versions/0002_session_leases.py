"""A lease on each session, so a writer asked to wait can queue behind the one in progress.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('sessions') as batch:
        batch.add_column(sa.Column('lease_owner', sa.String(64), nullable=True))
        batch.add_column(sa.Column('lease_expires', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('sessions') as batch:
        batch.drop_column('lease_expires')
        batch.drop_column('lease_owner')
