"""The group request model against real Placement (HGX H200 host).

Builds the nested provider tree of one host by hand (compute node -> board
-> 2 quads -> 2 pairs each -> 8 GPUs with member-index traits) and checks
the claim of DESIGN.md: a request for N GPUs returns exactly one candidate
per free group of size N, each candidate is a declared group, and using one
GPU removes exactly the groups it breaks.
"""

import uuid

import testtools

from nova.pci import request as pci_request
from nova.scheduler import request_builder
from nova.scheduler import weights
from nova.tests.fixtures import placement as placement_fixture

HOST = 'cmp1'
ADDRESSES = ['0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0',
             '0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0']
# name -> (parent group name or None, GPU numbers 1..8)
GROUPS = {
    'board': (None, (1, 2, 3, 4, 5, 6, 7, 8)),
    'quad-a': ('board', (1, 2, 3, 4)),
    'quad-b': ('board', (5, 6, 7, 8)),
    'pair-a1': ('quad-a', (1, 3)),
    'pair-a2': ('quad-a', (2, 4)),
    'pair-b1': ('quad-b', (5, 7)),
    'pair-b2': ('quad-b', (6, 8)),
}
FLAVOR = {'vcpus': 4, 'memory_mb': 4096, 'root_gb': 0, 'extra_specs': {}}


def _member_traits(gpu):
    """One member-index trait per group enclosing ``gpu``."""
    traits = set()
    for _parent, gpus in GROUPS.values():
        if gpu in gpus:
            # Member index: position in the group's address-sorted list.
            ordered = sorted(gpus, key=lambda g: ADDRESSES[g - 1])
            traits.add('CUSTOM_PCI_GROUP_NVLINK_%d_M%d' % (
                len(gpus), ordered.index(gpu)))
    return traits


class TestGroupCandidates(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.api = self.useFixture(placement_fixture.PlacementFixture()).api
        self.gpu_rps = {}       # GPU number -> RP uuid
        self._build_tree()

    def _call(self, method, url, body=None, expect=(200, 201, 204)):
        resp = getattr(self.api, method)(url, json=body)
        self.assertIn(resp.status_code, expect, '%s %s: %s' % (
            method, url, resp.text))
        return resp.json() if resp.text else None

    def _provider(self, name, parent, inventory=None, traits=()):
        rp = str(uuid.uuid4())
        self._call('post', '/resource_providers', {
            'name': name, 'uuid': rp, 'parent_provider_uuid': parent})
        generation = 0
        if inventory:
            generation = self._call(
                'put', '/resource_providers/%s/inventories' % rp, {
                    'resource_provider_generation': generation,
                    'inventories': inventory})['resource_provider_generation']
        if traits:
            for trait in traits:
                if trait.startswith('CUSTOM_'):
                    self._call('put', '/traits/%s' % trait)
            self._call('put', '/resource_providers/%s/traits' % rp, {
                'resource_provider_generation': generation,
                'traits': sorted(traits)})
        return rp

    def _build_tree(self):
        self.root = self._provider(HOST, None, {
            'VCPU': {'total': 64}, 'MEMORY_MB': {'total': 65536}},
            {'OWNER_NOVA'})
        group_rps = {}
        for name, (parent, gpus) in GROUPS.items():   # parents first
            group_rps[name] = self._provider(
                '%s_%s' % (HOST, name),
                group_rps[parent] if parent else self.root,
                traits={'CUSTOM_PCI_GROUP_NVLINK',
                        'CUSTOM_PCI_GROUP_NVLINK_%d' % len(gpus)})
        for name, (_parent, gpus) in GROUPS.items():
            if not name.startswith('pair-'):
                continue
            for gpu in gpus:
                self.gpu_rps[gpu] = self._provider(
                    '%s_%s' % (HOST, ADDRESSES[gpu - 1].upper()),
                    group_rps[name],
                    {'PGPU': {'total': 1, 'max_unit': 1}},
                    {'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'} |
                    _member_traits(gpu))

    def _candidates(self, count):
        """(device sets of the candidates, request, raw response)."""
        pci = pci_request.InstancePCIRequest(
            request_id=str(uuid.uuid4()), alias_name='h200', count=count,
            spec=[{'resource_class': 'PGPU'}], numa_policy='legacy',
            group_type='nvlink', resource_class='PGPU', traits=set())
        request = request_builder.build_resource_request(
            FLAVOR, [pci], True)
        response = self._call('get', '/allocation_candidates?%s' % (
            request.to_querystring(1000)))
        gpu_of = {rp: gpu for gpu, rp in self.gpu_rps.items()}
        device_sets = []
        for candidate in response['allocation_requests']:
            gpus = [gpu_of[candidate['mappings'][suffix][0]]
                    for suffix in request.pci_group_suffixes(
                        pci.request_id)]
            self.assertEqual(count, len(set(gpus)))
            device_sets.append(frozenset(gpus))
        return device_sets, request, response

    def _assert_one_candidate_per_free_group(self, busy):
        for count in (1, 2, 4, 8):
            expected = {frozenset(gpus) for _p, gpus in GROUPS.values()
                        if len(gpus) == count and not set(gpus) & busy}
            if count == 1:
                expected = {frozenset([g]) for g in range(1, 9)
                            if g not in busy}
            device_sets, _req, _resp = self._candidates(count)
            self.assertEqual(len(expected), len(device_sets),
                             'N=%d: %s' % (count, device_sets))
            self.assertEqual(expected, set(device_sets), 'N=%d' % count)

    def test_one_candidate_per_free_group(self):
        self._assert_one_candidate_per_free_group(busy=set())
        counts = {n: len(self._candidates(n)[0]) for n in (1, 2, 4, 8)}
        self.assertEqual({1: 8, 2: 4, 4: 2, 8: 1}, counts)

    def test_used_gpu_removes_the_groups_it_breaks(self):
        self._call('put', '/allocations/%s' % uuid.uuid4(), {
            'allocations': {
                self.root: {'resources': {'VCPU': 4, 'MEMORY_MB': 4096}},
                self.gpu_rps[1]: {'resources': {'PGPU': 1}}},
            'project_id': str(uuid.uuid4()), 'user_id': str(uuid.uuid4()),
            'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        self._assert_one_candidate_per_free_group(busy={1})
        counts = {n: len(self._candidates(n)[0]) for n in (1, 2, 4, 8)}
        self.assertEqual({1: 7, 2: 3, 4: 1, 8: 0}, counts)

        # The buddy rule on real provider summaries: one GPU goes next to
        # the busy GPU 1, a pair into the already broken quad-a.
        gpu_of = {rp: gpu for gpu, rp in self.gpu_rps.items()}
        for count, best in ((1, {3}), (2, {2, 4})):
            _sets, request, response = self._candidates(count)
            selections = weights.select_candidates(response, request)
            self.assertEqual(self.root, selections[0].host)
            first = {gpu_of[rp] for rp in
                     selections[0].allocation_request['allocations']
                     if rp in gpu_of}
            self.assertEqual(best, first)
