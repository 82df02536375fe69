"""The reservation a server was created in: one id for all the servers
of one create (``min_count``/``max_count``), shown and filtered on as
upstream's ``reservation_id``.

Revision ID: 0016_instance_reservation_id
Revises: 0015_quotas
Create Date: 2026-12-06
"""

from alembic import op
import sqlalchemy as sa

revision = '0016_instance_reservation_id'
down_revision = '0015_quotas'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.add_column(sa.Column('reservation_id', sa.String(255),
                                   nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.drop_column('reservation_id')
