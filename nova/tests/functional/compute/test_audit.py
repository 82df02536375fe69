"""The ownership rule and what the audit finds, on real Placement and DB."""

import uuid

from nova.compute import audit
from nova.db import api as db
from nova.scheduler.client import report
from nova.tests.functional.lib import gpu_hosts


class TestAudit(gpu_hosts.GpuHostsTestCase):

    def setUp(self):
        super().setUp()
        self.client = report.SchedulerReportClient(self.conf)
        self.root = self.hosts.add_host('cmp1')

    def _instance(self, vm_state='active', host='cmp1', deleted=False):
        instance = gpu_hosts.create_instance(self.admin, 0)
        instance = db.instance_update(self.admin, instance.uuid, {
            'vm_state': vm_state, 'host': host,
            'task_state': 'scheduling' if vm_state == 'building' else None})
        if deleted:
            db.instance_destroy(self.admin, instance.uuid)
        return instance.uuid

    def _migration(self, instance_uuid, status, source='cmp1',
                   dest='cmp2'):
        return db.migration_create(self.admin, {
            'instance_uuid': instance_uuid, 'migration_type': 'resize',
            'status': status, 'source_compute': source,
            'dest_compute': dest}).uuid

    def _hold(self, consumer, gpu=1, consumer_type='INSTANCE'):
        self.hosts.builder.call('put', '/allocations/%s' % consumer, {
            'allocations': {
                self.root: {'resources': {'VCPU': 1}},
                self.hosts.gpus['cmp1'][gpu]: {'resources': {'PGPU': 1}}},
            'project_id': 'p', 'user_id': 'u', 'consumer_generation': None,
            'consumer_type': consumer_type})
        return consumer

    def test_owner_rule(self):
        cases = {
            self._instance('building', host=None): None,
            self._instance('active'): None,
            self._instance('active', deleted=True): 'instance was deleted',
            self._instance('error', host=None): 'instance is in ERROR',
            self._instance('shelved_offloaded', host=None):
                'instance is shelved and offloaded',
            self._instance('shelved', host='cmp1'): None,
            self._instance('stopped', host='cmp1'): None,
        }
        unshelving = self._instance('shelved_offloaded', host=None)
        db.instance_update(self.admin, unshelving,
                           {'task_state': 'unshelving'})
        cases[unshelving] = None
        unknown = str(uuid.uuid4())
        cases[unknown] = 'no instance has this UUID'
        found = audit.unowned(self.admin, cases)
        for instance_uuid, expected in cases.items():
            if expected is None:
                self.assertNotIn(instance_uuid, found)
            else:
                self.assertIn(expected, found[instance_uuid])
        # On a host, the instance must be on that host.
        elsewhere = self._instance('active', host='cmp2')
        self.assertEqual('instance is on host cmp2, not cmp1',
                         audit.unowned(self.admin, [elsewhere],
                                       'cmp1')[elsewhere])
        self.assertEqual({}, audit.unowned(self.admin, [elsewhere]))
        # Moving from cmp1 to cmp2: owned on both until the move is over.
        self._migration(elsewhere, 'finished')
        self.assertEqual({}, audit.unowned(self.admin, [elsewhere], 'cmp1'))
        self.assertIn(elsewhere, audit.unowned(self.admin, [elsewhere],
                                               'cmp3'))

    def test_finds_allocations_no_instance_owns(self):
        building = self._hold(self._instance('building', host=None), 1)
        active = self._hold(self._instance('active'), 2)
        deleted = self._hold(self._instance('active', deleted=True), 3)
        failed = self._hold(self._instance('error', host=None), 4)
        stranger = self._hold(str(uuid.uuid4()), 5)
        migration = self._hold(self._migration(active, 'finished'), 6,
                               'MIGRATION')
        confirmed = self._hold(self._migration(active, 'confirmed'), 7,
                               'MIGRATION')
        unrecorded = self._hold(str(uuid.uuid4()), 8, 'MIGRATION')

        orphans = audit.find_orphan_allocations(self.admin, self.client,
                                                [self.root])

        self.assertEqual(sorted([deleted, failed, stranger, confirmed,
                                 unrecorded]),
                         [o.consumer_uuid for o in orphans])
        by_consumer = {o.consumer_uuid: o for o in orphans}
        self.assertEqual('migration is confirmed',
                         by_consumer[confirmed].reason)
        self.assertEqual('no migration has this UUID',
                         by_consumer[unrecorded].reason)
        by_consumer = {o.consumer_uuid: o for o in orphans}
        self.assertEqual(
            {self.root: {'VCPU': 1},
             self.hosts.gpus['cmp1'][5]: {'PGPU': 1}},
            by_consumer[stranger].resources)
        self.assertIn('PGPU=1 on %s' % self.hosts.gpus['cmp1'][5],
                      audit.describe_resources(
                          by_consumer[stranger].resources))

        self.assertEqual(sorted([deleted, failed, stranger, confirmed,
                                 unrecorded]),
                         sorted(audit.remove_allocations(self.client,
                                                         orphans)))
        for consumer in (deleted, failed, stranger, confirmed, unrecorded):
            self.assertEqual({}, self.hosts.allocations(consumer))
        for consumer in (building, active, migration):
            self.assertNotEqual({}, self.hosts.allocations(consumer))
        self.assertEqual([], audit.find_orphan_allocations(
            self.admin, self.client, [self.root]))

    def test_remove_leaves_what_placement_cannot_delete(self):
        stranger = self._hold(str(uuid.uuid4()), 1)
        orphans = audit.find_orphan_allocations(self.admin, self.client,
                                                [self.root])
        self.placement.stop_server()

        self.assertEqual([], audit.remove_allocations(self.client, orphans))
        self.assertIn('Could not delete the orphaned allocation of '
                      'consumer %s' % stranger, self.logger.output)
        self.placement.start_server()
        self.assertEqual([stranger],
                         audit.remove_allocations(self.client, orphans))

    def test_finds_device_claims_no_instance_owns(self):
        node = db.compute_node_get_by_nodename(self.admin, 'cmp1')
        here = self._instance('active')
        moved = self._instance('active', host='cmp2')
        deleted = self._instance('active', deleted=True)
        for index, holder in enumerate((here, moved, deleted, None)):
            db.pci_device_create(self.admin, {
                'compute_node_id': node.id,
                'address': '0000:0%d:00.0' % index, 'vendor_id': '10de',
                'product_id': '2335', 'dev_type': 'type-PCI',
                'status': 'allocated' if holder else 'available',
                'instance_uuid': holder})

        claims = audit.find_orphan_device_claims(self.admin, [node])

        self.assertEqual(
            [('0000:01:00.0', moved, 'instance is on host cmp2, not cmp1'),
             ('0000:02:00.0', deleted, 'instance was deleted')],
            [(c.address, c.instance_uuid, c.reason[:len(
                'instance was deleted')] if c.instance_uuid == deleted
              else c.reason) for c in claims])
        self.assertEqual({'cmp1'}, {c.host for c in claims})
        self.assertEqual({node.id}, {c.compute_node_id for c in claims})
