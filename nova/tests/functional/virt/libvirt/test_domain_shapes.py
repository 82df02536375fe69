"""Every domain shape the libvirt driver writes, checked by libvirt.

A matrix over GPU counts, PCI NUMA policies, firmware, machine types,
guest NUMA cells and spare PCIe ports: each domain the driver can write
passes libvirt's own schema check (``virt-xml-validate``), and the
shapes that could not work are refused instead of written. Then a GPU
guest is defined (not started: there is no IOMMU here) on the real
libvirt and checked from the XML libvirt gives back.
"""

import itertools
import os
import shutil
import subprocess
import uuid
import xml.etree.ElementTree as ET

import fixtures
import libvirt

from nova import exception
from nova import test
from nova.pci import device as pci_device
from nova.pci import numa as pci_numa
from nova.tests.functional.lib import real_hypervisor
from nova.virt import driver as virt_driver
from nova.virt.fake import host as fakehost
from nova.virt import hardware
from nova.virt.libvirt import config as libvirt_config
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import pcie

GPU_COUNTS = (0, 1, 2, 4, 8)
POLICIES = (pci_numa.LEGACY, pci_numa.PREFERRED, pci_numa.REQUIRED,
            pci_numa.SOCKET)
FIRMWARES = ('bios', 'uefi')
MACHINES = ('q35', 'pc')
CELLS = (None, 2)
PORTS = (0, 4)
VCPUS, MEMORY_MB = 16, 65536


def _driver(uri: str, ports: int) -> libvirt_driver.LibvirtDriver:
    return libvirt_driver.LibvirtDriver(
        uri, guest_options=libvirt_driver.GuestOptions(
            {'x86_64': 'q35'}, ports), bar_reader=fakehost.bar_sizes)


def _gpus(driver, count: int, request_id: str = 'req-1'
          ) -> list[pci_device.Passthrough]:
    gpus = [dev for dev in driver.get_pci_devices()
            if dev.address in fakehost.H200_GPU_ADDRESSES]
    return [pci_device.Passthrough(dev.address, True, dev.numa_node,
                                   request_id) for dev in gpus[:count]]


# Every shape also gets a root disk, a console log and a NIC, so the
# schema check covers the guest IO elements too.
FULL_IO = libvirt_config.GuestIO(
    disk_path='/var/lib/nova/instances/x/disk',
    console_log='/var/lib/nova/instances/x/console.log', network='default')


def _domain_xml(driver, name: str, devices, nodes, extra_specs) -> str:
    """The domain XML the driver writes for this guest."""
    return driver.domain_xml(virt_driver.GuestSpec(
        str(uuid.uuid4()), name, VCPUS, MEMORY_MB, devices, nodes,
        extra_specs), FULL_IO)


def _guest_nodes(driver, devices, policy, cells) -> tuple[int, ...]:
    """The host nodes the compute would confine the guest to."""
    topology = driver.get_numa_topology()
    return pci_numa.guest_nodes([pci_numa.PlacedRequest(
        policy=policy, label='h200:%d' % len(devices),
        devices=tuple(pci_numa.Locality(
            dev.numa_node, topology.socket_of(dev.numa_node))
            for dev in devices))], cells or 1)


def _extra_specs(machine, firmware, cells) -> dict:
    specs = {'hw:machine_type': machine, 'hw:firmware_type': firmware}
    if cells:
        specs['hw:numa_nodes'] = str(cells)
    return specs


class DomainSchemaTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.validator = shutil.which('virt-xml-validate')
        if self.validator is None:
            self.fail('virt-xml-validate is missing: install libvirt-clients'
                      ' (tools/install.sh does)')
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.uri = fakehost.write_node_xml(
            os.path.join(self.tmp, 'node.xml'), fakehost.hgx_h200_node_xml())

    def _validate(self, xml: str, name: str) -> None:
        path = os.path.join(self.tmp, name + '.xml')
        with open(path, 'w') as handle:
            handle.write(xml)
        result = subprocess.run([self.validator, path, 'domain'],
                                capture_output=True, text=True)
        self.assertEqual(0, result.returncode, '%s: %s%s\n%s' % (
            name, result.stdout, result.stderr, xml))

    def test_every_shape_validates(self):
        drivers = {ports: _driver(self.uri, ports) for ports in PORTS}
        written, refused, seen = 0, set(), set()
        for gpus, policy, firmware, machine, cells, ports in \
                itertools.product(GPU_COUNTS, POLICIES, FIRMWARES,
                                  MACHINES, CELLS, PORTS):
            driver = drivers[ports]
            devices = _gpus(driver, gpus)
            name = '%d-gpus-%s-%s-%s-cells%s-ports%d' % (
                gpus, policy, firmware, machine, cells, ports)
            try:
                nodes = _guest_nodes(driver, devices, policy, cells)
            except exception.PciNumaAffinityViolation:
                # The scheduler never places it: a one-cell guest with a
                # required/socket request for a board spanning nodes.
                self.assertEqual((8, None), (gpus, cells), name)
                self.assertIn(policy, (pci_numa.REQUIRED, pci_numa.SOCKET))
                continue
            try:
                xml = _domain_xml(driver, name, devices, nodes,
                                  _extra_specs(machine, firmware, cells))
            except exception.GuestHardwareUnsupported:
                refused.add((gpus > 0, machine, firmware))
                continue
            self.assertTrue(gpus == 0 or (machine, firmware) ==
                            ('q35', 'uefi'), name)
            # One check per distinct document.
            shape = xml.replace(ET.fromstring(xml).findtext('uuid'), '')
            shape = shape.replace(ET.fromstring(xml).findtext('name'), '')
            if shape in seen:
                continue
            seen.add(shape)
            self._validate(xml, name)
            written += 1
        # GPUs on i440fx, and H200 BARs on BIOS, are refused.
        self.assertEqual({(True, 'pc', 'bios'), (True, 'pc', 'uefi'),
                          (True, 'q35', 'bios')}, refused)
        self.assertGreater(written, 40)

    def test_hugepage_shapes_validate(self):
        # The compute chose 1 GiB pages on the guest's nodes (see
        # nova.virt.hugepages): with and without devices and cells.
        driver = _driver(self.uri, 0)
        for gpus, cells in ((0, None), (0, 2), (2, None), (8, 2)):
            devices = _gpus(driver, gpus)
            nodes = _guest_nodes(driver, devices, pci_numa.REQUIRED,
                                 cells) if gpus else (0, 1)[:cells or 1]
            name = 'hugepages-%d-gpus-cells%s' % (gpus, cells)
            specs = dict(_extra_specs('q35', 'uefi', cells),
                         **{'hw:mem_page_size': '1GB'})
            xml = driver.domain_xml(virt_driver.GuestSpec(
                str(uuid.uuid4()), name, VCPUS, MEMORY_MB, devices, nodes,
                specs, page_size_kib=1048576), FULL_IO)
            root = ET.fromstring(xml)
            self.assertEqual(
                [str(cell) for cell in range(cells or 1)],
                [m.get('cellid') for m in root.findall('numatune/memnode')])
            self.assertEqual('1048576', root.find(
                'memoryBacking/hugepages/page').get('size'))
            self._validate(xml, name)


class RealLibvirtDomainTest(test.TestCase):
    """An 8-GPU, two-cell guest defined on qemu:///system.

    The fake HGX host's GPU addresses do not exist on this machine;
    libvirt defines a domain whose hostdevs name absent devices (it only
    looks for them when the domain starts), so the board's own addresses
    are used and the guest is never started.
    """

    def setUp(self):
        super().setUp()
        real_hypervisor.skip_unless_real_hypervisor(self)
        tmp = self.useFixture(fixtures.TempDir()).path
        uri = fakehost.write_node_xml(os.path.join(tmp, 'node.xml'),
                                      fakehost.hgx_h200_node_xml())
        # The devices and NUMA layout of the generated HGX host; the
        # domain goes to the real libvirt.
        self.fake = _driver(uri, 0)
        self.real = _driver(real_hypervisor.URI, 0)
        self.conn = libvirt.open(real_hypervisor.URI)
        self.addCleanup(self.conn.close)

    def _define(self, xml: str) -> ET.Element:
        domain = self.conn.defineXML(xml)
        self.addCleanup(domain.undefineFlags,
                        libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        return ET.fromstring(domain.XMLDesc())

    def test_eight_gpu_guest(self):
        devices = _gpus(self.fake, 8)
        nodes = _guest_nodes(self.fake, devices, pci_numa.REQUIRED, 2)
        self.assertEqual((0, 1), nodes)
        xml = _domain_xml(self.real, 'hgx guest', devices, nodes,
                          _extra_specs('q35', 'uefi', 2))
        root = self._define(xml)

        # libvirt expands q35 to its versioned name.
        self.assertIn('q35', root.find('os/type').get('machine'))
        # UEFI by autoselection; libvirt 9.0 resolves the OVMF loader at
        # start, later versions at define: then it must be OVMF.
        self.assertEqual('efi', root.find('os').get('firmware'))
        loader = root.findtext('os/loader')
        if loader:
            self.assertIn('OVMF', loader)

        controllers = {c.get('index'): c for c in root.findall(
            "devices/controller[@type='pci']")}
        hostdevs = root.findall("devices/hostdev[@type='pci']")
        self.assertEqual(8, len(hostdevs))
        ports = [controllers[str(int(h.find('address').get('bus'), 16))]
                 for h in hostdevs]
        self.assertEqual(['pcie-root-port'] * 8,
                         [port.get('model') for port in ports])
        self.assertEqual(8, len({port.get('index') for port in ports}))

        window_kib = int(root.findtext(
            "devices/controller[@model='pcie-root']/pcihole64"))
        bars = sum(bar.size for dev in devices
                   for bar in pcie.large_bars(fakehost.bar_sizes(
                       dev.address)))
        self.assertGreaterEqual(window_kib * 1024, bars)

        cells = {c.get('id') for c in root.findall('cpu/numa/cell')}
        self.assertEqual({'0', '1'}, cells)
        memnodes = {m.get('cellid'): m.get('nodeset')
                    for m in root.findall('numatune/memnode')}
        for dev, hostdev, port in zip(devices, hostdevs, ports):
            source = hostdev.find('source/address')
            self.assertEqual(dev.address, '%04x:%02x:%02x.%x' % tuple(
                int(source.get(f), 16) for f in ('domain', 'bus', 'slot',
                                                 'function')))
            expander = controllers[str(int(port.find('address').get('bus'),
                                           16))]
            self.assertEqual('pcie-expander-bus', expander.get('model'))
            cell = expander.findtext('target/node')
            # libvirt keeps the driver's bus numbers (its own, 254 and
            # 252, leave one bus behind each expander).
            self.assertIn(expander.find('target').get('busNr'),
                          ('128', '192'))
            # The expander's guest cell is bound to the GPU's host node.
            self.assertEqual(str(dev.numa_node), memnodes[cell])

        # libvirt keeps what a guest of this size needs besides its
        # devices: no balloon, one socket per cell, QEMU's threads on the
        # guest's nodes, and OVMF told the aperture the GPUs need.
        self.assertEqual(['none'], [b.get('model') for b in
                                    root.findall('devices/memballoon')])
        self.assertEqual(('2', str(VCPUS // 2), '1'), tuple(
            root.find('cpu/topology').get(f)
            for f in ('sockets', 'cores', 'threads')))
        self.assertEqual(
            hardware.format_cpu_set(sorted(
                cpu for node in nodes
                for cpu in self.real.get_numa_topology().cpus_of((node,)))),
            root.find('cputune/emulatorpin').get('cpuset'))
        ns = libvirt_config.QEMU_NS
        self.assertEqual(
            ['-fw_cfg', 'name=opt/ovmf/X-PciMmio64Mb,string=%d' %
             pcie.ovmf_aperture_mb(window_kib * 1024)],
            [arg.get('value') for arg in root.findall(
                '{%s}commandline/{%s}arg' % (ns, ns))])


# The guest guest-domain.rst shows: the full board of a generated HGX
# H200 host for a 192-vCPU, 1.75 TiB flavor with two NUMA cells, a
# required NUMA policy and 1 GiB pages (all of the host's 1 GiB pages:
# 896 per node).
DOC_EXAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                           '..', '..', 'doc', 'source', 'admin', 'examples',
                           'hgx-h200-8gpu-2cells.xml')
DOC_UUID = '6f1c2a9e-3b7d-4e5f-8a91-0c2d3e4f5a6b'


class DocumentedDomainTest(test.TestCase):
    """The domain XML in the docs is the one the driver writes now."""

    def _written(self) -> str:
        tmp = self.useFixture(fixtures.TempDir()).path
        driver = _driver(fakehost.write_node_xml(
            os.path.join(tmp, 'node.xml'), fakehost.hgx_h200_node_xml()), 0)
        devices = _gpus(driver, 8)
        nodes = _guest_nodes(driver, devices, pci_numa.REQUIRED, 2)
        instance_dir = '/var/lib/nova/instances/' + DOC_UUID
        xml = driver.domain_xml(virt_driver.GuestSpec(
            DOC_UUID, 'train-8x', 192, 1792 * 1024, devices, nodes,
            {'hw:numa_nodes': '2', 'hw:pci_numa_affinity_policy': 'required',
             'hw:mem_page_size': '1GB', 'pci_passthrough:alias': 'h200:8'},
            page_size_kib=1048576),
            libvirt_config.GuestIO(
                disk_path=instance_dir + '/disk',
                console_log=instance_dir + '/console.log'))
        root = ET.fromstring(xml)
        # The test driver's domain type; a KVM host writes 'kvm'.
        root.set('type', 'kvm')
        ET.indent(root)
        return ET.tostring(root, encoding='unicode') + '\n'

    def test_docs_show_the_written_domain(self):
        written = self._written()
        if os.environ.get('NOVA_WRITE_DOC_EXAMPLES'):
            with open(DOC_EXAMPLE, 'w') as handle:
                handle.write(written)
        with open(DOC_EXAMPLE) as handle:
            documented = handle.read()
        self.assertEqual(written, documented,
                         'the driver writes another domain than %s shows; '
                         'run this test with NOVA_WRITE_DOC_EXAMPLES=1 to '
                         'write it' % os.path.normpath(DOC_EXAMPLE))
