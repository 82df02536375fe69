"""The NoValidHost reason of a refused request and its codes, against
real Placement."""

import dataclasses

from nova import exception
from nova.db import api as db
from nova.scheduler import manager
from nova.scheduler import refusal
from nova.tests.functional.lib import gpu_hosts
from nova.tests.functional.scheduler import test_manager

PREFIX = ('No valid host was found. There are not enough hosts available: '
          'no host can provide ')


class TestRefusalReason(gpu_hosts.GpuHostsTestCase):

    def setUp(self):
        super().setUp()
        self.scheduler = manager.SchedulerManager(self.conf)
        self.context = self.admin
        self.hosts.add_host('cmp1')

    def refuse(self, gpus, traits=(), flavor=None):
        """The codes and the words of the request's refusal."""
        request = gpu_hosts.gpu_request(gpus)
        request.traits = set(traits)
        instance = db.instance_create(self.admin, {
            'display_name': 'vm', 'project_id': 'p', 'user_id': 'u',
            'flavor_id': gpu_hosts.FLAVOR.id,
            'flavor': flavor or gpu_hosts.FLAVOR, 'vm_state': 'building',
            'task_state': 'scheduling',
            'pci_requests': [request]})
        # Scheduled as the conductor asks, build lease included.
        error = self.assertRaises(
            exception.NoValidHost,
            test_manager.TestSelectDestination._select, self, instance)
        self.assertTrue(error.message.startswith(PREFIX), error.message)
        return error.kwargs['codes'], error.message.split(': ', 2)[2]

    def test_fragmented_free_gpus(self):
        # One GPU of each quad in use: 6 free, no free quad.
        self.hosts.use('cmp1', [1, 6])
        self.assertEqual((
            [refusal.FRAGMENTATION],
            'fragmentation: 6 PGPU devices free, but no nvlink group of 4 '
            'is wholly free (the free devices sit in partly used groups)'),
            self.refuse(4))

    def test_no_free_gpu_at_all(self):
        self.hosts.use('cmp1', range(1, 9))
        self.assertEqual(([refusal.NO_FREE_DEVICE],
                          'no PGPU device is free on any host'),
                         self.refuse(1))

    def test_too_few_free_gpus(self):
        self.hosts.use('cmp1', [1])
        self.assertEqual(([refusal.TOO_FEW_DEVICES],
                          'only 7 PGPU devices free, 8 needed'),
                         self.refuse(8))

    def test_no_group_of_a_size_no_host_declares(self):
        # 2 GPUs free, 3 asked: the size is what no host can give, now or
        # after any delete.
        self.hosts.use('cmp1', range(1, 7))
        self.assertEqual((
            [refusal.NO_GROUP_SIZE],
            'no nvlink group of 3 on any host (no host declares one, trait '
            'CUSTOM_PCI_GROUP_NVLINK_3)'), self.refuse(3))

    def test_missing_device_trait_is_named(self):
        # The trait exists in Placement, no GPU carries it.
        self.hosts.builder.call('put', '/traits/CUSTOM_HBM_141G')
        self.assertEqual((
            [refusal.NO_DEVICE_WITH_TRAIT],
            '8 PGPU devices free, none with the required trait(s) '
            'CUSTOM_HBM_141G'), self.refuse(2, traits=['CUSTOM_HBM_141G']))

    def test_missing_flavor_resource_and_trait(self):
        self.hosts.builder.call('put', '/traits/CUSTOM_FAST')
        flavor = dataclasses.replace(gpu_hosts.FLAVOR, vcpus=1000,
                                     extra_specs={
                                         'trait:CUSTOM_FAST': 'required'})
        self.assertEqual((
            sorted([refusal.NO_FLAVOR_RESOURCES, refusal.NO_TRAIT]),
            'no host has 1000 VCPU free; no compute has the required '
            'trait CUSTOM_FAST'), self.refuse(1, flavor=flavor))

    def test_parts_on_different_hosts(self):
        self.hosts.add_host('cmp2')
        self.hosts.use('cmp1', range(1, 9))
        self.hosts.allocate('0ddba110-0000-4000-8000-000000000001', {
            self.hosts.roots['cmp2']: {'VCPU': 62}})
        self.assertEqual((
            [refusal.SPREAD],
            'each part is free somewhere, but no single host has all'),
            self.refuse(1))
