"""The group request model against real Placement (HGX H200 host).

Builds the nested provider tree of one host by hand (compute node -> board
-> 2 quads -> 2 pairs each -> 8 GPUs with member-index traits) and checks
the claim of doc/source/admin/pci-groups.rst: a request for N GPUs
returns exactly one candidate per free group of size N, each candidate is
a declared group, and using one GPU removes exactly the groups it breaks.
"""

import uuid


from nova import test
from nova.db import records
from nova.pci import request as pci_request
from nova.scheduler import request_builder
from nova.scheduler import candidates as scheduler_candidates
from nova.tests.fixtures import h200_placement
from nova.tests.fixtures import placement as placement_fixture
from nova.tests.functional.lib import base

HOST = 'cmp1'
GROUPS = h200_placement.GROUPS
FLAVOR = records.FlavorSnapshot.of_flavor(
    {'vcpus': 4, 'memory_mb': 4096, 'root_gb': 0, 'extra_specs': {}})


class TestGroupCandidates(test.TestCase):

    def setUp(self):
        super().setUp()
        api = self.useFixture(placement_fixture.PlacementFixture()).api
        self.builder = h200_placement.TreeBuilder(self, api)
        self.root, self.gpu_rps = self.builder.h200_host(HOST)

    def _candidates(self, count):
        """(device sets of the candidates, request, raw response)."""
        pci = pci_request.InstancePCIRequest(
            request_id=str(uuid.uuid4()), alias_name='h200', count=count,
            spec=[{'resource_class': 'PGPU'}], numa_policy='legacy',
            group_type='nvlink', resource_class='PGPU', traits=set())
        request = request_builder.build_resource_request(
            FLAVOR, [pci])
        # As the scheduler does: Placement refuses to forbid a trait it
        # does not know (single-GPU requests forbid the group-only one).
        for group in request.groups:
            for trait in group.forbidden_traits:
                self.builder.call('put', '/traits/%s' % trait)
        response = self.builder.call('get', '/allocation_candidates?%s' % (
            request.to_querystring(1000)))
        gpu_of = {rp: gpu for gpu, rp in self.gpu_rps.items()}
        device_sets = []
        for candidate in response['allocation_requests']:
            gpus = [gpu_of[rp] for rp in
                    request.pci_providers(candidate)[pci.request_id]]
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
        self.builder.call('put', '/allocations/%s' % uuid.uuid4(), {
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
        partner = set(base.pair_of(1)) - {1}
        other_pair = set(base.pair_of(base.not_a_pair(1)[1]))
        for count, best in ((1, partner), (2, other_pair)):
            _sets, request, response = self._candidates(count)
            selections = scheduler_candidates.select_candidates(
                response, request)
            self.assertEqual(self.root, selections[0].host)
            first = {gpu_of[rp] for rp in
                     selections[0].allocation_request['allocations']
                     if rp in gpu_of}
            self.assertEqual(best, first)
