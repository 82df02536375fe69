"""Loading the libvirt driver from configuration (no connection made).

The driver against libvirt's test:/// driver is tested in
``nova.tests.functional.virt.libvirt.test_driver``.
"""

from oslo_config import cfg

from nova import conf as nova_conf
from nova import test
from nova.virt import driver as virt_driver
from nova.virt.libvirt import driver as libvirt_driver


class LoadDriverTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        nova_conf.register_all(self.conf)
        self.conf([], default_config_files=[])

    def test_uri_from_config(self):
        self.conf.set_override('connection_uri', 'test:///tmp/n.xml',
                               group='libvirt')
        drv = virt_driver.load_driver(self.conf)
        self.assertIsInstance(drv, libvirt_driver.LibvirtDriver)
        self.assertIsInstance(drv, virt_driver.ComputeDriver)
        self.assertEqual('test:///tmp/n.xml', drv.uri)

    def test_default_uri(self):
        self.assertEqual('qemu:///system',
                         virt_driver.load_driver(self.conf).uri)

    def test_instances_path_from_config(self):
        self.conf.set_override('instances_path', '/srv/nova/instances')
        self.assertEqual('/srv/nova/instances',
                         virt_driver.load_driver(self.conf).instances_path)
