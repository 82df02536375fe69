"""Schema upgrades of the nova database (alembic, run programmatically)."""

import contextlib
import os
from collections.abc import Iterator

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic.runtime import migration as alembic_migration
import sqlalchemy as sa

from nova.db import api as db_api

MIGRATIONS_DIR = os.path.join(os.path.dirname(__file__), 'migrations')


@contextlib.contextmanager
def _engine(engine_or_url: sa.engine.Engine | str | None
            ) -> Iterator[sa.engine.Engine]:
    """Yield the engine to migrate.

    None means the database ``nova.db.api`` is configured for; a URL gets a
    short-lived engine of its own, disposed afterwards.
    """
    if engine_or_url is None:
        yield db_api.get_engine()
    elif isinstance(engine_or_url, str):
        engine = sa.create_engine(engine_or_url)
        try:
            yield engine
        finally:
            engine.dispose()
    else:
        yield engine_or_url


def _alembic_config(connection: sa.engine.Connection) -> alembic_config.Config:
    config = alembic_config.Config()
    config.set_main_option('script_location', MIGRATIONS_DIR)
    config.attributes['connection'] = connection
    return config


def db_sync(engine_or_url: sa.engine.Engine | str | None = None) -> None:
    """Upgrade the database schema to the newest revision (idempotent)."""
    with _engine(engine_or_url) as engine, engine.begin() as connection:
        alembic_command.upgrade(_alembic_config(connection), 'head')


def db_version(engine_or_url: sa.engine.Engine | str | None = None
               ) -> str | None:
    """Return the current schema revision, or None for an empty database."""
    with _engine(engine_or_url) as engine, engine.connect() as connection:
        context = alembic_migration.MigrationContext.configure(connection)
        return context.get_current_revision()
