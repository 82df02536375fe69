"""Tests for the PCI placement translator on the HGX H200 layout."""

import json


from nova import test
from nova import exception
from nova.compute import pci_placement_translator as translator
from nova.compute import provider_tree
from nova.pci import device as pci_device
from nova.pci import devspec
from nova.pci import groups
from nova.pci import health
from nova.pci import partitions
from nova.pci import placement_names
from nova.virt import hardware
from nova.virt.fake import host as fakehost

HOST = 'cmp1'
GPUS = fakehost.H200_GPU_ADDRESSES  # GPU1..GPU8
H200_CONFIG = fakehost.h200_pci_config()
SPEC = H200_CONFIG['device_spec'][0]


def h200_groups() -> list[str]:
    return H200_CONFIG['device_group']


def pair_of(gpu: int) -> tuple[str, tuple[int, int]]:
    """Name and GPU numbers of the declared pair holding GPU ``gpu``."""
    return next((name, gpus) for name, gpus in
                fakehost.H200_NVLINK_PAIRS.items() if gpu in gpus)


def tracked(address, vendor_id='10de', product_id='2335',
            dev_type='type-PCI', **row) -> pci_device.TrackedDevice:
    """A tracked device (available unless ``row`` says otherwise)."""
    return pci_device.TrackedDevice(
        id=1, compute_node_id=1, address=address, vendor_id=vendor_id,
        product_id=product_id, dev_type=dev_type, **row)


def reported(dev: pci_device.TrackedDevice) -> pci_device.HostDevice:
    """What the driver reported of a tracked device."""
    return pci_device.HostDevice(dev.address, dev.vendor_id,
                                 dev.product_id, dev.dev_type,
                                 dev.parent_addr, dev.numa_node)


def gpu_devices(**overrides) -> list[pci_device.TrackedDevice]:
    return [tracked(address, **overrides.get(address, {}))
            for address in GPUS]


class TranslatorTestBase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.whitelist = devspec.Whitelist.from_config([SPEC], True)
        self.tree = provider_tree.ProviderTree()
        self.root = self.tree.add(HOST, uuid='root')

    def translate(self, devices, group_config=(), statics=(),
                  allocations=None, whitelist=None, withheld=None):
        return translator.update_provider_tree_for_pci(
            self.tree, HOST, devices,
            (whitelist or self.whitelist).classify(
                [reported(dev) for dev in devices]),
            groups.GroupTree.from_config(list(group_config)), list(statics),
            lambda: allocations or {}, withheld=withheld)

    def traits(self, name):
        """Traits of provider ``name`` but the host's shard traits, which
        every provider of the host carries (see test_shard_traits_...)."""
        return {trait for trait in self.tree.data(name).traits
                if not placement_names.is_shard_trait(trait)}

    def parent_name(self, name):
        return self.tree.data(self.tree.data(name).parent_uuid).name

    def dev_name(self, gpu):
        return placement_names.device_rp_name(HOST, GPUS[gpu - 1])


class TestFlatTree(TranslatorTestBase):

    def test_devices_are_children_of_root_upper_cased(self):
        self.translate(gpu_devices())
        names = [p.name for p in self.tree.children(HOST)]
        self.assertEqual(sorted('cmp1_' + a.upper() for a in GPUS),
                         sorted(names))
        data = self.tree.data('cmp1_0000:2A:00.0')
        self.assertEqual({'PGPU': {'total': 1, 'reserved': 0,
                                   'min_unit': 1, 'max_unit': 1,
                                   'step_size': 1,
                                   'allocation_ratio': 1.0}},
                         data.inventory)
        self.assertEqual({'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'},
                         self.traits(data.name))

    def test_removed_and_unmatched_devices_get_no_provider(self):
        devices = gpu_devices(**{GPUS[0]: {'status': 'removed'}})
        devices.append(tracked('0000:c1:00.0', '144d', 'a80a'))
        self.translate(devices)
        self.assertEqual(7, len(self.tree.children(HOST)))
        self.assertFalse(self.tree.exists(self.dev_name(1)))

    def test_second_run_is_stable(self):
        self.translate(gpu_devices(), h200_groups())
        before = {p.name: (p.uuid, p.parent_uuid, p.traits)
                  for p in self.tree.providers()}
        self.translate(gpu_devices(), h200_groups())
        after = {p.name: (p.uuid, p.parent_uuid, p.traits)
                 for p in self.tree.providers()}
        self.assertEqual(before, after)

    def test_every_provider_gets_the_shard_traits_of_the_host(self):
        # Shard traits of another name (e.g. before a rename) are
        # replaced on the root; a trait nova does not own stays.
        other = placement_names.shard_traits('another-host')
        self.assertNotEqual(other, placement_names.shard_traits(HOST))
        self.tree.update_traits('root', other | {'CUSTOM_RACK_1'})
        self.translate(gpu_devices(), h200_groups())
        providers = self.tree.providers()
        self.assertEqual(1 + 8 + 7, len(providers))     # root, GPUs, groups
        for provider in providers:
            self.assertEqual(placement_names.shard_traits(HOST), {
                t for t in provider.traits
                if placement_names.is_shard_trait(t)}, provider.name)
        self.assertIn('CUSTOM_RACK_1', self.traits(HOST))


class TestRootTraits(TranslatorTestBase):
    """Band and fitting sizes on the root, from the tracker's devices."""

    def root_traits(self, prefix_test):
        return {t for t in self.tree.data(HOST).traits if prefix_test(t)}

    def test_free_board_fits_eight(self):
        self.translate(gpu_devices(), h200_groups())
        self.assertEqual({'CUSTOM_PCI_FIT_PGPU_8'},
                         self.root_traits(placement_names.is_fit_trait))

    def test_one_gpu_taken_fits_one_two_and_four(self):
        self.translate(gpu_devices(**{GPUS[0]: {
            'status': 'allocated', 'instance_uuid': 'vm1'}}), h200_groups())
        self.assertEqual({'CUSTOM_PCI_FIT_PGPU_%d' % n for n in (1, 2, 4)},
                         self.root_traits(placement_names.is_fit_trait))
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_4'},
                         self.root_traits(placement_names.is_band_trait))
        # Freed again: the old sizes are replaced.
        self.translate(gpu_devices(), h200_groups())
        self.assertEqual({'CUSTOM_PCI_FIT_PGPU_8'},
                         self.root_traits(placement_names.is_fit_trait))

    def test_reserved_device_is_not_free(self):
        withheld = partitions.Withheld()
        tree = groups.GroupTree.from_config(list(h200_groups()))
        withheld = health.withhold(withheld, tree,
                                   {GPUS[0]: 'GPU is lost'}, {})
        self.translate(gpu_devices(), h200_groups(), withheld=withheld)
        self.assertIn('CUSTOM_PCI_FIT_PGPU_1',
                      self.root_traits(placement_names.is_fit_trait))
        self.assertNotIn('CUSTOM_PCI_FIT_PGPU_8',
                         self.root_traits(placement_names.is_fit_trait))

    def test_host_state_traits_replace_bands_and_sizes_only(self):
        # What the benchmark publishes for a host without a compute: the
        # old band and sizes go, every other root trait stays.
        shard = sorted(placement_names.shard_traits(HOST))[0]
        before = {'OWNER_NOVA', shard, 'CUSTOM_PCI_FREE_PGPU_8',
                  'CUSTOM_PCI_FIT_PGPU_8'}
        self.assertEqual(
            {'OWNER_NOVA', shard} | placement_names.band_traits(
                {'PGPU': 3}) | {'CUSTOM_PCI_FIT_PGPU_1',
                                'CUSTOM_PCI_FIT_PGPU_2'},
            translator.host_state_traits(before, {'PGPU': 3},
                                         {'PGPU': [1, 2]}))


class TestGroupedTree(TranslatorTestBase):

    def test_h200_tree_shape_and_traits(self):
        self.translate(gpu_devices(), h200_groups())
        self.assertEqual(['cmp1_board'],
                         [p.name for p in self.tree.children(HOST)])
        self.assertEqual('cmp1_board', self.parent_name('cmp1_quad-a'))
        self.assertEqual('cmp1_quad-b', self.parent_name('cmp1_pair-b2'))
        self.assertEqual({'CUSTOM_PCI_GROUP_NVLINK',
                          'CUSTOM_PCI_GROUP_NVLINK_4'},
                         self.traits('cmp1_quad-a'))
        self.assertEqual({}, self.tree.data('cmp1_pair-a1').inventory)
        # GPU3 is the third device of quad-a and of the board, and its
        # place in its pair follows from the board's module map (addresses
        # sorted).
        name, gpus = pair_of(3)
        self.assertEqual('cmp1_' + name, self.parent_name(self.dev_name(3)))
        self.assertEqual({'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA',
                          'CUSTOM_PCI_GROUP_NVLINK_2_M%d' % gpus.index(3),
                          'CUSTOM_PCI_GROUP_NVLINK_4_M2',
                          'CUSTOM_PCI_GROUP_NVLINK_8_M2'},
                         self.traits(self.dev_name(3)))
        self.assertEqual(1 + 7 + 8, len(self.tree.providers()))

    def test_flat_to_grouped_keeps_device_uuids(self):
        self.translate(gpu_devices())
        uuids = {p.name: p.uuid for p in self.tree.children(HOST)}
        allocations = {'vm1': {'allocations': {
            uuids[self.dev_name(1)]: {'resources': {'PGPU': 1}}}}}
        self.translate(gpu_devices(**{GPUS[0]: {
            'status': 'allocated', 'instance_uuid': 'vm1',
            'request_id': 'r1'}}), h200_groups(), allocations=allocations)
        for name, uuid in uuids.items():
            self.assertEqual(uuid, self.tree.data(name).uuid)
        self.assertEqual('cmp1_' + pair_of(1)[0],
                         self.parent_name(self.dev_name(1)))

    def test_grouped_to_flat_removes_group_providers(self):
        self.translate(gpu_devices(), h200_groups())
        self.translate(gpu_devices())
        self.assertEqual(9, len(self.tree.providers()))
        self.assertEqual({'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'},
                         self.traits(self.dev_name(5)))

    def test_regrouping_that_splits_an_instance_is_refused(self):
        self.translate(gpu_devices())
        snapshot = [(p.name, p.parent_uuid) for p in self.tree.providers()]
        held = {'status': 'allocated', 'instance_uuid': 'vm1',
                'request_id': 'r1'}
        # GPU 1 and a GPU of another pair.
        other = next(n for n in range(2, 9) if n not in pair_of(1)[1])
        devices = gpu_devices(**{GPUS[0]: held, GPUS[other - 1]: held})
        err = self.assertRaises(exception.PlacementPciException,
                                self.translate, devices, h200_groups())
        self.assertIn('vm1', str(err))
        self.assertIn(GPUS[0], str(err))
        self.assertEqual(snapshot, [(p.name, p.parent_uuid)
                                    for p in self.tree.providers()])

    def test_instance_holding_a_whole_pair_is_accepted(self):
        self.translate(gpu_devices())
        held = {'status': 'allocated', 'instance_uuid': 'vm1',
                'request_id': 'r1'}
        name, (first, second) = pair_of(1)
        self.translate(gpu_devices(**{GPUS[first - 1]: held,
                                      GPUS[second - 1]: held}),
                       h200_groups())
        self.assertEqual('cmp1_' + name, self.parent_name(self.dev_name(1)))


class TestAllocationsAndStaticGroups(TranslatorTestBase):

    def test_removing_allocated_provider_is_refused(self):
        self.translate(gpu_devices())
        rp = self.tree.data(self.dev_name(2))
        allocations = {'vm2': {'allocations': {
            rp.uuid: {'resources': {'PGPU': 1}}}}}
        devices = gpu_devices()
        del devices[1]
        err = self.assertRaises(exception.PlacementPciException,
                                self.translate, devices,
                                allocations=allocations)
        self.assertIn('vm2', str(err))
        self.assertIn(rp.name, str(err))
        self.assertTrue(self.tree.exists(rp.uuid))

    def test_allocations_are_read_only_when_a_provider_shrinks(self):
        self.translate(gpu_devices(), h200_groups())
        reads = []

        def read():
            reads.append(True)
            return {}

        specs = self.whitelist.classify(gpu_devices())
        translator.update_provider_tree_for_pci(
            self.tree, HOST, gpu_devices(), specs,
            groups.GroupTree.from_config(h200_groups()), [], read)
        self.assertEqual([], reads)
        # Regrouping moves providers but shrinks none: still no read.
        translator.update_provider_tree_for_pci(
            self.tree, HOST, gpu_devices(), specs,
            groups.GroupTree([]), [], read)
        self.assertEqual([], reads)
        translator.update_provider_tree_for_pci(
            self.tree, HOST, gpu_devices()[1:],
            self.whitelist.classify(gpu_devices()[1:]),
            groups.GroupTree([]), [], read)
        self.assertEqual([True], reads)

    def test_allocated_device_without_spec_is_kept(self):
        self.translate(gpu_devices())
        rp = self.tree.data(self.dev_name(4))
        allocations = {'vm4': {'allocations': {
            rp.uuid: {'resources': {'PGPU': 1}}}}}
        other = devspec.Whitelist.from_config([json.dumps(
            {'vendor_id': '10de', 'product_id': '2335',
             'address': '0000:18:00.0', 'resource_class': 'PGPU'})], True)
        self.translate(gpu_devices(**{GPUS[3]: {
            'status': 'allocated', 'instance_uuid': 'vm4',
            'request_id': 'r4'}}), allocations=allocations,
            whitelist=other)
        self.assertEqual(rp.uuid, self.tree.data(self.dev_name(4)).uuid)
        self.assertEqual({'PGPU'}, set(rp.inventory))
        self.assertEqual(['cmp1_0000:18:00.0', self.dev_name(4)],
                         sorted(p.name for p in self.tree.children(HOST)))

    def test_static_group_is_one_unit(self):
        spec = json.dumps({'vendor_id': '10de', 'product_id': '2335',
                           'group_name': 'hgx1', 'group_type': 'nvlink'})
        whitelist = devspec.Whitelist.from_config([spec], True)
        devices = gpu_devices()
        statics = groups.static_groups(devices,
                                       whitelist.classify(devices))
        self.translate(devices, statics=statics, whitelist=whitelist)
        self.assertEqual(['cmp1_hgx1'],
                         [p.name for p in self.tree.children(HOST)])
        data = self.tree.data('cmp1_hgx1')
        self.assertEqual(1, data.inventory['CUSTOM_PCI_GROUP_NVLINK']
                         ['total'])
        self.assertIn('COMPUTE_MANAGED_PCI_DEVICE', data.traits)

    def test_reporting_cannot_be_disabled(self):
        self.translate(gpu_devices())
        err = self.assertRaises(exception.PlacementPciException,
                                translator.ensure_reporting_not_disabled,
                                self.tree)
        self.assertIn('report_in_placement', str(err))


class TestUpstreamTags(TranslatorTestBase):
    """one_time_use, live_migratable and operator-set reservations."""

    def otu_whitelist(self, **tags):
        spec = dict(json.loads(SPEC), address=GPUS[0], **tags)
        return devspec.Whitelist.from_config(
            [json.dumps(spec), SPEC], True)

    def reserved(self, gpu):
        return self.tree.data(self.dev_name(gpu)).inventory['PGPU'][
            'reserved']

    def test_tag_traits(self):
        whitelist = self.otu_whitelist(one_time_use='yes',
                                       live_migratable=True)
        self.translate(gpu_devices(), whitelist=whitelist)
        self.assertEqual({'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA',
                          'HW_PCI_ONE_TIME_USE', 'HW_PCI_LIVE_MIGRATABLE'},
                         self.traits(self.dev_name(1)))
        self.assertEqual({'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'},
                         self.traits(self.dev_name(2)))

    def test_one_time_use_reserved_once_used_and_never_lowered(self):
        whitelist = self.otu_whitelist(one_time_use=True)
        self.translate(gpu_devices(), whitelist=whitelist)
        self.assertEqual(0, self.reserved(1))
        used = gpu_devices(**{GPUS[0]: {'instance_uuid': 'vm1'},
                              GPUS[1]: {'instance_uuid': 'vm1'}})
        self.translate(used, whitelist=whitelist)
        self.assertEqual((1, 0), (self.reserved(1), self.reserved(2)))
        # Freed: still reserved, only an operator clears it.
        self.translate(gpu_devices(), whitelist=whitelist)
        self.assertEqual(1, self.reserved(1))

    def test_operator_reserved_is_kept_and_capped_at_total(self):
        self.translate(gpu_devices())
        # An operator reserves the device in Placement.
        inventory = self.tree.data(self.dev_name(3)).inventory
        inventory['PGPU']['reserved'] = 1
        self.tree.update_inventory(self.dev_name(3), inventory)
        self.translate(gpu_devices())
        self.assertEqual(1, self.reserved(3))
        self.assertEqual(
            1, translator._keep_reserved(
                placement_names.pci_inventory('PGPU', 1),
                {'PGPU': {'reserved': 5}})['PGPU']['reserved'])

    def test_withheld_device_reserved_until_offered_again(self):
        withheld = partitions.Withheld({GPUS[0]: 'cannot be activated'})
        self.translate(gpu_devices(), h200_groups(), withheld=withheld)
        self.assertEqual((1, 0), (self.reserved(1), self.reserved(2)))
        self.assertIn('CUSTOM_PCI_WITHHELD',
                      self.traits(self.dev_name(1)))
        self.translate(gpu_devices(), h200_groups())
        self.assertEqual(0, self.reserved(1))
        self.assertNotIn('CUSTOM_PCI_WITHHELD',
                         self.traits(self.dev_name(1)))

    def test_lifting_a_withheld_device_keeps_one_time_use_reserved(self):
        whitelist = self.otu_whitelist(one_time_use=True)
        used = gpu_devices(**{GPUS[0]: {'instance_uuid': 'vm1'}})
        self.translate(used, whitelist=whitelist)
        self.translate(gpu_devices(), whitelist=whitelist,
                       withheld=partitions.Withheld({GPUS[0]: 'foreign'}))
        self.translate(gpu_devices(), whitelist=whitelist)
        self.assertEqual(1, self.reserved(1))

    def test_device_withheld_alone_keeps_inventory_gets_trait(self):
        withheld = partitions.Withheld(alone={GPUS[0]: 'no own partition'})
        self.translate(gpu_devices(), h200_groups(), withheld=withheld)
        self.assertEqual(0, self.reserved(1))
        self.assertIn('CUSTOM_PCI_GROUP_ONLY',
                      self.traits(self.dev_name(1)))
        self.assertNotIn('CUSTOM_PCI_GROUP_ONLY',
                         self.traits(self.dev_name(2)))

    def test_unhealthy_device_and_its_groups(self):
        tree = groups.GroupTree.from_config(h200_groups())
        devices = gpu_devices(**{
            GPUS[0]: {'health': pci_device.UNHEALTHY,
                      'instance_uuid': 'vm1', 'status': 'allocated'}})
        withheld = health.withhold(partitions.Withheld(), tree,
                                   {GPUS[0]: 'GPU is lost'}, {})
        self.translate(devices, h200_groups(), withheld=withheld)
        self.assertEqual((1, 0), (self.reserved(1), self.reserved(2)))
        self.assertTrue({'CUSTOM_PCI_WITHHELD', 'CUSTOM_PCI_UNHEALTHY'} <=
                        self.traits(self.dev_name(1)))
        pair, _gpus = pair_of(1)
        for group in tree.groups():
            traits = self.traits(placement_names.group_rp_name(
                HOST, group.name))
            size = placement_names.group_size_trait('nvlink', group.size)
            if GPUS[0] in group.addresses:
                self.assertNotIn(size, traits, group.name)
                self.assertIn('CUSTOM_PCI_WITHHELD', traits)
            else:
                self.assertIn(size, traits, group.name)
        # The band counts the 7 healthy GPUs only; the unhealthy one is
        # neither free nor counted twice as used.
        root = self.traits(HOST)
        self.assertEqual(placement_names.band_traits({'PGPU': 7}),
                         {t for t in root
                          if placement_names.is_band_trait(t)})
        # Healthy again: reservation, traits and the group come back.
        self.translate(gpu_devices(), h200_groups())
        self.assertEqual(0, self.reserved(1))
        self.assertNotIn('CUSTOM_PCI_UNHEALTHY',
                         self.traits(self.dev_name(1)))
        self.assertIn(placement_names.group_size_trait('nvlink', 2),
                      self.traits(placement_names.group_rp_name(
                          HOST, pair)))

    def test_one_time_use_static_group_reserved_once_used(self):
        spec = json.dumps({'vendor_id': '10de', 'product_id': '2335',
                           'group_name': 'hgx1', 'group_type': 'nvlink',
                           'one_time_use': True})
        whitelist = devspec.Whitelist.from_config([spec], True)
        devices = gpu_devices(**{GPUS[4]: {'instance_uuid': 'vm1'}})
        statics = groups.static_groups(devices,
                                       whitelist.classify(devices))
        self.translate(devices, statics=statics, whitelist=whitelist)
        data = self.tree.data('cmp1_hgx1')
        self.assertEqual(1, data.inventory['CUSTOM_PCI_GROUP_NVLINK'][
            'reserved'])
        self.assertIn('HW_PCI_ONE_TIME_USE', data.traits)

    def test_one_time_use_on_a_vf_is_refused(self):
        spec = json.dumps({'vendor_id': '15b3', 'one_time_use': 'false'})
        whitelist = devspec.Whitelist.from_config([spec], True)
        vf = tracked('0000:4b:00.2', '15b3', '101e', 'type-VF',
                     parent_addr='0000:4b:00.0')
        err = self.assertRaises(exception.PlacementPciException,
                                self.translate, [vf], whitelist=whitelist)
        self.assertIn('one_time_use', str(err))
        self.assertIn('0000:4b:00.2', str(err))
        self.assertEqual([], self.tree.children(HOST))

    def nic_pf_and_vfs(self):
        """The ConnectX-7 PF and two of its VFs."""
        pf = tracked('0000:4b:00.0', '15b3', '1021', 'type-PF')
        return [pf] + [tracked('0000:4b:00.%d' % fn, '15b3', '101e',
                               'type-VF', parent_addr=pf.address)
                       for fn in (2, 3)]

    def test_pf_and_its_vfs_of_one_class_are_refused(self):
        # Before: one provider with 3 units of CUSTOM_NIC.
        whitelist = devspec.Whitelist.from_config([json.dumps(
            {'vendor_id': '15b3', 'resource_class': 'nic'})], True)
        err = self.assertRaises(exception.PlacementPciException,
                                self.translate, self.nic_pf_and_vfs(),
                                whitelist=whitelist)
        self.assertIn('Configuring both PF 0000:4b:00.0 (resource class '
                      'CUSTOM_NIC) and its VFs 0000:4b:00.2, 0000:4b:00.3 '
                      '(resource class CUSTOM_NIC) in [pci]device_spec is '
                      'not supported', str(err))
        self.assertEqual([], self.tree.children(HOST))

    def test_pf_and_its_vfs_of_two_classes_are_refused(self):
        whitelist = devspec.Whitelist.from_config([json.dumps(
            {'vendor_id': '15b3', 'product_id': '1021',
             'resource_class': 'pf'}), json.dumps(
            {'vendor_id': '15b3', 'product_id': '101e',
             'resource_class': 'vf'})], True)
        err = self.assertRaises(exception.PlacementPciException,
                                self.translate, self.nic_pf_and_vfs(),
                                whitelist=whitelist)
        self.assertIn('PF 0000:4b:00.0 (resource class CUSTOM_PF) and its '
                      'VFs 0000:4b:00.2, 0000:4b:00.3 (resource class '
                      'CUSTOM_VF)', str(err))

    def test_vfs_alone_share_their_pf_provider(self):
        whitelist = devspec.Whitelist.from_config([json.dumps(
            {'vendor_id': '15b3', 'product_id': '101e',
             'resource_class': 'vf'})], True)
        self.translate(self.nic_pf_and_vfs(), whitelist=whitelist)
        name = placement_names.device_rp_name(HOST, '0000:4b:00.0')
        self.assertEqual(2, self.tree.data(name).inventory['CUSTOM_VF'][
            'total'])


class TestNumaLocality(TranslatorTestBase):
    """Sub-NUMA clustering: nodes 0 and 1 on socket 0, nodes 2 and 3 on
    socket 1; GPUs 1-4 alternate between nodes 0 and 1, GPUs 5-8 between
    nodes 2 and 3, so pair-a1 (GPUs 3 and 4 by the board's module map)
    spans the two nodes of socket 0."""

    TOPOLOGY = hardware.HostNUMATopology(tuple(
        hardware.NUMACell(node, (node,), 1024, node // 2)
        for node in range(4)))

    def test_device_and_group_traits(self):
        devices = gpu_devices(**{
            address: {'numa_node': 2 * (index // 4) + index % 2}
            for index, address in enumerate(GPUS)})
        translator.update_provider_tree_for_pci(
            self.tree, HOST, devices, self.whitelist.classify(devices),
            groups.GroupTree.from_config(h200_groups()), [], dict,
            self.TOPOLOGY)

        def traits(name):
            return self.traits('%s_%s' % (HOST, name))

        self.assertLessEqual({'CUSTOM_PCI_NUMA_NODE_3',
                              'CUSTOM_PCI_SOCKET_1'},
                             traits(GPUS[7].upper()))
        local = {'CUSTOM_PCI_NUMA_LOCAL', 'CUSTOM_PCI_SOCKET_LOCAL'}
        # pair-a1: nodes 0 and 1, one socket.
        self.assertEqual({'CUSTOM_PCI_SOCKET_LOCAL'},
                         traits('pair-a1') & local)
        self.assertEqual(set(), traits('board') & local)
        self.assertEqual({'CUSTOM_PCI_SOCKET_LOCAL'},
                         traits('quad-b') & local)

    def test_unknown_node_gives_no_locality(self):
        devices = gpu_devices(**{GPUS[0]: {'numa_node': None},
                                 GPUS[2]: {'numa_node': 0}})
        translator.update_provider_tree_for_pci(
            self.tree, HOST, devices, self.whitelist.classify(devices),
            groups.GroupTree.from_config(h200_groups()), [], dict,
            self.TOPOLOGY)
        self.assertFalse({t for t in self.traits(
            '%s_%s' % (HOST, GPUS[0].upper()))
            if 'NUMA' in t or 'SOCKET' in t})
        self.assertFalse({t for t in self.traits(
            '%s_pair-a1' % HOST) if t.endswith('_LOCAL')})
        self.assertIn('CUSTOM_PCI_NUMA_NODE_0', self.traits(
            '%s_%s' % (HOST, GPUS[2].upper())))
