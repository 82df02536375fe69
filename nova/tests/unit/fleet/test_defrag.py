"""The defragmentation planner: exact plans on small fleets."""

import dataclasses

from nova import test
from nova.fleet import board as fleet_board
from nova.fleet import defrag
from nova.pci import device as pci_device

# An HGX board: pairs 1+3, 2+4, 5+7, 6+8, quartets 1-4 (NUMA node 0) and
# 5-8 (node 1), the board of 8.
PATHS = {1: 'board/quad-a/pair-a1', 3: 'board/quad-a/pair-a1',
         2: 'board/quad-a/pair-a2', 4: 'board/quad-a/pair-a2',
         5: 'board/quad-b/pair-b1', 7: 'board/quad-b/pair-b1',
         6: 'board/quad-b/pair-b2', 8: 'board/quad-b/pair-b2'}


def _addr(gpu):
    return '0000:0%d:00.0' % gpu


def _board(host, held, paths=PATHS, nodes=None):
    """``held``: GPU number -> server UUID."""
    devices = [pci_device.TrackedDevice(
        id=gpu, compute_node_id=1, address=_addr(gpu), vendor_id='10de',
        product_id='2335', dev_type=pci_device.DEV_TYPE_PCI,
        group_path=path, instance_uuid=held.get(gpu),
        numa_node=(nodes or {}).get(gpu, 0 if gpu <= 4 else 1),
        status='allocated' if gpu in held else 'available')
        for gpu, path in sorted(paths.items())]
    return fleet_board.HostBoard(host, devices, {})


def _servers(*uuids, fixed=(), strict=()):
    return {uuid: defrag.Server(
        uuid=uuid, name='vm-' + uuid,
        numa_policy='required' if uuid in strict else 'legacy',
        movable=uuid not in fixed) for uuid in uuids}


def _moves(plan):
    return [(m.server, m.source_host, m.source, m.target.host,
             m.target.name) for m in plan.moves]


class BoardsFromTest(test.TestCase):

    def test_partitions_of_every_size(self):
        board, = defrag.boards_from([_board('h1', {1: 's1'})])
        sizes = sorted(part.size for part in board.partitions)
        self.assertEqual([1] * 8 + [2] * 4 + [4] * 2 + [8], sizes)
        self.assertEqual({_addr(1): 's1'}, dict(board.holders))
        quad, = [p for p in board.partitions if p.name == 'board/quad-b']
        self.assertEqual(frozenset([1]), quad.numa_nodes)

    def test_withheld_device_is_unusable(self):
        host = _board('h1', {})
        devices = [host.devices[0].__class__(**{
            **host.devices[0].to_row(),
            'extra_info': {'withheld': 'fabric manager lost it'}})]
        host = fleet_board.HostBoard('h1', devices + host.devices[1:], {})
        board, = defrag.boards_from([host])
        self.assertEqual(frozenset([_addr(1)]), board.unusable)
        self.assertNotIn(_addr(1), [p.name for p in board.partitions])


def _unhealthy(host_board, gpu):
    """``host_board`` with GPU ``gpu`` marked unhealthy."""
    return fleet_board.HostBoard(host_board.host, [
        dataclasses.replace(dev, health=pci_device.UNHEALTHY,
                            health_reason='RMA 4711')
        if dev.address == _addr(gpu) else dev
        for dev in host_board.devices], {})


class BoardsFromHealthTest(test.TestCase):

    def test_unhealthy_device_is_unusable_and_its_groups_no_partitions(
            self):
        board, = defrag.boards_from([_unhealthy(_board('h1', {}), 1)])
        self.assertEqual(frozenset([_addr(1)]), board.unusable)
        names = {p.name for p in board.partitions}
        self.assertFalse({_addr(1), 'board', 'board/quad-a',
                          'board/quad-a/pair-a1'} & names, names)
        self.assertIn('board/quad-b', names)

    def test_no_move_frees_a_board_with_a_broken_gpu(self):
        # h1's board holds an unhealthy GPU: freeing it by moving s1
        # would free nothing; h2's board is freed by moving s2.
        plan = defrag.plan(defrag.boards_from([
            _unhealthy(_board('h1', {5: 's1'}), 1),
            _board('h2', {1: 's2'})]), _servers('s1', 's2'), 8, 3)
        self.assertEqual(('h2', 'board'), (plan.freed.host,
                                           plan.freed.name))
        self.assertEqual(['s2'], [m.server for m in plan.moves])


class PlanTest(test.TestCase):

    def _plan(self, hosts, servers, size=8, max_moves=3, host=None):
        return defrag.plan(defrag.boards_from(hosts), servers, size,
                           max_moves, host)

    def test_free_group_needs_no_move(self):
        plan = self._plan([_board('h1', {1: 's1'}), _board('h2', {})],
                          _servers('s1'))
        self.assertEqual(('h2', 'board'), (plan.freed.host,
                                           plan.freed.name))
        self.assertEqual((), plan.moves)

    def test_one_move_frees_a_board(self):
        # s1 (1 GPU) is alone on h1; on h2 s2 holds pair-a1: s1 goes next
        # to it, on GPU 2, breaking only the free pair a2.
        plan = self._plan([_board('h1', {1: 's1'}),
                           _board('h2', {1: 's2', 3: 's2'})],
                          _servers('s1', 's2'))
        self.assertEqual(('h1', 'board'), (plan.freed.host,
                                           plan.freed.name))
        self.assertEqual([('s1', 'h1', _addr(1), 'h2', _addr(2))],
                         _moves(plan))
        self.assertEqual((1, 1), plan.cost)
        self.assertEqual([
            '1. vm-s1 (1 device): h1 %s -> h2 %s' % (_addr(1), _addr(2)),
            'frees h1 board (8 devices) with 1 move(s), 1 device(s) moved',
        ], plan.describe())

    def test_fewest_servers_before_fewest_gpus(self):
        # Freeing h1 moves two 1-GPU servers, freeing h2 one of 4 GPUs
        # (to h3's free quartet, the only one).
        plan = self._plan([_board('h1', {1: 's1', 5: 's2'}),
                           _board('h2', {1: 's3', 2: 's3', 3: 's3',
                                         4: 's3'}),
                           _board('h3', {1: 's4', 3: 's4'})],
                          _servers('s1', 's2', 's3', 's4', fixed=('s4',)))
        self.assertEqual([('s3', 'h2', 'board/quad-a', 'h3',
                           'board/quad-b')], _moves(plan))

    def test_fewest_gpus_among_equal_moves(self):
        # One move frees h1 (a pair) or h2 (one GPU): h2, whose GPU goes
        # to h3's GPU 7, next to s4, breaking no free group.
        plan = self._plan([_board('h1', {1: 's1', 3: 's1'}),
                           _board('h2', {5: 's2'}),
                           _board('h3', {1: 's3', 2: 's3', 3: 's3',
                                         4: 's3', 5: 's4'})],
                          _servers('s1', 's2', 's3', 's4'))
        self.assertEqual([('s2', 'h2', _addr(5), 'h3', _addr(7))],
                         _moves(plan))

    def test_unmovable_server_is_never_moved(self):
        hosts = [_board('h1', {1: 's1'}), _board('h2', {5: 's2'}),
                 _board('h3', {1: 's3', 3: 's3'})]
        # h2's GPU goes to h1's GPU 3, beside the fixed s1.
        plan = self._plan(hosts, _servers('s1', 's2', 's3', fixed=('s1',)))
        self.assertEqual([('s2', 'h2', _addr(5), 'h1', _addr(3))],
                         _moves(plan))
        plan = self._plan(hosts, _servers('s1', 's2', 's3',
                                          fixed=('s1', 's2')))
        self.assertEqual([('s3', 'h3', 'board/quad-a/pair-a1', 'h1',
                           'board/quad-a/pair-a2')], _moves(plan))
        self.assertIsNone(self._plan(
            hosts, _servers('s1', 's2', 's3', fixed=('s1', 's2', 's3'))))

    def test_chain_moves_a_blocker_first(self):
        # h1's quartet s1 can only go to h2's quad-b, where s2 must first
        # make room (to h3's GPU 7, next to the fixed s5); h2 and h3 have
        # fixed servers and cannot be freed.
        hosts = [_board('h1', {1: 's1', 2: 's1', 3: 's1', 4: 's1'}),
                 _board('h2', {1: 's3', 2: 's3', 3: 's3', 4: 's3',
                               5: 's2'}),
                 _board('h3', {1: 's4', 2: 's4', 3: 's4', 4: 's4',
                               5: 's5'})]
        servers = _servers('s1', 's2', 's3', 's4', 's5',
                           fixed=('s3', 's4', 's5'))
        plan = self._plan(hosts, servers)
        self.assertEqual([('s2', 'h2', _addr(5), 'h3', _addr(7)),
                          ('s1', 'h1', 'board/quad-a', 'h2',
                           'board/quad-b')], _moves(plan))
        self.assertEqual((2, 5), plan.cost)
        self.assertIsNone(self._plan(hosts, servers, max_moves=1))

    def test_strict_numa_policy_is_kept(self):
        # h2's only free pair spans NUMA nodes 0 and 1.
        paths = {1: 'board/p1', 2: 'board/p1', 3: 'board/p2',
                 4: 'board/p2'}
        h2 = _board('h2', {1: 's2', 2: 's2'}, paths, {1: 0, 2: 0, 3: 0,
                                                      4: 1})
        h1 = _board('h1', {1: 's1', 2: 's1'}, paths, {1: 0, 2: 0, 3: 0,
                                                      4: 0})
        self.assertIsNone(self._plan([h1, h2], _servers(
            's1', 's2', fixed=('s2',), strict=('s1',)), size=4))
        plan = self._plan([h1, h2], _servers('s1', 's2', fixed=('s2',)),
                          size=4)
        self.assertEqual([('s1', 'h1', 'board/p1', 'h2', 'board/p2')],
                         _moves(plan))

    def test_a_server_moves_only_to_its_kind_of_device(self):
        # h2's only free device is an NVMe drive.
        nvme = pci_device.TrackedDevice(
            id=9, compute_node_id=2, address='0000:c1:00.0',
            vendor_id='144d', product_id='a80a',
            dev_type=pci_device.DEV_TYPE_PCI)
        h2 = _board('h2', {gpu: 's2' for gpu in range(1, 9)})
        h2 = fleet_board.HostBoard('h2', h2.devices + [nvme], {})
        servers = _servers('s1', 's2', fixed=('s2',))
        self.assertIsNone(self._plan([_board('h1', {1: 's1'}), h2],
                                     servers))

    def test_only_the_requested_host(self):
        hosts = [_board('h1', {1: 's1'}), _board('h2', {5: 's2', 6: 's3'}),
                 _board('h3', {1: 's4', 3: 's4'})]
        plan = self._plan(hosts, _servers('s1', 's2', 's3', 's4'),
                          host='h2')
        self.assertEqual('h2', plan.freed.host)
        self.assertEqual([('s2', 'h2', _addr(5), 'h1', _addr(3)),
                          ('s3', 'h2', _addr(6), 'h1', _addr(2))],
                         _moves(plan))

    def test_smaller_group_already_free(self):
        plan = self._plan([_board('h1', {1: 's1'})], _servers('s1'),
                          size=2)
        self.assertEqual(('board/quad-a/pair-a2', ()),
                         (plan.freed.name, plan.moves))
