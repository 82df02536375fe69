import xml.etree.ElementTree as ET


from nova import test
from nova import exception
from nova.pci import device as pci_device
from nova.virt import driver as virt_driver
from nova.virt import guest_hardware
from nova.virt import hugepages
from nova.virt.libvirt import config
from nova.virt.libvirt import pcie

GPU_XML = """
<device>
  <name>pci_0000_1b_00_0</name>
  <path>/sys/devices/pci0000:15/0000:15:01.0/0000:1b:00.0</path>
  <parent>pci_0000_18_10_0</parent>
  <driver><name>vfio-pci</name></driver>
  <capability type='pci'>
    <class>0x030200</class>
    <domain>0</domain>
    <bus>27</bus>
    <slot>0</slot>
    <function>0</function>
    <product id='0x2335'>GH100 [H200 SXM 141GB]</product>
    <vendor id='0x10DE'>NVIDIA Corporation</vendor>
    <iommuGroup number='29'>
      <address domain='0x0000' bus='0x1b' slot='0x00' function='0x0'/>
    </iommuGroup>
    <numa node='0'/>
    <pci-express>
      <link validity='cap' port='0' speed='32' width='16'/>
      <link validity='sta' speed='32' width='16'/>
    </pci-express>
  </capability>
</device>
"""


def _pci_xml(inner: str, bus: int = 27, slot: int = 0,
             function: int = 0) -> str:
    return ("<device><name>pci_x</name><capability type='pci'>"
            "<domain>0</domain><bus>%d</bus><slot>%d</slot>"
            "<function>%d</function><product id='0x1021'/>"
            "<vendor id='0x15b3'/>%s</capability></device>" % (
                bus, slot, function, inner))


class ParseNodedevTest(test.TestCase):

    def test_vpd_serial_number(self):
        vpd = ("<capability type='vpd'><name>BlueField-2 DPU</name>"
               "<fields access='readonly'><part_number>MBF2H</part_number>"
               "<serial_number> MT2113X00000 </serial_number></fields>"
               "<fields access='readwrite'><serial_number>RW1"
               "</serial_number></fields></capability>")
        dev = config.parse_pci_nodedev(_pci_xml(vpd))
        self.assertEqual('MT2113X00000', dev.card_serial_number)

    def test_vpd_without_readonly_serial_number(self):
        for vpd in ("<capability type='vpd'><name>x</name></capability>",
                    "<capability type='vpd'><fields access='readonly'>"
                    "<serial_number>  </serial_number></fields></capability>",
                    "<capability type='vpd'><fields access='readwrite'>"
                    "<serial_number>RW</serial_number></fields>"
                    "</capability>", ''):
            dev = config.parse_pci_nodedev(_pci_xml(vpd))
            self.assertIsNone(dev.card_serial_number, vpd)

    def test_gpu(self):
        dev = config.parse_pci_nodedev(GPU_XML)
        self.assertEqual(pci_device.HostDevice(
            address='0000:1b:00.0', vendor_id='10de', product_id='2335',
            dev_type='type-PCI', parent_addr=None, numa_node=0,
            iommu_group=29, driver='vfio-pci', pci_class='030200',
        ), dev)
        self.assertEqual(('pci_0000_1b_00_0', 'label_10de_2335'),
                         (dev.dev_id, dev.label))

    def test_pcie_link_down_is_a_health_problem(self):
        down = GPU_XML.replace(
            "<link validity='sta' speed='32' width='16'/>",
            "<link validity='sta' width='0'/>")
        self.assertEqual('PCIe link down (capable of x16, now x0)',
                         config.parse_pci_nodedev(down).health_problem)
        gone = GPU_XML.replace(
            "<link validity='sta' speed='32' width='16'/>", '')
        self.assertIsNotNone(config.parse_pci_nodedev(gone).health_problem)
        # No link reported (e.g. a conventional PCI device): nothing known.
        self.assertIsNone(config.parse_pci_nodedev(
            _pci_xml('')).health_problem)
        self.assertIsNone(config.parse_pci_nodedev(GPU_XML).health_problem)

    def test_decimal_fields_become_hex_address(self):
        dev = config.parse_pci_nodedev(_pci_xml('', bus=219, slot=31,
                                                function=7))
        self.assertEqual('0000:db:1f.7', dev.address)
        self.assertEqual('pci_0000_db_1f_7', dev.dev_id)

    def test_optional_fields_absent(self):
        dev = config.parse_pci_nodedev(_pci_xml(''))
        self.assertIsNone(dev.numa_node)
        self.assertIsNone(dev.iommu_group)
        self.assertIsNone(dev.driver)
        self.assertIsNone(dev.pci_class)

    def test_negative_numa_node_is_none(self):
        dev = config.parse_pci_nodedev(_pci_xml("<numa node='-1'/>"))
        self.assertIsNone(dev.numa_node)

    def test_numa_node_one(self):
        dev = config.parse_pci_nodedev(_pci_xml("<numa node='1'/>"))
        self.assertEqual(1, dev.numa_node)

    def test_pf_with_only_max_count(self):
        dev = config.parse_pci_nodedev(_pci_xml(
            "<capability type='virt_functions' maxCount='8'/>"))
        self.assertEqual('type-PF', dev.dev_type)
        self.assertIsNone(dev.parent_addr)

    def test_pf_with_vfs(self):
        dev = config.parse_pci_nodedev(_pci_xml(
            "<capability type='virt_functions' maxCount='8'>"
            "<address domain='0x0000' bus='0x1b' slot='0x00' "
            "function='0x1'/></capability>"))
        self.assertEqual('type-PF', dev.dev_type)

    def test_vf(self):
        dev = config.parse_pci_nodedev(_pci_xml(
            "<capability type='phys_function'>"
            "<address domain='0x0000' bus='0x4B' slot='0x00' "
            "function='0x0'/></capability>", function=2))
        self.assertEqual('type-VF', dev.dev_type)
        self.assertEqual('0000:4b:00.0', dev.parent_addr)
        self.assertEqual('0000:1b:00.2', dev.address)

    def test_not_pci(self):
        xml = ("<device><name>net_eth0</name><capability type='net'>"
               "<interface>eth0</interface></capability></device>")
        self.assertIsNone(config.parse_pci_nodedev(xml))

    def test_bad_vendor_id(self):
        xml = _pci_xml('').replace("0x15b3", "zz")
        exc = self.assertRaises(exception.Invalid,
                                config.parse_pci_nodedev, xml)
        self.assertIn("'zz'", str(exc))

    def test_missing_product(self):
        xml = _pci_xml('').replace("<product id='0x1021'/>", '')
        exc = self.assertRaises(exception.Invalid,
                                config.parse_pci_nodedev, xml)
        self.assertIn('product', str(exc))

    def test_bad_bus(self):
        xml = _pci_xml('').replace('<bus>27</bus>', '<bus>0x1b</bus>')
        exc = self.assertRaises(exception.Invalid,
                                config.parse_pci_nodedev, xml)
        self.assertIn("'0x1b'", str(exc))

    def test_malformed_xml(self):
        self.assertRaises(exception.Invalid, config.parse_pci_nodedev,
                          '<device>')


class GuestXmlTest(test.TestCase):

    UUID = '6f0a4b1e-6c39-4d5f-9d0e-1a2b3c4d5e6f'

    def _build(self, devices, domain_type='test', **kwargs):
        """The XML of a guest ``kwargs`` name GuestSpec fields or
        build_guest_xml arguments of."""
        spec = dict(instance_uuid=self.UUID, name='vm1', vcpus=8,
                    memory_mb=4096)
        spec.update((key, kwargs.pop(key)) for key in list(kwargs)
                    if key in spec or key == 'numa_nodes')
        return ET.fromstring(config.build_guest_xml(
            virt_driver.GuestSpec(pci_devices=devices, **spec),
            domain_type=domain_type, **kwargs))

    def test_domain_fields(self):
        root = self._build([], domain_type='kvm')
        self.assertEqual('kvm', root.get('type'))
        self.assertEqual('instance-' + self.UUID, root.findtext('name'))
        self.assertEqual('vm1', root.findtext('title'))
        self.assertEqual(self.UUID, root.findtext('uuid'))
        self.assertEqual('8', root.findtext('vcpu'))
        self.assertEqual('4096', root.findtext('memory'))
        self.assertEqual('MiB', root.find('memory').get('unit'))
        self.assertEqual([], root.findall('devices/hostdev'))

    def test_multi_line_display_name_is_one_line_title(self):
        root = self._build([], name='vm\nof team a')
        self.assertEqual('vm of team a', root.findtext('title'))

    def test_instance_uuid_of_domain(self):
        self.assertEqual(self.UUID, config.instance_uuid_of_domain(
            config.domain_name(self.UUID)))
        for name in ('vm1', 'instance-0000000a', self.UUID):
            self.assertIsNone(config.instance_uuid_of_domain(name), name)

    def test_uuid_is_canonical(self):
        root = self._build([], instance_uuid=self.UUID.upper())
        self.assertEqual(self.UUID, root.findtext('uuid'))

    def test_hostdevs(self):
        root = self._build([
            pci_device.Passthrough('0000:1B:00.0', managed=True),
            pci_device.Passthrough('0000:db:1f.7', managed=False),
            pci_device.Passthrough('0000:2a:00.0'),
        ])
        hostdevs = root.findall('devices/hostdev')
        self.assertEqual(3, len(hostdevs))
        ports = {c.get('index') for c in root.findall(
            "devices/controller[@model='pcie-root-port']")}
        for hostdev in hostdevs:
            self.assertEqual('subsystem', hostdev.get('mode'))
            self.assertEqual('pci', hostdev.get('type'))
            # Each device sits alone behind a root port of its own.
            self.assertEqual('0x00', hostdev.find('address').get('slot'))
        self.assertEqual(ports, {str(int(h.find('address').get('bus'), 16))
                                 for h in hostdevs})
        self.assertEqual(3, len(ports))
        self.assertEqual(['yes', 'no', 'yes'],
                         [h.get('managed') for h in hostdevs])
        self.assertEqual(
            {'domain': '0x0000', 'bus': '0x1b', 'slot': '0x00',
             'function': '0x0'},
            hostdevs[0].find('source/address').attrib)
        self.assertEqual(
            {'domain': '0x0000', 'bus': '0xdb', 'slot': '0x1f',
             'function': '0x7'},
            hostdevs[1].find('source/address').attrib)

    def test_parse_guest_hostdevs_round_trip(self):
        devices = [pci_device.Passthrough('0000:18:00.0', managed=False),
                   pci_device.Passthrough('0000:9a:00.0', managed=True)]
        xml = config.build_guest_xml(
            virt_driver.GuestSpec(self.UUID, 'vm', 1, 1, devices), 'test')
        self.assertEqual(devices, config.parse_guest_hostdevs(xml))

    def test_bad_uuid(self):
        exc = self.assertRaises(exception.Invalid, self._build, [],
                                instance_uuid='not-a-uuid')
        self.assertIn('not-a-uuid', str(exc))

    def test_bad_counts(self):
        for kwargs in ({'vcpus': 0}, {'memory_mb': -1}, {'vcpus': '2'},
                       {'vcpus': True}):
            exc = self.assertRaises(exception.Invalid, self._build, [],
                                    **kwargs)
            self.assertIn(repr(list(kwargs.values())[0]), str(exc))

    def test_empty_name(self):
        self.assertRaises(exception.Invalid, self._build, [], name=' ')

    def test_bad_address(self):
        self.assertRaises(exception.PciDeviceWrongAddressFormat,
                          self._build,
                          [pci_device.Passthrough('0000:1b:*.0')])

    def test_duplicate_device(self):
        exc = self.assertRaises(
            exception.Invalid, self._build,
            [pci_device.Passthrough('0000:1b:00.0'),
             pci_device.Passthrough('0000:1B:00.0')])
        self.assertIn('0000:1b:00.0', str(exc))


GiB = pcie.GiB
H200_BARS = (pcie.Bar(0, 16 << 20, False, False),
             pcie.Bar(1, 256 * GiB, True, True),
             pcie.Bar(3, 32 << 20, True, True))
# Four GPUs on host node 0, four on node 1, one PCI request (a group).
BOARD = [pci_device.Passthrough('0000:%02x:00.0' % bus, True,
                                0 if index < 4 else 1, 'r1')
         for index, bus in enumerate(
             (0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb))]


def _platform(machine='q35', firmware=None, cells=None, ports=0,
              devices=BOARD):
    return config.GuestPlatform(
        hardware=guest_hardware.GuestHardware(machine, firmware, cells),
        num_pcie_ports=ports,
        bars={dev.address: H200_BARS for dev in devices},
        node_cpus={0: tuple(range(32)), 1: tuple(range(32, 64))})


class GuestMachineTest(test.TestCase):
    """Machine type, firmware, NUMA cells and the PCIe layout."""

    UUID = '5b3e1a2c-9f8d-4c7b-a6e5-d4c3b2a19080'

    def _build(self, devices, platform, **kwargs):
        return ET.fromstring(config.build_guest_xml(
            virt_driver.GuestSpec(
                self.UUID, 'vm', kwargs.pop('vcpus', 16),
                kwargs.pop('memory_mb', 65536), devices,
                numa_nodes=kwargs.pop('numa_nodes', ())),
            kwargs.pop('domain_type', 'kvm'), platform=platform, **kwargs))

    def test_eight_gpus_on_two_cells(self):
        root = self._build(BOARD, _platform(cells=2), numa_nodes=(0, 1),
                           host_cpus=tuple(range(64)))
        self.assertEqual('q35', root.find('os/type').get('machine'))
        self.assertEqual('efi', root.find('os').get('firmware'))
        self.assertEqual('host-passthrough', root.find('cpu').get('mode'))
        self.assertEqual('passthrough',
                         root.find('cpu/maxphysaddr').get('mode'))
        cells = root.findall('cpu/numa/cell')
        self.assertEqual([('0-7', '32768'), ('8-15', '32768')],
                         [(c.get('cpus'), c.get('memory')) for c in cells])
        self.assertEqual(
            [('0', '0'), ('1', '1')],
            [(m.get('cellid'), m.get('nodeset'))
             for m in root.findall('numatune/memnode')])
        # Each cell's vCPUs run on its host node's CPUs.
        self.assertEqual(
            [(str(v), '0-31') for v in range(8)] +
            [(str(v), '32-63') for v in range(8, 16)],
            [(p.get('vcpu'), p.get('cpuset'))
             for p in root.findall('cputune/vcpupin')])
        # QEMU's own threads stay on the guest's nodes.
        self.assertEqual('0-63', root.find('cputune/emulatorpin')
                         .get('cpuset'))
        # One socket per cell, not a one-core socket per vCPU.
        self.assertEqual(
            {'sockets': '2', 'dies': '1', 'cores': '8', 'threads': '1'},
            root.find('cpu/topology').attrib)
        # No balloon: a passed-through device pins the guest's memory.
        self.assertEqual(['none'], [b.get('model') for b in
                                    root.findall('devices/memballoon')])
        # OVMF opens the 4 TiB window plus its classic 32 GiB.
        self.assertEqual(
            ['-fw_cfg', 'name=opt/ovmf/X-PciMmio64Mb,string=%d' % (
                4 * 1024 * 1024 + 32 * 1024)],
            [arg.get('value') for arg in root.findall(
                '{%s}commandline/{%s}arg' % (config.QEMU_NS,
                                             config.QEMU_NS))])
        pcie_root = root.find("devices/controller[@model='pcie-root']")
        # 8 x pow2(256 GiB + 32 MiB) = 8 x 512 GiB = 4 TiB.
        self.assertEqual(str(4 * 1024 * GiB // 1024),
                         pcie_root.findtext('pcihole64'))
        controllers = {c.get('index'): c for c in root.findall(
            "devices/controller[@type='pci']")}
        expanders = {i: c.findtext('target/node')
                     for i, c in controllers.items()
                     if c.get('model') == 'pcie-expander-bus'}
        self.assertEqual(['0', '1'], sorted(expanders.values()))
        for dev, hostdev in zip(BOARD, root.findall('devices/hostdev')):
            port = controllers[str(int(hostdev.find('address').get('bus'),
                                       16))]
            self.assertEqual('pcie-root-port', port.get('model'))
            expander = str(int(port.find('address').get('bus'), 16))
            self.assertEqual(str(dev.numa_node), expanders[expander])

    def test_emulated_gpu_guest_gets_the_emulators_cpu(self):
        # libvirt refuses host-passthrough under QEMU's emulator (TCG):
        # its counterpart is 'maximum', with TCG's own address width.
        root = self._build(BOARD, _platform(cells=2), numa_nodes=(0, 1),
                           host_cpus=tuple(range(64)), domain_type='qemu')
        cpu = root.find('cpu')
        self.assertEqual(('maximum', 'none', 'off'), (
            cpu.get('mode'), cpu.get('check'), cpu.get('migratable')))
        self.assertIsNone(cpu.find('maxphysaddr'))
        # The rest of the CPU element is the one a KVM guest gets.
        self.assertEqual('2', cpu.find('topology').get('sockets'))
        self.assertEqual(2, len(cpu.findall('numa/cell')))
        # Without cells too (where the element would otherwise be empty).
        cpu = self._build(BOARD, _platform(), domain_type='qemu').find('cpu')
        self.assertEqual('maximum', cpu.get('mode'))
        self.assertEqual('1', cpu.find('topology').get('sockets'))

    def test_one_cell_when_confined_without_numa_nodes(self):
        devices = BOARD[:2]
        root = self._build(devices, _platform(devices=devices),
                           numa_nodes=(0,), host_cpus=(0, 1))
        self.assertEqual(1, len(root.findall('cpu/numa/cell')))
        # One cell: the <vcpu cpuset> pins it, no per-vCPU pinning; the
        # emulator threads run on the same CPUs.
        self.assertEqual([], root.findall('cputune/vcpupin'))
        self.assertEqual('0-1', root.find('cputune/emulatorpin')
                         .get('cpuset'))
        self.assertEqual('16', root.find('cpu/topology').get('cores'))
        self.assertEqual(['0'], [c.findtext('target/node') for c in
                                 root.findall("devices/controller"
                                              "[@model='pcie-expander-bus']")])

    def test_unconfined_gpus_sit_on_pcie_root(self):
        devices = BOARD[:2]
        root = self._build(devices, _platform(devices=devices))
        self.assertEqual([], root.findall(
            "devices/controller[@model='pcie-expander-bus']"))
        self.assertIsNone(root.find('cpu/numa'))
        ports = root.findall("devices/controller[@model='pcie-root-port']")
        self.assertEqual(2, len(ports))
        self.assertEqual([None, None], [p.find('address') for p in ports])
        # Not confined: nothing pins the vCPUs or the emulator.
        self.assertIsNone(root.find('cputune'))
        self.assertEqual(
            {'sockets': '1', 'dies': '1', 'cores': '16', 'threads': '1'},
            root.find('cpu/topology').attrib)

    def test_guest_without_devices(self):
        root = self._build([], _platform(ports=3, devices=[]))
        self.assertIsNone(root.find('os').get('firmware'))
        self.assertIsNone(root.find('cpu'))
        self.assertEqual(3, len(root.findall(
            "devices/controller[@model='pcie-root-port']")))
        self.assertIsNone(root.find(
            "devices/controller[@model='pcie-root']/pcihole64"))
        # No devices: libvirt's default balloon, OVMF's own aperture.
        self.assertIsNone(root.find('devices/memballoon'))
        self.assertIsNone(root.find('{%s}commandline' % config.QEMU_NS))

    def test_i440fx_guest_without_devices(self):
        root = self._build([], _platform(machine='pc', devices=[]))
        self.assertEqual('pc', root.find('os/type').get('machine'))
        self.assertEqual([], root.findall('devices/controller'))

    def test_spare_ports_count_the_devices(self):
        devices = BOARD[:2]
        root = self._build(devices, _platform(ports=5, devices=devices))
        self.assertEqual(5, len(root.findall(
            "devices/controller[@model='pcie-root-port']")))

    def test_gpu_on_i440fx_refused(self):
        exc = self.assertRaises(
            exception.GuestHardwareUnsupported, self._build, BOARD[:1],
            _platform(machine='pc', devices=BOARD[:1]))
        self.assertIn('machine type pc has no PCIe root ports',
                      str(exc))

    def test_large_bar_on_bios_refused(self):
        exc = self.assertRaises(
            exception.GuestHardwareUnsupported, self._build, BOARD[:1],
            _platform(firmware='bios', devices=BOARD[:1]))
        self.assertIn('0000:18:00.0 has a 256 GiB 64-bit BAR1', str(exc))
        self.assertIn('hw:firmware_type=uefi', str(exc))

    def test_bios_without_bars_read(self):
        platform = config.GuestPlatform(hardware=guest_hardware.
                                        GuestHardware('q35', 'bios'))
        root = self._build(BOARD[:1], platform)
        self.assertIsNone(root.find('os').get('firmware'))
        # The aperture knob is OVMF's; SeaBIOS gets none.
        self.assertIsNone(root.find('{%s}commandline' % config.QEMU_NS))

    def test_uneven_cells_refused(self):
        exc = self.assertRaises(
            exception.GuestHardwareUnsupported, self._build, [],
            _platform(cells=3, devices=[]))
        self.assertIn('hw:numa_nodes=3', str(exc))

    def test_cells_cycle_over_fewer_host_nodes(self):
        devices = BOARD[:1]
        root = self._build(devices, _platform(cells=2, devices=devices),
                           numa_nodes=(0,), host_cpus=(0, 1))
        self.assertEqual(
            [('0', '0'), ('1', '0')],
            [(m.get('cellid'), m.get('nodeset'))
             for m in root.findall('numatune/memnode')])
        # The device's node is local to the first cell on it.
        self.assertEqual(['0'], [c.findtext('target/node') for c in
                                 root.findall("devices/controller"
                                              "[@model='pcie-expander-bus']")])


class GuestHugepagesTest(test.TestCase):
    """Hugepages backing each guest cell on its host node."""

    UUID = '5b3e1a2c-9f8d-4c7b-a6e5-d4c3b2a19080'

    def _xml(self, numa_nodes, cells=None, page_size_kib=1048576):
        return config.build_guest_xml(
            virt_driver.GuestSpec(self.UUID, 'vm', 16, 65536,
                                  numa_nodes=numa_nodes,
                                  page_size_kib=page_size_kib),
            'kvm', host_cpus=(0, 1),
            platform=_platform(cells=cells, devices=()))

    def test_each_cell_backed_on_its_node(self):
        xml = self._xml((0, 1), cells=2)
        root = ET.fromstring(xml)
        self.assertEqual(
            [{'size': '1048576', 'unit': 'KiB', 'nodeset': '0-1'}],
            [p.attrib for p in root.findall(
                'memoryBacking/hugepages/page')])
        self.assertEqual(
            [('0', 'strict', '0'), ('1', 'strict', '1')],
            [(m.get('cellid'), m.get('mode'), m.get('nodeset'))
             for m in root.findall('numatune/memnode')])
        self.assertEqual(
            hugepages.GuestPages(1048576, (0, 1), (32768, 32768)),
            config.parse_guest_hugepages(xml))

    def test_one_cell_without_numa_nodes_spec(self):
        xml = self._xml((1,), page_size_kib=2048)
        root = ET.fromstring(xml)
        self.assertEqual('0', root.find(
            'memoryBacking/hugepages/page').get('nodeset'))
        self.assertEqual(
            hugepages.GuestPages(2048, (1,), (65536,)),
            config.parse_guest_hugepages(xml))

    def test_ordinary_pages(self):
        xml = self._xml((0,), page_size_kib=None)
        self.assertIsNone(ET.fromstring(xml).find('memoryBacking'))
        self.assertIsNone(config.parse_guest_hugepages(xml))

    def test_hugepages_need_a_cell(self):
        err = self.assertRaises(exception.Invalid, self._xml, ())
        self.assertIn('without NUMA cells', err.message)

    def test_libvirt_kib_cells_read_back(self):
        # libvirt writes cell memory back in KiB.
        xml = self._xml((0,)).replace("unit=\"MiB\"", "unit=\"KiB\"")
        xml = xml.replace('memory="65536"', 'memory="67108864"')
        self.assertEqual((65536,), config.parse_guest_hugepages(
            xml).cell_memory_mb)


class GuestIOTest(test.TestCase):
    """Root disk, console log and NIC in the domain."""

    UUID = GuestXmlTest.UUID
    _build = GuestXmlTest._build

    def test_none_by_default(self):
        root = self._build([])
        self.assertEqual([], root.findall('devices/disk'))
        self.assertEqual([], root.findall('devices/serial'))
        self.assertEqual([], root.findall('devices/interface'))
        # ACPI always: a soft reboot presses the guest's power button.
        self.assertIsNotNone(root.find('features/acpi'))

    def test_disk_console_nic(self):
        root = self._build([], io=config.GuestIO(
            disk_path='/i/u/disk', console_log='/i/u/console.log',
            network='default'))
        disk = root.find('devices/disk')
        self.assertEqual(('file', 'disk', 'qcow2', '/i/u/disk', 'vda',
                          'virtio', '1'),
                         (disk.get('type'), disk.get('device'),
                          disk.find('driver').get('type'),
                          disk.find('source').get('file'),
                          disk.find('target').get('dev'),
                          disk.find('target').get('bus'),
                          disk.find('boot').get('order')))
        serial = root.find('devices/serial')
        self.assertEqual(('pty', '/i/u/console.log', 'on', '0'),
                         (serial.get('type'), serial.find('log').get('file'),
                          serial.find('log').get('append'),
                          serial.find('target').get('port')))
        nic = root.find('devices/interface')
        self.assertEqual(('network', 'default', 'virtio'),
                         (nic.get('type'), nic.find('source').get('network'),
                          nic.find('model').get('type')))

    def test_console_without_disk(self):
        root = self._build([], io=config.GuestIO(console_log='/c.log'))
        self.assertEqual([], root.findall('devices/disk'))
        self.assertEqual(1, len(root.findall('devices/serial')))


class DomainTypeTest(test.TestCase):

    def test_test_uri(self):
        self.assertEqual('test',
                         config.domain_type_for_uri('test:///tmp/node.xml'))

    def test_other_uris(self):
        for uri in ('qemu:///system', 'qemu+ssh://h/system'):
            self.assertEqual('kvm', config.domain_type_for_uri(uri))
            self.assertEqual('qemu',
                             config.domain_type_for_uri(uri, 'qemu'))

    def test_virt_type_does_not_change_the_test_driver(self):
        self.assertEqual('test', config.domain_type_for_uri(
            'test:///tmp/node.xml', 'qemu'))
