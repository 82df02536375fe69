"""A guest's root disk overlay and console log under instances_path, with
the driver on libvirt's test:/// driver, real qemu-img and its base images
from a real Glance through the image cache."""

import json
import logging
import os
import subprocess
import threading
import time

import fixtures

from nova import exception
from nova import test
from nova.tests.fixtures import glance as glance_fixture
from nova.virt import driver as virt_driver
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import config
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import guest_files
from nova.virt.libvirt import imagecache

UUID = '0b0e8a6c-3f7e-4b8e-9a51-6f1c2d3e4a01'
MiB = 1024 ** 2


class GuestFilesTest(test.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.glance = self.useFixture(glance_fixture.GlanceFixture())
        raw = os.path.join(tmp, 'tiny.raw')
        with open(raw, 'wb') as f:
            f.truncate(16 * MiB)
        self.image = self.glance.upload('tiny', raw, disk_format='raw').id
        self.instances = os.path.join(tmp, 'instances')
        conf = test.make_conf()
        self.glance.configure_nova(conf)
        self.client = glance_fixture.CountingClient(conf)
        self.cache = imagecache.ImageCache(
            os.path.join(self.instances, '_base'), lambda: self.client)
        uri = fakehost.write_node_xml(os.path.join(tmp, 'node.xml'),
                                      fakehost.hgx_h200_node_xml())
        self.driver = libvirt_driver.LibvirtDriver(
            uri, self.instances, image_cache=self.cache, network='default')
        self.driver.init_host('cmp1')
        self.files = guest_files.GuestFiles.of(self.instances, UUID)

    def spawn(self, image='', size_gb=0, uuid=UUID):
        image = self.image if image == '' else image
        self.driver.spawn(virt_driver.GuestSpec(
            uuid, 'vm', 1, 256, [], root_disk=None if image is None else
            virt_driver.RootDisk(image, size_gb)))

    def disk_info(self) -> dict:
        return json.loads(subprocess.run(
            ['qemu-img', 'info', '--output=json', self.files.disk],
            check=True, capture_output=True, text=True).stdout)

    def domain_xml(self):
        return self.driver.host.lookup_domain(UUID).XMLDesc()

    def test_spawn_boots_from_an_overlay_of_the_image(self):
        self.spawn(size_gb=1)
        info = self.disk_info()
        self.assertEqual(('qcow2', self.cache.path(self.image),
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
        for image in ('nope', '../images/tiny'):
            err = self.assertRaises(exception.ImageNotFound, self.spawn,
                                    image=image)
            self.assertIn(image, str(err))
            self.assertIsNone(self.driver.host.lookup_domain(UUID))
            self.assertFalse(os.path.exists(self.files.directory))

    def test_flavor_disk_smaller_than_image(self):
        big = os.path.join(self.useFixture(fixtures.TempDir()).path, 'big')
        subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', big,
                        '2G'], check=True)
        image = self.glance.upload('big', big).id
        err = self.assertRaises(exception.FlavorDiskSmallerThanImage,
                                self.spawn, image=image, size_gb=1)
        self.assertIn('1 GB', str(err))
        self.assertFalse(os.path.exists(self.files.directory))

    def test_concurrent_boots_download_the_image_once(self):
        errors = []

        def boot(n):
            try:
                self.spawn(uuid='0b0e8a6c-3f7e-4b8e-9a51-%012d' % n)
            except Exception as err:  # reported below
                errors.append(err)
        threads = [threading.Thread(target=boot, args=(n,))
                   for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([], errors)
        self.assertEqual([self.image], self.client.downloads)
        self.assertEqual([self.image], self.cache.cached())
        self.assertEqual(20, len(self.driver.list_instance_uuids()))

    def test_deleted_image_keeps_its_guests_and_is_aged_out_unused(self):
        self.spawn()
        self.glance.client.delete(self.image)
        # In use: kept, however old.
        self.assertEqual([], self.driver.manage_image_cache(True, 0))
        self.driver.rebuild(
            virt_driver.GuestSpec(UUID, 'vm', 1, 256, [],
                                  root_disk=virt_driver.RootDisk(self.image)),
            power_on=True, keep_disk=True)
        self.driver.destroy(UUID)
        # Unused but used recently: kept until old enough.
        self.assertEqual([], self.driver.manage_image_cache(True, 3600))
        self.assertEqual([], self.driver.manage_image_cache(False, 0))
        self.assertEqual([self.image],
                         self.driver.manage_image_cache(True, 0))
        self.assertEqual([], self.cache.cached())

    def test_stale_partial_download_is_removed_never_used(self):
        os.makedirs(self.cache.directory)
        partial = os.path.join(self.cache.directory,
                               self.image + '.part-dead')
        with open(partial, 'wb') as f:
            f.write(b'half')
        old = time.time() - imagecache.STALE_PARTIAL_SECONDS - 1
        os.utime(partial, (old, old))
        self.spawn()
        self.assertEqual([self.image], self.client.downloads)
        self.driver.manage_image_cache(True, 0)
        self.assertFalse(os.path.exists(partial))

    def test_rebuild_makes_a_new_overlay_keep_disk_keeps_it(self):
        self.spawn()
        with open(self.files.console_log, 'w') as log:
            log.write('first boot\n')
        # What the guest wrote to its disk.
        with open(self.files.disk, 'wb') as disk:
            disk.write(b'guest data')
        self.driver.rebuild(
            virt_driver.GuestSpec(UUID, 'vm', 1, 256, [],
                                  root_disk=virt_driver.RootDisk(self.image)),
            power_on=True)
        self.assertEqual(self.image, os.path.basename(
            self.disk_info()['backing-filename']))
        # The console log stays: it shows every boot.
        self.assertEqual('first boot\n',
                         self.driver.get_console_output(UUID))
        with open(self.files.disk, 'wb') as disk:
            disk.write(b'guest data')
        self.driver.rebuild(
            virt_driver.GuestSpec(UUID, 'vm', 1, 256, [],
                                  root_disk=virt_driver.RootDisk(self.image)),
            power_on=True, keep_disk=True)
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

    def test_image_ignored_without_an_image_cache(self):
        self.driver.image_cache = None
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        self.spawn()
        self.assertFalse(os.path.exists(self.files.disk))
        self.assertIn("image %r ignored" % self.image, logs.output)
        self.assertIn('no image cache', logs.output)


class GuestXmlOnTestDriverTest(test.TestCase):
    """What the test:/// driver makes of the elements."""

    def test_defined_domain_keeps_disk_console_and_nic(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        uri = fakehost.write_node_xml(os.path.join(tmp, 'node.xml'),
                                      fakehost.hgx_h200_node_xml())
        drv = libvirt_driver.LibvirtDriver(uri)
        xml = config.build_guest_xml(
            virt_driver.GuestSpec(UUID, 'vm', 1, 256, []), 'test',
            io=config.GuestIO(
                '/d/disk', '/d/console.log', 'default'))
        domain = drv.host.get_connection().defineXML(xml)
        self.addCleanup(domain.undefine)
        defined = domain.XMLDesc()
        for fragment in ("<source file='/d/disk'",
                         "<log file='/d/console.log'",
                         "<source network='default'", '<acpi/>'):
            self.assertIn(fragment, defined)
