"""Alembic environment for the nova database.

Migrations always run online against a connection handed in by
``nova.db.migration`` (``config.attributes['connection']``); there is no
alembic.ini and no autogenerate at runtime.
"""

from alembic import context

from nova.db import models

config = context.config


def run_migrations_online() -> None:
    """Run the pending revisions on the connection nova.db.migration gave."""
    connection = config.attributes['connection']
    context.configure(connection=connection,
                      target_metadata=models.Base.metadata,
                      render_as_batch=connection.dialect.name == 'sqlite')
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError('nova migrations run online only (use '
                       'nova.db.migration.db_sync)')
run_migrations_online()
