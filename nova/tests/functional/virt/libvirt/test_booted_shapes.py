"""The GPU domain shapes booted: the driver's own domain for 2-, 4- and
8-GPU guests of a generated HGX H200 host, started on the real libvirtd
(``qemu:///system``) under OVMF from the UEFI test image
(``tools/build_test_image.py``), each GPU replaced by an emulated device
at the same guest PCI address.

The driver writes the domain (``LibvirtDriver.domain_xml``) with the
generated host's devices and NUMA placement, as the compute would. Only
the test changes it, and only where this machine cannot follow:

* each ``<hostdev>`` (a GPU absent here) becomes QEMU's ``pci-testdev``
  (vendor 1b36, device 0005) on the root port the GPU had, with one
  64-bit prefetchable BAR (``membar``). The driver is told that BAR
  through its BAR reader, so it sizes the 64-bit MMIO window and OVMF's
  aperture for it as it would for a GPU. Under QEMU's emulator (TCG, 40
  physical address bits) the BAR is 2 GiB; with hardware KVM it is an
  H200's 256 GiB BAR1;
* the guest's host NUMA nodes (``<numatune>``) are mapped onto this
  machine's nodes (one, here); the guest's own cells, expander buses and
  root ports stay the driver's;
* the flavor is small (2 vCPUs, 512 MiB) so TCG on two shared cores
  boots it in about a minute.

libvirt places the guest's other devices (disk, USB) when the driver's
domain is defined, on ports of their own; only then are the GPUs
swapped, so no other device takes a GPU's port. The devices go in as
JSON ``-device`` arguments: QEMU creates those after the ones libvirt
writes, so the root ports (aliases ``pci.<index>``) exist by then.

The guest's init lists every PCI device with its ``numa_node`` and
64-bit BARs on the serial console. Each shape must show N of N devices,
each with its BAR assigned above 4 GiB, each behind the expander bus of
its root port, on the guest NUMA node of that expander, which the driver
binds to the GPU's host node. The driver's ``destroy`` must then leave
neither a domain nor an NVRAM file nor the guest's files. The seconds
each boot took are in the test's ``timings`` detail.
"""

import dataclasses
import os
import re
import shutil
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET

import fixtures
import libvirt
from testtools import content

from nova.pci import numa as pci_numa
from nova import test
from nova.tests.functional.lib import real_hypervisor
from nova.tests.functional.virt.libvirt import test_domain_shapes as shapes
from nova.tests.unit import tool
from nova.virt import driver as virt_driver
from nova.virt.fake import host as fakehost
from nova.virt import hardware
from nova.virt.libvirt import config as libvirt_config
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import pcie

MARKER = 'NOVA-TEST-IMAGE-BOOTED'
TESTDEV = ('0x1b36', '0x0005')
# The substitute BAR: small enough for TCG's 40 address bits with the
# driver's window (8 x 2 GiB plus OVMF's classic 32 GiB), an H200's BAR1
# where hardware KVM gives the guest the host's width.
TCG_BAR = 2 * pcie.GiB
KVM_BAR = 256 * pcie.GiB
VCPUS, MEMORY_MB = 2, 512
NVRAM_DIR = '/var/lib/libvirt/qemu/nvram'
_LINE = re.compile(r'^PCI (?P<address>\S+) (?P<vendor>0x[0-9a-f]{4}) '
                   r'(?P<device>0x[0-9a-f]{4}) numa_node=(?P<node>-?\d+)'
                   r'(?P<bars>(?: bar64=0x[0-9a-f]+)*)$')


@dataclasses.dataclass(frozen=True)
class Shape:
    """A guest shape booted: which of the board's GPUs it gets (indexes
    into nova.virt.fake.host.H200_GPU_ADDRESSES; 0-3 on host node 0, 4-7
    on node 1) and whether its flavor asks for two NUMA cells with a
    required PCI NUMA policy (else the flavor has no extra specs: the
    legacy policy, and the driver's default machine and firmware, q35
    and UEFI for a guest with devices)."""
    gpus: tuple[int, ...]
    confined: bool

    @property
    def name(self) -> str:
        return '%d-gpus-%s' % (len(self.gpus),
                               'confined' if self.confined else 'default')

    def extra_specs(self) -> dict[str, str]:
        if not self.confined:
            return {}
        return {'hw:numa_nodes': '2',
                'hw:pci_numa_affinity_policy': pci_numa.REQUIRED}


# Small enough for CI under TCG (about a minute each): the full board
# on two cells, node 0's four GPUs for a flavor without NUMA extra
# specs, and one GPU of each node on two cells.
SHAPES = (Shape(tuple(range(8)), True), Shape((0, 1, 2, 3), False),
          Shape((0, 4), True))


@dataclasses.dataclass(frozen=True)
class GuestDevice:
    """One PCI device as the guest's init listed it."""
    address: str
    vendor: str
    device: str
    numa_node: int
    bars64: tuple[int, ...]

    @property
    def bus(self) -> int:
        return int(self.address.split(':')[1], 16)


def parse_listing(console: str) -> list[GuestDevice]:
    """The devices of the first listing on ``console``."""
    console = console.replace('\r', '')
    body = console[console.index(MARKER + '\n'):
                   console.index(MARKER + '-END')]
    found = []
    for line in body.splitlines()[1:]:
        match = _LINE.match(line)
        if match:
            found.append(GuestDevice(
                match['address'], match['vendor'], match['device'],
                int(match['node']),
                tuple(int(bar.split('=')[1], 16)
                      for bar in match['bars'].split())))
    return found


def substitute_devices(xml: str, membar: int) -> str:
    """``xml`` (a defined domain's, addresses assigned) with each
    ``<hostdev>`` replaced by a ``pci-testdev`` with a ``membar`` BAR on
    the same root port."""
    root = ET.fromstring(xml)
    devices = root.find('devices')
    ns = libvirt_config.QEMU_NS
    commandline = root.find('{%s}commandline' % ns)
    if commandline is None:
        commandline = ET.SubElement(root, '{%s}commandline' % ns)
    for hostdev in devices.findall('hostdev'):
        address = hostdev.find('address')
        devices.remove(hostdev)
        ET.SubElement(commandline, '{%s}arg' % ns, {'value': '-device'})
        ET.SubElement(commandline, '{%s}arg' % ns, {
            'value': '{"driver": "pci-testdev", "bus": "pci.%d", '
                     '"addr": "0x%x.0x%x", "membar": %d}' % (
                         int(address.get('bus'), 16),
                         int(address.get('slot'), 16),
                         int(address.get('function'), 16), membar)})
    return ET.tostring(root, encoding='unicode')


def map_host_nodes(xml: str, present: tuple[int, ...]) -> str:
    """``xml`` with its ``<numatune>`` host nodes mapped onto the nodes
    ``present`` on this machine (node n on present[n % len])."""
    root = ET.fromstring(xml)
    numatune = root.find('numatune')
    if numatune is None:
        return xml
    mapped = set()
    for memnode in numatune.findall('memnode'):
        node = present[int(memnode.get('nodeset')) % len(present)]
        memnode.set('nodeset', str(node))
        mapped.add(node)
    numatune.find('memory').set(
        'nodeset', hardware.format_cpu_set(tuple(sorted(mapped))))
    return ET.tostring(root, encoding='unicode')


class BootedShapesTest(test.TestCase):

    TIMEOUT = 1500

    def setUp(self):
        super().setUp()
        real_hypervisor.skip_unless_real_hypervisor(self)
        try:
            self.virt_type, why = real_hypervisor.virt_type()
        except ValueError as err:
            self.fail(str(err))
        self.addDetail('virt_type', content.text_content(
            '%s: %s' % (self.virt_type, why)))
        self.membar = TCG_BAR if self.virt_type == 'qemu' else KVM_BAR
        self.deadlines = real_hypervisor.BootDeadlines()
        self.timings: list[str] = []
        self.addDetail('timings', content.Content(
            content.UTF8_TEXT,
            lambda: ['\n'.join(self.timings).encode('utf-8')]))
        self.image = tool.load('build_test_image').build()
        tmp = self.useFixture(fixtures.TempDir()).path
        # QEMU runs as its own user and opens the disk under it.
        os.chmod(tmp, 0o755)
        self.instances_path = os.path.join(tmp, 'instances')
        os.mkdir(self.instances_path)
        os.chmod(self.instances_path, 0o755)
        # The generated HGX H200 host: its GPUs and their NUMA nodes.
        self.hgx = shapes._driver(fakehost.write_node_xml(
            os.path.join(tmp, 'node.xml'), fakehost.hgx_h200_node_xml()), 0)
        # The driver on the real libvirt, told the substitute's BARs.
        self.driver = libvirt_driver.LibvirtDriver(
            real_hypervisor.URI, instances_path=self.instances_path,
            guest_options=libvirt_driver.GuestOptions({'x86_64': 'q35'}, 0),
            bar_reader=self._testdev_bars, virt_type=self.virt_type)
        self.conn = libvirt.open(real_hypervisor.URI)
        self.addCleanup(self.conn.close)
        # A host whose nodes libvirt does not tell has node 0.
        self.host_nodes = tuple(sorted(
            cell.id for cell in self.driver.get_numa_topology().cells)) or (0,)

    def _testdev_bars(self, address: str) -> tuple[pcie.Bar, ...]:
        """pci-testdev's memory BARs: 4 KiB of registers and ``membar``
        (BAR 2, 64-bit prefetchable)."""
        return (pcie.Bar(0, 4096, False, False),
                pcie.Bar(2, self.membar, True, True))

    def _domain_xml(self, shape: Shape, instance_uuid: str) -> str:
        """The driver's domain for ``shape``, its disk an overlay of the
        test image in the guest's instance directory."""
        board = shapes._gpus(self.hgx, 8)
        devices = [board[index] for index in shape.gpus]
        if shape.confined:
            nodes = shapes._guest_nodes(self.hgx, devices, pci_numa.REQUIRED,
                                        2)
        else:
            nodes = shapes._guest_nodes(self.hgx, devices, pci_numa.LEGACY,
                                        None)
        files = os.path.join(self.instances_path, instance_uuid)
        os.mkdir(files)
        os.chmod(files, 0o755)
        disk = os.path.join(files, 'disk')
        subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', '-F',
                        'raw', '-b', self.image, disk], check=True)
        return self.driver.domain_xml(
            virt_driver.GuestSpec(instance_uuid, shape.name, VCPUS,
                                  MEMORY_MB, devices, nodes,
                                  shape.extra_specs()),
            libvirt_config.GuestIO(
                disk_path=disk,
                console_log=os.path.join(files, 'console.log')))

    def _boot(self, instance_uuid: str, xml: str) -> str:
        """Define the driver's domain, swap its GPUs, start it and return
        its console once the guest has listed its devices."""
        defined = self.conn.defineXML(map_host_nodes(xml, self.host_nodes))
        self.addCleanup(self._leave_nothing, instance_uuid)
        placed = defined.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        domain = self.conn.defineXML(substitute_devices(placed,
                                                        self.membar))
        started = time.monotonic()
        domain.create()
        log = os.path.join(self.instances_path, instance_uuid,
                           'console.log')
        timeout = self.deadlines.timeout()
        while True:
            console = ''
            if os.path.exists(log):
                with open(log, errors='replace') as handle:
                    console = handle.read()
            if MARKER + '-END' in console:
                self.deadlines.record(time.monotonic() - started)
                return console
            self.assertLess(time.monotonic() - started, timeout,
                            'the guest listed no devices in %ds; console:'
                            '\n%s' % (timeout, console[-3000:]))
            time.sleep(2)

    def _expected(self, xml: str) -> dict[str, tuple[range, int]]:
        """Per GPU (host address), from the driver's domain: the guest
        bus numbers behind its expander (all of pcie-root's below the
        first expander's without one) and the guest NUMA node it must
        show (-1 without one); checks the expander's cell is bound to the
        GPU's host node."""
        root = ET.fromstring(xml)
        controllers = {int(c.get('index')): c for c in root.findall(
            "devices/controller[@type='pci']")}
        bus_nrs = sorted(int(c.find('target').get('busNr'))
                         for c in controllers.values()
                         if c.get('model') == 'pcie-expander-bus')
        memnodes = {m.get('cellid'): int(m.get('nodeset'))
                    for m in root.findall('numatune/memnode')}
        gpus = {dev.address: dev for dev in self.hgx.get_pci_devices()}
        expected = {}
        for hostdev in root.findall('devices/hostdev'):
            source = hostdev.find('source/address')
            address = '%04x:%02x:%02x.%x' % tuple(
                int(source.get(f), 16)
                for f in ('domain', 'bus', 'slot', 'function'))
            port = controllers[int(hostdev.find('address').get('bus'), 16)]
            self.assertEqual('pcie-root-port', port.get('model'))
            # A port without an address is libvirt's to place, on
            # pcie-root.
            port_address = port.find('address')
            parent = controllers[int(port_address.get('bus'), 16)
                                 if port_address is not None else 0]
            if parent.get('model') != 'pcie-expander-bus':
                expected[address] = (range(1, (bus_nrs or [256])[0]), -1)
                continue
            bus_nr = int(parent.find('target').get('busNr'))
            following = [n for n in bus_nrs if n > bus_nr] + [256]
            cell = parent.findtext('target/node')
            self.assertEqual(gpus[address].numa_node, memnodes[cell],
                             'expander of %s' % address)
            expected[address] = (range(bus_nr + 1, following[0]), int(cell))
        return expected

    def _check_listing(self, shape: Shape, console: str,
                       expected: dict[str, tuple[range, int]]) -> None:
        listed = parse_listing(console)
        testdevs = [dev for dev in listed
                    if (dev.vendor, dev.device) == TESTDEV]
        self.assertEqual(len(shape.gpus), len(testdevs), '%s: %s' % (
            shape.name, console[-4000:]))
        for dev in testdevs:
            # Assigned, above 4 GiB (in the 64-bit window), and only the
            # one 64-bit BAR pci-testdev has.
            self.assertEqual(1, len(dev.bars64), dev)
            self.assertGreaterEqual(dev.bars64[0], 4 * pcie.GiB, dev)
        self.assertEqual(len(testdevs),
                         len({dev.bars64[0] for dev in testdevs}))
        # Each expander's buses hold as many devices as it has GPUs,
        # each on the expander's guest node.
        wanted = sorted((r.start, node) for r, node in expected.values())
        seen = []
        for dev in testdevs:
            where = [(r.start, node) for r, node in expected.values()
                     if dev.bus in r]
            self.assertTrue(where, '%s is behind no expected bus' % (dev,))
            self.assertEqual(where[0][1], dev.numa_node, dev)
            seen.append(where[0])
        self.assertEqual(wanted, sorted(seen))

    def _leave_nothing(self, instance_uuid: str) -> None:
        """Whatever the test did: no domain, no NVRAM file."""
        try:
            domain = self.conn.lookupByUUIDString(instance_uuid)
        except libvirt.libvirtError:
            return
        if domain.isActive():
            domain.destroy()
        domain.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)

    def test_shapes_boot_with_every_device(self):
        if not shutil.which('qemu-img'):
            self.fail('qemu-img is missing: install qemu-utils '
                      '(tools/install.sh does)')
        for shape in SHAPES:
            instance_uuid = str(uuid.uuid4())
            xml = self._domain_xml(shape, instance_uuid)
            self.assertEqual('efi', ET.fromstring(xml).find('os').get(
                'firmware'), shape.name)
            expected = self._expected(xml)
            self.assertEqual(len(shape.gpus), len(expected))
            started = time.monotonic()
            console = self._boot(instance_uuid, xml)
            self.timings.append('%s: listed its devices %.1f s after '
                                'start' % (shape.name,
                                           time.monotonic() - started))
            self._check_listing(shape, console, expected)

            nvram = os.path.join(NVRAM_DIR, '%s_VARS.fd' % (
                libvirt_config.domain_name(instance_uuid)))
            self.assertTrue(os.path.isfile(nvram), nvram)
            self.driver.destroy(instance_uuid)
            self.assertRaises(libvirt.libvirtError,
                              self.conn.lookupByUUIDString, instance_uuid)
            self.assertFalse(os.path.exists(nvram))
            self.assertFalse(os.path.exists(
                os.path.join(self.instances_path, instance_uuid)))
