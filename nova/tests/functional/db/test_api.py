"""nova.db.api on real MariaDB/MySQL and PostgreSQL servers.

The same tests as on SQLite (``nova.tests.unit.db.test_api``); each class
is skipped when its driver is missing or its server does not answer.
"""

from nova.tests.unit.db import test_api as unit_db_api


class TestDBApiMySQL(unit_db_api.TestDBApiSqlite):
    BACKEND = 'mysql'


class TestDBApiPostgreSQL(unit_db_api.TestDBApiSqlite):
    BACKEND = 'postgresql'
