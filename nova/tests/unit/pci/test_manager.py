"""Tests for the PCI device tracker (nova.pci.manager)."""

import dataclasses
import logging
import threading

import fixtures

from nova import test
from nova import context as nova_context
from nova.db import api as db_api
from nova import exception
from nova.pci import device as pci_device
from nova.pci import devspec
from nova.pci import manager
from nova.pci import partitions
from nova.tests.fixtures import database as db_fixture

GPU_ADDRESSES = ('0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0',
                 '0000:5d:00.0')
NVME_ADDRESS = '0000:c1:00.0'

GPU_SPEC = '{"vendor_id": "10de", "product_id": "2335"}'


def gpu(address, **overrides):
    """An H200 GPU as the libvirt driver reports it."""
    return pci_device.HostDevice(**{
        'address': address, 'vendor_id': '10de', 'product_id': '2335',
        'numa_node': 0, 'iommu_group': 29, 'driver': 'vfio-pci',
        'pci_class': '030200', **overrides})


def nvme():
    return dataclasses.replace(gpu(NVME_ADDRESS), vendor_id='144d',
                               product_id='a80a', pci_class='010802')


def whitelist(*values):
    return devspec.Whitelist.from_config(list(values) or [GPU_SPEC])


class TestPciDevTracker(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.ctx = nova_context.get_admin_context()
        service = db_api.service_create(self.ctx, {
            'host': 'cmp1', 'binary': 'nova-compute'})
        self.node = db_api.compute_node_create(self.ctx, {
            'host': 'cmp1', 'hypervisor_hostname': 'cmp1',
            'service_id': service.id})
        self.tracker = manager.PciDevTracker(self.ctx, self.node.id)
        self.devices = [gpu(address) for address in GPU_ADDRESSES] + [nvme()]

    def _sync(self, devices=None, wl=None, group_path=None):
        devices = self.devices if devices is None else devices
        self.tracker.update_devices_from_hypervisor_resources(
            devices, (wl or whitelist()).classify(devices), group_path)

    def _db_devices(self):
        return {device.address: device for device in
                manager.devices_of_node(self.ctx, self.node.id)}

    def test_new_devices_are_available_and_filtered(self):
        groups = {'0000:18:00.0': 'quad-a/pair-a1'}
        self._sync(group_path=lambda address: groups.get(address, ''))
        self.assertEqual(list(GPU_ADDRESSES),
                         [d.address for d in self.tracker.pci_devs])
        stored = self._db_devices()
        self.assertNotIn(NVME_ADDRESS, stored)
        first = stored['0000:18:00.0']
        self.assertEqual('available', first.status)
        self.assertEqual('quad-a/pair-a1', first.group_path)
        self.assertEqual('', stored['0000:2a:00.0'].group_path)
        self.assertEqual('pci_0000_18_00_0', first.dev_id)
        self.assertEqual(0, first.numa_node)
        self.assertIsNone(first.instance_uuid)
        self.assertEqual({'managed': 'true', 'live_migratable': 'false',
                          'resource_class': 'CUSTOM_PCI_10DE_2335'},
                         first.extra_info)
        self.assertEqual('CUSTOM_PCI_10DE_2335', first.resource_class)

    def test_extra_info_from_spec_tags(self):
        self._sync(wl=whitelist(
            '{"vendor_id": "10de", "product_id": "2335", '
            '"managed": "no", "live_migratable": "yes"}'))
        device = self.tracker.get_by_address('0000:18:00.0')
        self.assertEqual({'managed': 'false', 'live_migratable': 'true',
                          'resource_class': 'CUSTOM_PCI_10DE_2335'},
                         device.extra_info)

    def test_withheld_reason_and_partition_recorded(self):
        hold = pci_device.PartitionHold(4, pci_device.PARTITION_FOREIGN)
        withheld = partitions.Withheld(
            devices={'0000:18:00.0': 'in foreign partition 4'},
            holds={'0000:18:00.0': hold})
        self.tracker.update_devices_from_hypervisor_resources(
            self.devices, whitelist().classify(self.devices), None,
            withheld)
        stored = self._db_devices()
        self.assertEqual('in foreign partition 4',
                         stored['0000:18:00.0'].withheld)
        self.assertEqual(hold, stored['0000:18:00.0'].partition_hold)
        self.assertIsNone(stored['0000:2a:00.0'].partition_hold)
        # Gone with its reason at the next sync.
        self._sync()
        self.assertIsNone(self._db_devices()['0000:18:00.0'].partition_hold)

    def test_resource_class_tag_recorded(self):
        self._sync(wl=whitelist(
            '{"vendor_id": "10de", "product_id": "2335", '
            '"resource_class": "h200"}'))
        device = self.tracker.get_by_address('0000:18:00.0')
        self.assertEqual('CUSTOM_H200', device.resource_class)

    def test_existing_devices_loaded_at_start(self):
        self._sync()
        tracker = manager.PciDevTracker(self.ctx, self.node.id)
        self.assertEqual(self.tracker.pci_devs, tracker.pci_devs)

    def test_get_by_address(self):
        self._sync()
        self.assertEqual('0000:2a:00.0',
                         self.tracker.get_by_address('0:2A:0.0').address)
        self.assertIsNone(self.tracker.get_by_address(NVME_ADDRESS))
        # Callers cannot change the tracker's devices.
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          self.tracker.get_by_address('0000:2a:00.0'),
                          'status', 'allocated')
        self.assertEqual({'available'},
                         {d.status for d in self.tracker.pci_devs})

    def test_changed_fields_are_updated(self):
        self._sync()
        before = self.tracker.get_by_address('0000:18:00.0')
        self.devices[0] = gpu('0000:18:00.0', numa_node=1,
                              dev_type='type-PF')
        self._sync(group_path=lambda address: 'pair-a1')
        after = self._db_devices()['0000:18:00.0']
        self.assertEqual(before.id, after.id)
        self.assertEqual(1, after.numa_node)
        self.assertEqual('type-PF', after.dev_type)
        self.assertEqual('pair-a1', after.group_path)
        self.assertEqual(after, self.tracker.get_by_address('0000:18:00.0'))

    def test_unchanged_sync_writes_nothing(self):
        self._sync()
        before = self._db_devices()
        self._sync()
        self.assertEqual(before, self._db_devices())

    def test_free_device_gone_from_hypervisor_is_removed(self):
        self._sync()
        self._sync(devices=self.devices[1:])
        self.assertNotIn('0000:18:00.0', self._db_devices())
        self.assertIsNone(self.tracker.get_by_address('0000:18:00.0'))
        self.assertEqual(3, len(self.tracker.pci_devs))

    def test_free_device_gone_from_config_is_removed(self):
        self._sync()
        self._sync(wl=whitelist('{"address": "0000:18:00.0"}'))
        self.assertEqual(['0000:18:00.0'], list(self._db_devices()))

    def test_removed_device_comes_back_as_new(self):
        self._sync()
        self._sync(devices=self.devices[1:])
        self._sync()
        self.assertEqual('available',
                         self._db_devices()['0000:18:00.0'].status)

    def test_allocated_device_gone_is_kept_until_freed(self):
        self._sync()
        self.tracker.claim('inst-1', 'req-1', ['0000:18:00.0'])
        self._sync(devices=self.devices[1:])
        device = self._db_devices()['0000:18:00.0']
        self.assertEqual('allocated', device.status)
        self.assertEqual('inst-1', device.instance_uuid)
        self.assertIn('Unable to remove PCI device 0000:18:00.0 with '
                      'status allocated', self.log.output)
        self.assertIn('instance inst-1 uses it', self.log.output)
        self.assertEqual({'0000:18:00.0'},
                         self.tracker.to_be_removed_when_freed)
        self.assertEqual(['0000:18:00.0'],
                         self.tracker.free_instance('inst-1'))
        self.assertNotIn('0000:18:00.0', self._db_devices())
        self.assertEqual(frozenset(), self.tracker.to_be_removed_when_freed)
        self.assertIsNone(self.tracker.get_by_address('0000:18:00.0'))

    def test_allocated_device_reappearing_is_not_removed(self):
        self._sync()
        self.tracker.claim('inst-1', 'req-1', ['0000:18:00.0'])
        self._sync(devices=self.devices[1:])
        self._sync()
        self.assertEqual(frozenset(), self.tracker.to_be_removed_when_freed)
        self.tracker.free_instance('inst-1')
        self.assertEqual('available',
                         self._db_devices()['0000:18:00.0'].status)

    def test_claim(self):
        self._sync()
        claimed = self.tracker.claim('inst-1', 'req-1',
                                     ['0000:3a:00.0', '0000:18:00.0'])
        self.assertEqual(['0000:3a:00.0', '0000:18:00.0'],
                         [d.address for d in claimed])
        stored = self._db_devices()
        for address in ('0000:18:00.0', '0000:3a:00.0'):
            self.assertEqual('allocated', stored[address].status)
            self.assertEqual('inst-1', stored[address].instance_uuid)
            self.assertEqual('req-1', stored[address].request_id)
            self.assertEqual('allocated',
                             self.tracker.get_by_address(address).status)
        self.assertEqual('available', stored['0000:2a:00.0'].status)

    def test_claim_partly_unavailable_changes_nothing(self):
        self._sync()
        self.tracker.claim('inst-1', 'req-1', ['0000:18:00.0'])
        before = self._db_devices()
        error = self.assertRaises(
            exception.PciDeviceRequestFailed, self.tracker.claim,
            'inst-2', 'req-2', ['0000:2a:00.0', '0000:18:00.0',
                                NVME_ADDRESS])
        message = str(error)
        self.assertIn('0000:18:00.0 is allocated to instance inst-1',
                      message)
        self.assertIn(NVME_ADDRESS + ' is not tracked', message)
        self.assertNotIn('0000:2a:00.0 is', message)
        self.assertIn('req-2', message)
        self.assertEqual(before, self._db_devices())
        self.assertEqual('available',
                         self.tracker.get_by_address(
                             '0000:2a:00.0').status)

    def test_claim_refuses_a_device_marked_unhealthy_since_loaded(self):
        # Marked by another process (nova-manage) after this tracker read
        # the devices: the claim reads the mark from the database.
        self._sync()
        manager.set_device_health(self.ctx, self.node.id,
                                  '0000:18:00.0', True, 'RMA 4711',
                                  'nova-manage (ops)')
        error = self.assertRaises(
            exception.PciDeviceUnhealthy, self.tracker.claim, 'inst-1',
            'req-1', ['0000:2a:00.0', '0000:18:00.0'])
        self.assertEqual(['0000:18:00.0'], error.kwargs['addresses'])
        self.assertIn('0000:18:00.0 is unhealthy since', str(error))
        self.assertIn('(operator): RMA 4711', str(error))
        self.assertEqual({'available'}, {
            d.status for d in self._db_devices().values()})

    def test_claim_same_device_twice_fails(self):
        self._sync()
        error = self.assertRaises(exception.PciDeviceRequestFailed,
                                  self.tracker.claim, 'inst-1', 'req-1',
                                  ['0000:18:00.0', '0000:18:00.0'])
        self.assertIn('requested twice', str(error))
        self.assertEqual('available',
                         self._db_devices()['0000:18:00.0'].status)

    def test_concurrent_claims_of_one_device(self):
        self._sync()
        results = []

        def claim(instance):
            try:
                self.tracker.claim(instance, 'req-' + instance,
                                   ['0000:18:00.0'])
                results.append(instance)
            except exception.PciDeviceRequestFailed:
                results.append(None)

        threads = [threading.Thread(target=claim, args=('inst-%d' % i,))
                   for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [result for result in results if result]
        self.assertEqual(1, len(winners))
        self.assertEqual(winners[0],
                         self._db_devices()['0000:18:00.0'].instance_uuid)

    def test_free_instance(self):
        self._sync()
        self.tracker.claim('inst-1', 'req-1',
                           ['0000:3a:00.0', '0000:18:00.0'])
        self.tracker.claim('inst-2', 'req-2', ['0000:2a:00.0'])
        self.assertEqual(['0000:18:00.0', '0000:3a:00.0'],
                         self.tracker.free_instance('inst-1'))
        stored = self._db_devices()
        for address in ('0000:18:00.0', '0000:3a:00.0'):
            self.assertEqual('available', stored[address].status)
            self.assertIsNone(stored[address].instance_uuid)
            self.assertIsNone(stored[address].request_id)
        self.assertEqual('inst-2', stored['0000:2a:00.0'].instance_uuid)
        self.assertEqual([], self.tracker.free_instance('inst-1'))
        # Freed devices can be claimed again.
        self.tracker.claim('inst-3', 'req-3', ['0000:18:00.0'])

    def test_set_rp_uuid(self):
        self._sync()
        rp_uuid = '4f7a1ad6-4e0c-4d6f-9a38-3b0f1c1e9e11'
        self.tracker.set_rp_uuid('0000:18:00.0', rp_uuid)
        self.assertEqual(rp_uuid,
                         self._db_devices()['0000:18:00.0'].rp_uuid)
        self.assertEqual(rp_uuid, self.tracker.get_by_address(
            '0000:18:00.0').rp_uuid)
        error = self.assertRaises(exception.PciDeviceNotFound,
                                  self.tracker.set_rp_uuid, NVME_ADDRESS,
                                  rp_uuid)
        self.assertIn(NVME_ADDRESS, str(error))
        # The RP uuid survives a sync that changes nothing else.
        self._sync()
        self.assertEqual(rp_uuid,
                         self._db_devices()['0000:18:00.0'].rp_uuid)
