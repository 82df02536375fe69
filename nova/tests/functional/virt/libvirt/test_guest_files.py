"""A guest's root disk overlay and console log under instances_path, with
the driver on libvirt's test:/// driver and real qemu-img."""

import json
import logging
import os
import subprocess

import fixtures

from nova import exception
from nova import test
from nova.virt import driver as virt_driver
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import config
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import guest_files

UUID = '0b0e8a6c-3f7e-4b8e-9a51-6f1c2d3e4a01'
MiB = 1024 ** 2


class GuestFilesTest(test.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.images = os.path.join(tmp, 'images')
        self.instances = os.path.join(tmp, 'instances')
        os.mkdir(self.images)
        with open(os.path.join(self.images, 'tiny.raw'), 'wb') as f:
            f.truncate(16 * MiB)
        uri = fakehost.write_node_xml(os.path.join(tmp, 'node.xml'),
                                      fakehost.hgx_h200_node_xml())
        self.driver = libvirt_driver.LibvirtDriver(
            uri, self.instances, images_path=self.images,
            network='default')
        self.driver.init_host('cmp1')
        self.files = guest_files.GuestFiles.of(self.instances, UUID)

    def spawn(self, image='tiny.raw', size_gb=0):
        self.driver.spawn(UUID, 'vm', 1, 256, [], root_disk=None
                          if image is None else
                          virt_driver.RootDisk(image, size_gb))

    def disk_info(self) -> dict:
        return json.loads(subprocess.run(
            ['qemu-img', 'info', '--output=json', self.files.disk],
            check=True, capture_output=True, text=True).stdout)

    def domain_xml(self):
        return self.driver.host.lookup_domain(UUID).XMLDesc()

    def test_spawn_boots_from_an_overlay_of_the_image(self):
        self.spawn(size_gb=1)
        info = self.disk_info()
        self.assertEqual(('qcow2', os.path.join(self.images, 'tiny.raw'),
                          'raw', 1024 * MiB),
                         (info['format'], info['backing-filename'],
                          info['backing-filename-format'],
                          info['virtual-size']))
        xml = self.domain_xml()
        self.assertIn(self.files.disk, xml)
        self.assertIn(self.files.console_log, xml)
        self.assertIn("network='default'", xml)

    def test_disk_zero_takes_the_image_size(self):
        self.spawn(size_gb=0)
        self.assertEqual(16 * MiB, self.disk_info()['virtual-size'])

    def test_no_image_no_disk_but_a_console(self):
        self.spawn(image=None)
        self.assertFalse(os.path.exists(self.files.disk))
        self.assertIn(self.files.console_log, self.domain_xml())
        self.assertNotIn('<disk', self.domain_xml())

    def test_missing_or_bad_image_leaves_nothing(self):
        for image, error in (('nope.raw', exception.ImageNotFound),
                             ('../images/tiny.raw', exception.ImageNotFound)):
            err = self.assertRaises(error, self.spawn, image=image)
            self.assertIn(repr(image), str(err))
            self.assertIsNone(self.driver.host.lookup_domain(UUID))
            self.assertFalse(os.path.exists(self.files.directory))

    def test_flavor_disk_smaller_than_image(self):
        with open(os.path.join(self.images, 'big.raw'), 'wb') as f:
            f.truncate(2 * 1024 * MiB)
        err = self.assertRaises(exception.FlavorDiskSmallerThanImage,
                                self.spawn, image='big.raw', size_gb=1)
        self.assertIn('1 GB', str(err))
        self.assertFalse(os.path.exists(self.files.directory))

    def test_rebuild_makes_a_new_overlay_keep_disk_keeps_it(self):
        self.spawn()
        with open(self.files.console_log, 'w') as log:
            log.write('first boot\n')
        # What the guest wrote to its disk.
        with open(self.files.disk, 'wb') as disk:
            disk.write(b'guest data')
        self.driver.rebuild(UUID, 'vm', 1, 256, [], power_on=True,
                            root_disk=virt_driver.RootDisk('tiny.raw'))
        self.assertEqual('tiny.raw', os.path.basename(
            self.disk_info()['backing-filename']))
        # The console log stays: it shows every boot.
        self.assertEqual('first boot\n',
                         self.driver.get_console_output(UUID))
        with open(self.files.disk, 'wb') as disk:
            disk.write(b'guest data')
        self.driver.rebuild(UUID, 'vm', 1, 256, [], power_on=True,
                            root_disk=virt_driver.RootDisk('tiny.raw'),
                            keep_disk=True)
        with open(self.files.disk, 'rb') as disk:
            self.assertEqual(b'guest data', disk.read())

    def test_destroy_removes_the_files(self):
        self.spawn()
        self.driver.destroy(UUID)
        self.assertFalse(os.path.exists(self.files.directory))
        self.assertEqual('', self.driver.get_console_output(UUID))

    def test_console_output_is_the_logs_end(self):
        self.spawn()
        with open(self.files.console_log, 'wb') as log:
            log.write(b'x' * guest_files.MAX_CONSOLE_BYTES + b'\xff end')
        output = self.driver.get_console_output(UUID)
        self.assertEqual(guest_files.MAX_CONSOLE_BYTES, len(output))
        self.assertTrue(output.endswith('\ufffd end'))

    def test_image_ignored_without_local_images_path(self):
        self.driver.images_path = ''
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        self.spawn()
        self.assertFalse(os.path.exists(self.files.disk))
        self.assertIn("image 'tiny.raw' ignored", logs.output)
        self.assertIn('local_images_path', logs.output)


class GuestXmlOnTestDriverTest(test.TestCase):
    """What the test:/// driver makes of the elements."""

    def test_defined_domain_keeps_disk_console_and_nic(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        uri = fakehost.write_node_xml(os.path.join(tmp, 'node.xml'),
                                      fakehost.hgx_h200_node_xml())
        drv = libvirt_driver.LibvirtDriver(uri)
        xml = config.build_guest_xml(
            UUID, 'vm', 1, 256, [], 'test', io=config.GuestIO(
                '/d/disk', '/d/console.log', 'default'))
        domain = drv.host.get_connection().defineXML(xml)
        self.addCleanup(domain.undefine)
        defined = domain.XMLDesc()
        for fragment in ("<source file='/d/disk'",
                         "<log file='/d/console.log'",
                         "<source network='default'", '<acpi/>'):
            self.assertIn(fragment, defined)
