"""Quotas (``os-quota-sets``, ``os-quota-class-sets``): per-project and
per-user limits, quota class limits, and the per-project row the quota
check locks.

Revision ID: 0015_quotas
Revises: 0014_server_groups
Create Date: 2026-12-06
"""

from alembic import op
import sqlalchemy as sa

revision = '0015_quotas'
down_revision = '0014_server_groups'
branch_labels = None
depends_on = None

_MYSQL = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def _timestamps() -> list[sa.Column]:
    return [sa.Column('created_at', sa.DateTime, nullable=True),
            sa.Column('updated_at', sa.DateTime, nullable=True)]


def upgrade() -> None:
    op.create_table(
        'quotas', *_timestamps(),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('project_id', sa.String(255), nullable=False),
        sa.Column('user_id', sa.String(255), nullable=False),
        sa.Column('resource', sa.String(255), nullable=False),
        sa.Column('hard_limit', sa.Integer, nullable=False),
        sa.UniqueConstraint('project_id', 'user_id', 'resource',
                            name='uniq_quotas0project_id0user_id0resource'),
        **_MYSQL)
    op.create_table(
        'quota_classes', *_timestamps(),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('class_name', sa.String(255), nullable=False),
        sa.Column('resource', sa.String(255), nullable=False),
        sa.Column('hard_limit', sa.Integer, nullable=False),
        sa.UniqueConstraint('class_name', 'resource',
                            name='uniq_quota_classes0class_name0resource'),
        **_MYSQL)
    op.create_table(
        'quota_locks', *_timestamps(),
        sa.Column('project_id', sa.String(255), primary_key=True),
        **_MYSQL)


def downgrade() -> None:
    for table in ('quota_locks', 'quota_classes', 'quotas'):
        op.drop_table(table)
