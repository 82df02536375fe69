"""Tests for PCI NUMA affinity rules and the host topology helpers."""

from nova import exception
from nova import test
from nova.pci import numa
from nova.virt import hardware

L = numa.Locality


def _req(policy, *devices, label='gpu:1'):
    return numa.PlacedRequest(policy=policy, label=label,
                              devices=tuple(devices))


class TestGuestNodes(test.TestCase):

    def assertViolation(self, requests, *fragments):
        err = self.assertRaises(exception.PciNumaAffinityViolation,
                                numa.guest_nodes, requests)
        for fragment in fragments:
            self.assertIn(fragment, err.message)

    def test_no_requests_leaves_the_guest_free(self):
        self.assertEqual((), numa.guest_nodes([]))

    def test_strict_request_without_devices_is_ignored(self):
        self.assertEqual((), numa.guest_nodes([_req('required'),
                                               _req('socket')]))
        self.assertEqual((1,), numa.guest_nodes([
            _req('required'), _req('preferred', L(1, 1))]))

    def test_preferred_follows_one_shared_node(self):
        self.assertEqual((1,), numa.guest_nodes(
            [_req('preferred', L(1, 1), L(1, 1)), _req('legacy', L(1, 1))]))
        self.assertEqual((), numa.guest_nodes(
            [_req('preferred', L(1, 1)), _req('legacy', L(0, 0))]))
        self.assertEqual((), numa.guest_nodes(
            [_req('preferred', L(0, 0), L(1, 1))]))
        self.assertEqual((), numa.guest_nodes([_req('preferred', L())]))

    def test_legacy_alone_never_confines(self):
        self.assertEqual((), numa.guest_nodes(
            [_req('legacy', L(1, 1), L(1, 1))]))

    def test_required_on_one_node(self):
        self.assertEqual((1,), numa.guest_nodes([
            _req('required', L(1, 1), L(1, 1)),
            _req('legacy', L(0, 0))]))

    def test_required_spanning_nodes(self):
        self.assertViolation(
            [_req('required', L(0, 0), L(1, 1), label='h200:8')],
            'PCI request h200:8 with NUMA affinity policy required',
            'sit on NUMA nodes 0, 1', 'single NUMA node')
        # Across two required requests too.
        self.assertViolation([_req('required', L(0, 0)),
                              _req('required', L(1, 1))], 'nodes 0, 1')

    def test_required_spanning_nodes_with_numa_nodes(self):
        board = _req('required', *([L(0, 0)] * 4 + [L(1, 1)] * 4),
                     label='h200:8')
        self.assertEqual((0, 1), numa.guest_nodes([board], cells=2))
        self.assertEqual((0, 1), numa.guest_nodes([board], cells=4))
        err = self.assertRaises(
            exception.PciNumaAffinityViolation, numa.guest_nodes,
            [_req('required', L(0, 0), L(1, 1), L(2, 1))], cells=2)
        self.assertIn('nodes 0, 1, 2 but the guest runs on 2 NUMA nodes',
                      err.message)

    def test_socket_with_numa_nodes_takes_the_busiest_nodes(self):
        # Node 2 holds two devices, nodes 0 and 1 one each (0 wins).
        self.assertEqual((0, 2), numa.guest_nodes([
            _req('socket', L(2, 1), L(2, 1), L(1, 0), L(0, 0))], cells=2))
        err = self.assertRaises(
            exception.PciNumaAffinityViolation, numa.guest_nodes,
            [_req('socket', L(1, 0), L(1, 0), L(0, 0), L(2, 1))], cells=2)
        self.assertIn('sockets 0, 1 but the guest runs on NUMA node 0, 1 '
                      'of socket 0', err.message)

    def test_preferred_with_numa_nodes(self):
        self.assertEqual((0, 1), numa.guest_nodes(
            [_req('preferred', L(0, 0), L(1, 1))], cells=2))
        self.assertEqual((), numa.guest_nodes(
            [_req('preferred', L(0, 0), L(1, 1), L(2, 1))], cells=2))

    def test_required_without_numa_information(self):
        self.assertViolation([_req('required', L(0, 0), L())],
                             'reports no NUMA node')

    def test_socket_follows_the_required_node(self):
        self.assertEqual((0,), numa.guest_nodes([
            _req('required', L(0, 0)), _req('socket', L(1, 0))]))
        self.assertViolation(
            [_req('required', L(0, 0)),
             _req('socket', L(2, 1), label='nic:1')],
            'nic:1 with NUMA affinity policy socket', 'sockets 1',
            'NUMA node 0 of socket 0')

    def test_socket_alone_picks_the_busiest_node(self):
        self.assertEqual((1,), numa.guest_nodes([
            _req('socket', L(0, 0), L(1, 0), L(1, 0))]))
        # A tie goes to the lowest node.
        self.assertEqual((0,), numa.guest_nodes([
            _req('socket', L(1, 0), L(0, 0))]))
        self.assertViolation([_req('socket', L(0, 0), L(2, 1))],
                             'sockets 0, 1')
        self.assertViolation([_req('socket', L(0, None))],
                             'socket unknown')

    def test_prefers_local(self):
        self.assertTrue(numa.prefers_local([_req('preferred', L(1), L(1)),
                                            _req('legacy', L(0))]))
        self.assertFalse(numa.prefers_local([_req('preferred', L(0),
                                                  L(1))]))
        self.assertTrue(numa.prefers_local([_req('legacy', L(0), L(1))]))


class TestHostTopology(test.TestCase):

    def test_queries(self):
        topo = hardware.HostNUMATopology((
            hardware.NUMACell(0, (0, 1, 4, 5), 1024, 0),
            hardware.NUMACell(1, (2, 3, 6, 7), 1024, None)))
        self.assertEqual(0, topo.socket_of(0))
        self.assertIsNone(topo.socket_of(1))
        self.assertIsNone(topo.socket_of(None))
        self.assertIsNone(topo.socket_of(7))
        self.assertFalse(topo.sockets_known)
        self.assertEqual((0, 1, 2, 3, 4, 5, 6, 7), topo.cpus_of((1, 0)))
        self.assertFalse(hardware.HostNUMATopology().sockets_known)

    def test_format_cpu_set(self):
        self.assertEqual('0-2,5,7-8',
                         hardware.format_cpu_set((8, 7, 5, 2, 1, 0, 1)))
        self.assertEqual('3', hardware.format_cpu_set((3,)))
