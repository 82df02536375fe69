"""The invariant checker finds each kind of damage it promises to find."""

import dataclasses

from nova import context as nova_context
from nova.db import api as db
from nova.pci import manager as pci_manager
from nova.tests.functional.lib import invariants
from nova.tests.functional import test_boot_gpu_groups as boot

LEAKED = '99999999-8888-7777-6666-555555555555'


class TestInvariants(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.start_services()
        self.ctx = nova_context.get_admin_context()
        self.flavors = self.gpu_flavors()

    def check(self, settled=True):
        return invariants.check(self.allinone.api_url, 'admin',
                                self.placement.api, self.ctx,
                                settled=settled)

    def device_row(self, server_id=None):
        return next(r for r in self._rows()
                    if r['instance_uuid'] == server_id)

    def test_consistent_deployment_has_no_violation(self):
        self.boot(self.flavors[2], 'pair')
        self.boot(self.flavors[1], 'single')
        self.boot(self.flavors[8], 'too-big', status='ERROR')
        self.assertEqual([], self.check())
        self.assertEqual('all invariants hold', invariants.summary([]))

    def test_leaked_allocation_and_over_use(self):
        server = self.boot(self.flavors[1], 'single')
        taken = self.device_row(server['id'])['rp_uuid']
        resp = self.placement.api.put('/allocations/%s' % LEAKED, json={
            'allocations': {taken: {'resources': {'PGPU': 1}}},
            'project_id': 'p', 'user_id': 'u', 'consumer_generation': None,
            'consumer_type': 'INSTANCE'})
        # Placement itself refuses the over-use.
        self.assertEqual(409, resp.status_code, resp.text)
        free = self.device_row(None)['rp_uuid']
        resp = self.placement.api.put('/allocations/%s' % LEAKED, json={
            'allocations': {free: {'resources': {'PGPU': 1}}},
            'project_id': 'p', 'user_id': 'u', 'consumer_generation': None,
            'consumer_type': 'INSTANCE'})
        self.assertEqual(204, resp.status_code, resp.text)
        violations = self.check()
        self.assertEqual(1, len(violations), violations)
        self.assertIn('consumer %s' % LEAKED, violations[0])
        self.assertIn('leaked', violations[0])

    def test_device_rows_that_disagree(self):
        server = self.boot(self.flavors[2], 'pair')
        row = self.device_row(server['id'])
        # Hand one of its GPUs to an instance that does not exist.
        db.pci_device_update(self.ctx, row['id'],
                             {'instance_uuid': LEAKED})
        violations = invariants.summary(self.check())
        self.assertIn('held by instance %s, which is deleted' % LEAKED,
                      violations)
        self.assertIn('ACTIVE server %s holds 1 devices, its flavor asks '
                      'for 2' % server['id'], violations)

    def test_server_on_a_broken_partition(self):
        first = self.boot(self.flavors[1], 'a')
        second = self.boot(self.flavors[1], 'b')
        # Make "a" look like a 2-GPU server holding both singles: they are
        # a pair only if the buddy rule put them together, so take two
        # GPUs of different pairs instead.
        rows = [r for r in self._rows() if r['instance_uuid'] is None]
        mine = self.device_row(first['id'])
        other = next(r for r in rows if r['group_path'].rsplit('/', 1)[0]
                     != mine['group_path'].rsplit('/', 1)[0])
        db.pci_device_update(self.ctx, other['id'], {
            'instance_uuid': first['id'], 'status': 'allocated'})
        instance = db.instance_get_by_uuid(self.ctx, first['id'])
        flavor = dataclasses.replace(
            instance.flavor,
            extra_specs={'pci_passthrough:alias': 'h200:2'})
        db.instance_update(self.ctx, first['id'], {'flavor': flavor})
        violations = invariants.summary(self.check())
        self.assertIn('which is not one device group', violations)
        self.assertIn('in Placement but holds', violations)
        self.assertNotIn(second['id'], violations)

    def test_stuck_build_only_when_settled(self):
        server = self.boot(self.flavors[1], 'single')
        db.instance_update(self.ctx, server['id'],
                           {'vm_state': 'building'})
        self.assertEqual([], self.check(settled=False))
        self.assertEqual(['server %s is still in BUILD' % server['id']],
                         self.check(settled=True))

    def test_only_the_holder_may_keep_an_unhealthy_device(self):
        server = self.boot(self.flavors[1], 'single')
        held = self.device_row(server['id'])
        node = db.compute_node_get_by_nodename(self.ctx, 'cmp1')
        pci_manager.set_device_health(self.ctx, node.id, held['address'],
                                      True, 'ECC errors', 'test')
        self.computes['cmp1'].update_available_resource()
        # Reserved under its holder's allocation: allowed.
        self.assertEqual([], self.check())
        # A device marked unhealthy while free, allocated to someone
        # before the compute reserved it.
        free = self.device_row(None)
        pci_manager.set_device_health(self.ctx, node.id, free['address'],
                                      True, 'ECC errors', 'test')
        resp = self.placement.api.put('/allocations/%s' % LEAKED, json={
            'allocations': {free['rp_uuid']: {'resources': {'PGPU': 1}}},
            'project_id': 'p', 'user_id': 'u', 'consumer_generation': None,
            'consumer_type': 'INSTANCE'})
        self.assertEqual(204, resp.status_code, resp.text)
        violations = invariants.summary(self.check())
        self.assertIn('unhealthy device cmp1 %s is allocated to %s, which '
                      'did not hold it when it became unhealthy (holder '
                      'then: none)' % (free['address'], LEAKED), violations)
        self.assertNotIn(server['id'], violations)

    def _rows(self):
        node = db.compute_node_get_by_nodename(self.ctx, 'cmp1')
        return db.pci_device_get_all_by_node(self.ctx, node.id)
