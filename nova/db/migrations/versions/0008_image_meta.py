"""What a server's image was when it was built: ``instances.image_meta``
(JSON: the Glance image's id, name, formats, sizes and properties), as
upstream keeps image metadata with the instance so its guest does not
change when the image is edited or deleted.

Revision ID: 0008_image_meta
Revises: 0007_image_ref
Create Date: 2026-12-04
"""

from alembic import op
import sqlalchemy as sa

revision = '0008_image_meta'
down_revision = '0007_image_ref'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.add_column(sa.Column('image_meta', sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.drop_column('image_meta')
