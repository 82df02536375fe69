"""A server's lock (``lock``/``unlock`` actions): whether it is locked,
by whom (``owner`` or ``admin``, as upstream's ``locked_by``) and why
(``locked_reason``, microversion 2.73).

Revision ID: 0011_instance_lock
Revises: 0010_instance_metadata
Create Date: 2026-12-05
"""

from alembic import op
import sqlalchemy as sa

revision = '0011_instance_lock'
down_revision = '0010_instance_metadata'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.add_column(sa.Column('locked', sa.Boolean, nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column('locked_by', sa.String(255),
                                   nullable=True))
        batch.add_column(sa.Column('locked_reason', sa.String(255),
                                   nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.drop_column('locked_reason')
        batch.drop_column('locked_by')
        batch.drop_column('locked')
