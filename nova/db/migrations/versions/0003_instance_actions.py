"""Instance actions: what was asked of a server and how each step went.

One ``instance_actions`` row per request acting on a server (create,
delete, reboot, stop, shelve, ...), keyed by the request id, and one
``instance_actions_events`` row per step a service ran for it (with its
result and, on failure, the traceback), as upstream Nova models them for
``GET /servers/{id}/os-instance-actions``.

Revision ID: 0003_instance_actions
Revises: 0002_build_lease
Create Date: 2026-12-03
"""

from alembic import op
import sqlalchemy as sa

revision = '0003_instance_actions'
down_revision = '0002_build_lease'
branch_labels = None
depends_on = None

_MYSQL_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade() -> None:
    op.create_table(
        'instance_actions',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('action', sa.String(255), nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=False),
        sa.Column('request_id', sa.String(255), nullable=False),
        sa.Column('user_id', sa.String(255), nullable=True),
        sa.Column('project_id', sa.String(255), nullable=True),
        sa.Column('start_time', sa.DateTime, nullable=False),
        sa.Column('finish_time', sa.DateTime, nullable=True),
        sa.Column('message', sa.String(255), nullable=True),
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Index('ix_instance_actions_instance_uuid_request_id',
                 'instance_uuid', 'request_id'),
        **_MYSQL_ARGS)
    op.create_table(
        'instance_actions_events',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('action_id', sa.Integer,
                  sa.ForeignKey('instance_actions.id',
                                name='fk_instance_actions_events_action_id'),
                  nullable=False),
        sa.Column('event', sa.String(255), nullable=False),
        sa.Column('result', sa.String(255), nullable=True),
        sa.Column('traceback', sa.Text, nullable=True),
        sa.Column('start_time', sa.DateTime, nullable=False),
        sa.Column('finish_time', sa.DateTime, nullable=True),
        sa.Column('host', sa.String(255), nullable=True),
        sa.Column('details', sa.Text, nullable=True),
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Index('ix_instance_actions_events_action_id', 'action_id'),
        **_MYSQL_ARGS)


def downgrade() -> None:
    op.drop_table('instance_actions_events')
    op.drop_table('instance_actions')
