"""The image a server boots from: ``instances.image_ref``, as upstream
names it (a file in the compute's ``[libvirt]local_images_path`` until
nova has an image service; empty or ``none`` for no image).

Revision ID: 0007_image_ref
Revises: 0006_pending_frees
Create Date: 2026-12-03
"""

from alembic import op
import sqlalchemy as sa

revision = '0007_image_ref'
down_revision = '0006_pending_frees'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.add_column(sa.Column('image_ref', sa.String(255),
                                   nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.drop_column('image_ref')
