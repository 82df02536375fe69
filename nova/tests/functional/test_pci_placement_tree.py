"""The provider tree a compute reports to real Placement for its PCI devices.

Each test starts a real compute manager on the libvirt test driver and
reads the tree back from Placement's REST API.
"""

from nova import context as nova_context
from nova import exception
from nova.db import api as db
from nova.pci import placement_names
from nova.tests.fixtures import database as db_fixture
from nova.tests.functional.lib import base
from nova.virt.fake import host as fakehost

GPUS = base.GPUS
MANAGED = {'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'}
# The compute node: nova's, each NUMA node has one socket, and its 8 GPUs
# are free (free-device band 8, see nova.pci.placement_names), so only an
# 8-GPU request takes a group without breaking a larger free one.
ROOT_TRAITS = {'OWNER_NOVA', 'COMPUTE_SOCKET_PCI_NUMA_AFFINITY',
               'CUSTOM_PCI_FREE_PGPU_8', 'CUSTOM_PCI_FIT_PGPU_8'}
# All devices of the group on one NUMA node and socket.
LOCAL = {'CUSTOM_PCI_NUMA_LOCAL', 'CUSTOM_PCI_SOCKET_LOCAL'}


def dev(host: str, gpu: int) -> str:
    return '%s_%s' % (host, GPUS[gpu - 1].upper())


def numa(gpu: int) -> set[str]:
    """NUMA node and socket traits of GPU ``gpu`` (1-4 on node 0)."""
    node = 0 if gpu <= 4 else 1
    return {'CUSTOM_PCI_NUMA_NODE_%d' % node, 'CUSTOM_PCI_SOCKET_%d' % node}


def h200_tree(host: str) -> dict[str, tuple]:
    """Expected name -> (parent, inventory, traits) for a grouped host."""

    def member(size, index):
        return 'CUSTOM_PCI_GROUP_NVLINK_%d_M%d' % (size, index)

    def group_traits(size):
        return {'CUSTOM_PCI_GROUP_NVLINK', 'CUSTOM_PCI_GROUP_NVLINK_%d' % size}

    # The board spans both NUMA nodes; quads and pairs sit on one.
    tree = {
        host: (None, {'VCPU': 224, 'MEMORY_MB': 2097152}, ROOT_TRAITS),
        host + '_board': (host, {}, group_traits(8)),
        host + '_quad-a': (host + '_board', {}, group_traits(4) | LOCAL),
        host + '_quad-b': (host + '_board', {}, group_traits(4) | LOCAL),
    }
    for name, (first, second) in fakehost.H200_NVLINK_PAIRS.items():
        quad = host + ('_quad-a' if name.startswith('pair-a') else '_quad-b')
        tree[host + '_' + name] = (quad, {}, group_traits(2) | LOCAL)
        for pair_index, gpu in enumerate((first, second)):
            quad_gpus = (1, 2, 3, 4) if gpu <= 4 else (5, 6, 7, 8)
            traits = MANAGED | numa(gpu) | {member(2, pair_index),
                                            member(4, quad_gpus.index(gpu)),
                                            member(8, gpu - 1)}
            tree[dev(host, gpu)] = (host + '_' + name, {'PGPU': 1}, traits)
    return tree


def as_tuples(view: dict[str, dict]) -> dict[str, tuple]:
    return {name: (rp['parent'], rp['inventory'], rp['traits'])
            for name, rp in view.items()}


class TestGroupedTree(base.FunctionalTestCase):

    def test_hgx_h200_host_with_groups(self):
        self.enable_h200_groups()
        self.start_compute('cmp1')
        self.assertEqual(h200_tree('cmp1'),
                         as_tuples(self.provider_view('cmp1')))

    def test_every_provider_carries_the_shard_traits_of_its_host(self):
        self.enable_h200_groups()
        self.start_compute('cmp1')
        self.start_compute('cmp2')
        for host in ('cmp1', 'cmp2'):
            view = self.provider_view(host)
            self.assertEqual(16, len(view))
            for name, provider in view.items():
                traits = self.placement_get(
                    '/resource_providers/%s/traits' % provider['uuid'])
                self.assertEqual(placement_names.shard_traits(host), {
                    trait for trait in traits['traits']
                    if placement_names.is_shard_trait(trait)}, name)
        self.assertNotEqual(placement_names.shard_traits('cmp1'),
                            placement_names.shard_traits('cmp2'))

    def test_periodic_update_is_idempotent(self):
        self.enable_h200_groups()
        compute = self.start_compute('cmp1')
        before = self.provider_view('cmp1')
        gens = {name: self.placement_get('/resource_providers/%s' %
                                         rp['uuid'])['generation']
                for name, rp in before.items()}
        compute.update_available_resource()
        after = self.provider_view('cmp1')
        self.assertEqual(before, after)
        self.assertEqual(gens, {
            name: self.placement_get('/resource_providers/%s' %
                                     rp['uuid'])['generation']
            for name, rp in after.items()})

    def test_two_hosts(self):
        self.enable_h200_groups()
        self.start_compute('cmp1')
        self.start_compute('cmp2')
        self.assertEqual(h200_tree('cmp1'),
                         as_tuples(self.provider_view('cmp1')))
        self.assertEqual(h200_tree('cmp2'),
                         as_tuples(self.provider_view('cmp2')))
        uuids1 = {rp['uuid'] for rp in self.provider_view('cmp1').values()}
        uuids2 = {rp['uuid'] for rp in self.provider_view('cmp2').values()}
        self.assertEqual(set(), uuids1 & uuids2)

    def test_devices_record_their_provider_and_group(self):
        self.enable_h200_groups()
        compute = self.start_compute('cmp1')
        view = self.provider_view('cmp1')
        devices = {d.address: d for d in compute.rt.pci_tracker.pci_devs}
        self.assertEqual(sorted(GPUS), sorted(devices))
        self.assertEqual('board/quad-a/pair-a1',
                         devices[GPUS[2]].group_path)
        self.assertEqual(view[dev('cmp1', 3)]['uuid'],
                         devices[GPUS[2]].rp_uuid)


class TestFlatTree(base.FunctionalTestCase):

    def test_no_groups_is_upstream_compatible(self):
        self.enable_h200_groups(groups=False)
        self.start_compute('cmp1')
        view = as_tuples(self.provider_view('cmp1'))
        # Ungrouped GPUs: one GPU fits anywhere, nothing larger does.
        expected = {'cmp1': (None, {'VCPU': 224, 'MEMORY_MB': 2097152},
                             ROOT_TRAITS - {'CUSTOM_PCI_FIT_PGPU_8'} |
                             {'CUSTOM_PCI_FIT_PGPU_1'})}
        for gpu in range(1, 9):
            expected[dev('cmp1', gpu)] = ('cmp1', {'PGPU': 1},
                                          MANAGED | numa(gpu))
        self.assertEqual(expected, view)

    def test_reporting_off_reports_no_pci(self):
        self.flags('pci', device_spec=base.H200_CONFIG['device_spec'])
        self.start_compute('cmp1')
        self.assertEqual(['cmp1'], list(self.provider_view('cmp1')))

    def test_reporting_cannot_be_disabled_once_enabled(self):
        self.enable_h200_groups(groups=False)
        self.start_compute('cmp1')
        self.flags('pci', report_in_placement=False, alias=[])
        err = self.assertRaises(exception.PlacementPciException,
                                self.start_compute, 'cmp1')
        self.assertIn('report_in_placement', str(err))

    def test_groups_without_reporting_are_rejected(self):
        self.enable_h200_groups()
        self.flags('pci', report_in_placement=False)
        err = self.assertRaises(exception.InvalidConfiguration,
                                self.start_compute, 'cmp1')
        self.assertIn('report_in_placement', str(err))


class TestReshape(base.FunctionalTestCase):

    def _allocate(self, consumer: str, rp_uuids: list[str]) -> None:
        body = {'allocations': {u: {'resources': {'PGPU': 1}}
                                for u in rp_uuids},
                'project_id': 'p', 'user_id': 'u',
                'consumer_generation': None, 'consumer_type': 'INSTANCE'}
        resp = self.placement.api.put('/allocations/%s' % consumer, json=body)
        self.assertEqual(204, resp.status_code, resp.text)

    def _hold(self, compute, consumer: str, gpus: list[int]) -> None:
        compute.rt.pci_tracker.claim(consumer, 'req-' + consumer,
                                     [GPUS[g - 1] for g in gpus])

    def test_flat_to_grouped_keeps_uuids_and_allocations(self):
        self.enable_h200_groups(groups=False)
        compute = self.start_compute('cmp1')
        flat = self.provider_view('cmp1')
        gpus = base.pair_of(1)
        pair = [flat[dev('cmp1', gpu)]['uuid'] for gpu in gpus]
        consumer = '11111111-2222-3333-4444-555555555555'
        self._allocate(consumer, pair)
        self._hold(compute, consumer, list(gpus))

        self.enable_h200_groups()
        self.start_compute('cmp1')
        grouped = self.provider_view('cmp1')
        # The start-up repair frees the pair of the consumer that is no
        # instance and publishes the band at once: all 8 GPUs free in the
        # tracker (band 8), while Placement keeps the allocation.
        self.assertEqual(h200_tree('cmp1'), as_tuples(grouped))
        for gpu in range(1, 9):
            self.assertEqual(flat[dev('cmp1', gpu)]['uuid'],
                             grouped[dev('cmp1', gpu)]['uuid'])
        allocs = self.placement_get('/allocations/%s' % consumer)
        self.assertEqual(set(pair), set(allocs['allocations']))
        self.assertEqual({'PGPU': 1}, self.usages(pair[0]))

    def test_grouped_back_to_flat(self):
        self.enable_h200_groups()
        self.start_compute('cmp1')
        grouped = self.provider_view('cmp1')
        self.enable_h200_groups(groups=False)
        self.start_compute('cmp1')
        flat = self.provider_view('cmp1')
        self.assertEqual(9, len(flat))
        self.assertEqual(grouped[dev('cmp1', 8)]['uuid'],
                         flat[dev('cmp1', 8)]['uuid'])
        self.assertEqual('cmp1', flat[dev('cmp1', 8)]['parent'])

    def test_grouping_that_cannot_hold_an_allocation_is_refused(self):
        self.enable_h200_groups(groups=False)
        compute = self.start_compute('cmp1')
        flat = self.provider_view('cmp1')
        consumer = '22222222-2222-3333-4444-555555555555'
        # Two GPUs that are not an NVLink pair.
        gpus = base.not_a_pair(1)
        self._allocate(consumer, [flat[dev('cmp1', gpu)]['uuid']
                                  for gpu in gpus])
        self._hold(compute, consumer, list(gpus))
        self.enable_h200_groups()
        err = self.assertRaises(exception.PlacementPciException,
                                self.start_compute, 'cmp1')
        self.assertIn(consumer, str(err))
        self.assertIn(GPUS[0], str(err))
        self.assertEqual(flat, self.provider_view('cmp1'))

    def test_device_removed_from_config_while_allocated(self):
        self.enable_h200_groups(groups=False)
        compute = self.start_compute('cmp1')
        flat = self.provider_view('cmp1')
        gpu4 = flat[dev('cmp1', 4)]['uuid']
        consumer = '33333333-2222-3333-4444-555555555555'
        self._allocate(consumer, [gpu4])
        self._hold(compute, consumer, [4])
        # The operator narrows the spec to GPUs 5-8 only.
        self.flags('pci', device_spec=[
            '{"vendor_id": "10de", "product_id": "2335", '
            '"resource_class": "PGPU", "address": {"bus": "[9a-d]"}}'])
        compute = self.start_compute('cmp1')
        view = self.provider_view('cmp1')
        self.assertEqual({'cmp1', dev('cmp1', 4)} |
                         {dev('cmp1', g) for g in (5, 6, 7, 8)}, set(view))
        self.assertEqual(gpu4, view[dev('cmp1', 4)]['uuid'])
        self.assertEqual({'PGPU': 1}, self.usages(gpu4))

        # Once the instance frees the device, it and its provider go.
        compute.rt.pci_tracker.free_instance(consumer)
        self.placement.api.delete('/allocations/%s' % consumer)
        compute.update_available_resource()
        self.assertNotIn(dev('cmp1', 4), self.provider_view('cmp1'))
        self.assertIsNone(compute.rt.pci_tracker.get_by_address(GPUS[3]))

    def test_gpu_gone_from_hypervisor(self):
        self.enable_h200_groups(groups=False)
        self.start_compute('cmp1')
        devices = [d for d in fakehost.hgx_h200_devices()
                   if d.address != GPUS[7]]
        self.start_compute('cmp1', devices=devices)
        self.assertNotIn(dev('cmp1', 8), self.provider_view('cmp1'))
        self.assertEqual(9 - 1, len(self.provider_view('cmp1')))

    def test_group_naming_a_missing_device_fails_at_start(self):
        self.enable_h200_groups()
        devices = [d for d in fakehost.hgx_h200_devices()
                   if d.address != GPUS[7]]
        err = self.assertRaises(exception.PciGroupConfigInvalid,
                                self.start_compute, 'cmp1', devices)
        self.assertIn(GPUS[7], str(err))


class TestStaticGroups(base.FunctionalTestCase):

    def test_static_spec_group_is_one_unit(self):
        self.flags('pci', report_in_placement=True, device_spec=[
            '{"vendor_id": "10de", "product_id": "2335", '
            '"address": {"bus": "(18|2a|3a|5d)"}, '
            '"group_name": "hgx-left", "group_type": "nvlink"}'])
        compute = self.start_compute('cmp1')
        view = as_tuples(self.provider_view('cmp1'))
        # GPUs 1-4 all sit on NUMA node 0.
        self.assertEqual(('cmp1', {'CUSTOM_PCI_GROUP_NVLINK': 1},
                          MANAGED | numa(1) | LOCAL),
                         view['cmp1_hgx-left'])
        self.assertEqual({'cmp1', 'cmp1_hgx-left'}, set(view))
        rp_uuids = {d.rp_uuid for d in compute.rt.pci_tracker.pci_devs}
        self.assertEqual({self.provider_view('cmp1')['cmp1_hgx-left']
                          ['uuid']}, rp_uuids)


class TestComputeRecords(base.FunctionalTestCase):

    def test_service_and_node_recorded(self):
        self.enable_h200_groups()
        self.start_compute('cmp1')
        ctx = nova_context.get_admin_context()
        node = db.compute_node_get_by_nodename(ctx, 'cmp1')
        self.assertEqual(224, node.vcpus)
        root = self.provider_view('cmp1')['cmp1']
        self.assertEqual(node.uuid, root['uuid'])
        service = db.service_get_by_host_and_binary(ctx, 'cmp1',
                                                    'nova-compute')
        self.assertEqual('compute', service.topic)

    def test_rebuilt_database_reuses_the_provider(self):
        self.enable_h200_groups()
        self.start_compute('cmp1')
        before = self.provider_view('cmp1')
        # A fresh, empty nova database; Placement still has the tree.
        self.useFixture(db_fixture.Database())
        self.computes.clear()
        self.start_compute('cmp1')
        ctx = nova_context.get_admin_context()
        node = db.compute_node_get_by_nodename(ctx, 'cmp1')
        self.assertEqual(before['cmp1']['uuid'], node.uuid)
        self.assertEqual(before, self.provider_view('cmp1'))


class TestAliasesOnCompute(base.FunctionalTestCase):

    def test_alias_of_an_undeclared_group_type_warns_once(self):
        self.enable_h200_groups()
        self.flags('pci', alias=base.H200_CONFIG['alias'] + [
            '{"name": "mi300", "resource_class": "PGPU", '
            '"group_type": "xgmi"}'])
        # The compute does not schedule: it needs no pci_in_placement.
        self.flags('filter_scheduler', pci_in_placement=False)
        compute = self.start_compute('cmp1')
        compute.update_available_resource()
        warnings = [line for line in self.logger.output.splitlines()
                    if 'mi300' in line]
        self.assertEqual(1, len(warnings), self.logger.output)
        self.assertIn('xgmi', warnings[0])
        self.assertIn('nvlink', warnings[0])
