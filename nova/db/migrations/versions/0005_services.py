"""Services gain upstream's operator state: a uuid (the 2.53 API id),
``forced_down`` (an operator says the service is down, whatever its
heartbeats) and ``disabled_reason``.

Existing rows get a fresh uuid each, before the column becomes NOT NULL
and unique.

Revision ID: 0005_services
Revises: 0004_migrations
Create Date: 2026-12-03
"""

from alembic import op
from oslo_utils import uuidutils
import sqlalchemy as sa

revision = '0005_services'
down_revision = '0004_migrations'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('services') as batch:
        batch.add_column(sa.Column('uuid', sa.String(36), nullable=True))
        batch.add_column(sa.Column('forced_down', sa.Boolean,
                                   nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column('disabled_reason', sa.String(255),
                                   nullable=True))
    connection = op.get_bind()
    services = sa.table('services', sa.column('id', sa.Integer),
                        sa.column('uuid', sa.String(36)))
    ids = connection.execute(
        sa.select(services.c.id).where(services.c.uuid.is_(None))
    ).scalars().all()
    for service_id in ids:
        connection.execute(
            services.update().where(services.c.id == service_id)
            .values(uuid=uuidutils.generate_uuid()))
    with op.batch_alter_table('services') as batch:
        batch.alter_column('uuid', existing_type=sa.String(36),
                           nullable=False)
        # The model sets forced_down; no server default is left behind.
        batch.alter_column('forced_down', existing_type=sa.Boolean,
                           server_default=None)
        batch.create_unique_constraint('uniq_services0uuid', ['uuid'])


def downgrade() -> None:
    with op.batch_alter_table('services') as batch:
        batch.drop_constraint('uniq_services0uuid', type_='unique')
        batch.drop_column('disabled_reason')
        batch.drop_column('forced_down')
        batch.drop_column('uuid')
