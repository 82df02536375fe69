"""Pending allocation frees: Placement allocations a delete (or an
offload) could not free because Placement did not answer, recorded so
the consumer's compute frees them as soon as Placement answers again,
also after a restart.

Revision ID: 0006_pending_frees
Revises: 0005_services
Create Date: 2026-12-03
"""

from alembic import op
import sqlalchemy as sa

revision = '0006_pending_frees'
down_revision = '0005_services'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'pending_frees',
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('consumer_uuid', sa.String(36), nullable=False),
        sa.Column('host', sa.String(255), nullable=True),
        sa.UniqueConstraint('consumer_uuid',
                            name='uniq_pending_frees0consumer_uuid'),
        sa.Index('ix_pending_frees_host', 'host'),
        mysql_engine='InnoDB', mysql_charset='utf8mb4')


def downgrade() -> None:
    op.drop_table('pending_frees')
