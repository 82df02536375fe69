"""A UEFI guest on the real hypervisor through its whole life.

``nova-all`` with one compute on ``qemu:///system`` (see
:mod:`nova.tests.functional.test_real_guest`) boots a server whose flavor
asks for UEFI on q35 (``hw:firmware_type=uefi``): libvirt starts it on
OVMF and makes its NVRAM (UEFI variable store) from OVMF's template.
QEMU refuses to undefine such a guest unless told what to do with the
NVRAM, which the test shows first; then stop and start, rebuild, a
resize reverted and one confirmed (on the one host, with
``allow_resize_to_same_host``), a cold migration (which one host cannot
take: refused, the guest untouched) and the delete must all work, and
the delete leave neither a domain nor an NVRAM file.

Only the guest's firmware matters here, not whether the test image's
init runs under OVMF: each step checks the domain runs on OVMF with its
NVRAM file, not the guest's console. The seconds each step took are in
the test's ``timings`` detail.
"""

import os
import time
import xml.etree.ElementTree as ET

import libvirt
from testtools import content

from nova.tests.functional import test_real_guest
from nova.virt.libvirt import config as libvirt_config

UEFI_SPECS = {'hw:firmware_type': 'uefi', 'hw:machine_type': 'q35'}


class RealUEFIGuestTest(test_real_guest.RealGuestTestBase):

    extra_conf = {'DEFAULT': {'allow_resize_to_same_host': True}}

    def setUp(self):
        super().setUp()
        self.timings: list[str] = []
        self.addDetail('timings', content.Content(
            content.UTF8_TEXT,
            lambda: ['\n'.join(self.timings).encode('utf-8')]))

    def step(self, name: str, started: float) -> None:
        self.timings.append('%s: %.1f s' % (name, time.monotonic() - started))

    def flavor(self, name: str, ram: int) -> str:
        flavor = self.api('POST', '/flavors', {'flavor': {
            'name': name, 'vcpus': 1, 'ram': ram, 'disk': 1}})['flavor']['id']
        self.api('POST', '/flavors/%s/os-extra_specs' % flavor,
                 {'extra_specs': UEFI_SPECS})
        return flavor

    def running_on_ovmf(self, server: str, memory_mb: int) -> str:
        """The guest runs with ``memory_mb`` on OVMF and has its NVRAM
        file; the file's path."""
        domain = self.conn.lookupByName(libvirt_config.domain_name(server))
        self.assertEqual(libvirt.VIR_DOMAIN_RUNNING, domain.state()[0])
        os_el = ET.fromstring(domain.XMLDesc()).find('os')
        self.assertIn('q35', os_el.find('type').get('machine'))
        # libvirt resolved the firmware autoselection to OVMF's code.
        loader = os_el.find('loader')
        self.assertEqual('pflash', loader.get('type'))
        self.assertIn('OVMF', loader.text)
        nvram = os_el.find('nvram').text
        self.assertTrue(os.path.isfile(nvram), nvram)
        self.assertEqual(memory_mb * 1024, domain.maxMemory())
        return nvram

    def settle(self, server: str, status: str, name: str,
               started: float) -> None:
        self.wait_for(server, status)
        self.step(name, started)

    def test_uefi_guest_lifecycle(self):
        small = self.flavor('uefi-small', 256)
        large = self.flavor('uefi-large', 384)
        started = time.monotonic()
        server = self.api('POST', '/servers', {'server': {
            'name': 'wp-nvram-uefi', 'flavorRef': small,
            'imageRef': self.image_ref}})['server']['id']
        self.addCleanup(self._remove_nvram, server)
        self.addCleanup(self._destroy_domain, server)
        self.settle(server, 'ACTIVE', 'boot', started)
        nvram = self.running_on_ovmf(server, 256)
        self.assertEqual(libvirt_config.domain_name(server) + '_VARS.fd',
                         os.path.basename(nvram))

        started = time.monotonic()
        self.action(server, {'os-stop': None})
        self.settle(server, 'SHUTOFF', 'stop', started)
        domain = self.conn.lookupByName(libvirt_config.domain_name(server))
        self.assertTrue(os.path.isfile(nvram))
        # What every undefine without an NVRAM flag met before.
        err = self.assertRaises(libvirt.libvirtError, domain.undefine)
        self.assertIn('nvram', str(err))
        started = time.monotonic()
        self.action(server, {'os-start': None})
        self.settle(server, 'ACTIVE', 'start', started)
        self.assertEqual(nvram, self.running_on_ovmf(server, 256))

        # A new root disk from the image, and a new NVRAM with it.
        started = time.monotonic()
        self.action(server, {'rebuild': {'imageRef': self.image_ref}})
        self.settle(server, 'ACTIVE', 'rebuild', started)
        self.assertEqual(nvram, self.running_on_ovmf(server, 256))

        # A move makes the disk and NVRAM again on the destination (here
        # the same host), and again on the source for a revert.
        started = time.monotonic()
        self.action(server, {'resize': {'flavorRef': large}})
        self.settle(server, 'VERIFY_RESIZE', 'resize', started)
        self.assertEqual(nvram, self.running_on_ovmf(server, 384))
        started = time.monotonic()
        self.action(server, {'revertResize': None})
        self.settle(server, 'ACTIVE', 'revert resize', started)
        self.assertEqual(nvram, self.running_on_ovmf(server, 256))
        started = time.monotonic()
        self.action(server, {'resize': {'flavorRef': large}})
        self.settle(server, 'VERIFY_RESIZE', 'resize again', started)
        self.action(server, {'confirmResize': None})
        self.settle(server, 'ACTIVE', 'resize confirmed', started)
        self.assertEqual(nvram, self.running_on_ovmf(server, 384))

        # A cold migration needs another host: this deployment has none.
        started = time.monotonic()
        self.action(server, {'migrate': None})
        migration = self.wait_for_migration(server)
        self.step('cold migration refused', started)
        self.assertEqual('error', migration['status'], migration)
        self.wait_for(server, 'ACTIVE')
        self.assertEqual(nvram, self.running_on_ovmf(server, 384))

        started = time.monotonic()
        self.api('DELETE', '/servers/%s' % server)
        deadline = time.monotonic() + test_real_guest.STATE_TIMEOUT
        while self.api('GET', '/servers')['servers']:
            self.assertLess(time.monotonic(), deadline, 'delete hangs')
            time.sleep(1)
        self.step('delete', started)
        self.assertRaises(libvirt.libvirtError, self.conn.lookupByName,
                          libvirt_config.domain_name(server))
        self.assertFalse(os.path.exists(nvram))
        self.assertFalse(os.path.exists(
            os.path.join(self.instances_path, server)))

    def wait_for_migration(self, server: str) -> dict:
        """The server's one cold migration once it has ended."""
        deadline = time.monotonic() + test_real_guest.STATE_TIMEOUT
        while True:
            found = self.api(
                'GET', '/os-migrations?instance_uuid=%s&migration_type='
                'migration' % server, version='2.59')['migrations']
            if len(found) == 1 and found[0]['status'] in (
                    'error', 'confirmed', 'finished'):
                return found[0]
            self.assertLess(time.monotonic(), deadline,
                            'migrations of %s: %s' % (server, found))
            time.sleep(1)

    def _remove_nvram(self, server: str) -> None:
        """An NVRAM file the test left (it failed before the delete)."""
        path = os.path.join('/var/lib/libvirt/qemu/nvram', '%s_VARS.fd' % (
            libvirt_config.domain_name(server)))
        if os.path.exists(path):
            os.unlink(path)
