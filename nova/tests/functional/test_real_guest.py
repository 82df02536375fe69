"""A real guest on the real hypervisor: ``nova-all`` with one compute on
``qemu:///system`` boots a 0-GPU server from the test image
(``tools/build_test_image.py``), uploaded to nova-all's Glance, as a
qcow2 overlay of the compute's cached copy, and the marker the guest
prints on its serial console comes back through the API's
``os-getConsoleOutput``; then stop, start, reboot, rebuild, a snapshot
(``createImage``) that boots again, and delete run against that guest.

Skipped with the reason where there is no usable ``/dev/kvm`` or no
libvirtd (see :mod:`nova.tests.functional.lib.real_hypervisor`); ``.ci/run``
turns that skip into a failure. The compute runs with the
``[libvirt]virt_type`` ``real_hypervisor.virt_type`` chooses: ``kvm``,
except ``qemu`` (QEMU's emulator) where ``/dev/kvm`` is PVM's, as on this
project's CI machines, or what ``NOVA_REAL_HYPERVISOR_VIRT_TYPE`` says.
"""

import os
import time

import fixtures
import libvirt
import requests
from testtools import content

from nova import test
from nova.image import glance
from nova.tests.fixtures import glance as glance_fixture
from nova.tests.functional.lib import deployment
from nova.tests.functional.lib import real_hypervisor
from nova.tests.unit import tool
from nova.virt.libvirt import config as libvirt_config

STATE_TIMEOUT = 120
MARKER = 'NOVA-TEST-IMAGE-BOOTED'


class RealGuestTestBase(test.TestCase):
    """nova-all with one compute on the real hypervisor, the test image
    in its Glance (``image_ref``), and the helpers of the real-guest
    tests. ``extra_conf`` sections are added to nova-all's."""

    TIMEOUT = 1500
    extra_conf: dict[str, dict] = {}

    def setUp(self):
        super().setUp()
        # A boot's deadline follows this machine's measured speed: TCG on
        # two loaded cores makes the test slower, not red.
        self.deadlines = real_hypervisor.BootDeadlines()
        real_hypervisor.skip_unless_real_hypervisor(self)
        try:
            virt_type, why = real_hypervisor.virt_type()
        except ValueError as err:
            self.fail(str(err))
        self.addDetail('virt_type', content.text_content(
            '%s: %s' % (virt_type, why)))
        image = tool.load('build_test_image').build()
        workdir = self.useFixture(fixtures.TempDir()).path
        # QEMU runs as its own user under qemu:///system and opens the
        # overlay under instances_path ($state_path/instances).
        os.chmod(workdir, 0o755)
        conf = {'libvirt': {'connection_uri': real_hypervisor.URI,
                            'virt_type': virt_type},
                # No GPUs here: none of the HGX H200 PCI config.
                'pci': {'device_spec': [], 'alias': [], 'device_group': []}}
        for section, options in self.extra_conf.items():
            conf.setdefault(section, {}).update(options)
        self.nova = deployment.AllInOne(computes=1, workdir=workdir,
                                        extra_conf=conf)
        self.addOnException(self._attach_log)
        self.useFixture(self.nova)
        glance_conf = test.make_conf()
        glance_fixture.configure_nova(glance_conf, self.nova.glance_url)
        self.glance = glance.GlanceClient(glance_conf)
        queued = self.glance.create('test-image', disk_format='raw')
        self.image_ref = self.glance.upload(queued.id, image).id
        self.instances_path = os.path.join(workdir, 'instances')
        self.conn = libvirt.open(real_hypervisor.URI)
        self.addCleanup(self.conn.close)

    def _attach_log(self, exc_info) -> None:
        for name, text in self.nova.logs().items():
            self.addDetail(name, content.text_content(text[-20000:]))

    # REST helpers -------------------------------------------------------

    def api(self, method: str, path: str, body: dict | None = None,
            version: str | None = None):
        headers = {'X-Auth-Token': deployment.TOKEN}
        if version:
            headers['OpenStack-API-Version'] = 'compute %s' % version
        resp = requests.request(
            method, self.nova.api_url + path, json=body, headers=headers,
            timeout=60)
        self.assertLess(resp.status_code, 300, resp.text)
        return resp.json() if resp.content else None

    def action(self, server: str, body: dict):
        return self.api('POST', '/servers/%s/action' % server, body)

    def wait_for(self, server: str, status: str) -> dict:
        deadline = time.monotonic() + STATE_TIMEOUT
        while True:
            found = self.api('GET', '/servers/%s' % server)['server']
            if found['status'] == status and \
                    found['OS-EXT-STS:task_state'] is None:
                return found
            self.assertNotEqual('ERROR', found['status'], found)
            self.assertLess(time.monotonic(), deadline,
                            'server %s is %s, not %s' % (
                                server, found['status'], status))
            time.sleep(1)

    def console(self, server: str) -> str:
        return self.action(server, {'os-getConsoleOutput': {}})['output']

    def wait_for_boots(self, server: str, boots: int) -> str:
        """Wait until the console shows ``boots`` boots of the image,
        within a deadline derived from the boots measured so far."""
        start = time.monotonic()
        timeout = self.deadlines.timeout()
        while True:
            output = self.console(server)
            if output.count(MARKER + '-END') >= boots:
                self.deadlines.record(time.monotonic() - start)
                return output
            self.assertLess(time.monotonic() - start, timeout,
                            'boot %d of server %s did not reach its '
                            'marker in %ds (boots so far took %s s); '
                            'console:\n%s' % (
                                boots, server, timeout,
                                self.deadlines.boots, output[-3000:]))
            time.sleep(2)

    def domain_state(self, server: str) -> int:
        domain = self.conn.lookupByName(libvirt_config.domain_name(server))
        return domain.state()[0]

    def _destroy_domain(self, server: str) -> None:
        """Leave no domain (nor a UEFI guest's NVRAM) behind, whatever
        the test did."""
        try:
            domain = self.conn.lookupByName(
                libvirt_config.domain_name(server))
        except libvirt.libvirtError:
            return
        if domain.isActive():
            domain.destroy()
        domain.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)


class RealGuestTest(RealGuestTestBase):

    # The test -----------------------------------------------------------

    def test_boot_console_and_lifecycle(self):
        flavor = self.api('POST', '/flavors', {'flavor': {
            'name': 'tiny', 'vcpus': 1, 'ram': 256,
            'disk': 1}})['flavor']['id']
        server = self.api('POST', '/servers', {'server': {
            'name': 'real-guest', 'flavorRef': flavor,
            'imageRef': self.image_ref}})['server']['id']
        self.addCleanup(self._destroy_domain, server)
        self.wait_for(server, 'ACTIVE')
        files = os.path.join(self.instances_path, server)
        self.assertEqual(['console.log', 'disk'], sorted(os.listdir(files)))

        output = self.wait_for_boots(server, 1)
        # The guest lists the PCI devices it sees, as vendor and device.
        self.assertRegex(output, r'PCI 0000:00:\S+ 0x[0-9a-f]{4} '
                                 r'0x[0-9a-f]{4}')
        # length: the last lines only.
        tail = self.action(server, {'os-getConsoleOutput': {'length': 1}})
        self.assertEqual(1, len(tail['output'].splitlines()),
                         tail['output'])
        self.assertEqual(libvirt.VIR_DOMAIN_RUNNING,
                         self.domain_state(server))

        self.action(server, {'os-stop': None})
        self.wait_for(server, 'SHUTOFF')
        self.assertEqual(libvirt.VIR_DOMAIN_SHUTOFF,
                         self.domain_state(server))

        self.action(server, {'os-start': None})
        self.wait_for(server, 'ACTIVE')
        self.assertEqual(libvirt.VIR_DOMAIN_RUNNING,
                         self.domain_state(server))
        self.wait_for_boots(server, 2)

        # A soft reboot: the guest's power button, which libvirt turns
        # into a reset once the guest powers off.
        self.action(server, {'reboot': {'type': 'SOFT'}})
        self.wait_for(server, 'ACTIVE')
        self.wait_for_boots(server, 3)

        self.action(server, {'reboot': {'type': 'HARD'}})
        self.wait_for(server, 'ACTIVE')
        self.wait_for_boots(server, 4)

        self.action(server, {'rebuild': {'imageRef': self.image_ref}})
        self.wait_for(server, 'ACTIVE')
        self.wait_for_boots(server, 5)
        self.assertEqual(libvirt.VIR_DOMAIN_RUNNING,
                         self.domain_state(server))
        # The image was downloaded once, into the compute's image cache.
        self.assertEqual([self.image_ref], os.listdir(
            os.path.join(self.instances_path, '_base')))

        # A snapshot of the running guest boots again.
        snapshot = self.api(
            'POST', '/servers/%s/action' % server,
            {'createImage': {'name': 'real-guest-snap'}},
            version='2.45')['image_id']
        self.wait_for(server, 'ACTIVE')
        self.assertEqual('active', self.glance.show(snapshot).status)
        self.assertEqual(libvirt.VIR_DOMAIN_RUNNING,
                         self.domain_state(server))
        again = self.api('POST', '/servers', {'server': {
            'name': 'from-snapshot', 'flavorRef': flavor,
            'imageRef': snapshot}})['server']['id']
        self.addCleanup(self._destroy_domain, again)
        self.wait_for(again, 'ACTIVE')
        self.wait_for_boots(again, 1)
        self.api('DELETE', '/servers/%s' % again)

        self.api('DELETE', '/servers/%s' % server)
        deadline = time.monotonic() + STATE_TIMEOUT
        while self.api('GET', '/servers')['servers']:
            self.assertLess(time.monotonic(), deadline, 'delete hangs')
            time.sleep(1)
        self.assertRaises(libvirt.libvirtError, self.conn.lookupByName,
                          libvirt_config.domain_name(server))
        self.assertFalse(os.path.exists(files))
