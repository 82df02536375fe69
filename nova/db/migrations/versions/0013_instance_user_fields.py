"""What a user says of a server beyond its name: ``description``
(microversion 2.19), ``accessIPv4``/``accessIPv6`` and ``user_data``,
kept and shown as upstream keeps them.

Revision ID: 0013_instance_user_fields
Revises: 0012_key_pairs
Create Date: 2026-12-06
"""

from alembic import op
import sqlalchemy as sa

revision = '0013_instance_user_fields'
down_revision = '0012_key_pairs'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.add_column(sa.Column('description', sa.String(255),
                                   nullable=True))
        batch.add_column(sa.Column('access_ip_v4', sa.String(39),
                                   nullable=True))
        batch.add_column(sa.Column('access_ip_v6', sa.String(39),
                                   nullable=True))
        batch.add_column(sa.Column('user_data', sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        for column in ('user_data', 'access_ip_v6', 'access_ip_v4',
                       'description'):
            batch.drop_column(column)
