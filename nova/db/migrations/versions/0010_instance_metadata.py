"""A server's metadata (``metadata`` of ``POST /servers`` and
``/servers/{id}/metadata``), a JSON object of strings, e.g. the
operator's ``pci_defrag=allow`` that lets ``nova-manage pci defrag``
move it.

Revision ID: 0010_instance_metadata
Revises: 0009_pci_device_health
Create Date: 2026-12-04
"""

from alembic import op
import sqlalchemy as sa

revision = '0010_instance_metadata'
down_revision = '0009_pci_device_health'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.add_column(sa.Column('server_metadata', sa.Text,
                                   nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.drop_column('server_metadata')
