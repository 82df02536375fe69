"""What a compute's periodic resource update costs a real Placement.

Requests are counted where they reach the Placement WSGI app, so every
HTTP request the compute sends is seen, whichever code path sent it.
"""

from oslo_utils import uuidutils

from nova.tests.functional.lib import base
from nova.tests.functional import test_pci_placement_tree as tree_test

# Requests an unchanged host may send per periodic update: the one
# listing of its tree that carries every provider's generation.
UNCHANGED_COST = [('GET', '/resource_providers')]


class TestUpdateCost(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.compute = self.start_compute('cmp1')
        self.expected = tree_test.h200_tree('cmp1')

    def cycle(self) -> list[tuple[str, str]]:
        """Run one periodic update; return the requests it sent."""
        seen = len(self.placement.faults.requests)
        self.compute.update_available_resource()
        return self.placement.faults.requests[seen:]

    def assert_tree_is_nova_s(self) -> None:
        self.assertEqual(self.expected,
                         tree_test.as_tuples(self.provider_view('cmp1')))

    def rp_uuid(self, name: str) -> str:
        return self.provider_view('cmp1')[name]['uuid']

    def generation(self, uuid: str) -> int:
        return self.placement_get('/resource_providers/%s' %
                                  uuid)['generation']

    def test_unchanged_host_costs_one_listing(self):
        for _ in range(3):
            self.assertEqual(UNCHANGED_COST, self.cycle())
        self.assert_tree_is_nova_s()

    def test_allocation_change_rereads_only_the_moved_providers(self):
        gpu = self.rp_uuid(tree_test.dev('cmp1', 1))
        root = self.rp_uuid('cmp1')
        self.reportclient.put_allocations(
            uuidutils.generate_uuid(),
            {root: {'resources': {'VCPU': 2}},
             gpu: {'resources': {'PGPU': 1}}},
            project_id='p', user_id='u')
        requests = self.cycle()
        # The listing, then inventories and traits of the two providers
        # whose generation the claim moved; no writes.
        self.assertEqual('/resource_providers', requests[0][1])
        self.assertEqual({'GET'}, {method for method, _ in requests})
        self.assertEqual(
            {'/resource_providers/%s/%s' % (uuid, what)
             for uuid in (root, gpu) for what in ('inventories', 'traits')},
            {path for _, path in requests[1:]})
        self.assertEqual(UNCHANGED_COST, self.cycle())

    def test_trait_removed_behind_its_back_is_healed(self):
        pair = self.rp_uuid('cmp1_pair-a1')
        resp = self.placement.api.put(
            '/resource_providers/%s/traits' % pair,
            json={'traits': [],
                  'resource_provider_generation': self.generation(pair)})
        self.assertEqual(200, resp.status_code, resp.text)
        self.assertIn(('PUT', '/resource_providers/%s/traits' % pair),
                      self.cycle())
        self.assert_tree_is_nova_s()
        self.assertEqual(UNCHANGED_COST, self.cycle())

    def test_inventory_changed_behind_its_back_is_healed(self):
        gpu = self.rp_uuid(tree_test.dev('cmp1', 5))
        resp = self.placement.api.put(
            '/resource_providers/%s/inventories' % gpu,
            json={'inventories': {'PGPU': {'total': 3}},
                  'resource_provider_generation': self.generation(gpu)})
        self.assertEqual(200, resp.status_code, resp.text)
        self.assertIn(('PUT', '/resource_providers/%s/inventories' % gpu),
                      self.cycle())
        self.assert_tree_is_nova_s()

    def test_provider_deleted_behind_its_back_is_recreated(self):
        gpu = self.rp_uuid(tree_test.dev('cmp1', 8))
        resp = self.placement.api.delete('/resource_providers/%s' % gpu)
        self.assertEqual(204, resp.status_code, resp.text)
        self.assertIn(('POST', '/resource_providers'), self.cycle())
        self.assert_tree_is_nova_s()
        # The device now points at the provider made in its place.
        new_uuid = self.rp_uuid(tree_test.dev('cmp1', 8))
        self.assertNotEqual(gpu, new_uuid)
        devices = {d.address: d for d in
                   self.compute.rt.pci_tracker.pci_devs}
        self.assertEqual(new_uuid, devices[base.GPUS[7]].rp_uuid)
        self.assertEqual(UNCHANGED_COST, self.cycle())

    def test_whole_tree_deleted_behind_its_back_is_rebuilt(self):
        view = self.provider_view('cmp1')
        parents = {rp['parent'] for rp in view.values()}
        # Leaves first: Placement refuses to delete a parent.
        for name in sorted(view, key=lambda n: (n in parents, -len(n))):
            resp = self.placement.api.delete(
                '/resource_providers/%s' % view[name]['uuid'])
            self.assertEqual(204, resp.status_code, resp.text)
        self.cycle()
        self.assert_tree_is_nova_s()
        self.assertEqual(UNCHANGED_COST, self.cycle())

    def test_foreign_provider_added_is_read_once_and_kept(self):
        root = self.rp_uuid('cmp1')
        resp = self.placement.api.post(
            '/resource_providers',
            json={'name': 'cmp1_nic', 'parent_provider_uuid': root})
        self.assertEqual(200, resp.status_code, resp.text)
        self.assertEqual({'GET'}, {method for method, _ in self.cycle()})
        # Not a provider nova's translator owns (e.g. another agent's):
        # left as it is, and no longer read once known.
        self.assertIn('cmp1_nic', self.provider_view('cmp1'))
        self.assertEqual(UNCHANGED_COST, self.cycle())

    def test_claim_publishes_only_what_changed(self):
        # A claim moves the generations of the providers it allocates
        # from; the compute's publish of its new free-device band writes
        # the root's traits without listing or re-reading the tree first
        # (the conflict on the moved root generation re-reads the root
        # alone), then the periodic update verifies the whole tree again.
        gpu = self.rp_uuid(tree_test.dev('cmp1', 1))
        root = self.rp_uuid('cmp1')
        consumer = uuidutils.generate_uuid()
        self.reportclient.put_allocations(
            consumer, {root: {'resources': {'VCPU': 2}},
                       gpu: {'resources': {'PGPU': 1}}},
            project_id='p', user_id='u')
        seen = len(self.placement.faults.requests)
        self.compute.rt.report_claimed(self.compute.rt.claim(
            consumer, 'req-1', [base.GPUS[0]]))
        requests = self.placement.faults.requests[seen:]
        reads = {path for method, path in requests if method == 'GET'}
        # (and at most one look-up of the band's trait names, new to
        # this client).
        self.assertLessEqual(reads, {'/resource_providers/%s/%s' % (
            root, what) for what in ('inventories', 'traits')} | {
            '/traits'}, requests)
        self.assertLessEqual(
            sum(1 for request in requests if request == ('GET', '/traits')),
            1, requests)
        self.assertEqual(('PUT', '/resource_providers/%s/traits' % root),
                         requests[-1])
        self.assertIn('CUSTOM_PCI_FREE_PGPU_4', set(self.placement_get(
            '/resource_providers/%s/traits' % root)['traits']))
        requests = self.cycle()
        self.assertEqual(('GET', '/resource_providers'), requests[0])
        self.assertEqual(UNCHANGED_COST, self.cycle())
