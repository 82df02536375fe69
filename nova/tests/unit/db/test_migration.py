"""Tests for the alembic migrations and nova.db.migration."""

import os

from alembic import autogenerate
from alembic import command as alembic_command
from alembic.runtime import migration as alembic_migration
import fixtures
import sqlalchemy as sa

from nova import test
from nova.db import migration
from nova.db import models
from nova.tests.fixtures import database as db_fixture

TABLES = {'services', 'compute_nodes', 'pci_devices', 'flavors',
          'flavor_extra_specs', 'instances', 'instance_actions',
          'instance_actions_events', 'migrations', 'pending_frees',
          'pci_device_health_events', 'key_pairs', 'instance_groups',
          'instance_group_members', 'quotas', 'quota_classes', 'quota_locks'}
HEAD = '0016_instance_reservation_id'


class TestMigrationSqlite(test.TestCase):
    """The migrations on a SQLite file (on servers: the subclasses in
    nova.tests.functional.db.test_migration)."""

    BACKEND = None

    def _database(self) -> db_fixture.Database:
        return self.useFixture(db_fixture.Database(
            db_fixture.url_for(self, self.BACKEND)))

    def test_creates_all_tables_at_head(self):
        db = self._database()
        tables = set(sa.inspect(db.engine).get_table_names())
        self.assertEqual(TABLES | {'alembic_version'}, tables)
        self.assertEqual(HEAD, migration.db_version(db.engine))

    def test_db_sync_is_idempotent(self):
        db = self._database()
        migration.db_sync(db.engine)
        self.assertEqual(HEAD, migration.db_version(db.engine))

    def test_migrated_schema_matches_models(self):
        db = self._database()
        with db.engine.connect() as connection:
            context = alembic_migration.MigrationContext.configure(
                connection, opts={'compare_type': True})
            diff = autogenerate.compare_metadata(context,
                                                 models.Base.metadata)
        self.assertEqual([], diff)

    def test_unique_constraints(self):
        db = self._database()
        inspector = sa.inspect(db.engine)
        uniques = {
            table: {tuple(u['column_names'])
                    for u in inspector.get_unique_constraints(table)}
            for table in TABLES}
        self.assertIn(('host', 'binary'), uniques['services'])
        self.assertIn(('uuid',), uniques['services'])
        self.assertIn(('hypervisor_hostname',), uniques['compute_nodes'])
        self.assertIn(('compute_node_id', 'address'),
                      uniques['pci_devices'])
        self.assertIn(('flavorid',), uniques['flavors'])
        self.assertIn(('name',), uniques['flavors'])
        self.assertIn(('flavor_id', 'key'), uniques['flavor_extra_specs'])
        self.assertIn(('uuid',), uniques['instances'])
        self.assertIn(('uuid',), uniques['instance_groups'])
        self.assertIn(('instance_uuid',), uniques['instance_group_members'])

    def _engine_at(self, revision: str) -> sa.engine.Engine:
        """An engine on a database at schema ``revision``: the backend's
        (which the fixture migrated to head) taken down to it, or a new
        SQLite file brought up to it."""
        path = self.useFixture(fixtures.TempDir()).path
        url = self._database().url if self.BACKEND else \
            'sqlite:///' + os.path.join(path, 'old.sqlite')
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        with engine.begin() as connection:
            config = migration._alembic_config(connection)
            if self.BACKEND:
                alembic_command.downgrade(config, revision)
            else:
                alembic_command.upgrade(config, revision)
        return engine

    def test_build_lease_upgrade_keeps_instances(self):
        engine = self._engine_at('0001_initial')
        with engine.begin() as connection:
            connection.execute(sa.text(
                "INSERT INTO instances (uuid, vm_state, task_state) "
                "VALUES ('u1', 'building', 'scheduling')"))
        migration.db_sync(engine)
        with engine.connect() as connection:
            row = connection.execute(sa.text(
                'SELECT uuid, build_owner, build_heartbeat FROM instances'
            )).one()
        self.assertEqual(('u1', None, None), tuple(row))

    def test_services_upgrade_backfills_uuids(self):
        engine = self._engine_at('0004_migrations')
        with engine.begin() as connection:
            for host in ('hgx-1', 'hgx-2'):
                connection.execute(sa.text(
                    "INSERT INTO services (host, %s, disabled, "
                    "report_count) VALUES (:host, 'nova-compute', :off, 0)"
                    % connection.dialect.identifier_preparer.quote(
                        'binary')), {'host': host, 'off': False})
        migration.db_sync(engine)
        with engine.connect() as connection:
            rows = connection.execute(sa.text(
                'SELECT uuid, forced_down, disabled_reason FROM services'
            )).all()
        self.assertEqual(2, len(rows))
        self.assertEqual(2, len({row[0] for row in rows}))
        for uuid, forced_down, reason in rows:
            self.assertEqual(36, len(uuid))
            self.assertFalse(forced_down)
            self.assertIsNone(reason)


class TestDbSyncByUrl(test.TestCase):

    def test_empty_database_has_no_version(self):
        path = self.useFixture(fixtures.TempDir()).path
        url = 'sqlite:///' + os.path.join(path, 'empty.sqlite')
        self.assertIsNone(migration.db_version(url))

    def test_sync_by_url(self):
        path = self.useFixture(fixtures.TempDir()).path
        url = 'sqlite:///' + os.path.join(path, 'nova.sqlite')
        migration.db_sync(url)
        self.assertEqual(HEAD, migration.db_version(url))
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        self.assertTrue(TABLES <= set(sa.inspect(engine).get_table_names()))
