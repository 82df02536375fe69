"""Tests for nova.db.api on SQLite (on servers: nova.tests.functional.db)."""

import dataclasses
import datetime
import os
import threading

import fixtures
from oslo_config import cfg
from oslo_db.sqlalchemy import enginefacade
from oslo_utils import timeutils

from nova import test
from nova.conf import database as nova_database_conf
from nova import context as nova_context
from nova.db import api as db_api
from nova.db import records
from nova import exception
from nova.pci import request as pci_request
from nova.tests.fixtures import database as db_fixture

PCI_DEVICE = {'address': '0000:18:00.0', 'vendor_id': '10de',
              'product_id': '2335', 'dev_type': 'type-PCI',
              'dev_id': 'pci_0000_18_00_0', 'label': 'label_10de_2335',
              'numa_node': 0}


OLD_FLAVOR = records.FlavorSnapshot(id=2, flavorid='gpu.2x', name='gpu.2x',
                                    vcpus=8, memory_mb=8192, root_gb=0)
NEW_REQUEST = pci_request.InstancePCIRequest(
    request_id='r1', alias_name='h200', count=4, spec=[{'vendor_id': '10de'}],
    numa_policy='legacy', group_type='nvlink', resource_class='PGPU',
    traits=set())


class TestDBApiSqlite(test.TestCase):

    BACKEND = None

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database(
            db_fixture.url_for(self, self.BACKEND)))
        self.ctx = nova_context.get_admin_context()

    def assertReadBack(self, written, read):
        """``read`` is the record ``written``, read back from the database.

        MySQL's DATETIME keeps whole seconds: the stored creation time is
        read back rounded, every other field as it was written.
        """
        self.assertEqual(dataclasses.replace(written,
                                             created_at=read.created_at),
                         read)
        self.assertLess(abs(written.created_at - read.created_at),
                        datetime.timedelta(seconds=1))

    def _service(self, host='cmp1'):
        return db_api.service_create(self.ctx, {
            'host': host, 'binary': 'nova-compute', 'topic': 'compute'})

    def _node(self, name='cmp1'):
        service = self._service(name)
        return db_api.compute_node_create(self.ctx, {
            'host': name, 'hypervisor_hostname': name, 'vcpus': 8,
            'memory_mb': 1024, 'local_gb': 10, 'hypervisor_type': 'QEMU',
            'service_id': service.id})

    # Services

    def test_service_crud(self):
        service = self._service()
        self.assertIsInstance(service, records.Service)
        self.assertReadBack(service, db_api.service_get_by_uuid(
            self.ctx, service.uuid))
        self.assertFalse(service.disabled)
        self.assertEqual(0, service.report_count)
        self.assertIsNotNone(service.created_at)
        found = db_api.service_get_by_host_and_binary(self.ctx, 'cmp1',
                                                      'nova-compute')
        self.assertEqual(service.id, found.id)
        updated = db_api.service_update(self.ctx, service.id,
                                        {'report_count': 3,
                                         'disabled': True})
        self.assertEqual(3, updated.report_count)
        self.assertTrue(updated.disabled)
        self.assertIsNotNone(updated.updated_at)
        self._service('cmp2')
        self.assertEqual(['cmp1', 'cmp2'],
                         [s.host for s in db_api.service_get_all(
                             self.ctx, binary='nova-compute')])
        self.assertEqual([], db_api.service_get_all(self.ctx,
                                                    binary='nova-api'))

    def test_service_duplicate(self):
        self._service()
        error = self.assertRaises(exception.ServiceExists, self._service)
        self.assertIn('nova-compute', str(error))
        self.assertIn('cmp1', str(error))

    def test_service_update_to_duplicate(self):
        self._service('cmp1')
        other = self._service('cmp2')
        self.assertRaises(exception.ServiceExists, db_api.service_update,
                          self.ctx, other.id, {'host': 'cmp1'})

    def test_service_not_found(self):
        error = self.assertRaises(
            exception.ServiceHostBinaryNotFound,
            db_api.service_get_by_host_and_binary, self.ctx, 'nohost',
            'nova-compute')
        self.assertIn('nohost', str(error))
        self.assertRaises(exception.ServiceNotFound, db_api.service_update,
                          self.ctx, 42, {'report_count': 1})

    def test_unknown_field(self):
        error = self.assertRaises(
            exception.DBFieldInvalid, db_api.service_create, self.ctx,
            {'host': 'h', 'binary': 'b', 'colour': 'red'})
        self.assertIn('colour', str(error))
        self.assertIn('report_count', str(error))

    # Compute nodes

    def test_compute_node_crud(self):
        node = self._node()
        self.assertIsInstance(node, records.ComputeNode)
        self.assertEqual(36, len(node.uuid))
        found = db_api.compute_node_get_by_nodename(self.ctx, 'cmp1')
        self.assertReadBack(node, found)
        self.assertEqual(node.uuid, found.uuid)
        updated = db_api.compute_node_update(self.ctx, node.id,
                                             {'vcpus': 16})
        self.assertEqual(16, updated.vcpus)
        self.assertEqual([node.id],
                         [n.id for n in db_api.compute_node_get_all(
                             self.ctx)])

    def test_compute_node_duplicate_and_missing(self):
        self._node()
        error = self.assertRaises(
            exception.ComputeNodeExists, db_api.compute_node_create,
            self.ctx, {'host': 'cmp1', 'hypervisor_hostname': 'cmp1'})
        self.assertIn('cmp1', str(error))
        self.assertRaises(exception.ComputeHostNotFound,
                          db_api.compute_node_get_by_nodename, self.ctx,
                          'cmp9')
        self.assertRaises(exception.ComputeHostNotFound,
                          db_api.compute_node_update, self.ctx, 99,
                          {'vcpus': 1})

    def test_compute_node_unknown_service(self):
        self.assertRaises(exception.ServiceNotFound,
                          db_api.compute_node_create, self.ctx,
                          {'host': 'h', 'hypervisor_hostname': 'h',
                           'service_id': 999})

    # PCI devices

    def test_pci_device_crud(self):
        node = self._node()
        device = db_api.pci_device_create(self.ctx, {
            **PCI_DEVICE, 'compute_node_id': node.id,
            'extra_info': {'managed': 'true'}})
        self.assertEqual('available', device['status'])
        self.assertEqual('', device['group_path'])
        self.assertEqual({'managed': 'true'}, device['extra_info'])
        db_api.pci_device_create(self.ctx, {
            **PCI_DEVICE, 'address': '0000:0a:00.0',
            'compute_node_id': node.id})
        devices = db_api.pci_device_get_all_by_node(self.ctx, node.id)
        self.assertEqual(['0000:0a:00.0', '0000:18:00.0'],
                         [d['address'] for d in devices])
        self.assertEqual({}, devices[0]['extra_info'])
        updated = db_api.pci_device_update(self.ctx, device['id'], {
            'status': 'allocated', 'instance_uuid': 'i1',
            'group_path': 'quad-a/pair-a1'})
        self.assertEqual('allocated', updated['status'])
        self.assertEqual('quad-a/pair-a1', updated['group_path'])
        db_api.pci_device_destroy(self.ctx, device['id'])
        self.assertEqual(['0000:0a:00.0'], [
            d['address'] for d in db_api.pci_device_get_all_by_node(
                self.ctx, node.id)])

    def test_pci_device_duplicate_and_missing(self):
        node = self._node()
        values = {**PCI_DEVICE, 'compute_node_id': node.id}
        db_api.pci_device_create(self.ctx, values)
        error = self.assertRaises(exception.PciDeviceExists,
                                  db_api.pci_device_create, self.ctx, values)
        self.assertIn('0000:18:00.0', str(error))
        self.assertRaises(exception.ComputeHostNotFound,
                          db_api.pci_device_create, self.ctx,
                          {**PCI_DEVICE, 'compute_node_id': node.id + 1})
        self.assertRaises(exception.PciDeviceNotFoundById,
                          db_api.pci_device_update, self.ctx, 999,
                          {'status': 'removed'})
        self.assertRaises(exception.PciDeviceNotFoundById,
                          db_api.pci_device_destroy, self.ctx, 999)

    def test_same_address_on_two_nodes(self):
        first, second = self._node('cmp1'), self._node('cmp2')
        for node in (first, second):
            db_api.pci_device_create(self.ctx, {
                **PCI_DEVICE, 'compute_node_id': node.id})
        self.assertEqual(1, len(db_api.pci_device_get_all_by_node(
            self.ctx, second.id)))

    def test_outer_transaction_is_all_or_nothing(self):
        node = self._node()
        values = {**PCI_DEVICE, 'compute_node_id': node.id}

        def create_two():
            with db_api.context_manager.writer.using(self.ctx):
                db_api.pci_device_create(self.ctx, {
                    **values, 'address': '0000:0a:00.0'})
                db_api.pci_device_create(self.ctx, values)
                db_api.pci_device_create(self.ctx, values)

        self.assertRaises(exception.PciDeviceExists, create_two)
        self.assertEqual([], db_api.pci_device_get_all_by_node(
            self.ctx, node.id))

    # Flavors

    def test_flavor_crud(self):
        flavor = db_api.flavor_create(
            self.ctx, {'flavorid': 'f1', 'name': 'gpu.2', 'vcpus': 4,
                       'memory_mb': 2048, 'root_gb': 10},
            extra_specs={'pci_passthrough:alias': 'h200:2'})
        self.assertTrue(flavor.is_public)
        self.assertFalse(flavor.disabled)
        self.assertEqual({'pci_passthrough:alias': 'h200:2'},
                         flavor.extra_specs)
        found = db_api.flavor_get_by_flavorid(self.ctx, 'f1')
        self.assertEqual('gpu.2', found.name)
        self.assertEqual(flavor.extra_specs, found.extra_specs)
        private = db_api.flavor_create(
            self.ctx, {'name': 'private', 'vcpus': 1, 'memory_mb': 512,
                       'is_public': False})
        self.assertEqual(36, len(private.flavorid))
        self.assertEqual(['f1', private.flavorid],
                         [f.flavorid for f in db_api.flavor_get_all(
                             self.ctx)])
        self.assertEqual(['f1'], [f.flavorid for f in
                                  db_api.flavor_get_all(self.ctx,
                                                        is_public=True)])
        db_api.flavor_destroy(self.ctx, 'f1')
        self.assertRaises(exception.FlavorNotFound,
                          db_api.flavor_get_by_flavorid, self.ctx, 'f1')
        # The name and flavorid may be reused once deleted.
        db_api.flavor_create(self.ctx, {'flavorid': 'f1', 'name': 'gpu.2',
                                        'vcpus': 4, 'memory_mb': 2048})
        self.assertEqual({}, db_api.flavor_extra_specs_get(self.ctx, 'f1'))

    def test_flavor_duplicates(self):
        base = {'flavorid': 'f1', 'name': 'one', 'vcpus': 1,
                'memory_mb': 512}
        db_api.flavor_create(self.ctx, base)
        error = self.assertRaises(exception.FlavorExists,
                                  db_api.flavor_create, self.ctx,
                                  {**base, 'name': 'two'})
        self.assertIn('flavorid f1', str(error))
        error = self.assertRaises(exception.FlavorExists,
                                  db_api.flavor_create, self.ctx,
                                  {**base, 'flavorid': 'f2'})
        self.assertIn('name one', str(error))

    def test_flavor_missing(self):
        for call in (db_api.flavor_get_by_flavorid, db_api.flavor_destroy,
                     db_api.flavor_extra_specs_get):
            error = self.assertRaises(exception.FlavorNotFound, call,
                                      self.ctx, 'nope')
            self.assertIn('nope', str(error))
        self.assertRaises(exception.FlavorNotFound,
                          db_api.flavor_extra_specs_update_or_create,
                          self.ctx, 'nope', {'a': 'b'})

    def test_flavor_extra_specs(self):
        db_api.flavor_create(self.ctx, {'flavorid': 'f1', 'name': 'one',
                                        'vcpus': 1, 'memory_mb': 512},
                             extra_specs={'a': '1', 'b': '2'})
        specs = db_api.flavor_extra_specs_update_or_create(
            self.ctx, 'f1', {'b': '3', 'c': '4'})
        self.assertEqual({'a': '1', 'b': '3', 'c': '4'}, specs)
        db_api.flavor_extra_specs_delete(self.ctx, 'f1', 'a')
        self.assertEqual({'b': '3', 'c': '4'},
                         db_api.flavor_extra_specs_get(self.ctx, 'f1'))
        error = self.assertRaises(exception.FlavorExtraSpecNotFound,
                                  db_api.flavor_extra_specs_delete,
                                  self.ctx, 'f1', 'a')
        self.assertIn('f1', str(error))

    # Instances

    def test_instance_crud(self):
        flavor = records.FlavorSnapshot(
            id=1, flavorid='f1', name='gpu', vcpus=4, memory_mb=1024,
            root_gb=0, extra_specs={'pci_passthrough:alias': 'h200:2'})
        requests = (pci_request.InstancePCIRequest(
            request_id='r1', alias_name='h200', count=2,
            spec=[{'vendor_id': '10de'}], numa_policy='legacy',
            group_type=None, resource_class='PGPU', traits={'T'}),)
        instance = db_api.instance_create(self.ctx, {
            'display_name': 'vm1', 'project_id': 'p1', 'user_id': 'u1',
            'flavor_id': 1, 'flavor': flavor, 'vm_state': 'building',
            'pci_requests': requests})
        self.assertEqual(36, len(instance.uuid))
        self.assertIsInstance(instance, records.Instance)
        found = db_api.instance_get_by_uuid(self.ctx, instance.uuid)
        # MySQL's DATETIME keeps whole seconds (see the migrations').
        self.assertEqual(dataclasses.replace(instance,
                                             created_at=found.created_at),
                         found)
        self.assertEqual(flavor, found.flavor)
        self.assertEqual(requests, found.pci_requests)
        updated = db_api.instance_update(self.ctx, instance.uuid, {
            'vm_state': 'active', 'host': 'cmp1', 'power_state': 1})
        self.assertEqual('active', updated.vm_state)
        self.assertEqual('cmp1', updated.host)
        self.assertIsNotNone(updated.updated_at)

    def test_instance_get_all_filters(self):
        for name, project, state in (('a', 'p1', 'active'),
                                     ('b', 'p1', 'error'),
                                     ('c', 'p2', 'active')):
            db_api.instance_create(self.ctx, {
                'display_name': name, 'project_id': project,
                'vm_state': state})
        names = [i.display_name for i in db_api.instance_get_all(
            self.ctx, {'project_id': 'p1'})]
        self.assertEqual(['a', 'b'], names)
        names = [i.display_name for i in db_api.instance_get_all(
            self.ctx, {'vm_state': ['active', 'error'],
                       'project_id': 'p2'})]
        self.assertEqual(['c'], names)
        self.assertEqual(3, len(db_api.instance_get_all(self.ctx)))
        self.assertRaises(exception.DBFieldInvalid, db_api.instance_get_all,
                          self.ctx, {'colour': 'red'})

    def test_instance_update_expected(self):
        uuid = db_api.instance_create(self.ctx, {'task_state': None}).uuid
        updated = db_api.instance_update(
            self.ctx, uuid, {'task_state': 'spawning'},
            expected={'task_state': [None, 'scheduling']})
        self.assertEqual('spawning', updated.task_state)
        error = self.assertRaises(
            exception.InstanceUpdateConflict, db_api.instance_update,
            self.ctx, uuid, {'task_state': 'deleting'},
            expected={'task_state': None})
        self.assertIn('spawning', str(error))
        self.assertEqual('spawning', db_api.instance_get_by_uuid(
            self.ctx, uuid).task_state)

    def _migration(self, instance_uuid, status, source='cmp1',
                   dest='cmp2', migration_type='resize'):
        return db_api.migration_create(self.ctx, {
            'instance_uuid': instance_uuid, 'status': status,
            'migration_type': migration_type, 'source_compute': source,
            'dest_compute': dest, 'old_flavor': OLD_FLAVOR,
            'new_pci_requests': [NEW_REQUEST]})

    def test_migrations_in_progress_and_filters(self):
        moving = self._migration('i1', 'finished')
        self._migration('i1', 'error')
        self._migration('i2', 'done', source='cmp3',
                        migration_type='evacuation')
        self._migration('i3', 'completed', source='cmp3',
                        migration_type='evacuation')
        self.assertIsInstance(moving, records.Migration)
        read = db_api.migration_get_by_uuid(self.ctx, moving.uuid)
        self.assertReadBack(moving, read)
        self.assertEqual(OLD_FLAVOR, read.old_flavor)
        self.assertEqual((NEW_REQUEST,), read.new_pci_requests)
        self.assertEqual(['i2', 'i1'], [
            m.instance_uuid
            for m in db_api.migration_get_in_progress(self.ctx)])
        self.assertEqual(['i1'], [
            m.instance_uuid for m in db_api.migration_get_in_progress(
                self.ctx, host='cmp2', instance_uuids=['i1', 'i3'])])
        self.assertEqual(['i2'], [
            m.instance_uuid for m in db_api.migration_get_in_progress(
                self.ctx, host='cmp3')])
        self.assertEqual(2, len(db_api.migration_get_all(
            self.ctx, {'instance_uuid': 'i1'})))
        self.assertEqual(['completed', 'done'], sorted(
            m.status for m in db_api.migration_get_all(
                self.ctx, {'migration_type': 'evacuation'})))
        self.assertRaises(exception.MigrationNotFound,
                          db_api.migration_get_by_uuid, self.ctx, 'nope')
        self.assertRaises(exception.DBFieldInvalid,
                          db_api.migration_get_all, self.ctx, {'x': 1})

    def test_migration_update_compare_and_swap(self):
        uuid = self._migration('i1', 'finished').uuid
        self.assertEqual('confirming', db_api.migration_update(
            self.ctx, uuid, {'status': 'confirming'},
            expected_status='finished').status)
        # A revert racing the confirm loses and is told why.
        error = self.assertRaises(
            exception.MigrationUpdateConflict, db_api.migration_update,
            self.ctx, uuid, {'status': 'reverting'},
            expected_status='finished')
        self.assertIn("'confirming'", str(error))
        self.assertRaises(exception.MigrationNotFound,
                          db_api.migration_update, self.ctx, 'nope',
                          {'status': 'error'})

    def test_move_lease_taken_once_then_only_when_stale(self):
        uuid = db_api.instance_create(self.ctx, {
            'vm_state': 'active', 'build_owner': None}).uuid
        self._migration(uuid, 'post-migrating')
        now = timeutils.utcnow()
        self.assertTrue(db_api.instance_move_lease_take(
            self.ctx, uuid, 'c1', now))
        self.assertFalse(db_api.instance_move_lease_take(
            self.ctx, uuid, 'c2', now - datetime.timedelta(seconds=60)))
        self.assertEqual([], db_api.migration_get_orphaned(
            self.ctx, now - datetime.timedelta(seconds=60)))
        later = timeutils.utcnow() + datetime.timedelta(seconds=1)
        self.assertEqual([uuid], [m.instance_uuid for m in
                                  db_api.migration_get_orphaned(
                                      self.ctx, later)])
        self.assertTrue(db_api.instance_move_lease_take(
            self.ctx, uuid, 'c2', later))
        self.assertEqual('c2', db_api.instance_get_by_uuid(
            self.ctx, uuid).build_owner)

    def test_instance_destroy_is_soft(self):
        uuid = db_api.instance_create(self.ctx, {'display_name': 'x'}).uuid
        deleted = db_api.instance_destroy(self.ctx, uuid)
        self.assertIsNotNone(deleted.deleted_at)
        self.assertRaises(exception.InstanceNotFound,
                          db_api.instance_get_by_uuid, self.ctx, uuid)
        self.assertEqual([], db_api.instance_get_all(self.ctx))
        self.assertEqual(uuid, db_api.instance_get_by_uuid(
            self.ctx, uuid, read_deleted=True).uuid)
        self.assertEqual(1, len(db_api.instance_get_all(
            self.ctx, read_deleted=True)))
        for call, args in ((db_api.instance_destroy, ()),
                           (db_api.instance_update, ({'host': 'h'},))):
            error = self.assertRaises(exception.InstanceNotFound, call,
                                      self.ctx, uuid, *args)
            self.assertIn(uuid, str(error))

    def test_instance_duplicate_uuid(self):
        instance = db_api.instance_create(self.ctx, {})
        self.assertRaises(exception.InstanceExists, db_api.instance_create,
                          self.ctx, {'uuid': instance.uuid})

    def test_threads_share_the_database(self):
        errors = []

        def create(index):
            try:
                db_api.instance_create(nova_context.get_admin_context(),
                                       {'display_name': 'vm%d' % index})
            except Exception as error:  # reported by the assertion below
                errors.append(error)

        threads = [threading.Thread(target=create, args=(i,))
                   for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([], errors)
        self.assertEqual(8, len(db_api.instance_get_all(self.ctx)))

    # Build leases

    def _building(self, age=0, **values):
        """A build in ``scheduling``, created ``age`` seconds ago."""
        timeutils.set_time_override(self._ago(age))
        try:
            return db_api.instance_create(self.ctx, {
                'vm_state': 'building', 'task_state': 'scheduling',
                **values})
        finally:
            timeutils.clear_time_override()

    @staticmethod
    def _ago(seconds):
        return timeutils.utcnow() - datetime.timedelta(seconds=seconds)

    def test_take_unowned_build_once(self):
        uuid = self._building().uuid
        self.assertTrue(db_api.instance_build_lease_take(
            self.ctx, uuid, 'c1', self._ago(60), any_unowned=True))
        # A replayed request, and another conductor, find it taken.
        for owner in ('c1', 'c2'):
            self.assertFalse(db_api.instance_build_lease_take(
                self.ctx, uuid, owner, self._ago(60), any_unowned=True))
        instance = db_api.instance_get_by_uuid(self.ctx, uuid)
        self.assertEqual('c1', instance.build_owner)
        self.assertIsNotNone(instance.build_heartbeat)

    def test_take_expired_lease_clears_the_host(self):
        uuid = self._building(build_owner='dead', host='cmp1', node='cmp1',
                              build_heartbeat=self._ago(120)).uuid
        self.assertEqual([uuid], db_api.instance_get_orphaned_builds(
            self.ctx, self._ago(60)))
        self.assertTrue(db_api.instance_build_lease_take(
            self.ctx, uuid, 'c2', self._ago(60)))
        instance = db_api.instance_get_by_uuid(self.ctx, uuid)
        self.assertEqual(('c2', None, None), (
            instance.build_owner, instance.host, instance.node))
        self.assertEqual([], db_api.instance_get_orphaned_builds(
            self.ctx, self._ago(60)))

    def test_orphaned_builds(self):
        lost = self._building(age=120).uuid      # nova-api died
        self._building(age=1)                       # cast on its way
        self._building(build_owner='live', build_heartbeat=self._ago(1))
        dead = self._building(build_owner='dead',
                              build_heartbeat=self._ago(120)).uuid
        self._building(age=120, build_owner='dead', task_state='spawning',
                       build_heartbeat=self._ago(120))
        db_api.instance_create(self.ctx, {
            'vm_state': 'error', 'build_owner': 'dead',
            'build_heartbeat': self._ago(120)})
        deleted = self._building(age=120).uuid
        db_api.instance_destroy(self.ctx, deleted)

        self.assertEqual([lost, dead], db_api.instance_get_orphaned_builds(
            self.ctx, self._ago(60)))
        # Not orphaned: never taken, even by a conductor that asks only
        # for orphans.
        fresh = self._building(age=1).uuid
        self.assertFalse(db_api.instance_build_lease_take(
            self.ctx, fresh, 'c1', self._ago(60)))

    def test_renew_only_own_leases(self):
        mine = self._building(build_owner='c1',
                              build_heartbeat=self._ago(50)).uuid
        other = self._building(build_owner='c2',
                               build_heartbeat=self._ago(50)).uuid
        self.assertEqual(1, db_api.instance_build_lease_renew(
            self.ctx, 'c1', [mine, other]))
        self.assertEqual(0, db_api.instance_build_lease_renew(
            self.ctx, 'c1', []))
        self.assertEqual([other], db_api.instance_get_orphaned_builds(
            self.ctx, self._ago(40)))

    def test_concurrent_takeover_has_one_winner(self):
        uuids = [self._building(build_owner='dead',
                                build_heartbeat=self._ago(120)).uuid
                 for _ in range(3)]
        wins = {uuid: [] for uuid in uuids}
        errors = []
        barrier = threading.Barrier(6)

        def take(owner):
            context = nova_context.get_admin_context()
            try:
                barrier.wait(timeout=30)
                for uuid in uuids:
                    if db_api.instance_build_lease_take(
                            context, uuid, owner, self._ago(60)):
                        wins[uuid].append(owner)
            except Exception as error:  # reported by the assertion below
                errors.append(error)

        threads = [threading.Thread(target=take, args=('c%d' % i,))
                   for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([], errors)
        for uuid in uuids:
            self.assertEqual(1, len(wins[uuid]), wins)
            self.assertEqual(wins[uuid][0], db_api.instance_get_by_uuid(
                self.ctx, uuid).build_owner)


class TestConfigure(test.TestCase):

    def setUp(self):
        super().setUp()
        # A private, unstarted facade so the process-wide one is untouched.
        self.manager = enginefacade.transaction_context()
        self.useFixture(fixtures.MockPatchObject(db_api, 'context_manager',
                                                 self.manager))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.db.api._configured_connection', None))
        self.path = self.useFixture(fixtures.TempDir()).path

    def _conf(self, connection):
        conf = cfg.ConfigOpts()
        nova_database_conf.register_opts(conf)
        conf([])
        conf.set_override('connection', connection, group='database')
        return conf

    def test_configure_creates_sqlite_directory(self):
        db_file = os.path.join(self.path, 'state', 'nova.sqlite')
        db_api.configure(self._conf('sqlite:///' + db_file))
        self.addCleanup(self.manager.dispose_pool)
        self.assertTrue(os.path.isdir(os.path.dirname(db_file)))
        self.assertEqual(db_file, db_api.get_engine().url.database)

    def test_configure_again(self):
        url = 'sqlite:///' + os.path.join(self.path, 'nova.sqlite')
        db_api.configure(self._conf(url))
        db_api.configure(self._conf(url))
        error = self.assertRaises(
            exception.InvalidConfiguration, db_api.configure,
            self._conf('sqlite:///' + os.path.join(self.path, 'other')))
        self.assertIn('other', str(error))
