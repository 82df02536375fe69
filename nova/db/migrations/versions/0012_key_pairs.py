"""Key pairs (``/os-keypairs``): a user's public keys by name, and the
key pair a server was booted with (``instances.key_name``, ``key_data``).

Revision ID: 0012_key_pairs
Revises: 0011_instance_lock
Create Date: 2026-12-06
"""

from alembic import op
import sqlalchemy as sa

revision = '0012_key_pairs'
down_revision = '0011_instance_lock'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'key_pairs',
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('user_id', sa.String(255), nullable=False),
        sa.Column('type', sa.String(16), nullable=False),
        sa.Column('fingerprint', sa.String(255), nullable=False),
        sa.Column('public_key', sa.Text, nullable=False),
        sa.UniqueConstraint('user_id', 'name',
                            name='uniq_key_pairs0user_id0name'),
        mysql_engine='InnoDB', mysql_charset='utf8mb4')
    with op.batch_alter_table('instances') as batch:
        batch.add_column(sa.Column('key_name', sa.String(255),
                                   nullable=True))
        batch.add_column(sa.Column('key_data', sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.drop_column('key_data')
        batch.drop_column('key_name')
    op.drop_table('key_pairs')
