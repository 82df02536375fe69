"""Tests for groups from the hardware's partitions: the tree Fabric
Manager's partitions form, the check of declared groups against them, the
withheld devices, and the one answer a host's offer comes from."""

from unittest import mock

from nova import exception
from nova import test
from nova.pci import device as pci_device
from nova.pci import groups
from nova.pci import partitions
from nova.tests.unit.pci.test_groups import gpu
from nova.tests.unit.pci.test_groups import group
from nova.tests.unit.pci.test_groups import H200_CONFIG


# FM's HGX H100/H200 partitions (ID: module IDs); GPU n has module n.
FM_TABLE = {0: range(1, 9), 1: (1, 2, 3, 4), 2: (5, 6, 7, 8), 3: (1, 3),
            4: (2, 4), 5: (5, 7), 6: (6, 8)}
FM_TABLE.update({6 + n: (n,) for n in range(1, 9)})


def fm_partitions(unknown=()):
    return [partitions.HardwarePartition(
        pid, frozenset(modules),
        None if set(modules) & set(unknown) else
        tuple(sorted(gpu(m) for m in modules)))
        for pid, modules in FM_TABLE.items()]


def shape(tree):
    """A tree's groups by their devices and their members' devices."""
    return {(frozenset(g.addresses),
             frozenset(frozenset(m.addresses) for m in g.members))
            for g in tree.groups()}


def modules_of(gpus):
    """The module map of ``gpus``: GPU n has module n."""
    return {gpu(n): n for n in gpus}


class PartitionTreeTest(test.TestCase):

    def shape(self, tree):
        return shape(tree)

    def test_containment_gives_the_declared_tree(self):
        tree, warnings = partitions.tree_from_partitions(
            fm_partitions(), 'nvlink')
        self.assertEqual([], warnings)
        self.assertEqual(self.shape(groups.GroupTree.from_config(
            H200_CONFIG)), self.shape(tree))
        self.assertEqual(['partition-0'], [r.name for r in tree.roots])
        self.assertEqual(['partition-3', 'partition-4'],
                         [m.name for m in tree.get('partition-1').members])

    def test_unknown_module_drops_its_partitions_upwards(self):
        tree, _ = partitions.tree_from_partitions(
            fm_partitions(unknown={1}), 'nvlink')
        self.assertEqual(['partition-2', 'partition-4'],
                         sorted(r.name for r in tree.roots))
        self.assertEqual(4, len(tree.get('partition-2').addresses))

    def test_crossing_partition_is_left_out(self):
        parts = fm_partitions() + [partitions.HardwarePartition(
            20, frozenset({3, 5}), (gpu(3), gpu(5)))]
        tree, warnings = partitions.tree_from_partitions(parts, 'nvlink')
        self.assertNotIn('partition-20', {g.name for g in tree.groups()})
        self.assertEqual(1, len(warnings))
        self.assertIn('partition 20 (modules 3,5', warnings[0])

    def test_declared_groups_match_fm(self):
        tree = groups.GroupTree.from_config(H200_CONFIG)
        modules = {gpu(n): n for n in range(1, 9)}
        checked, warnings = partitions.check_declared_against_partitions(
            tree, fm_partitions(), modules, {})
        self.assertIs(tree, checked)
        self.assertEqual([], warnings)

    def test_declared_group_that_is_no_partition_is_refused(self):
        tree = groups.GroupTree.from_config([
            group('odd', addresses=[gpu(1), gpu(2)])])
        modules = {gpu(n): n for n in range(1, 9)}
        err = self.assertRaises(
            exception.PciGroupConfigInvalid,
            partitions.check_declared_against_partitions, tree,
            fm_partitions(), modules, {})
        self.assertIn('group odd (%s, %s, module IDs 1,2)' % (gpu(1),
                                                              gpu(2)),
                      str(err))
        self.assertIn('3 (modules 1,3: %s, %s)' % (gpu(1), gpu(3)),
                      str(err))

    def test_group_with_unknown_module_is_not_offered(self):
        tree = groups.GroupTree.from_config(H200_CONFIG)
        modules = {gpu(n): n for n in range(2, 9)}
        checked, warnings = partitions.check_declared_against_partitions(
            tree, fm_partitions(unknown={1}), modules,
            {gpu(1): 'has no module ID'})
        self.assertEqual({'pair-a2', 'quad-b', 'pair-b1', 'pair-b2'},
                         {g.name for g in checked.groups()})
        self.assertEqual(3, len(warnings))
        self.assertIn('%s has no module ID' % gpu(1), warnings[0])

    def test_devices_of_foreign_and_quarantined_partitions_withheld(self):
        parts = [partitions.HardwarePartition(
            p.id, p.module_ids, p.addresses, foreign=p.id == 11,
            quarantined='NVLink training failed' if p.id == 3 else None)
            for p in fm_partitions()]
        modules = {gpu(n): n for n in range(1, 9)}
        withheld = partitions.withheld_devices(parts, modules, {})
        self.assertEqual({gpu(1), gpu(3), gpu(5)}, set(withheld.devices))
        self.assertIn('partition 11 (modules 5', withheld.reason(gpu(5)))
        self.assertIn('not activated by nova', withheld.reason(gpu(5)))
        self.assertIn('quarantined Fabric Manager partition 3',
                      withheld.reason(gpu(1)))
        self.assertIn('NVLink training failed', withheld.reason(gpu(3)))
        self.assertFalse(withheld.offers([gpu(1)]))
        self.assertFalse(withheld.offers([gpu(1), gpu(2), gpu(3), gpu(4)]))
        self.assertTrue(withheld.offers([gpu(2), gpu(4)]))
        self.assertEqual({}, withheld.alone)
        # The board names the partition that keeps each device out.
        self.assertEqual({
            gpu(5): pci_device.PartitionHold(11, 'foreign'),
            gpu(1): pci_device.PartitionHold(3, 'quarantined'),
            gpu(3): pci_device.PartitionHold(3, 'quarantined')},
            dict(withheld.holds))
        self.assertIsNone(withheld.hold(gpu(2)))
        none = partitions.withheld_devices(fm_partitions(), modules, {})
        self.assertEqual(partitions.Withheld(), none)

    def test_unmapped_device_withheld_with_its_reason(self):
        modules = {gpu(n): n for n in range(2, 9)}
        withheld = partitions.withheld_devices(
            fm_partitions(unknown={1}), modules,
            {gpu(1): 'has no module ID'})
        self.assertEqual({gpu(1): 'cannot be activated: it has no module '
                          'ID'}, dict(withheld.devices))
        self.assertTrue(withheld.offers([gpu(2)]))

    def test_device_without_own_partition_is_withheld_alone(self):
        parts = [p for p in fm_partitions() if p.id != 7]   # module 1
        modules = {gpu(n): n for n in range(1, 9)}
        withheld = partitions.withheld_devices(parts, modules, {})
        self.assertEqual({}, withheld.devices)
        self.assertEqual([gpu(1)], list(withheld.alone))
        self.assertFalse(withheld.offers([gpu(1)]))
        self.assertTrue(withheld.offers([gpu(1), gpu(3)]))
        self.assertTrue(withheld.reason(gpu(1)).startswith(
            partitions.ALONE_PREFIX))
        self.assertIn('no Fabric Manager partition of its own (module 1)',
                      withheld.reason(gpu(1)))

    def test_groups_off_partitions_are_warned_about(self):
        tree = groups.GroupTree.from_config([
            group('good', addresses=[gpu(1), gpu(3)]),
            group('odd', addresses=[gpu(5), gpu(6)]),
            group('unknown', addresses=[gpu(2), gpu(4)]),
            group('switch', type='pcie-switch', addresses=[gpu(7), gpu(8)]),
        ])
        modules = {gpu(n): n for n in (1, 3, 5, 6, 7, 8)}
        warnings = partitions.groups_off_partitions(
            tree, fm_partitions(unknown={2, 4}), modules, 'libvirt_hook')
        # The pair is a partition, GPU 2/4 have no module ID, and a
        # pcie-switch group is no NVLink claim.
        self.assertEqual(1, len(warnings), warnings)
        for part in ('device group odd (%s, %s, module IDs 5,6)' % (
                     gpu(5), gpu(6)), 'nvlink_partitions = libvirt_hook',
                     '5 (modules 5,7: %s, %s); 6 (modules 6,8' % (
                         gpu(5), gpu(7)),
                     '0 (modules 1,2,3,4,5,6,7,8', 'fmpm -l'):
            self.assertIn(part, warnings[0])
        self.assertLess(warnings[0].index('3 (modules 1,3'),
                        warnings[0].index('1 (modules 1,2,3,4'))

    def test_trees_are_built_without_parsing_config_values(self):
        # Partition trees and pruned trees go straight to the tree from
        # declarations, never through the [pci]device_group string form.
        declared = groups.GroupTree.from_config(H200_CONFIG)
        with mock.patch.object(groups.GroupTree, 'from_config',
                               side_effect=AssertionError('parsed')):
            tree, _ = partitions.tree_from_partitions(
                fm_partitions(), 'nvlink')
            checked, _ = partitions.check_declared_against_partitions(
                declared, fm_partitions(unknown={1}), modules_of(range(2, 9)),
                {gpu(1): 'has no module ID'})
        self.assertEqual(shape(declared), shape(tree))
        self.assertEqual({'pair-a2', 'quad-b', 'pair-b1', 'pair-b2'},
                         {g.name for g in checked.groups()})
        # The pruned tree is a new one: the declared tree is unchanged.
        self.assertEqual(7, len(declared.groups()))


class EffectiveOfferTest(test.TestCase):
    """The one answer to "what does this host offer"."""

    def setUp(self):
        super().setUp()
        self.declared = groups.GroupTree.from_config(H200_CONFIG)

    def fabric(self, parts=None, unmapped=None, gpus=range(1, 9)):
        return partitions.FabricPartitions(
            tuple(fm_partitions() if parts is None else parts),
            modules_of(gpus), unmapped or {})

    def test_without_fabric_manager_the_declared_tree_is_offered(self):
        offer = partitions.effective_offer(self.declared, 'config', None)
        self.assertIs(self.declared, offer.tree)
        self.assertEqual(partitions.Withheld(), offer.withheld)
        self.assertEqual([], offer.warnings)

    def test_without_fabric_manager_known_partitions_check_the_groups(self):
        declared = groups.GroupTree.from_config([
            group('odd', addresses=[gpu(5), gpu(6)])])
        tree, withheld, warnings = partitions.effective_offer(
            declared, 'config', None, known=self.fabric(),
            mode='libvirt_hook')
        self.assertIs(declared, tree)
        self.assertEqual(partitions.Withheld(), withheld)
        self.assertEqual(1, len(warnings), warnings)
        self.assertIn('device group odd', warnings[0])
        self.assertIn('nvlink_partitions = libvirt_hook', warnings[0])

    def test_declared_groups_are_checked_against_fabric_manager(self):
        parts = [p for p in fm_partitions() if p.id != 7]   # module 1
        offer = partitions.effective_offer(
            self.declared, 'config', self.fabric(parts),
            known=self.fabric(), mode='ignored with FM partitions')
        self.assertIs(self.declared, offer.tree)
        self.assertEqual([gpu(1)], list(offer.withheld.alone))
        self.assertEqual([], offer.warnings)
        bad = groups.GroupTree.from_config([
            group('odd', addresses=[gpu(1), gpu(2)])])
        self.assertRaises(exception.PciGroupConfigInvalid,
                          partitions.effective_offer, bad, 'config',
                          self.fabric())

    def test_fabric_manager_source_offers_the_partitions(self):
        offer = partitions.effective_offer(
            groups.GroupTree.from_config([]), 'fabric_manager',
            self.fabric(fm_partitions(unknown={1}),
                        {gpu(1): 'has no module ID'}, range(2, 9)))
        self.assertEqual(['partition-2', 'partition-4'],
                         sorted(r.name for r in offer.tree.roots))
        self.assertEqual({gpu(1): 'cannot be activated: it has no module '
                          'ID'}, dict(offer.withheld.devices))
        self.assertEqual([], offer.warnings)

    def test_unmapped_group_is_warned_about_and_left_out(self):
        offer = partitions.effective_offer(
            self.declared, 'config',
            self.fabric(fm_partitions(unknown={1}),
                        {gpu(1): 'has no module ID'}, range(2, 9)))
        self.assertEqual({'pair-a2', 'quad-b', 'pair-b1', 'pair-b2'},
                         {g.name for g in offer.tree.groups()})
        self.assertEqual(3, len(offer.warnings))
        self.assertIn(gpu(1), offer.withheld.devices)
