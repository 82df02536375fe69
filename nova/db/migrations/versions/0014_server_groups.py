"""Server groups (``/os-server-groups``): a group's affinity policy and
its members, with the host the scheduler last placed each member on and
the group's generation, which the scheduler bumps with every placement
(a compare-and-swap: two concurrent placements in one group cannot both
win, see ``nova.scheduler.affinity``).

Revision ID: 0014_server_groups
Revises: 0013_instance_user_fields
Create Date: 2026-12-06
"""

from alembic import op
import sqlalchemy as sa

revision = '0014_server_groups'
down_revision = '0013_instance_user_fields'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'instance_groups',
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('uuid', sa.String(36), nullable=False),
        sa.Column('name', sa.String(255), nullable=True),
        sa.Column('project_id', sa.String(255), nullable=True),
        sa.Column('user_id', sa.String(255), nullable=True),
        sa.Column('policy', sa.String(255), nullable=False),
        sa.Column('rules', sa.Text, nullable=True),
        sa.Column('generation', sa.Integer, nullable=False,
                  server_default='0'),
        sa.UniqueConstraint('uuid', name='uniq_instance_groups0uuid'),
        sa.Index('ix_instance_groups_project_id', 'project_id'),
        mysql_engine='InnoDB', mysql_charset='utf8mb4')
    op.create_table(
        'instance_group_members',
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('group_id', sa.Integer,
                  sa.ForeignKey('instance_groups.id', ondelete='CASCADE',
                                name='fk_instance_group_members_group_id'),
                  nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=False),
        sa.Column('host', sa.String(255), nullable=True),
        sa.UniqueConstraint(
            'instance_uuid',
            name='uniq_instance_group_members0instance_uuid'),
        sa.Index('ix_instance_group_members_group_id', 'group_id'),
        mysql_engine='InnoDB', mysql_charset='utf8mb4')


def downgrade() -> None:
    op.drop_table('instance_group_members')
    op.drop_table('instance_groups')
