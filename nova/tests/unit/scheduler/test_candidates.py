"""Tests for choosing among allocation candidates (pack and buddy rule)."""

import itertools


from nova import test
from nova.db import records
from nova.pci import request as pci_request
from nova.scheduler import request_builder
from nova.scheduler import candidates as scheduler_candidates

RID = '11111111-2222-3333-4444-555555555555'
PAIRS = {'pair-a1': (1, 3), 'pair-a2': (2, 4),
         'pair-b1': (5, 7), 'pair-b2': (6, 8)}
QUADS = {'quad-a': ('pair-a1', 'pair-a2'), 'quad-b': ('pair-b1', 'pair-b2')}


def _summary(root, parent, resources=None, traits=()):
    return {'root_provider_uuid': root, 'parent_provider_uuid': parent,
            'resources': resources or {}, 'traits': sorted(traits)}


def _hgx(host, used=()):
    """Provider summaries of an HGX H200 host; GPUs in ``used`` are busy.

    Provider "UUIDs" are readable names that sort by GPU number.
    """
    summaries = {host: _summary(host, None, {
        'VCPU': {'capacity': 64, 'used': 0},
        'MEMORY_MB': {'capacity': 65536, 'used': 0}})}
    board = host + '-board'
    summaries[board] = _summary(host, host, traits={
        'CUSTOM_PCI_GROUP_NVLINK', 'CUSTOM_PCI_GROUP_NVLINK_8'})
    for quad, pairs in QUADS.items():
        summaries['%s-%s' % (host, quad)] = _summary(host, board, traits={
            'CUSTOM_PCI_GROUP_NVLINK', 'CUSTOM_PCI_GROUP_NVLINK_4'})
        for pair in pairs:
            pair_uuid = '%s-%s' % (host, pair)
            summaries[pair_uuid] = _summary(
                host, '%s-%s' % (host, quad), traits={
                    'CUSTOM_PCI_GROUP_NVLINK', 'CUSTOM_PCI_GROUP_NVLINK_2'})
            for gpu in PAIRS[pair]:
                summaries[_gpu(host, gpu)] = _summary(
                    host, pair_uuid,
                    {'PGPU': {'capacity': 1, 'used': int(gpu in used)}},
                    traits={'COMPUTE_MANAGED_PCI_DEVICE',
                            'CUSTOM_PCI_GROUP_NVLINK_2_M0'})
    return summaries


def _gpu(host, gpu):
    return '%s-gpu%d' % (host, gpu)


def _candidate(host, gpus):
    allocations = {host: {'resources': {'VCPU': 4, 'MEMORY_MB': 4096}}}
    mappings = {'': [host]}
    for index, gpu in enumerate(gpus):
        allocations[_gpu(host, gpu)] = {'resources': {'PGPU': 1}}
        mappings['%s-%d' % (RID, index)] = [_gpu(host, gpu)]
    if len(gpus) > 1:
        mappings['%s-g' % RID] = ['%s-group' % host]
    return {'allocations': allocations, 'mappings': mappings}


def _request(count, group_type='nvlink'):
    pci = pci_request.InstancePCIRequest(
        request_id=RID, alias_name='h200', count=count,
        spec=[{'resource_class': 'PGPU'}], numa_policy='legacy',
        group_type=group_type, resource_class='PGPU', traits=set())
    return request_builder.build_resource_request(
        records.FlavorSnapshot.of_flavor(
            {'vcpus': 4, 'memory_mb': 4096, 'root_gb': 0, 'extra_specs': {}}),
        [pci])


def _response(hosts, candidate_gpus):
    """Response with ``candidate_gpus[host]`` (lists of GPU tuples)."""
    summaries = {}
    for host, used in hosts.items():
        summaries.update(_hgx(host, used))
    requests = [_candidate(host, gpus)
                for host in hosts for gpus in candidate_gpus[host]]
    return {'allocation_requests': requests,
            'provider_summaries': summaries}


def _free_singles(used):
    return [(gpu,) for gpu in range(1, 9) if gpu not in used]


def _free_pairs(used):
    return [gpus for gpus in PAIRS.values() if not set(gpus) & set(used)]


def _picked(selections):
    """(host, GPU numbers) of each selection, in order."""
    result = []
    for sel in selections:
        gpus = sorted(int(uuid.rsplit('gpu', 1)[1])
                      for uuid in sel.allocation_request['allocations']
                      if '-gpu' in uuid)
        result.append((sel.host, tuple(gpus)))
    return result


class TestSelectCandidates(test.TestCase):

    def test_hosts_packed_fullest_first(self):
        hosts = {'h-free': (), 'h-two': (1, 3), 'h-six': (1, 2, 3, 4, 5, 7)}
        response = _response(hosts, {
            host: _free_singles(used) for host, used in hosts.items()})
        picked = _picked(scheduler_candidates.select_candidates(
            response, _request(1)))
        self.assertEqual(['h-six'] * 2 + ['h-two'] * 6 + ['h-free'] * 8,
                         [host for host, _gpus in picked])

    def test_buddy_rule_one_gpu(self):
        # GPU 1 busy: GPU 3 (its partner) breaks nothing, GPUs 2/4 break a
        # free pair, GPUs 5-8 a free pair and a free quad.
        response = _response({'h': (1,)}, {'h': _free_singles((1,))})
        picked = _picked(scheduler_candidates.select_candidates(
            response, _request(1)))
        self.assertEqual(
            [(3,), (2,), (4,), (5,), (6,), (7,), (8,)],
            [gpus for _host, gpus in picked])

    def test_buddy_rule_one_gpu_plain_alias(self):
        response = _response({'h': (5, 6, 8)}, {'h': _free_singles(
            (5, 6, 8))})
        picked = _picked(scheduler_candidates.select_candidates(
            response, _request(1, group_type=None)))
        self.assertEqual((7,), picked[0][1])

    def test_buddy_rule_two_gpus(self):
        # GPU 1 busy: pair {2,4} sits in the already broken quad-a; pairs
        # of quad-b would break it.
        response = _response({'h': (1,)}, {'h': _free_pairs((1,))})
        picked = _picked(scheduler_candidates.select_candidates(
            response, _request(2)))
        self.assertEqual([(2, 4), (5, 7), (6, 8)],
                         [gpus for _host, gpus in picked])

    def test_best_fit_before_host_fullness(self):
        # h-light's GPU 3 sits next to its busy partner and breaks
        # nothing, so it goes first although h-busy is fuller; breaking a
        # free pair comes next, on the fuller host first; breaking a free
        # quartet (h-light's quad-b) last.
        hosts = {'h-busy': (1, 2, 3, 4, 5, 7), 'h-light': (1,)}
        response = _response(hosts, {
            host: _free_singles(used) for host, used in hosts.items()})
        picked = _picked(scheduler_candidates.select_candidates(
            response, _request(1)))
        self.assertEqual([('h-light', (3,)), ('h-busy', (6,)),
                          ('h-busy', (8,)), ('h-light', (2,)),
                          ('h-light', (4,)), ('h-light', (5,))],
                         picked[:6])

    def test_quartet_goes_to_a_broken_board(self):
        # A 4-GPU request keeps the wholly free host for an 8-GPU one.
        hosts = {'h-a': (), 'h-b': (1,)}
        response = _response(hosts, {'h-a': [(1, 2, 3, 4), (5, 6, 7, 8)],
                                     'h-b': [(5, 6, 7, 8)]})
        picked = _picked(scheduler_candidates.select_candidates(
            response, _request(4)))
        self.assertEqual(('h-b', (5, 6, 7, 8)), picked[0])

    def test_free_host_ties_are_deterministic(self):
        response = _response({'h': ()}, {'h': _free_singles(())})
        response['allocation_requests'].reverse()
        picked = _picked(scheduler_candidates.select_candidates(
            response, _request(1)))
        self.assertEqual([(gpu,) for gpu in range(1, 9)],
                         [gpus for _host, gpus in picked])

    def test_whole_group_is_not_broken(self):
        # Two GPUs of a plain alias: taking the whole free pair {6,8}
        # breaks nothing, GPU 7 with 6 or 8 breaks that pair.
        used = (1, 2, 3, 4, 5)
        free = [g for g in range(1, 9) if g not in used]
        response = _response({'h': used}, {
            'h': list(itertools.combinations(free, 2))})
        picked = _picked(scheduler_candidates.select_candidates(
            response, _request(2, group_type=None)))
        self.assertEqual([(6, 8), (6, 7), (7, 8)],
                         [gpus for _host, gpus in picked])

    def test_selection_shape(self):
        response = _response({'h': ()}, {'h': [(1, 3)]})
        (selection,) = scheduler_candidates.select_candidates(
            response, _request(2))
        host, allocation_request, pci_providers = selection
        self.assertEqual('h', host)
        self.assertIs(response['allocation_requests'][0], allocation_request)
        self.assertEqual({RID: ['h-gpu1', 'h-gpu3']}, pci_providers)

    def test_host_without_unsuffixed_mapping(self):
        response = _response({'h': (1,)}, {'h': [(3,)]})
        candidate = response['allocation_requests'][0]
        del candidate['mappings']['']
        del candidate['allocations']['h']
        (selection,) = scheduler_candidates.select_candidates(
            response, _request(1))
        self.assertEqual('h', selection.host)

    def test_empty_response(self):
        self.assertEqual([], scheduler_candidates.select_candidates(
            {'allocation_requests': [], 'provider_summaries': {}},
            _request(1)))


class TestHostRoot(test.TestCase):
    """The one answer to "which host does a candidate land on", used by
    the scheduler manager and the weighing alike."""

    SUMMARIES = {'b-root': {'root_provider_uuid': 'b-root'},
                 'b-gpu': {'root_provider_uuid': 'b-root'},
                 'a-share': {'root_provider_uuid': 'a-share'}}

    def test_unsuffixed_group_tells_the_host(self):
        # A sharing provider with a lower UUID does not win.
        candidate = {'allocations': {'b-root': {}, 'b-gpu': {},
                                     'a-share': {}},
                     'mappings': {'': ['b-root'], 'r-0': ['b-gpu']}}
        self.assertEqual('b-root', scheduler_candidates.host_root(
            candidate, self.SUMMARIES))

    def test_lowest_root_without_unsuffixed_group(self):
        candidate = {'allocations': {'b-gpu': {}, 'a-share': {}},
                     'mappings': {'r-0': ['b-gpu']}}
        self.assertEqual('a-share', scheduler_candidates.host_root(
            candidate, self.SUMMARIES))
