"""Tests for the PCI NUMA affinity check of allocation candidates."""

from nova import test
from nova.db import records
from nova.pci import request as pci_request
from nova.scheduler import numa_affinity
from nova.scheduler import request_builder
from nova.scheduler import candidates as scheduler_candidates

RID = '11111111-2222-3333-4444-555555555555'


def _pci(count, policy, rid=RID):
    return pci_request.InstancePCIRequest(
        request_id=rid, alias_name='gpu', count=count,
        spec=[{'resource_class': 'PGPU'}], numa_policy=policy,
        group_type=None, resource_class='PGPU', traits=set())


def _response(*nodes_per_candidate):
    """Candidates mapping device i to a provider on NUMA node nodes[i]
    (None: no NUMA trait); providers d<node> exist once per node."""
    summaries = {'root': {'root_provider_uuid': 'root', 'traits': []}}
    candidates = []
    for nodes in nodes_per_candidate:
        mappings = {}
        for index, node in enumerate(nodes):
            rp = 'dev-%s-%d' % (node, index)
            summaries[rp] = {'root_provider_uuid': 'root', 'traits': (
                ['CUSTOM_PCI_NUMA_NODE_%d' % node,
                 'CUSTOM_PCI_SOCKET_%d' % node] if node is not None
                else [])}
            mappings['%s-%d' % (RID, index)] = [rp]
        candidates.append({'allocations': {'root': {}}, 'mappings': mappings})
    return {'allocation_requests': candidates,
            'provider_summaries': summaries}


class TestFilter(test.TestCase):

    def check(self, policy, *nodes_per_candidate):
        requests = [_pci(len(nodes_per_candidate[0]), policy)]
        request = request_builder.build_resource_request(
            records.FlavorSnapshot.of_flavor(
                {'vcpus': 1, 'memory_mb': 1, 'root_gb': 0}), requests)
        response = _response(*nodes_per_candidate)
        return numa_affinity.filter_candidates(
            scheduler_candidates.from_response(response, request),
            response['provider_summaries'], request)

    def test_required_keeps_single_node_candidates(self):
        kept, reasons = self.check('required', (0, 1), (1, 1), (0, None))
        self.assertEqual([[['dev-1-0'], ['dev-1-1']]],
                         [list(c.allocation_request['mappings'].values())
                          for c in kept])
        self.assertEqual(2, len(reasons))
        self.assertIn('NUMA nodes 0, 1', reasons[0])
        self.assertIn('reports no NUMA node', reasons[1])

    def test_socket_keeps_single_socket_candidates(self):
        kept, reasons = self.check('socket', (0, 1), (0, 0))
        self.assertEqual(1, len(kept))
        self.assertIn('sockets 0, 1', reasons[0])

    def test_legacy_and_preferred_keep_everything(self):
        for policy in ('legacy', 'preferred'):
            kept, reasons = self.check(policy, (0, 1), (None, None))
            self.assertEqual((2, []), (len(kept), reasons))

    def test_preferred_candidates_on_one_node_first(self):
        requests = [_pci(2, 'preferred')]
        request = request_builder.build_resource_request(
            records.FlavorSnapshot.of_flavor(
                {'vcpus': 1, 'memory_mb': 1, 'root_gb': 0}), requests)
        response = _response((0, 1), (1, 1), (0, None), (0, 0))
        selections = scheduler_candidates.from_response(response, request)
        summaries = response['provider_summaries']
        ordered = numa_affinity.prefer_local(selections, summaries, request)
        self.assertEqual([1, 3, 0, 2], [selections.index(s)
                                        for s in ordered])
        # Legacy keeps the weighers' order.
        requests[0].numa_policy = 'legacy'
        self.assertEqual(selections, numa_affinity.prefer_local(
            selections, summaries, request))
