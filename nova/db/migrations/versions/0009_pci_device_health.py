"""PCI device health: whether a tracked device is usable, why not, since
when and who said so (``pci_devices.health*``), and the audit trail of
every change (``pci_device_health_events``).

Revision ID: 0009_pci_device_health
Revises: 0008_image_meta
Create Date: 2026-12-04
"""

from alembic import op
import sqlalchemy as sa

revision = '0009_pci_device_health'
down_revision = '0008_image_meta'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('pci_devices') as batch:
        batch.add_column(sa.Column('health', sa.String(16), nullable=False,
                                   server_default='healthy'))
        batch.add_column(sa.Column('health_reason', sa.Text, nullable=True))
        batch.add_column(sa.Column('health_since', sa.DateTime,
                                   nullable=True))
        batch.add_column(sa.Column('health_source', sa.String(32),
                                   nullable=True))
    op.create_table(
        'pci_device_health_events',
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('compute_node_id', sa.Integer, nullable=False),
        sa.Column('address', sa.String(16), nullable=False),
        sa.Column('health', sa.String(16), nullable=False),
        sa.Column('reason', sa.Text, nullable=True),
        sa.Column('source', sa.String(32), nullable=False),
        sa.Column('actor', sa.String(255), nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=True),
        sa.Index('ix_pci_device_health_events_node_address',
                 'compute_node_id', 'address'),
        mysql_engine='InnoDB', mysql_charset='utf8mb4')


def downgrade() -> None:
    op.drop_table('pci_device_health_events')
    with op.batch_alter_table('pci_devices') as batch:
        batch.drop_column('health_source')
        batch.drop_column('health_since')
        batch.drop_column('health_reason')
        batch.drop_column('health')
