"""The host XML nova.virt.fake.host generates (read by libvirt in
nova.tests.functional.virt.fake.test_host)."""

import xml.etree.ElementTree as ET

from nova import test
from nova import exception
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import config

GPUS = ['0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0',
        '0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0']


class NodeXmlTest(test.TestCase):
    """Structure of the generated XML, without libvirt."""

    def _devices(self, xml):
        return [config.parse_pci_nodedev(ET.tostring(d, encoding='unicode'))
                for d in ET.fromstring(xml).findall('device')]

    def test_default_host(self):
        root = ET.fromstring(fakehost.hgx_h200_node_xml())
        cpu = root.find('cpu')
        self.assertEqual('2', cpu.findtext('nodes'))
        self.assertEqual('224', cpu.findtext('active'))
        self.assertEqual(str(2097152 * 1024), root.findtext('memory'))

    def test_gpus(self):
        devs = self._devices(fakehost.hgx_h200_node_xml(extra_devices=False))
        self.assertEqual(GPUS, [d.address for d in devs])
        for index, dev in enumerate(devs):
            self.assertEqual(('10de', '2335', 'type-PCI', 'vfio-pci',
                              '030200'),
                             (dev.vendor_id, dev.product_id,
                              dev.dev_type, dev.driver, dev.pci_class))
            self.assertEqual(0 if index < 4 else 1, dev.numa_node)
        self.assertEqual(8, len({d.iommu_group for d in devs}))

    def test_gpu_topology_elements(self):
        root = ET.fromstring(fakehost.hgx_h200_node_xml())
        gpu = root.find('device')
        self.assertEqual(
            '/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/'
            '0000:17:00.0/0000:18:00.0', gpu.findtext('path'))
        self.assertEqual('pci_0000_17_00_0', gpu.findtext('parent'))
        self.assertEqual('24', gpu.findtext("capability/bus"))
        links = gpu.findall('capability/pci-express/link')
        self.assertEqual(['cap', 'sta'], [lk.get('validity') for lk in links])
        self.assertEqual('GH100 [H200 SXM 141GB]',
                         gpu.findtext('capability/product'))

    def test_extra_devices(self):
        devs = self._devices(fakehost.hgx_h200_node_xml())
        extras = {d.address: d for d in devs
                  if d.address not in GPUS}
        self.assertEqual({'0000:4b:00.0', '0000:c1:00.0'}, set(extras))
        self.assertEqual(('15b3', '1021', 'type-PF'), (
            extras['0000:4b:00.0'].vendor_id,
            extras['0000:4b:00.0'].product_id,
            extras['0000:4b:00.0'].dev_type))
        self.assertEqual(('144d', 'a80a'), (
            extras['0000:c1:00.0'].vendor_id,
            extras['0000:c1:00.0'].product_id))

    def test_fewer_gpus(self):
        devs = self._devices(fakehost.hgx_h200_node_xml(
            num_gpus=3, extra_devices=False))
        self.assertEqual(GPUS[:3], [d.address for d in devs])

    def test_bad_gpu_count(self):
        for count in (9, -1, '8'):
            exc = self.assertRaises(exception.Invalid,
                                    fakehost.hgx_h200_node_xml,
                                    num_gpus=count)
            self.assertIn(repr(count), str(exc))

    def test_custom_devices(self):
        devices = fakehost.hgx_h200_devices(extra_devices=False)
        del devices[2]
        devices.append(fakehost.NodeDevice(
            address='0000:4b:00.3', vendor_id='15b3', product_id='101e',
            dev_type='type-VF', parent_addr='0000:4b:00.0'))
        root = ET.fromstring(fakehost.node_xml_from_devices(
            devices, memory_mb=1024, numa_nodes=1, cores_per_socket=4,
            threads_per_core=1))
        self.assertEqual('4', root.findtext('cpu/active'))
        self.assertEqual('1048576', root.findtext('memory'))
        devs = self._devices(ET.tostring(root, encoding='unicode'))
        self.assertNotIn(GPUS[2], [d.address for d in devs])
        self.assertEqual(('type-VF', '0000:4b:00.0'),
                         (devs[-1].dev_type, devs[-1].parent_addr))
        vf = root.findall('device')[-1]
        self.assertEqual('pci_0000_4b_00_0', vf.findtext('parent'))

    def test_root_bus_device(self):
        root = ET.fromstring(fakehost.node_xml_from_devices([
            fakehost.NodeDevice(address='0000:00:1f.2', vendor_id='8086',
                                product_id='1bf2')]))
        dev = root.find('device')
        self.assertEqual('/sys/devices/pci0000:00/0000:00:1f.2',
                         dev.findtext('path'))
        self.assertEqual('computer', dev.findtext('parent'))

    def test_duplicate_address(self):
        devices = fakehost.hgx_h200_devices(num_gpus=1, extra_devices=False)
        exc = self.assertRaises(exception.Invalid,
                                fakehost.node_xml_from_devices,
                                devices * 2)
        self.assertIn('0000:18:00.0', str(exc))

    def test_bad_topology(self):
        exc = self.assertRaises(exception.Invalid,
                                fakehost.node_xml_from_devices, [],
                                numa_nodes=0)
        self.assertIn('numa_nodes 0', str(exc))
