"""Build leases: which conductor drives an instance's build, and when it
last said it still does.

A conductor records itself in ``build_owner`` when it starts (or takes
over) a build and renews ``build_heartbeat`` while the build runs; another
conductor re-drives a build whose heartbeat stopped (see
``nova.conductor.manager``).

Revision ID: 0002_build_lease
Revises: 0001_initial
Create Date: 2026-12-03
"""

from alembic import op
import sqlalchemy as sa

revision = '0002_build_lease'
down_revision = '0001_initial'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.add_column(sa.Column('build_owner', sa.String(255),
                                   nullable=True))
        batch.add_column(sa.Column('build_heartbeat', sa.DateTime,
                                   nullable=True))
        batch.create_index('ix_instances_vm_state_task_state',
                           ['vm_state', 'task_state'])


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.drop_index('ix_instances_vm_state_task_state')
        batch.drop_column('build_heartbeat')
        batch.drop_column('build_owner')
