"""Migration records: resizes, cold migrations and evacuations.

One row per move of an instance, with upstream's columns (source/dest
compute and node, old/new flavor ids, migration_type, status) plus the
flavor and PCI request snapshots of both sides (see
``nova.db.models.Migration``).

Revision ID: 0004_migrations
Revises: 0003_instance_actions
Create Date: 2026-12-03
"""

from alembic import op
import sqlalchemy as sa

revision = '0004_migrations'
down_revision = '0003_instance_actions'
branch_labels = None
depends_on = None

_MYSQL_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade() -> None:
    op.create_table(
        'migrations',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('uuid', sa.String(36), nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=False),
        sa.Column('source_compute', sa.String(255), nullable=True),
        sa.Column('dest_compute', sa.String(255), nullable=True),
        sa.Column('source_node', sa.String(255), nullable=True),
        sa.Column('dest_node', sa.String(255), nullable=True),
        sa.Column('dest_host', sa.String(255), nullable=True),
        sa.Column('old_instance_type_id', sa.Integer, nullable=True),
        sa.Column('new_instance_type_id', sa.Integer, nullable=True),
        sa.Column('migration_type', sa.String(32), nullable=False),
        sa.Column('status', sa.String(255), nullable=False),
        sa.Column('project_id', sa.String(255), nullable=True),
        sa.Column('user_id', sa.String(255), nullable=True),
        sa.Column('old_flavor', sa.Text, nullable=True),
        sa.Column('new_flavor', sa.Text, nullable=True),
        sa.Column('old_pci_requests', sa.Text, nullable=True),
        sa.Column('new_pci_requests', sa.Text, nullable=True),
        sa.Column('deleted_at', sa.DateTime, nullable=True),
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.UniqueConstraint('uuid', name='uniq_migrations0uuid'),
        sa.Index('ix_migrations_instance_uuid', 'instance_uuid'),
        sa.Index('ix_migrations_status', 'status'),
        **_MYSQL_ARGS)


def downgrade() -> None:
    op.drop_table('migrations')
