"""Tests for the names and records of the PCI provider tree."""

from nova.pci import device as pci_device
from nova.pci import numa
from nova.pci import placement_names as names
from nova import test

L = numa.Locality


class TestNames(test.TestCase):

    def test_provider_names(self):
        self.assertEqual('cmp1_0000:1B:00.0',
                         names.device_rp_name('cmp1', '0000:1b:00.0'))
        self.assertEqual('cmp1_pair-a1',
                         names.group_rp_name('cmp1', 'pair-a1'))

    def test_provider_address(self):
        def dev(address, dev_type, parent_addr=None):
            return pci_device.HostDevice(address, '10de', '2335', dev_type,
                                         parent_addr)
        self.assertEqual('0000:1b:00.0', names.provider_address(
            dev('0000:1b:00.0', 'type-PCI')))
        self.assertEqual('0000:1b:00.0', names.provider_address(
            dev('0000:1b:00.0', 'type-PF')))
        self.assertEqual('0000:1b:00.0', names.provider_address(
            dev('0000:1b:00.4', 'type-VF', '0000:1b:00.0')))
        self.assertIsNone(names.provider_address(
            dev('0000:1b:00.4', 'type-VF')))

    def test_resource_class(self):
        self.assertEqual('PGPU', names.get_resource_class('pgpu', None, None))
        self.assertEqual('CUSTOM_GPU', names.get_resource_class('gpu', 'a',
                                                                'b'))
        self.assertEqual('CUSTOM_X', names.get_resource_class('custom_x',
                                                              None, None))
        self.assertEqual('CUSTOM_MY_AWESOME_GPU_',
                         names.get_resource_class('my-awesome gpu!!', None,
                                                  None))
        self.assertEqual('CUSTOM_PCI_10DE_ABCD',
                         names.get_resource_class(None, '10de', 'abcd'))
        self.assertTrue(names.is_pci_resource_class('CUSTOM_PCI_10DE_ABCD'))
        self.assertTrue(names.is_pci_resource_class(
            names.static_group_resource_class('nvlink')))
        self.assertFalse(names.is_pci_resource_class('PGPU'))

    def test_traits(self):
        self.assertEqual({'HW_GPU_API_VULKAN', 'CUSTOM_PURPLE',
                          'CUSTOM_X', 'CUSTOM__BIG'},
                         names.get_traits(
                             'HW_GPU_API_VULKAN,purple,custom_x, big'))
        self.assertEqual(set(), names.get_traits(''))

    def test_group_traits(self):
        self.assertEqual('CUSTOM_PCI_GROUP_NVLINK',
                         names.group_type_trait('nvlink'))
        self.assertEqual('CUSTOM_PCI_GROUP_PCIE_SWITCH_4',
                         names.group_size_trait('pcie-switch', 4))
        self.assertEqual('CUSTOM_PCI_GROUP_NVLINK_2_M1',
                         names.group_member_trait('nvlink', 2, 1))
        self.assertEqual('CUSTOM_PCI_GROUP_NVLINK',
                         names.static_group_resource_class('nvlink'))

    def test_group_size_trait_is_parsed_back(self):
        self.assertTrue(names.is_group_size_trait(
            names.group_size_trait('pcie-switch', 4)))
        for other in (names.group_type_trait('nvlink'),
                      names.group_member_trait('nvlink', 2, 1),
                      'CUSTOM_PCI_NUMA_NODE_1', 'CUSTOM_PCI_GROUP_2'):
            self.assertFalse(names.is_group_size_trait(other), other)

    def test_pci_provider(self):
        self.assertTrue(names.is_pci_provider(names.MANAGED_TRAITS))
        self.assertTrue(names.is_pci_provider(
            {names.group_type_trait('nvlink')}))
        self.assertFalse(names.is_pci_provider(
            {names.OWNER_NOVA_TRAIT, names.SOCKET_AFFINITY_TRAIT}))

    def test_nova_owned_traits(self):
        owned = set(names.MANAGED_TRAITS) | {
            names.group_type_trait('nvlink'),
            names.group_size_trait('nvlink', 2),
            names.group_member_trait('nvlink', 2, 1),
            names.NUMA_LOCAL_TRAIT, names.SOCKET_LOCAL_TRAIT,
            names.band_trait('PGPU', 4)} | names.locality_traits(L(1, 0))
        for trait in owned:
            self.assertTrue(names.is_nova_owned_trait(trait), trait)
        for trait in ('CUSTOM_PCIE_GEN5', 'HW_CPU_X86_AVX2',
                      names.SOCKET_AFFINITY_TRAIT):
            self.assertFalse(names.is_nova_owned_trait(trait), trait)

    def test_locality_traits_round_trip(self):
        self.assertEqual({'CUSTOM_PCI_NUMA_NODE_1', 'CUSTOM_PCI_SOCKET_0'},
                         names.locality_traits(L(1, 0)))
        self.assertEqual(set(), names.locality_traits(L()))
        self.assertEqual(L(3, 1), names.locality_from_traits(
            {'CUSTOM_PCI_NUMA_NODE_3', 'CUSTOM_PCI_SOCKET_1', 'OWNER_NOVA',
             'CUSTOM_PCI_NUMA_NODE_X'}))
        self.assertEqual(L(), names.locality_from_traits(['OWNER_NOVA']))

    def test_group_locality_traits(self):
        self.assertEqual({'CUSTOM_PCI_NUMA_LOCAL', 'CUSTOM_PCI_SOCKET_LOCAL'},
                         names.group_locality_traits([L(0, 0), L(0, 0)]))
        # Two nodes of one socket (sub-NUMA clustering).
        self.assertEqual({names.SOCKET_LOCAL_TRAIT},
                         names.group_locality_traits([L(0, 0), L(1, 0)]))
        self.assertEqual(set(),
                         names.group_locality_traits([L(0, 0), L(1, 1)]))
        self.assertEqual(set(), names.group_locality_traits([L(), L()]))

    def test_local_group_trait(self):
        self.assertEqual(('CUSTOM_PCI_NUMA_LOCAL', 'NUMA node'),
                         names.local_group_trait(numa.REQUIRED))
        self.assertEqual(('CUSTOM_PCI_SOCKET_LOCAL', 'socket'),
                         names.local_group_trait(numa.SOCKET))
        self.assertIsNone(names.local_group_trait(numa.PREFERRED))
        self.assertIsNone(names.local_group_trait(numa.LEGACY))


class TestSuffixes(test.TestCase):

    def test_suffixes(self):
        self.assertEqual('r1-0', names.device_suffix('r1', 0))
        self.assertEqual('r1-g', names.partition_suffix('r1'))

    def test_chosen_providers(self):
        mappings = {'': ['root'], 'r1-0': ['b'], 'r1-1': ['a'],
                    'r1-g': ['grp'], 'r2-0': ['c']}
        self.assertEqual({'r1': ['b', 'a'], 'r2': ['c']},
                         names.chosen_providers(mappings,
                                                {'r1': 2, 'r2': 1}))
        # A device whose group is not mapped is left out.
        self.assertEqual({'r3': []},
                         names.chosen_providers(mappings, {'r3': 1}))
        self.assertEqual({}, names.chosen_providers(mappings, {}))


class TestInventory(test.TestCase):

    def test_records(self):
        self.assertEqual({'total': 4, 'reserved': 0, 'min_unit': 1,
                          'max_unit': 4, 'step_size': 1,
                          'allocation_ratio': 1.0},
                         names.inventory_record(4))
        self.assertEqual({'PGPU': {'total': 1, 'reserved': 1,
                                   'min_unit': 1, 'max_unit': 1,
                                   'step_size': 1,
                                   'allocation_ratio': 1.0}},
                         names.pci_inventory('PGPU', 1, 1))
        self.assertEqual(7, names.inventory_record(
            4, max_unit=7, allocation_ratio=2.0)['max_unit'])
