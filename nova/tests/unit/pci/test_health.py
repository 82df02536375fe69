"""Device health rules and what broken hardware takes out of the offer."""

import dataclasses

from nova import exception
from nova.pci import device as pci_device
from nova.pci import health
from nova.pci import partitions
from nova import test
from nova.virt.fake import fabric_manager as fake
from nova.virt.libvirt import gpu_modules

MODULES = fake.H100_WP12736_MAP
BY_MODULE = {m: a for a, m in MODULES.items()}
TREE, _ = partitions.tree_from_partitions(
    gpu_modules.hgx_partitions(MODULES), partitions.NVLINK)


def device(address=BY_MODULE[1], **fields) -> pci_device.TrackedDevice:
    return pci_device.TrackedDevice(
        id=1, compute_node_id=1, address=address, vendor_id='10de',
        product_id='2335', dev_type=pci_device.DEV_TYPE_PCI, **fields)


def smi(reason='nvidia-smi: GPU is lost'):
    return health.Finding(reason, health.SOURCE_NVIDIA_SMI)


class TestDecide(test.TestCase):

    def test_finding_makes_unhealthy_once(self):
        report = health.HealthReport(findings={device().address: smi()})
        change = health.decide(device(instance_uuid='vm1'), report)
        self.assertEqual(health.HealthChange(
            device().address, pci_device.UNHEALTHY, smi().reason,
            health.SOURCE_NVIDIA_SMI, 'vm1'), change)
        broken = device(health=pci_device.UNHEALTHY,
                        health_reason=smi().reason,
                        health_source=health.SOURCE_NVIDIA_SMI)
        self.assertIsNone(health.decide(broken, report))

    def test_healthy_again_only_when_its_source_checked_it(self):
        broken = device(health=pci_device.UNHEALTHY,
                        health_reason=smi().reason,
                        health_source=health.SOURCE_NVIDIA_SMI)
        # Fabric Manager sees nothing wrong, but nvidia-smi found the
        # fault and cannot see the GPU now (vfio-pci): it stays.
        fm_only = health.HealthReport(checked={
            health.SOURCE_FABRIC_MANAGER: frozenset({broken.address})})
        self.assertIsNone(health.decide(broken, fm_only))
        smi_ok = health.HealthReport(checked={
            health.SOURCE_NVIDIA_SMI: frozenset({broken.address})})
        change = health.decide(broken, smi_ok)
        self.assertTrue(change.healthy)
        self.assertEqual(health.SOURCE_NVIDIA_SMI, change.source)

    def test_operator_mark_wins_over_observations(self):
        marked = device(health=pci_device.UNHEALTHY, health_reason='RMA',
                        health_source=health.SOURCE_OPERATOR)
        checked_ok = health.HealthReport(checked={
            source: frozenset({marked.address})
            for source in health.OBSERVED_SOURCES})
        self.assertIsNone(health.decide(marked, checked_ok))
        other = health.HealthReport(findings={marked.address: smi()})
        self.assertIsNone(health.decide(marked, other))


class TestUnhealthyAfter(test.TestCase):

    def test_what_applying_the_report_leaves_unhealthy(self):
        healing = device(BY_MODULE[1], health=pci_device.UNHEALTHY,
                         health_reason=smi().reason,
                         health_source=health.SOURCE_NVIDIA_SMI)
        marked = device(BY_MODULE[2], health=pci_device.UNHEALTHY,
                        health_reason='RMA',
                        health_source=health.SOURCE_OPERATOR)
        breaking = device(BY_MODULE[3])
        report = health.HealthReport(
            findings={BY_MODULE[3]: smi('nvidia-smi: pending retired '
                                        'pages'),
                      BY_MODULE[4]: smi()},
            checked={health.SOURCE_NVIDIA_SMI: frozenset(MODULES)})
        # Each as decide() leaves it; a new device broken from the start.
        self.assertEqual({
            BY_MODULE[2]: 'RMA',
            BY_MODULE[3]: 'nvidia-smi: pending retired pages',
            BY_MODULE[4]: smi().reason},
            health.unhealthy_after([healing, marked, breaking],
                                   [BY_MODULE[4], BY_MODULE[5]], report))


class TestOperatorChange(test.TestCase):

    def test_unhealthy_needs_a_reason(self):
        for reason in (None, '', '   '):
            err = self.assertRaises(exception.Invalid,
                                    health.operator_change, device(), True,
                                    reason)
            self.assertIn('needs a reason', str(err))
        change = health.operator_change(device(), True, ' ECC storm ')
        self.assertEqual((pci_device.UNHEALTHY, 'ECC storm',
                          health.SOURCE_OPERATOR),
                         (change.health, change.reason, change.source))

    def test_healthy_clears_and_refuses_a_reason(self):
        self.assertIsNone(health.operator_change(device(), False, None))
        err = self.assertRaises(exception.Invalid, health.operator_change,
                                device(), False, 'fixed')
        self.assertIn('only allowed with --unhealthy', str(err))
        broken = device(health=pci_device.UNHEALTHY, health_reason='x',
                        health_source=health.SOURCE_FABRIC_MANAGER)
        change = health.operator_change(broken, False, None)
        self.assertTrue(change.healthy)
        self.assertEqual(health.SOURCE_OPERATOR, change.source)

    def test_same_mark_twice_changes_nothing(self):
        marked = device(health=pci_device.UNHEALTHY, health_reason='RMA',
                        health_source=health.SOURCE_OPERATOR)
        self.assertIsNone(health.operator_change(marked, True, 'RMA'))


class TestWithhold(test.TestCase):

    def test_unhealthy_gpu_takes_its_groups_only(self):
        broken = BY_MODULE[1]
        result = health.withhold(partitions.Withheld(), TREE,
                                 {broken: 'GPU is lost'}, {})
        self.assertEqual('unhealthy: GPU is lost', result.devices[broken])
        # Pair {1,3}, quartet {1..4} and the board are out ...
        out = {frozenset(TREE.get(name).addresses) for name in result.groups}
        self.assertEqual({frozenset(BY_MODULE[m] for m in ms) for ms in (
            (1, 3), (1, 2, 3, 4), range(1, 9))}, out)
        # ... pair {2,4}, the other quartet and its pairs stay.
        self.assertTrue(result.offers([BY_MODULE[2], BY_MODULE[4]]))
        self.assertTrue(result.offers([BY_MODULE[m] for m in (5, 6, 7, 8)]))
        self.assertTrue(result.offers([BY_MODULE[3]]))
        self.assertFalse(result.offers([BY_MODULE[1], BY_MODULE[3]]))
        self.assertFalse(result.offers([broken]))
        self.assertEqual({}, dict(result.in_groups))

    def test_nvswitch_down_leaves_single_gpus(self):
        down = {'0000:05:00.0': health.Finding(
            'NVLink failures on ports 0,1', health.SOURCE_FABRIC_MANAGER)}
        # Module 8 has no partition of its own here.
        offered = partitions.Withheld(alone={BY_MODULE[8]: 'no partition'})
        result = health.withhold(offered, TREE, {}, down)
        self.assertEqual({g.name for g in TREE.groups()}, set(result.groups))
        for module in range(1, 8):
            address = BY_MODULE[module]
            self.assertTrue(result.offers([address]))
            self.assertIn('NVSwitch 0000:05:00.0 is down',
                          result.reason(address))
            self.assertTrue(result.reason(address).startswith(
                partitions.IN_GROUPS_PREFIX))
        self.assertFalse(result.offers([BY_MODULE[1], BY_MODULE[3]]))
        # Neither alone nor in a group: not offered at all.
        self.assertIn(BY_MODULE[8], result.devices)
        self.assertNotIn(BY_MODULE[8], result.alone)

    def test_nothing_broken_changes_nothing_offered(self):
        hold = pci_device.PartitionHold(4, pci_device.PARTITION_FOREIGN)
        offered = partitions.Withheld(devices={BY_MODULE[2]: 'foreign'},
                                      holds={BY_MODULE[2]: hold})
        result = health.withhold(offered, TREE, {}, {})
        self.assertEqual(dict(offered.devices), dict(result.devices))
        self.assertEqual(hold, result.hold(BY_MODULE[2]))
        self.assertEqual({}, dict(result.groups))
        self.assertEqual(result, health.withhold(offered, TREE, {}, {}))


class TestReport(test.TestCase):

    def test_from_host_devices(self):
        devices = [pci_device.HostDevice(BY_MODULE[1], '10de', '2335'),
                   pci_device.HostDevice(BY_MODULE[2], '10de', '2335',
                                         health_problem='PCIe link down')]
        report = health.from_host_devices(devices)
        self.assertEqual({BY_MODULE[2]: health.Finding(
            'PCIe link down', health.SOURCE_HYPERVISOR)},
            dict(report.findings))
        self.assertEqual(frozenset(BY_MODULE[m] for m in (1, 2)),
                         report.checked[health.SOURCE_HYPERVISOR])

    def test_merge_keeps_every_source(self):
        first = health.HealthReport(
            findings={'a': smi()},
            checked={health.SOURCE_NVIDIA_SMI: frozenset({'a'})})
        second = health.HealthReport(
            findings={'a': health.Finding('x', 'fabric-manager'),
                      'b': health.Finding('y', 'fabric-manager')},
            checked={health.SOURCE_FABRIC_MANAGER: frozenset({'a', 'b'})},
            switches_checked=True)
        merged = first.merge(second)
        self.assertEqual(smi(), merged.findings['a'])
        self.assertEqual('y', merged.findings['b'].reason)
        self.assertEqual({health.SOURCE_NVIDIA_SMI, 'fabric-manager'},
                         set(merged.checked))
        self.assertTrue(merged.switches_checked)
        self.assertTrue(dataclasses.is_dataclass(merged))
