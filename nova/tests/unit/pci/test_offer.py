"""Tests for a host's offer from one observation: the partitions, the
NVSwitches and device health in one pure step, with both reasons (the
device row's and Placement's), and the quarantines an observation lifts."""

import dataclasses
import types

from nova import test
from nova.pci import groups
from nova.pci import health
from nova.pci import offer as pci_offer
from nova.pci import partitions
from nova.tests.unit.pci.test_groups import gpu
from nova.tests.unit.pci.test_groups import H200_CONFIG
from nova.tests.unit.pci.test_partitions import fm_partitions
from nova.tests.unit.pci.test_partitions import modules_of

SWITCH = '0000:05:00.0'
DOWN = health.Finding('NVLink failures on ports 3', 'fabric-manager')


def fabric(quarantined=(), error=None):
    """Fabric Manager's view: the HGX table, ``quarantined`` IDs kept out
    of use; only the ``error`` when it could not be read."""
    if error is not None:
        return partitions.FabricView(error=error)
    return partitions.FabricView(fabric=partitions.FabricPartitions(
        tuple(dataclasses.replace(p, quarantined='link training failed')
              if p.id in quarantined else p for p in fm_partitions()),
        modules_of(range(1, 9))))


def observed(view, switches_down=None):
    """An observation (fabric and health only, as ``offer`` reads it);
    ``switches_down`` None: no source checked the NVSwitches."""
    return types.SimpleNamespace(fabric=view, health=health.HealthReport(
        switches_down=switches_down or {},
        switches_checked=switches_down is not None))


class OfferTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.declared = pci_offer.Declared(
            groups.GroupTree.from_config(H200_CONFIG), 'fabric_manager',
            'fabric_manager')
        self.first = pci_offer.initial(self.declared)

    def test_rows_leave_health_out_placement_counts_it(self):
        offer = pci_offer.offer(self.declared, observed(fabric(), {}),
                                {gpu(1): 'GPU is lost'}, self.first)
        self.assertIsNone(offer.rows.reason(gpu(1)))
        self.assertEqual('unhealthy: GPU is lost',
                         offer.placement.reason(gpu(1)))
        self.assertIn('partition-3', offer.placement.groups)
        self.assertEqual({}, dict(offer.rows.groups))

    def test_switch_down_is_in_both_reasons_and_kept_until_checked(self):
        down = pci_offer.offer(self.declared,
                               observed(fabric(), {SWITCH: DOWN}), {},
                               self.first)
        self.assertIn('NVSwitch %s is down' % SWITCH,
                      down.rows.reason(gpu(1)))
        self.assertEqual(down.rows, down.placement)
        # Not checked this time: still down.
        unknown = pci_offer.offer(self.declared, observed(fabric()), {},
                                  down)
        self.assertEqual({SWITCH: DOWN}, dict(unknown.switches_down))
        self.assertEqual(down.placement, unknown.placement)
        # Checked and up.
        up = pci_offer.offer(self.declared, observed(fabric(), {}), {},
                             unknown)
        self.assertEqual({}, dict(up.switches_down))
        self.assertIsNone(up.placement.reason(gpu(1)))

    def test_fabric_manager_error_keeps_the_previous_groups(self):
        before = pci_offer.offer(self.declared,
                                 observed(fabric(quarantined={3}), {}), {},
                                 self.first)
        self.assertIn(gpu(1), before.partitions.devices)
        during = pci_offer.offer(
            self.declared, observed(fabric(error='connection refused')),
            {gpu(5): 'GPU is lost'}, before)
        self.assertEqual('connection refused', during.fabric_error)
        self.assertEqual(before.shape(), during.shape())
        self.assertEqual(before.partitions, during.partitions)
        self.assertEqual(before.warnings, during.warnings)
        # Health still counts while Fabric Manager is away.
        self.assertIn(gpu(5), during.placement.devices)
        self.assertIsNone(before.placement.reason(gpu(5)))

    def test_before_any_observation_the_declared_groups(self):
        offer = pci_offer.offer(
            self.declared, observed(fabric(error='not running')), {},
            self.first)
        self.assertIs(self.declared.tree, offer.tree)
        self.assertEqual((), offer.warnings)
        self.assertEqual([], [a for a in map(gpu, range(1, 9))
                              if offer.placement.reason(a)])
        self.assertEqual({}, dict(offer.placement.groups))


class ReleaseTest(test.TestCase):

    def test_partitions_holding_a_healed_device(self):
        view = fabric(quarantined={3, 5})
        # Partition 3 is modules 1 and 3, partition 5 modules 5 and 7.
        self.assertEqual([3], [p.id for p in view.to_release({gpu(3)})])
        self.assertEqual([], [p.id for p in view.to_release({gpu(2)})])
        self.assertEqual([3, 5], [p.id for p in view.to_release(None)])
        self.assertEqual((), fabric(error='down').to_release(None))

    def test_released_view_offers_them_again(self):
        view = fabric(quarantined={3, 5}).released([5])
        self.assertEqual([3], [p.id for p in view.fabric.partitions
                               if p.quarantined])
        offer = pci_offer.offer(
            pci_offer.Declared(groups.GroupTree.from_config(H200_CONFIG),
                               'config', 'fabric_manager'),
            observed(view, {}), {}, pci_offer.initial(pci_offer.Declared(
                groups.GroupTree.from_config(H200_CONFIG), 'config',
                'fabric_manager')))
        self.assertIn('quarantined', offer.rows.reason(gpu(1)))
        self.assertIsNone(offer.rows.reason(gpu(5)))
