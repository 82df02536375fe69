"""The board view drawn from device rows."""

import dataclasses
import datetime

from nova import test
from nova.fleet import board
from nova.pci import device as pci_device


def _dev(address, path, instance=None, status=None):
    return pci_device.TrackedDevice(
        id=1, compute_node_id=1, address=address, vendor_id='10de',
        product_id='2335', dev_type=pci_device.DEV_TYPE_PCI,
        group_path=path, instance_uuid=instance,
        status=status or ('allocated' if instance else 'available'))


class HostBoardTest(test.TestCase):

    def setUp(self):
        super().setUp()
        # Two NVLink pairs, one half used, and an ungrouped NVMe.
        self.board = board.HostBoard('nvl-1', [
            _dev('0000:31:00.0', 'pair-1'),
            _dev('0000:17:00.0', 'pair-1', 'u1'),
            _dev('0000:b1:00.0', 'pair-2'),
            _dev('0000:ca:00.0', 'pair-2'),
            _dev('0000:c1:00.0', '', 'u2', status='claimed'),
        ], {'u1': 'vm-1'})

    def test_draw(self):
        self.assertEqual([
            'nvl-1: 5 devices, 3 free',
            '  pair-1 [0000:17:00.0 vm-1     | 0000:31:00.0 free    ]',
            '  pair-2 [0000:b1:00.0 free     | 0000:ca:00.0 free    ]',
            '  (no group) [0000:c1:00.0 u2      ]',
        ], self.board.draw().splitlines())

    def test_holders_and_free_partitions(self):
        self.assertEqual({'vm-1': ['0000:17:00.0'], 'u2': ['0000:c1:00.0']},
                         self.board.holders())
        self.assertEqual({1: 3, 2: 1}, self.board.free_partitions())

    def test_fleet_summary(self):
        empty = board.HostBoard('other', [_dev('0000:01:00.0', '')], {})
        self.assertEqual([
            'Free partitions by size (every device of the group free):',
            '  size  free  hosts',
            '  1     4     nvl-1 3, other 1',
            '  2     1     nvl-1 1',
        ], board.draw_fleet_summary([self.board, empty]).splitlines())


class UnhealthyBoardTest(test.TestCase):

    def test_unhealthy_gpu_and_the_groups_still_offered(self):
        quad = [('0000:18:00.0', 'quad/pair-1'), ('0000:2a:00.0',
                                                  'quad/pair-1'),
                ('0000:3a:00.0', 'quad/pair-2'), ('0000:5d:00.0',
                                                  'quad/pair-2')]
        devices = [_dev(a, p) for a, p in quad]
        devices[0] = dataclasses.replace(
            devices[0], health=pci_device.UNHEALTHY,
            health_reason='nvidia-smi: GPU is lost',
            health_source='nvidia-smi',
            health_since=datetime.datetime(2026, 12, 4, 8, 0, 0))
        devices[3] = dataclasses.replace(devices[3], instance_uuid='u1',
                                         status='allocated')
        host = board.HostBoard('cmp1', devices, {'u1': 'vm-1'})
        self.assertEqual([
            'cmp1: 4 devices, 2 free, 1 unhealthy',
            '  quad NOT OFFERED: device 0000:18:00.0 unhealthy '
            '(nvidia-smi: nvidia-smi: GPU is lost)',
            '    pair-1 [0000:18:00.0 unhealthy | 0000:2a:00.0 free    ] '
            'NOT OFFERED: device 0000:18:00.0 unhealthy (nvidia-smi: '
            'nvidia-smi: GPU is lost)',
            '    pair-2 [0000:3a:00.0 free     | 0000:5d:00.0 vm-1    ]',
            '  0000:18:00.0 unhealthy since 2026-12-04T08:00:00 '
            '(nvidia-smi): nvidia-smi: GPU is lost',
        ], host.draw().splitlines())
        # The broken GPU counts nowhere; its pair is not free.
        self.assertEqual({1: 2, 2: 0, 4: 0}, host.free_partitions())

    def test_nvswitch_down_offers_singles_only(self):
        reason = 'not offered in groups: NVSwitch 0000:05:00.0 is down'
        devices = [dataclasses.replace(
            _dev(a, 'pair-1'), extra_info={'withheld': reason})
            for a in ('0000:18:00.0', '0000:2a:00.0')]
        host = board.HostBoard('cmp1', devices, {})
        self.assertEqual({1: 2, 2: 0}, host.free_partitions())
        self.assertIn('pair-1 [0000:18:00.0 free     | 0000:2a:00.0 free    '
                      '] NOT OFFERED: NVSwitch 0000:05:00.0 is down',
                      host.draw())


def withheld_by(dev, state, partition=3):
    """``dev`` as its compute records it while a partition keeps it."""
    return dataclasses.replace(dev, extra_info=pci_device.extra_info(
        'true', 'false', 'in Fabric Manager partition %d (...)' % partition,
        partition_hold=pci_device.PartitionHold(partition, state)))


def operator_marked(dev, reason='uncorrectable ECC errors, RMA 1234'):
    return dataclasses.replace(dev, health=pci_device.UNHEALTHY,
                               health_reason=reason, health_source='operator')


class WithheldBoardTest(test.TestCase):
    """Why capacity is missing, per cause, as board and picture say it."""

    def setUp(self):
        super().setUp()
        devices = [_dev('0000:18:00.0', 'quad/pair-1'),
                   _dev('0000:2a:00.0', 'quad/pair-1'),
                   _dev('0000:3a:00.0', 'quad/pair-2'),
                   _dev('0000:5d:00.0', 'quad/pair-2')]
        devices[0] = operator_marked(devices[0])
        devices[2:] = [withheld_by(d, pci_device.PARTITION_FOREIGN)
                       for d in devices[2:]]
        self.host = board.HostBoard('cmp1', devices, {})

    def test_one_reason_per_cause(self):
        self.assertEqual([
            board.Withholding(
                'device 0000:18:00.0 unhealthy (operator: uncorrectable '
                'ECC errors, RMA 1234)', board.UNHEALTHY, board.UNHEALTHY,
                ('0000:18:00.0',)),
            board.Withholding('foreign partition 3 active', board.WITHHELD,
                              'foreign partition 3',
                              ('0000:3a:00.0', '0000:5d:00.0'))],
            self.host.withholdings)
        self.assertEqual('withheld: foreign partition 3 active',
                         self.host.withholdings[1].text)
        pair_2 = self.host.devices[2:]
        self.assertEqual([self.host.withholdings[1]],
                         self.host.not_offered(pair_2))
        self.assertEqual(self.host.withholdings[1],
                         self.host.withholding(pair_2[0]))
        self.assertIsNone(self.host.withholding(self.host.devices[1]))

    def test_text_board_names_the_partition_and_the_mark(self):
        lines = self.host.draw().splitlines()
        self.assertEqual(
            '  quad NOT OFFERED: device 0000:18:00.0 unhealthy (operator: '
            'uncorrectable ECC errors, RMA 1234); foreign partition 3 '
            'active', lines[1])
        self.assertTrue(lines[3].endswith(
            '] NOT OFFERED: foreign partition 3 active'), lines[3])
        self.assertEqual({1: 1, 2: 0, 4: 0}, self.host.free_partitions())

    def test_quarantined_partition(self):
        devices = [withheld_by(_dev(a, 'pair-1'),
                               pci_device.PARTITION_QUARANTINED, 5)
                   for a in ('0000:18:00.0', '0000:2a:00.0')]
        host = board.HostBoard('cmp1', devices, {})
        self.assertEqual([('partition 5 quarantined', 'quarantined')],
                         [(w.reason, w.mark) for w in host.withholdings])
        self.assertIn('NOT OFFERED: partition 5 quarantined', host.draw())


class NestedBoardTest(test.TestCase):
    """A quad of two pairs and a lone pair: sizes 2 and 4."""

    def setUp(self):
        super().setUp()
        self.board = board.HostBoard('hgx-1', [
            _dev('0000:01:00.0', 'quad/pair-a', 'u1'),
            _dev('0000:02:00.0', 'quad/pair-a'),
            _dev('0000:03:00.0', 'quad/pair-b'),
            _dev('0000:04:00.0', 'quad/pair-b'),
            _dev('0000:05:00.0', 'pair-c'),
            _dev('0000:06:00.0', 'pair-c', 'u2'),
        ], {'u1': 'vm-1'})

    def test_free_partitions_and_fragmentation(self):
        self.assertEqual({1: 4, 2: 1, 4: 0}, self.board.free_partitions())
        # Pairs: 0000:02 and 0000:05 are free, each beside a used device.
        # Quad: the four free devices sit in no wholly free quad.
        self.assertEqual({2: 2, 4: 4}, self.board.fragmented())

    def test_states(self):
        self.assertEqual(
            ['used', 'free', 'free', 'free', 'free', 'used'],
            [self.board.state(d) for d in self.board.devices])
        self.assertEqual([4, 2, 2, 2], sorted(
            (len(g) for g in self.board.groups()), reverse=True))

    def test_resource_class_of_old_rows(self):
        dev = self.board.devices[0]
        self.assertEqual('CUSTOM_PCI_10DE_2335', board.resource_class(dev))
        self.assertFalse(board.unhealthy(dev))
