"""NVLink partition lifecycle against the fake Fabric Manager."""

import json
import os

import fixtures

from nova import exception
from nova import test
from nova.tests.fixtures import fabric_manager as fake_fm
from nova.virt.fake import fabric_manager as fake
from nova.virt.libvirt import fabric_manager
from nova.virt.libvirt import nvlink

MAP = fake.H100_WP12736_MAP
BY_MODULE = {module: address for address, module in MAP.items()}
UUID1 = '0b0e8a6c-3f7e-4b8e-9a51-6f1c2d3e4a01'
UUID2 = '0b0e8a6c-3f7e-4b8e-9a51-6f1c2d3e4a02'


def gpus(*modules):
    return [BY_MODULE[m] for m in modules]


class PartitionsTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.fm = self.useFixture(fake_fm.FabricManagerFixture(MAP)).fm
        self.state_dir = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'nvlink')
        self.parts = self.make()

    def make(self, override=None, start=True, quarantine_failures=1):
        parts = nvlink.NVLinkPartitions(
            fabric_manager.FabricManagerClient(self.fm.fmpm_path),
            self.fm.nvidia_smi_path, override or {}, self.state_dir,
            quarantine_failures)
        if start:
            parts.start('cmp1', sorted(MAP))
        return parts

    def test_map_from_nvidia_smi_is_saved_and_survives_vfio(self):
        self.assertEqual(MAP, self.parts.module_map)
        for address in MAP:
            self.fm.bind(address, 'vfio-pci')
        again = self.make()
        self.assertEqual(MAP, again.module_map)
        self.assertEqual({}, again.unmapped)

    def test_map_from_every_nvidia_smi_layout(self):
        # The fake prints the current drivers' layout ("Module Id" in
        # "Platform Info") unless asked for the R525-era one.
        for layout in ('current', 'r525'):
            self.fm.update(nvidia_smi_layout=layout)
            self.state_dir += '-' + layout
            parts = self.make()
            self.assertEqual(MAP, parts.module_map, layout)
            self.assertEqual({}, parts.unmapped, layout)
            self.assertEqual(9, parts.activate(UUID1, gpus(3)))
            parts.release(UUID1)

    def test_override_wins_and_duplicates_are_unplaceable(self):
        parts = self.make(override={BY_MODULE[5]: 7})
        self.assertEqual({BY_MODULE[5], BY_MODULE[7]}, set(parts.unmapped))
        self.assertIn('shares module ID 7', parts.unmapped[BY_MODULE[5]])
        err = self.assertRaises(exception.NVLinkPartitionFailed,
                                parts.activate, UUID1, gpus(5, 7))
        self.assertIn('no known module ID', str(err))
        self.assertEqual(set(), self.fm.active())
        # Singles with a known module stay usable.
        self.assertEqual(8, parts.activate(UUID1, gpus(2)))

    def test_gpu_never_seen_is_unplaceable(self):
        # On vfio-pci before nova ever saw it on nvidia.
        self.fm.bind(BY_MODULE[1], 'vfio-pci')
        self.state_dir += '-fresh'
        parts = self.make()
        self.assertEqual({BY_MODULE[1]: 'has no module ID'}, parts.unmapped)

    def test_activate_picks_partition_by_module_set(self):
        # Modules 1,3 are at 86/87 in this map: partition 3.
        self.assertEqual(3, self.parts.activate(UUID1, gpus(1, 3)))
        self.assertEqual(2, self.parts.activate(UUID2, gpus(5, 6, 7, 8)))
        self.assertEqual({2, 3}, self.fm.active())
        self.assertEqual({3: UUID1, 2: UUID2}, self.parts.holders())

    def test_devices_that_are_no_gpu_are_ignored(self):
        self.assertIsNone(self.parts.activate(UUID1, ['0000:c1:00.0']))
        self.assertEqual([], self.fm.calls())

    def test_gpus_that_are_no_partition(self):
        err = self.assertRaises(exception.NVLinkPartitionFailed,
                                self.parts.activate, UUID1, gpus(1, 2))
        self.assertIn('no Fabric Manager partition has exactly the modules '
                      '[1, 2]', str(err))

    def test_already_active_is_success_only_for_the_holder(self):
        self.parts.activate(UUID1, gpus(1, 3))
        self.assertEqual(3, self.parts.activate(UUID1, gpus(1, 3)))
        # Activated behind nova's back: not ours.
        self.fm.call('activate', 4)
        err = self.assertRaises(exception.NVLinkPartitionFailed,
                                self.parts.activate, UUID2, gpus(2, 4))
        self.assertIn('already active', str(err))
        self.assertIn('no instance', str(err))

    def test_activation_failure_names_partition_and_fm_error(self):
        self.fm.inject_fault('activate', fake.NVLINK_ERROR)
        err = self.assertRaises(exception.NVLinkPartitionFailed,
                                self.parts.activate, UUID1, gpus(5, 7))
        self.assertIn('NVLink partition 5 (modules 5,7)', str(err))
        self.assertIn('fmReturn: -10', str(err))
        self.assertEqual({}, self.parts.holders())

    def test_nvlink_error_quarantines_until_a_reprobe_passes(self):
        self.fm.inject_fault('activate', fake.NVLINK_ERROR, count=2,
                             partition=5)
        self.assertRaises(exception.NVLinkPartitionFailed,
                          self.parts.activate, UUID1, gpus(5, 7))
        [quarantined] = [p for p in self.parts.hardware_partitions()
                         if p.quarantined]
        self.assertEqual(5, quarantined.id)
        self.assertIn('fmReturn: -10', quarantined.quarantined)
        # Kept across a restart; a probe that fails keeps it.
        again = self.make()
        again.repair()
        self.assertEqual([5], list(again.quarantined()))
        # Not probed while an overlapping partition is active.
        self.fm.call('activate', 2)
        again.repair()
        self.assertEqual([5], list(again.quarantined()))
        self.fm.call('deactivate', 2)
        again.repair()
        self.assertEqual({}, again.quarantined())
        self.assertEqual(set(), self.fm.active())
        self.assertEqual(['activate', 5, 0], self.fm.calls()[-2])
        self.assertEqual(['deactivate', 5, 0], self.fm.calls()[-1])

    def test_transient_errors_do_not_quarantine(self):
        for code in (fake.TIMEOUT, fake.GENERIC_ERROR):
            self.fm.inject_fault('activate', code)
            self.assertRaises(exception.NVLinkPartitionFailed,
                              self.parts.activate, UUID1, gpus(5, 7))
        self.fm.stop()
        self.assertRaises(exception.FabricManagerConnectionInvalid,
                          self.parts.activate, UUID1, gpus(5, 7))
        self.assertEqual({}, self.parts.quarantined())

    def test_quarantine_after_configured_failures_in_a_row(self):
        parts = self.make(quarantine_failures=3)
        self.fm.inject_fault('activate', fake.NVLINK_ERROR, count=2,
                             partition=5)
        for _ in range(2):
            self.assertRaises(exception.NVLinkPartitionFailed,
                              parts.activate, UUID1, gpus(5, 7))
        self.assertEqual({}, parts.quarantined())
        # A success starts the count again (kept across a restart).
        self.assertEqual(5, self.make(quarantine_failures=3).activate(
            UUID1, gpus(5, 7)))
        parts = self.make(quarantine_failures=3)
        parts.release(UUID1)
        self.fm.inject_fault('activate', fake.NVLINK_ERROR, count=3,
                             partition=5)
        for _ in range(3):
            self.assertEqual({}, parts.quarantined())
            parts = self.make(quarantine_failures=3)
            self.assertRaises(exception.NVLinkPartitionFailed,
                              parts.activate, UUID1, gpus(5, 7))
        self.assertEqual([5], list(parts.quarantined()))

    def test_quarantine_released_when_its_hardware_is_healthy(self):
        self.fm.inject_fault('activate', fake.NVLINK_ERROR, count=9,
                             partition=5)
        self.fm.inject_fault('activate', fake.NVLINK_ERROR, count=9,
                             partition=3)
        for modules in ((5, 7), (1, 3)):
            self.assertRaises(exception.NVLinkPartitionFailed,
                              self.parts.activate, UUID1, gpus(*modules))
        self.assertEqual([3, 5], sorted(self.parts.quarantined()))
        # The partitions to release come from one observation; a view
        # older than a release releases nothing twice.
        view, _health = self.parts.observe()
        self.assertEqual([5], self.parts.release_quarantined(
            view.to_release({BY_MODULE[7]})))
        self.assertEqual([3], list(self.make().quarantined()))
        self.assertEqual([3], self.parts.release_quarantined(
            view.to_release(None)))
        self.assertEqual([], self.parts.release_quarantined(
            view.to_release(None)))

    def test_observe_fabric_and_health_from_nvidia_smi_and_fm(self):
        self.fm.break_gpu(BY_MODULE[2], 'retired_pages')
        self.fm.fail_nvlinks(gpus=(BY_MODULE[3],),
                             switches=('0000:05:00.0',))
        fabric, report = self.parts.observe()
        self.assertIsNone(fabric.error)
        self.assertEqual(15, len(fabric.fabric.partitions))
        self.assertIn('pending retired pages',
                      report.findings[BY_MODULE[2]].reason)
        self.assertEqual('fabric-manager',
                         report.findings[BY_MODULE[3]].source)
        self.assertEqual(['0000:05:00.0'], list(report.switches_down))
        self.assertTrue(report.switches_checked)
        self.assertEqual(frozenset(MAP), report.checked['fabric-manager'])
        # FM refuses what the failed hardware is in.
        self.assertRaises(exception.NVLinkPartitionFailed,
                          self.parts.activate, UUID1, gpus(5, 7))
        self.assertEqual(14, self.parts.activate(UUID1, gpus(8)))
        self.fm.repair_nvlinks()
        self.fm.stop()
        fabric, report = self.parts.observe()
        self.assertIsNone(fabric.fabric)
        self.assertIn('cannot connect to Fabric Manager', fabric.error)
        self.assertFalse(report.switches_checked)
        self.assertNotIn('fabric-manager', report.checked)
        self.assertIn(BY_MODULE[2], report.findings)

    def test_release_deactivates_and_forgets(self):
        self.parts.activate(UUID1, gpus(1, 3))
        self.parts.release(UUID1)
        self.assertEqual(set(), self.fm.active())
        self.assertEqual({}, self.parts.holders())
        self.parts.release(UUID1)
        self.assertEqual([['activate', 3, 0], ['deactivate', 3, 0]],
                         self.fm.calls())

    def test_records_survive_a_restart(self):
        self.parts.activate(UUID1, gpus(1, 3))
        again = self.make()
        self.assertEqual({3: UUID1}, again.holders())
        with open(os.path.join(self.state_dir, 'cmp1-partitions.json')) as f:
            self.assertEqual({'held': {UUID1: 3}, 'orphans': [],
                              'quarantined': {}, 'failures': {}},
                             json.load(f))

    def test_repair_at_start(self):
        self.parts.activate(UUID1, gpus(1, 3))
        self.parts.activate(UUID2, gpus(2, 4))
        self.fm.call('activate', 5)          # behind nova's back
        self.fm.call('deactivate', 3)        # lost behind nova's back
        again = self.make()
        # UUID2's guest is gone (compute died while deleting it): its
        # partition is nova's orphan, deactivated; the foreign one stays.
        again.forget_missing({UUID1})
        self.assertEqual({}, again.repair())
        self.assertEqual({3, 5}, self.fm.active())
        self.assertEqual({3: UUID1}, again.holders())
        foreign = [p for p in again.hardware_partitions() if p.foreign]
        self.assertEqual([5], [p.id for p in foreign])
        self.assertEqual(tuple(sorted(gpus(5, 7))), foreign[0].addresses)

    def test_periodic_repair_keeps_records(self):
        self.parts.activate(UUID1, gpus(1, 3))
        self.fm.call('deactivate', 3)
        self.parts.repair()
        self.assertEqual({3}, self.fm.active())
        self.assertEqual({3: UUID1}, self.parts.holders())

    def test_uncertain_activation_is_checked_by_repair(self):
        # FM activated the partition but the answer never came back.
        self.fm.inject_fault('activate', fake.TIMEOUT)
        self.assertRaises(exception.NVLinkPartitionFailed,
                          self.parts.activate, UUID1, gpus(1, 3))
        self.fm.call('activate', 3)
        self.parts.repair()
        self.assertEqual(set(), self.fm.active())

    def test_failed_release_is_retried_by_repair(self):
        self.parts.activate(UUID1, gpus(1, 3))
        self.fm.inject_fault('deactivate', fake.GENERIC_ERROR)
        self.parts.release(UUID1)
        self.assertEqual({3}, self.fm.active())
        self.parts.repair()
        self.assertEqual(set(), self.fm.active())

    def test_repair_replays_after_fm_restart(self):
        self.parts.activate(UUID1, gpus(1, 3))
        self.parts.activate(UUID2, gpus(5))
        self.fm.stop()
        self.fm.start(restart=True)
        self.parts.repair()
        self.assertEqual({3, 11}, self.fm.active())
        self.assertEqual('ready', self.fm.read()['daemon'])
        self.assertEqual(['set', [3, 11], 0], self.fm.calls()[-1])

    def test_repair_after_plain_fm_restart_reactivates(self):
        self.parts.activate(UUID1, gpus(1, 3))
        self.fm.stop()
        self.fm.start()
        self.assertEqual(set(), self.fm.active())
        self.parts.repair()
        self.assertEqual({3}, self.fm.active())

    def test_repair_reports_partitions_it_cannot_reactivate(self):
        self.parts.activate(UUID1, gpus(1, 3))
        self.fm.call('deactivate', 3)
        # Someone else took GPU 1 meanwhile.
        self.fm.call('activate', 7)
        failed = self.parts.repair()
        self.assertEqual([UUID1], list(failed))
        self.assertIn('NVLink partition 3 (modules 1,3)', failed[UUID1])
        self.assertIn('runs without it', failed[UUID1])
        self.assertIn('fmReturn: -7', failed[UUID1])

    def test_repair_with_fm_down_changes_nothing(self):
        self.parts.activate(UUID1, gpus(1, 3))
        self.fm.stop()
        self.parts.repair()
        self.assertEqual({3: UUID1}, self.parts.holders())
        self.assertEqual({3}, self.fm.active())
