"""The migrations on real MariaDB/MySQL and PostgreSQL servers.

The same tests as on SQLite (``nova.tests.unit.db.test_migration``); each
class is skipped when its driver is missing or its server does not answer.
"""

from nova.tests.unit.db import test_migration as unit_migration


class TestMigrationMySQL(unit_migration.TestMigrationSqlite):
    BACKEND = 'mysql'


class TestMigrationPostgreSQL(unit_migration.TestMigrationSqlite):
    BACKEND = 'postgresql'
