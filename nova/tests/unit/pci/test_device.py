"""Tests for the device records and their wire forms."""

import dataclasses
import datetime

from nova import exception
from nova.pci import device as pci_device
from nova import test

ROW = {
    'id': 7, 'compute_node_id': 1, 'address': '0000:18:00.0',
    'vendor_id': '10de', 'product_id': '2335', 'dev_type': 'type-PCI',
    'dev_id': 'pci_0000_18_00_0', 'label': 'label_10de_2335',
    'numa_node': 0, 'parent_addr': None, 'status': 'allocated',
    'instance_uuid': 'vm1', 'request_id': 'r1', 'group_path': 'pair-a1',
    'rp_uuid': 'rp1', 'created_at': None, 'updated_at': None,
    'health': 'healthy', 'health_reason': None, 'health_since': None,
    'health_source': None,
    'extra_info': {'managed': 'false', 'live_migratable': 'false',
                   'withheld': 'cannot be activated: it has no module ID'},
}


def gpu(**fields) -> pci_device.HostDevice:
    return pci_device.HostDevice(**{
        'address': '0000:18:00.0', 'vendor_id': '10de',
        'product_id': '2335', **fields})


class TestHostDevice(test.TestCase):

    def test_libvirt_names(self):
        dev = gpu(address='0000:db:1f.7')
        self.assertEqual('pci_0000_db_1f_7', dev.dev_id)
        self.assertEqual('label_10de_2335', dev.label)

    def test_bad_type_is_refused(self):
        err = self.assertRaises(exception.Invalid, gpu, dev_type='type-X')
        self.assertIn("'type-X'", str(err))
        self.assertIn('type-PCI, type-PF, type-VF', str(err))

    def test_frozen(self):
        self.assertRaises(dataclasses.FrozenInstanceError, setattr, gpu(),
                          'numa_node', 1)


class TestTrackedDevice(test.TestCase):

    def test_row_round_trip(self):
        dev = pci_device.TrackedDevice.from_row(ROW)
        self.assertEqual(('0000:18:00.0', 'allocated', 'vm1', 'rp1'),
                         (dev.address, dev.status, dev.instance_uuid,
                          dev.rp_uuid))
        self.assertEqual(ROW, dev.to_row())

    def test_health(self):
        dev = pci_device.TrackedDevice.from_row(dict(ROW, health=None))
        self.assertTrue(dev.healthy)
        self.assertIsNone(dev.describe_health())
        broken = dataclasses.replace(
            dev, health=pci_device.UNHEALTHY, health_reason='GPU is lost',
            health_source='nvidia-smi',
            health_since=datetime.datetime(2026, 12, 4, 8, 0, 1))
        self.assertFalse(broken.healthy)
        self.assertEqual('unhealthy since 2026-12-04T08:00:01 (nvidia-smi): '
                         'GPU is lost', broken.describe_health())

    def test_extra_info(self):
        dev = pci_device.TrackedDevice.from_row(ROW)
        self.assertFalse(dev.managed)
        self.assertEqual(pci_device.Passthrough('0000:18:00.0', False, 0,
                                                'r1'), dev.passthrough())
        self.assertEqual('cannot be activated: it has no module ID',
                         dev.withheld)
        plain = pci_device.TrackedDevice.from_row(dict(ROW, extra_info={}))
        self.assertTrue(plain.managed)
        self.assertIsNone(plain.withheld)
        for value in ('true', 'True', 'yes'):
            self.assertTrue(pci_device.TrackedDevice.from_row(
                dict(ROW, extra_info={'managed': value})).managed)

    def test_partition_hold(self):
        hold = pci_device.PartitionHold(3, pci_device.PARTITION_FOREIGN)
        info = pci_device.extra_info('true', 'false', 'in partition 3',
                                     partition_hold=hold)
        self.assertEqual({'withheld_partition': '3',
                          'withheld_partition_state': 'foreign'},
                         {k: v for k, v in info.items()
                          if k.startswith('withheld_')})
        dev = pci_device.TrackedDevice.from_row(dict(ROW, extra_info=info))
        self.assertEqual(hold, dev.partition_hold)
        self.assertIsNone(pci_device.TrackedDevice.from_row(
            ROW).partition_hold)
        err = self.assertRaises(exception.Invalid, pci_device.PartitionHold,
                                3, 'borrowed')
        self.assertIn("'borrowed'; allowed: foreign, quarantined", str(err))

    def test_in_use(self):
        for status, in_use in (('available', False), ('claimed', True),
                               ('allocated', True)):
            self.assertEqual(in_use, pci_device.TrackedDevice.from_row(
                dict(ROW, status=status)).in_use)

    def test_unknown_column_is_refused(self):
        err = self.assertRaises(exception.Invalid,
                                pci_device.TrackedDevice.from_row,
                                dict(ROW, colour='blue'))
        self.assertIn('colour', str(err))

    def test_incomplete_row_is_refused(self):
        row = dict(ROW)
        del row['address']
        err = self.assertRaises(exception.Invalid,
                                pci_device.TrackedDevice.from_row, row)
        self.assertIn('address', str(err))

    def test_changed_columns(self):
        dev = pci_device.TrackedDevice.from_row(ROW)
        same = dev.fields()
        self.assertEqual({}, pci_device.changed_columns(dev, same))
        moved = dataclasses.replace(same, numa_node=1, group_path='')
        self.assertEqual({'numa_node': 1, 'group_path': ''},
                         pci_device.changed_columns(dev, moved))

    def test_tracked_fields_of_a_host_device(self):
        info = pci_device.extra_info('true', 'false')
        fields = pci_device.TrackedFields.of(
            gpu(numa_node=1), None, 'quad-a/pair-a1', info)
        self.assertEqual({
            'vendor_id': '10de', 'product_id': '2335',
            'dev_type': 'type-PCI', 'dev_id': 'pci_0000_18_00_0',
            'label': 'label_10de_2335', 'numa_node': 1,
            'parent_addr': None, 'group_path': 'quad-a/pair-a1',
            'extra_info': {'managed': 'true', 'live_migratable': 'false'},
        }, fields.columns())


class TestWireValues(test.TestCase):

    def test_extra_info(self):
        self.assertEqual({'managed': 'false', 'live_migratable': 'true'},
                         pci_device.extra_info('false', 'true'))
        self.assertEqual({'managed': 'true', 'live_migratable': 'false',
                          'withheld': 'in use by someone else',
                          'remote_managed': 'true',
                          'card_serial_number': 'MT1'},
                         pci_device.extra_info(
                             'true', 'false', 'in use by someone else',
                             'MT1'))

    def test_row_values(self):
        self.assertEqual({'status': 'available', 'instance_uuid': None},
                         pci_device.row_values(status='available',
                                               instance_uuid=None))
        err = self.assertRaises(exception.Invalid, pci_device.row_values,
                                state='available')
        self.assertIn('state', str(err))
