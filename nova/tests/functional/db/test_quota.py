"""Quota counting and the locked quota check on real MariaDB/MySQL and
PostgreSQL servers: the same tests as on SQLite
(``nova.tests.unit.compute.test_quota``), concurrent creates included;
each class is skipped when its driver is missing or its server does not
answer."""

from nova.tests.unit.compute import test_quota as unit_quota


class TestQuotaMySQL(unit_quota.TestCountAndReserve):
    BACKEND = 'mysql'


class TestQuotaPostgreSQL(unit_quota.TestCountAndReserve):
    BACKEND = 'postgresql'
