"""The real libvirt test driver reads the host files nova.virt.fake.host
writes."""

import os

import fixtures
import libvirt

from nova import exception
from nova import test
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import config


class TestDriverAcceptsNodeXmlTest(test.TestCase):
    """The real libvirt test driver reads what the generator writes."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_write_node_xml(self):
        path = os.path.join(self.tmp, 'node.xml')
        xml = fakehost.hgx_h200_node_xml()
        uri = fakehost.write_node_xml(path, xml)
        self.assertEqual('test://' + path, uri)
        with open(path, encoding='utf-8') as node_file:
            self.assertEqual(xml, node_file.read())

    def test_libvirt_reads_host(self):
        uri = fakehost.write_node_xml(os.path.join(self.tmp, 'node.xml'),
                                      fakehost.hgx_h200_node_xml(
                                          memory_mb=65536))
        conn = libvirt.open(uri)
        self.addCleanup(conn.close)
        info = conn.getInfo()
        self.assertEqual((65536, 224, 2, 1, 56, 2),
                         (info[1], info[2], info[4], info[5], info[6],
                          info[7]))
        names = sorted(d.name() for d in conn.listAllDevices(
            libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV))
        self.assertEqual(10, len(names))
        self.assertIn('pci_0000_db_00_0', names)

    def test_compute_config_of_the_nvl_host(self):
        path = fakehost.write_compute_config('h200-nvl', 'nvl-1', self.tmp)
        with open(path, encoding='utf-8') as conf_file:
            lines = conf_file.read().splitlines()
        uri = 'test://' + os.path.join(self.tmp, 'nvl-1.xml')
        self.assertEqual(['[libvirt]', 'connection_uri = ' + uri],
                         lines[:2])
        groups = [line for line in lines if line.startswith('device_group')]
        self.assertEqual(2, len(groups))
        self.assertIn('"0000:17:00.0", "0000:31:00.0"', groups[0])
        conn = libvirt.open(uri)
        self.addCleanup(conn.close)
        self.assertEqual((128, 2), (conn.getInfo()[2], conn.getInfo()[4]))
        devices = [config.parse_pci_nodedev(d.XMLDesc()) for d in
                   conn.listAllDevices(
                       libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)]
        gpus = sorted(d.address for d in devices
                      if d.product_id == fakehost.H200_NVL_PRODUCT_ID)
        self.assertEqual(list(fakehost.H200_NVL_GPU_ADDRESSES), gpus)

    def test_unknown_kind(self):
        exc = self.assertRaises(exception.Invalid,
                                fakehost.write_compute_config, 'h100',
                                'x', self.tmp)
        self.assertIn("'h100'", str(exc))
        self.assertIn('h200-nvl, hgx-h200', str(exc))
