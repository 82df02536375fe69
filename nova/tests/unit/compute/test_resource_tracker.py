"""Tests for the ResourceTracker's update cycle.

The hypervisor and Placement are fakes (``fakes.FakeDriver``,
``fakes.FakeReportClient``); the provider tree, the translator, the PCI tracker
and the database are the real ones. The fake report client keeps the last
tree it was sent as Placement's, so consecutive updates see what they
reported before.
"""

import json
from unittest import mock
import uuid

from oslo_config import cfg

import nova.conf
from nova import context as nova_context
from nova.compute import provider_tree as ptree
from nova.compute import resource_tracker
from nova.db import api as db
from nova import exception
from nova.pci import device as pci_device
from nova.pci import placement_names as names
from nova import test
from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import h200_placement
from nova.tests.unit.compute import fakes
from nova.virt import hardware
from nova.virt.fake import host as fakehost

HOST = 'cmp1'
GPUS = fakehost.H200_GPU_ADDRESSES
# The H200 host's two NUMA nodes, one socket each.
TOPOLOGY = hardware.HostNUMATopology(tuple(
    hardware.NUMACell(node, (node,), 1024, node) for node in (0, 1)))


def make_conf(pci: dict | None = None, **overrides) -> cfg.ConfigOpts:
    """Nova options of a compute with the H200 host's [pci] section
    (``pci`` replaces option values of it)."""
    conf = cfg.ConfigOpts()
    nova.conf.register_all(conf)
    conf([], default_config_files=[], default_config_dirs=[])
    values = dict(fakehost.h200_pci_config(), report_in_placement=True)
    values.update(pci or {})
    for name, value in values.items():
        conf.set_override(name, value, group='pci')
    for name, value in overrides.items():
        conf.set_override(name, value)
    return conf


def tree_view(tree: ptree.ProviderTree) -> dict[str, tuple]:
    """Provider name -> (parent name, inventory, traits) of ``tree``."""
    view = {}
    for provider in tree.providers():
        parent = (tree.data(provider.parent_uuid).name
                  if provider.parent_uuid else None)
        view[provider.name] = (parent, provider.inventory,
                               provider.traits)
    return view


class ResourceTrackerTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        self.context = nova_context.get_admin_context()
        self.driver = fakes.FakeDriver(
            fakehost.hgx_h200_devices(),
            {'vcpus': h200_placement.VCPUS,
             'memory_mb': h200_placement.MEMORY_MB, 'local_gb': 0,
             'hypervisor_type': 'fake'},
            TOPOLOGY)
        self.client = fakes.FakeReportClient()

    def tracker(self, conf: cfg.ConfigOpts | None = None
                ) -> resource_tracker.ResourceTracker:
        return resource_tracker.ResourceTracker(
            conf or make_conf(), HOST, self.driver, self.client)

    def device(self, rt, address: str) -> pci_device.TrackedDevice:
        return rt.pci_tracker.get_by_address(address)


class TestH200Contract(ResourceTrackerTestCase):
    """The hand-built H200 tree of the scheduler and request model tests
    (nova.tests.fixtures.h200_placement) is what a compute reports.

    The fixture is hardware only: a compute also publishes its free-device
    band and fitting sizes, which follow usage, and on every provider its
    shard traits, which follow its name, so the check takes them apart."""

    def test_fixture_equals_reported_tree(self):
        self.tracker().update_available_resource(self.context)
        expected = {p.name: (p.parent, p.inventory, p.traits)
                    for p in h200_placement.h200_providers(HOST)}
        reported = tree_view(self.client.sent[-1])
        parent, inventory, traits = reported[HOST]
        self.assertEqual({names.band_trait('PGPU', 8),
                          names.fit_trait('PGPU', 8)},
                         {t for t in traits
                          if names.is_band_trait(t) or names.is_fit_trait(t)})
        reported[HOST] = (parent, inventory, {
            t for t in traits
            if not (names.is_band_trait(t) or names.is_fit_trait(t))})
        for name, (parent, inventory, traits) in reported.items():
            self.assertEqual(names.shard_traits(HOST),
                             {t for t in traits if names.is_shard_trait(t)})
            reported[name] = (parent, inventory, {
                t for t in traits if not names.is_shard_trait(t)})
        self.assertEqual(sorted(expected), sorted(reported))
        for name in expected:
            self.assertEqual(expected[name], reported[name], name)


class TestUpdateCycle(ResourceTrackerTestCase):

    def test_first_update_creates_node_and_tree(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        node = db.compute_node_get_by_nodename(self.context, HOST)
        self.assertEqual((h200_placement.VCPUS, h200_placement.MEMORY_MB),
                         (node.vcpus, node.memory_mb))
        (sent,) = self.client.sent
        root = sent.data(node.uuid)
        self.assertEqual(HOST, root.name)
        self.assertEqual(names.inventory_record(h200_placement.VCPUS),
                         root.inventory['VCPU'])
        # 8 GPUs tracked, the NIC and NVMe match no spec.
        self.assertEqual(sorted(GPUS), [d.address
                                        for d in rt.pci_tracker.pci_devs])
        # Nothing shrank: Placement's allocations were never read.
        self.assertEqual(0, self.client.allocation_reads)

    def test_devices_record_the_providers_the_translator_made(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        sent = self.client.sent[-1]
        for address in GPUS:
            self.assertEqual(
                sent.data(names.device_rp_name(HOST, address)).uuid,
                self.device(rt, address).rp_uuid)

    def test_steady_state_resends_the_same_tree(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        rt.update_available_resource(self.context)
        first, second = self.client.sent
        self.assertEqual(tree_view(first), tree_view(second))
        self.assertEqual([p.uuid for p in first.providers()],
                         [p.uuid for p in second.providers()])
        self.assertEqual(0, self.client.allocation_reads)

    def test_devices_are_matched_once_per_update(self):
        rt = self.tracker()
        matched = []
        assignable = rt.whitelist.device_assignable

        def counting(dev):
            matched.append(dev.address)
            return assignable(dev)

        rt.whitelist.device_assignable = counting
        rt.update_available_resource(self.context)
        self.assertEqual(sorted(d.address for d in self.driver.devices),
                         sorted(matched))

    def test_host_is_observed_once_per_update(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        self.assertEqual(1, self.driver.observations)
        rt.update_available_resource(self.context)
        self.assertEqual(2, self.driver.observations)
        # A claim's publish and the offer check after the NVLink repair
        # use the last observation; the check reads partitions only.
        rt.report_claimed(rt.pci_tracker.pci_devs[:1])
        with mock.patch.object(self.driver, 'get_nvlink_partitions',
                               wraps=self.driver.get_nvlink_partitions
                               ) as partitions:
            self.assertFalse(rt.refresh_offer(self.context))
        self.assertEqual(1, partitions.call_count)
        self.assertEqual(2, self.driver.observations)

    def test_node_known_to_placement_keeps_its_uuid(self):
        # The database was rebuilt; Placement still has the provider.
        self.client.placement = ptree.ProviderTree()
        root_uuid = str(uuid.uuid4())
        self.client.placement.add(HOST, uuid=root_uuid)
        self.tracker().update_available_resource(self.context)
        self.assertEqual(root_uuid, db.compute_node_get_by_nodename(
            self.context, HOST).uuid)
        self.assertEqual(root_uuid, self.client.sent[-1].roots()[0].uuid)

    def test_socket_trait_only_while_sockets_are_known(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        self.assertIn(names.SOCKET_AFFINITY_TRAIT,
                      self.client.sent[-1].roots()[0].traits)
        self.driver.topology = hardware.HostNUMATopology(tuple(
            hardware.NUMACell(node, (node,), 1024, None) for node in (0, 1)))
        rt.update_available_resource(self.context)
        self.assertEqual({names.OWNER_NOVA_TRAIT,
                          names.band_trait('PGPU', 8),
                          names.fit_trait('PGPU', 8)} |
                         names.shard_traits(HOST),
                         self.client.sent[-1].roots()[0].traits)

    def test_generation_conflicts_are_retried(self):
        self.client.conflicts = 2
        self.tracker().update_available_resource(self.context)
        self.assertEqual(1, len(self.client.sent))

    def test_persistent_conflict_is_raised(self):
        self.client.conflicts = 10
        self.assertRaises(exception.ResourceProviderUpdateConflict,
                          self.tracker().update_available_resource,
                          self.context)
        self.assertEqual([], self.client.sent)

    def test_disk_reservation_larger_than_disk_is_refused(self):
        self.driver.resources['local_gb'] = 1
        rt = self.tracker(make_conf(reserved_host_disk_mb=4096))
        err = self.assertRaises(exception.InvalidConfiguration,
                                rt.update_available_resource, self.context)
        self.assertIn('reserved_host_disk_mb = 4096', str(err))
        self.assertEqual([], self.client.sent)

    def test_disk_inventory_keeps_reservation_and_ratio(self):
        self.driver.resources['local_gb'] = 100
        rt = self.tracker(make_conf(reserved_host_disk_mb=2048,
                                    disk_allocation_ratio=2.0))
        rt.update_available_resource(self.context)
        self.assertEqual(
            names.inventory_record(100, reserved=2, max_unit=196,
                                   allocation_ratio=2.0),
            self.client.sent[-1].roots()[0].inventory['DISK_GB'])


class TestFabricManagerOutage(ResourceTrackerTestCase):

    def test_outage_is_warned_about_once_and_its_end_told(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        down = exception.FabricManagerError(operation='list',
                                            error='connection refused')
        with mock.patch.object(self.driver, 'get_nvlink_partitions',
                               side_effect=down):
            for _ in range(3):
                self.assertFalse(rt.refresh_offer(self.context))
        self.assertEqual(1, self.logger.output.count(
            'Cannot read NVLink partitions from Fabric Manager'))
        self.assertFalse(rt.refresh_offer(self.context))
        self.assertIn('Fabric Manager answers again on %s' % HOST,
                      self.logger.output)


class TestRefusals(ResourceTrackerTestCase):

    def test_removing_an_allocated_provider_is_refused(self):
        # Ungrouped GPUs: a grouped GPU that disappears fails the group
        # check before the translator runs.
        rt = self.tracker(make_conf({'device_group': []}))
        rt.update_available_resource(self.context)
        gpu8 = self.client.sent[-1].data(names.device_rp_name(HOST, GPUS[7]))
        # Placement holds an allocation on GPU 8, which then disappears
        # from the host while nova's tracker thinks it is free.
        self.client.allocations = {'vm1': {'allocations': {
            gpu8.uuid: {'resources': {'PGPU': 1}}}}}
        self.driver.devices = [d for d in self.driver.devices
                               if d.address != GPUS[7]]
        err = self.assertRaises(exception.PlacementPciException,
                                rt.update_available_resource, self.context)
        self.assertIn('consumer vm1', str(err))
        self.assertEqual(1, self.client.allocation_reads)
        # Nothing was sent: Placement keeps the old tree.
        self.assertEqual(1, len(self.client.sent))
        self.assertTrue(self.client.placement.exists(gpu8.uuid))

    def test_reporting_cannot_be_turned_off_again(self):
        self.tracker().update_available_resource(self.context)
        conf = make_conf({'report_in_placement': False, 'device_group': [],
                          'alias': []})
        err = self.assertRaises(exception.PlacementPciException,
                                self.tracker(conf).update_available_resource,
                                self.context)
        self.assertIn('report_in_placement is False', str(err))
        self.assertEqual(1, len(self.client.sent))

    def test_without_reporting_no_pci_providers(self):
        conf = make_conf({'report_in_placement': False, 'device_group': [],
                          'alias': []})
        rt = self.tracker(conf)
        rt.update_available_resource(self.context)
        self.assertEqual([HOST], [p.name for p in
                                  self.client.sent[-1].providers()])
        self.assertIsNone(self.device(rt, GPUS[0]).rp_uuid)


class TestOneTimeUse(ResourceTrackerTestCase):

    def one_time_use_tracker(self) -> resource_tracker.ResourceTracker:
        """A tracker whose H200 GPUs are one-time-use devices."""
        spec = {'vendor_id': fakehost.H200_VENDOR_ID,
                'product_id': fakehost.H200_PRODUCT_ID,
                'resource_class': 'PGPU', 'one_time_use': True}
        return self.tracker(make_conf({'device_spec': [json.dumps(spec)]}))

    def test_claimed_device_is_reserved_at_once(self):
        rt = self.one_time_use_tracker()
        rt.update_available_resource(self.context)
        devices = rt.pci_tracker.claim('vm1', 'req1', [GPUS[0]])
        rt.report_claimed(devices)
        self.assertEqual(2, len(self.client.sent))
        name = names.device_rp_name(HOST, GPUS[0])
        self.assertEqual(1, self.client.sent[-1].data(name).inventory[
            'PGPU']['reserved'])

    def test_ordinary_device_claim_reports_the_free_band(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        rt.report_claimed(rt.pci_tracker.claim('vm1', 'req1', [GPUS[0]]))
        # The claim is sent at once: the host's free-device band drops.
        self.assertEqual(2, len(self.client.sent))
        root = self.client.sent[-1].data(HOST)
        self.assertIn(names.band_trait('PGPU', 4),
                      root.traits)

    def test_claim_publishes_from_the_remembered_tree(self):
        # The periodic update verifies the tree against Placement; the
        # publish after a claim sends its change on what was last sent.
        rt = self.tracker()
        rt.update_available_resource(self.context)
        self.assertEqual(0, self.client.remembered_reads)
        rt.report_claimed(rt.pci_tracker.claim('vm1', 'req1', [GPUS[0]]))
        self.assertEqual(1, self.client.remembered_reads)
        rt.update_available_resource(self.context)
        self.assertEqual(1, self.client.remembered_reads)

    def test_unreachable_placement_does_not_fail_an_ordinary_claim(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        self.client.get_provider_tree = self.placement_down
        # Only the band was to be sent: the claim stands, nothing was sent.
        rt.report_claimed(rt.pci_tracker.claim('vm1', 'req1', [GPUS[0]]))
        self.assertEqual(1, len(self.client.sent))

    def test_unreachable_placement_fails_a_one_time_use_claim(self):
        rt = self.one_time_use_tracker()
        rt.update_available_resource(self.context)
        self.client.get_provider_tree = self.placement_down
        devices = rt.pci_tracker.claim('vm1', 'req1', [GPUS[0]])
        self.assertRaises(exception.PlacementAPIConnectFailure,
                          rt.report_claimed, devices)

    @staticmethod
    def placement_down(root_uuid: str) -> None:
        raise exception.PlacementAPIConnectFailure(
            url='http://placement', error='connection refused')

    def test_no_claimed_device_sends_nothing(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        rt.report_claimed([])
        self.assertEqual(1, len(self.client.sent))

    def test_free_reports_the_free_band(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        rt.pci_tracker.claim('vm1', 'req1', GPUS)
        self.assertEqual(sorted(GPUS),
                         sorted(rt.free_instance('vm1', ['req1'])))
        # Sent at once: the whole board is free again.
        self.assertEqual(2, len(self.client.sent))
        self.assertIn(names.band_trait('PGPU', 8),
                      self.client.sent[-1].data(HOST).traits)

    def test_unreachable_placement_does_not_fail_a_free(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        rt.pci_tracker.claim('vm1', 'req1', [GPUS[0]])
        self.client.get_provider_tree = self.placement_down
        self.assertEqual([GPUS[0]], rt.free_instance('vm1'))
        self.assertEqual(1, len(self.client.sent))

    def test_tree_placement_cannot_take_does_not_fail_a_free(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        rt.pci_tracker.claim('vm1', 'req1', [GPUS[0]])

        def refused(root_uuid):
            raise exception.PlacementPciException(
                error='an allocation on a device the new config removes')
        self.client.get_provider_tree = refused
        self.assertEqual([GPUS[0]], rt.free_instance('vm1'))
        self.assertEqual(1, len(self.client.sent))

    def test_free_of_nothing_sends_nothing(self):
        rt = self.tracker()
        rt.update_available_resource(self.context)
        self.assertEqual([], rt.free_instance('vm1'))
        self.assertEqual(1, len(self.client.sent))


class TestDevicesOfInstances(ResourceTrackerTestCase):
    """What the compute manager and its modules read and claim of the
    host's devices, through the tracker rather than its PCI tracker."""

    def claimed(self) -> resource_tracker.ResourceTracker:
        rt = self.tracker()
        rt.update_available_resource(self.context)
        rt.claim('vm1', 'old', [GPUS[0]])
        rt.claim('vm1', 'new', [GPUS[1], GPUS[2]])
        rt.claim('vm2', 'req', [GPUS[3]])
        return rt

    @staticmethod
    def addresses(devices: list[pci_device.TrackedDevice]) -> list[str]:
        return sorted(dev.address for dev in devices)

    def test_held_by_an_instance(self):
        rt = self.claimed()
        self.assertEqual(sorted(GPUS[:3]), self.addresses(rt.held_by('vm1')))
        self.assertEqual([GPUS[3]], self.addresses(rt.held_by('vm2')))
        self.assertEqual([], rt.held_by('vm3'))

    def test_held_for_some_requests_only(self):
        # Both ends of a move on one host: the request ids tell them.
        rt = self.claimed()
        self.assertEqual([GPUS[0]],
                         self.addresses(rt.held_by('vm1', {'old'})))
        self.assertEqual(sorted(GPUS[1:3]),
                         self.addresses(rt.held_by('vm1', ['new'])))
        self.assertEqual([], rt.held_by('vm1', set()))

    def test_a_claim_is_all_or_nothing(self):
        rt = self.claimed()
        error = self.assertRaises(exception.PciDeviceRequestFailed,
                                  rt.claim, 'vm3', 'req',
                                  [GPUS[4], GPUS[3]])
        self.assertIn(GPUS[3], str(error))
        self.assertEqual([], rt.held_by('vm3'))

    def test_tracked_devices_are_every_device_with_its_holder(self):
        rt = self.claimed()
        holders = {dev.address: dev.instance_uuid
                   for dev in rt.tracked_devices()}
        self.assertLessEqual(set(GPUS), set(holders))
        self.assertEqual(['vm1', 'vm1', 'vm1', 'vm2'] + [None] * 4,
                         [holders[address] for address in GPUS])
