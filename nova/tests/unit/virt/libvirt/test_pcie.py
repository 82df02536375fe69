import collections
import os
import xml.etree.ElementTree as ET

import fixtures

from nova import exception
from nova import test
from nova.virt import guest_hardware
from nova.virt.libvirt import pcie

GiB = pcie.GiB
MiB = 1024 ** 2

# An H100-like device as sysfs shows it: BAR0 32-bit, BAR1 and BAR3
# 64-bit prefetchable (flags 0x14220c), BAR5 an I/O port, the ROM last.
RESOURCE = '''\
0x00000000e2000000 0x00000000e2ffffff 0x0000000000040200
0x0000200000000000 0x0000201fffffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000202000000000 0x0000202001ffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x000000000000e000 0x000000000000e07f 0x0000000000040101
0x00000000e3000000 0x00000000e307ffff 0x0000000000046200
'''


class SysfsTest(test.TestCase):

    def test_parse(self):
        self.assertEqual(
            (pcie.Bar(0, 16 * MiB, False, False),
             pcie.Bar(1, 128 * GiB, True, True),
             pcie.Bar(3, 32 * MiB, True, True)),
            pcie.parse_sysfs_resource(RESOURCE))

    def test_bad_line(self):
        exc = self.assertRaises(exception.Invalid,
                                pcie.parse_sysfs_resource, '0x0 zz 0x0\n')
        self.assertIn("'0x0 zz 0x0'", str(exc))

    def test_reader(self):
        root = self.useFixture(fixtures.TempDir()).path
        os.mkdir(os.path.join(root, '0000:1b:00.0'))
        with open(os.path.join(root, '0000:1b:00.0', 'resource'), 'w') as f:
            f.write(RESOURCE)
        read = pcie.sysfs_bar_reader(root)
        self.assertEqual(3, len(read('0000:1B:00.0')))
        self.assertIsNone(read('0000:1c:00.0'))


H200 = (pcie.Bar(0, 16 * MiB, False, False),
        pcie.Bar(1, 256 * GiB, True, True),
        pcie.Bar(3, 32 * MiB, True, True))


class WindowTest(test.TestCase):

    def test_formula(self):
        self.assertEqual(0, pcie.mmio64_window([]))
        self.assertEqual(0, pcie.mmio64_window([H200[:1]]))
        self.assertEqual(512 * GiB, pcie.mmio64_window([H200]))
        self.assertEqual(1024 * GiB, pcie.mmio64_window([H200] * 2))
        # Three devices: 1.5 TiB rounded up to a power of two.
        self.assertEqual(2048 * GiB, pcie.mmio64_window([H200] * 3))
        self.assertEqual(4096 * GiB, pcie.mmio64_window([H200] * 8))

    def test_firmware_default(self):
        hw = guest_hardware.GuestHardware('q35')
        self.assertEqual('uefi', pcie.firmware_for(hw, True))
        self.assertEqual('bios', pcie.firmware_for(hw, False))
        self.assertEqual('bios', pcie.firmware_for(
            guest_hardware.GuestHardware('q35', 'bios'), True))

    def test_window_beyond_address_space_refused(self):
        huge = (pcie.Bar(1, 2 ** 45, True, True),)
        exc = self.assertRaises(
            exception.GuestHardwareUnsupported, pcie.check_guest,
            guest_hardware.GuestHardware('q35'), 'uefi',
            {'0000:18:00.0': huge, '0000:2a:00.0': huge}, 2, 1024)
        self.assertIn('65536 GiB 64-bit MMIO window', str(exc))

    def test_eight_h200_fit(self):
        bars = {'0000:%02x:00.0' % i: H200 for i in range(8)}
        self.assertEqual(4096 * GiB, pcie.check_guest(
            guest_hardware.GuestHardware('pc-q35-7.2'), 'uefi', bars, 8,
            2 * 1024 * 1024))

    def test_ovmf_aperture(self):
        self.assertEqual(0, pcie.ovmf_aperture_mb(0))
        # The devices' window plus OVMF's classic 32 GiB, in MiB.
        self.assertEqual(512 * 1024 + 32 * 1024,
                         pcie.ovmf_aperture_mb(512 * GiB))

    def test_aperture_beyond_ovmf_knob_refused(self):
        # 16 x 1 TiB fits a 46-bit address space but not OVMF's knob.
        bars = {'0000:%02x:00.0' % i: (pcie.Bar(1, 1024 * GiB, True, True),)
                for i in range(16)}
        exc = self.assertRaises(
            exception.GuestHardwareUnsupported, pcie.check_guest,
            guest_hardware.GuestHardware('q35'), 'uefi', bars, 16, 1024)
        self.assertIn('16384 GiB 64-bit MMIO window; OVMF opens at most '
                      '16384 GiB', str(exc))
        # SeaBIOS has no such knob (its own limit is the 4 GiB BAR check).
        small = {a: (pcie.Bar(1, 2 * GiB, True, True),) for a in bars}
        self.assertEqual(32 * GiB, pcie.check_guest(
            guest_hardware.GuestHardware('q35'), 'bios', small, 16, 1024))


def _layout(keys, ports=0):
    """The controllers add_pcie_layout writes for hostdevs with these
    expander keys, by index."""
    devices = ET.Element('devices')
    hostdevs = [(ET.SubElement(devices, 'hostdev'), key) for key in keys]
    pcie.add_pcie_layout(devices, hostdevs, 0, ports)
    return {int(c.get('index')): c for c in devices.findall('controller')}


class ExpanderBusTest(test.TestCase):
    """Every root port behind an expander bus gets a bus number."""

    def _ranges(self, controllers):
        """(first, last) bus number of each expander's range, and the
        number of root ports behind it, lowest first."""
        behind = collections.Counter(
            int(c.find('address').get('bus'), 16)
            for c in controllers.values()
            if c.get('model') == 'pcie-root-port'
            and c.find('address') is not None)
        starts = sorted((int(c.find('target').get('busNr')), index)
                        for index, c in controllers.items()
                        if c.get('model') == 'pcie-expander-bus')
        ends = [start for start, _index in starts[1:]] + [pcie.PCI_BUSES]
        return [(start, end - 1, behind[index])
                for (start, index), end in zip(starts, ends)]

    def test_eight_gpus_on_two_cells(self):
        # The NUMA-confined board: 4 GPUs per cell, and 4 spare ports.
        controllers = _layout([('req', 0)] * 4 + [('req', 1)] * 4,
                              ports=12)
        ranges = self._ranges(controllers)
        self.assertEqual([(128, 191, 4), (192, 255, 4)], ranges)
        for first, last, ports in ranges:
            # The expander's own bus and one secondary bus per port.
            self.assertGreaterEqual(last - first + 1, ports + 1)
        # pcie-root keeps every number below the first expander's: its
        # spare ports and those libvirt adds get one each.
        on_root = [c for c in controllers.values()
                   if c.get('model') == 'pcie-root-port'
                   and c.find('address') is None]
        self.assertEqual(4, len(on_root))
        self.assertLess(len(on_root), ranges[0][0])

    def test_one_expander_per_group_and_cell(self):
        keys = [('a', 0), ('a', 0), ('b', 0), ('a', 1), ('b', 1), ('b', 1)]
        ranges = self._ranges(_layout(keys))
        self.assertEqual([2, 1, 1, 2], [ports for _f, _l, ports in ranges])
        self.assertEqual(pcie.ROOT_BUSES, ranges[0][0])
        self.assertEqual(pcie.PCI_BUSES - 1, ranges[-1][1])
        for (first, last, ports), following in zip(ranges,
                                                   ranges[1:] + [None]):
            self.assertGreaterEqual(last - first + 1, ports + 1)
            if following:
                self.assertLess(last, following[0])

    def test_no_expanders_no_numbers(self):
        self.assertEqual([], pcie.expander_bus_numbers([]))
        self.assertEqual([], self._ranges(_layout([None, None])))

    def test_too_many_ports_for_a_span_refused(self):
        # 64 expanders get 2 numbers each: one root port behind each.
        self.assertEqual(list(range(128, 256, 2)),
                         pcie.expander_bus_numbers([(0, 1)] * 64))
        exc = self.assertRaises(
            exception.GuestHardwareUnsupported, pcie.expander_bus_numbers,
            [(0, 1)] * 63 + [(5, 2)])
        self.assertIn('the expander bus of guest NUMA cell 5 has 2 root '
                      'ports; each of the 64 expander buses has 2 bus '
                      'numbers, which hold at most 1 root ports', str(exc))
