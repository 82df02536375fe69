"""FM partition gauges (nova.virt.libvirt.nvlink_metrics) against the fake
Fabric Manager's executables."""

import os

import fixtures
import prometheus_client

from nova import test
from nova.tests.fixtures import fabric_manager as fake_fm
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import nvlink
from nova.virt.libvirt import nvlink_metrics


class PartitionCollectorTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.fm = self.useFixture(
            fake_fm.FabricManagerFixture(fakehost.H200_MODULE_IDS)).fm
        state = self.useFixture(fixtures.TempDir()).path
        self.parts = nvlink.NVLinkPartitions(
            nvlink.fabric_manager.FabricManagerClient(self.fm.fmpm_path),
            self.fm.nvidia_smi_path, {}, os.path.join(state, 'nvlink'))
        self.parts.start('hgx-1', sorted(fakehost.H200_MODULE_IDS))
        self.registry = prometheus_client.CollectorRegistry()
        self.registry.register(nvlink_metrics.PartitionCollector(
            lambda: {'hgx-1': self.parts}))

    def _value(self, name):
        return self.registry.get_sample_value(name, {'host': 'hgx-1'})

    def test_active_and_expected(self):
        pair = sorted(fakehost.H200_MODULE_IDS)[:2]
        self.parts.activate('u1', pair)
        self.assertEqual(1, self._value('nova_nvlink_partitions_active'))
        self.assertEqual(1, self._value('nova_nvlink_partitions_expected'))
        self.assertEqual(1, self._value('nova_nvlink_fabric_manager_up'))
        self.parts.release('u1')
        self.assertEqual(0, self._value('nova_nvlink_partitions_active'))
        self.assertEqual(0, self._value('nova_nvlink_partitions_expected'))

    def test_fabric_manager_down(self):
        self.fm.stop()
        self.assertEqual(0, self._value('nova_nvlink_fabric_manager_up'))
        self.assertIsNone(self._value('nova_nvlink_partitions_active'))
        self.assertEqual(0, self._value('nova_nvlink_partitions_expected'))

    def test_of_computes_skips_hosts_without_fabric_manager(self):
        class Driver:
            def __init__(self, parts):
                self.nvlink = parts

        class Compute:
            def __init__(self, host, parts):
                self.host, self.driver = host, Driver(parts)

        self.assertEqual({'hgx-1': self.parts}, nvlink_metrics.of_computes(
            [Compute('hgx-1', self.parts), Compute('plain', None)]))
