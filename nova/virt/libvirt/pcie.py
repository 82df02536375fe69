"""The PCIe side of a guest domain: BAR sizes, the 64-bit MMIO window,
root ports and NUMA-bound expander buses, and the checks that refuse a
guest whose devices could not work.

libvirt's node devices do not report BARs; on a real host they come from
sysfs (``/sys/bus/pci/devices/<address>/resource``), on a generated host
from the fake host (see nova.virt.fake.host.bar_sizes). The driver takes
a ``BarReader`` so either can feed it.

The 64-bit MMIO window (``pcihole64`` of ``pcie-root``) is::

    per device:  w(d) = pow2(sum of its 64-bit prefetchable BAR sizes)
    window:      W    = pow2(sum over devices of w(d))

where ``pow2`` rounds up to a power of two. Each device sits alone behind
a root port whose prefetchable window must be aligned to its largest BAR,
so a device takes ``w(d)`` of address space at worst; windows that are
powers of two packed largest first leave no gaps, and a power-of-two
total keeps the whole window naturally aligned. For an H200 (BAR1 256 GiB,
BAR3 32 MiB) ``w`` is 512 GiB; eight of them need 4 TiB.
"""

import collections
import dataclasses
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence

from nova import exception
from nova.pci import utils as pci_utils
from nova.virt import guest_hardware

GiB = 1024 ** 3

# Linux resource flags in sysfs ``resource`` (include/linux/ioport.h).
_IORESOURCE_MEM = 0x00000200
_IORESOURCE_PREFETCH = 0x00002000
_IORESOURCE_MEM_64 = 0x00100000
# The first six lines of ``resource`` are BARs 0-5 (then the ROM).
_NUM_BARS = 6

# The guest physical address width nova assumes for the 64-bit window: a
# GPU guest gets the host's width (``<maxphysaddr mode='passthrough'>``),
# and the CPUs of HGX H100/H200 servers (Xeon 4th/5th gen, EPYC 9004)
# have 46 bits or more.
GUEST_PHYS_BITS = 46
# Above this a 64-bit BAR is a "large BAR" nova only maps with UEFI.
BIOS_MAX_BAR = 4 * GiB
# PCI bus numbers of a PCI domain, and those pcie-root's hierarchy keeps
# below the expander buses (see expander_bus_numbers).
PCI_BUSES = 256
ROOT_BUSES = 128
# OVMF's own 64-bit aperture in builds that do not size it from the
# guest's address width (edk2 before stable202211), and the largest
# size its ``opt/ovmf/X-PciMmio64Mb`` fw_cfg knob takes (16 TiB, in MiB).
OVMF_CLASSIC_APERTURE = 32 * GiB
OVMF_MAX_APERTURE_MB = 16 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Bar:
    """One memory BAR of a device: its index, size in bytes and kind."""

    index: int
    size: int
    is_64bit: bool
    prefetchable: bool


# Address -> the device's memory BARs; None when they cannot be read.
BarReader = Callable[[str], tuple[Bar, ...] | None]


def parse_sysfs_resource(text: str) -> tuple[Bar, ...]:
    """The memory BARs of a sysfs ``resource`` file (``start end flags``
    per line, hex); unused and I/O port BARs are left out."""
    bars = []
    for index, line in enumerate(text.splitlines()[:_NUM_BARS]):
        try:
            start, end, flags = (int(field, 16) for field in line.split())
        except ValueError:
            raise exception.Invalid(reason=(
                'sysfs resource line %r is not allowed; three hex numbers '
                '"start end flags" are required' % line))
        if end <= start or not flags & _IORESOURCE_MEM:
            continue
        bars.append(Bar(index=index, size=end - start + 1,
                        is_64bit=bool(flags & _IORESOURCE_MEM_64),
                        prefetchable=bool(flags & _IORESOURCE_PREFETCH)))
    return tuple(bars)


def sysfs_bar_reader(root: str = '/sys/bus/pci/devices') -> BarReader:
    """A BarReader of the host's sysfs under ``root``."""
    def read(address: str) -> tuple[Bar, ...] | None:
        path = os.path.join(root, pci_utils.normalize_address(address),
                            'resource')
        try:
            with open(path) as handle:
                return parse_sysfs_resource(handle.read())
        except FileNotFoundError:
            return None
    return read


def _pow2(value: int) -> int:
    return 1 << (value - 1).bit_length() if value > 0 else 0


def large_bars(bars: Sequence[Bar]) -> list[Bar]:
    """The 64-bit prefetchable BARs, the ones the 64-bit window holds."""
    return [bar for bar in bars if bar.is_64bit and bar.prefetchable]


def mmio64_window(devices_bars: Sequence[Sequence[Bar]]) -> int:
    """The 64-bit MMIO window (bytes) for devices with these BARs, by
    the module docstring's formula; 0 without 64-bit BARs."""
    return _pow2(sum(_pow2(sum(bar.size for bar in large_bars(bars)))
                     for bars in devices_bars))


def ovmf_aperture_mb(window: int) -> int:
    """The 64-bit MMIO aperture (MiB) OVMF is told to open for a guest
    whose devices need ``window`` bytes: the window plus OVMF's classic
    32 GiB, which holds the 64-bit BARs of the guest's other devices
    (virtio) and the reservations of its spare root ports. OVMF takes it
    as a minimum (a newer build may open a larger window of its own);
    0 without a window."""
    if not window:
        return 0
    return (window + OVMF_CLASSIC_APERTURE) // (1024 * 1024)


def firmware_for(hardware: guest_hardware.GuestHardware,
                 has_devices: bool) -> str:
    """The firmware of a guest: the flavor's choice, else UEFI for a
    guest with passed-through devices (large BARs need OVMF), else BIOS
    (upstream's default)."""
    if hardware.firmware_type:
        return hardware.firmware_type
    return guest_hardware.UEFI if has_devices else guest_hardware.BIOS


def check_guest(hardware: guest_hardware.GuestHardware, firmware: str,
                devices_bars: dict[str, tuple[Bar, ...]],
                device_count: int, memory_mb: int) -> int:
    """Refuse (GuestHardwareUnsupported, saying why) a guest whose
    devices could not work; return its 64-bit MMIO window in bytes.

    ``devices_bars`` has the BARs of the devices nova could read; a
    device without them only counts toward the PCIe machine check.
    """
    if device_count and not hardware.is_q35:
        raise exception.GuestHardwareUnsupported(reason=(
            'machine type %s has no PCIe root ports for the %d passed-'
            'through device(s); use q35 ([libvirt]hw_machine_type or '
            'flavor extra spec %s)' % (
                hardware.machine_type or '<hypervisor default>',
                device_count, guest_hardware.MACHINE_TYPE_SPEC)))
    if firmware == guest_hardware.BIOS:
        for address, bars in sorted(devices_bars.items()):
            big = [bar for bar in large_bars(bars)
                   if bar.size > BIOS_MAX_BAR]
            if big:
                raise exception.GuestHardwareUnsupported(reason=(
                    'device %s has a %d GiB 64-bit BAR%d, which BIOS '
                    'firmware (SeaBIOS) is not relied on to map; use '
                    '%s=uefi' % (address, big[0].size // GiB,
                                 big[0].index,
                                 guest_hardware.FIRMWARE_TYPE_SPEC)))
    window = mmio64_window(list(devices_bars.values()))
    limit = 2 ** GUEST_PHYS_BITS - memory_mb * 1024 * 1024 - 4 * GiB
    if window > limit:
        raise exception.GuestHardwareUnsupported(reason=(
            'the devices need a %d GiB 64-bit MMIO window, more than the '
            '%d GiB a %d-bit guest address space has above the guest\'s '
            'memory' % (window // GiB, max(limit, 0) // GiB,
                        GUEST_PHYS_BITS)))
    if (firmware == guest_hardware.UEFI
            and ovmf_aperture_mb(window) > OVMF_MAX_APERTURE_MB):
        raise exception.GuestHardwareUnsupported(reason=(
            'the devices need a %d GiB 64-bit MMIO window; OVMF opens '
            'at most %d GiB when told its size' % (
                window // GiB, OVMF_MAX_APERTURE_MB // 1024)))
    return window


def _pci_address(bus: int, slot: int = 0) -> dict:
    return {'type': 'pci', 'domain': '0x0000', 'bus': '0x%02x' % bus,
            'slot': '0x%02x' % slot, 'function': '0x0'}


def expander_bus_numbers(expanders: Sequence[tuple[int, int]]
                         ) -> list[int]:
    """The ``busNr`` of each ``pcie-expander-bus``, given as (guest
    cell, root ports behind it) pairs.

    An expander takes its ``busNr`` and every bus behind it the numbers
    above, up to the next expander's; ``pcie-root`` keeps the numbers
    below the first expander's. Without explicit numbers libvirt gives
    the expanders 254, 252, ..., one bus each behind them, so the
    firmware gives a secondary bus to only one root port per expander and
    the devices behind the others do not enumerate. ``pcie-root`` keeps
    0 to ``ROOT_BUSES - 1`` (its root ports, spare ones and those libvirt
    adds for its own devices take one each); the expanders share the rest
    in equal spans, each of which must hold the expander's own bus and
    one per root port behind it.
    """
    if not expanders:
        return []
    span = (PCI_BUSES - ROOT_BUSES) // len(expanders)
    for cell, ports in expanders:
        if ports + 1 > span:
            raise exception.GuestHardwareUnsupported(reason=(
                'the expander bus of guest NUMA cell %d has %d root ports;'
                ' each of the %d expander buses has %d bus numbers, which '
                'hold at most %d root ports' % (
                    cell, ports, len(expanders), span, span - 1)))
    return [ROOT_BUSES + position * span
            for position in range(len(expanders))]


def add_pcie_layout(devices: ET.Element,
                    hostdevs: Sequence[tuple[ET.Element,
                                             tuple[str, int] | None]],
                    window: int, num_pcie_ports: int) -> None:
    """Add the PCIe controllers of a q35 guest to ``devices`` and give
    each hostdev its own root port.

    ``hostdevs`` are (hostdev element, expander key) pairs: hostdevs with
    the same key ``(group, cell)`` share a ``pcie-expander-bus`` bound to
    guest NUMA cell ``cell``, numbered by expander_bus_numbers; root
    ports of hostdevs without a key sit on ``pcie-root``.
    ``window`` (bytes) becomes ``pcihole64``; free root ports are added
    up to ``num_pcie_ports`` root ports in all.
    """
    root = ET.Element('controller', {'type': 'pci', 'index': '0',
                                     'model': 'pcie-root'})
    if window:
        ET.SubElement(root, 'pcihole64', {'unit': 'KiB'}).text = str(
            window // 1024)
    controllers = [root]
    # Next free slot of each expander bus (libvirt places the rest).
    slots: dict[int, int] = {}

    def controller(model: str, parent: int | None) -> int:
        index = len(controllers)
        element = ET.Element('controller', {'type': 'pci',
                                            'index': str(index),
                                            'model': model})
        if parent is not None:
            slot = slots.get(parent, 0)
            slots[parent] = slot + 1
            ET.SubElement(element, 'address', _pci_address(parent, slot))
        controllers.append(element)
        return index

    behind = collections.Counter(key for _hostdev, key in hostdevs
                                 if key is not None)
    keys = sorted(behind, key=lambda k: (k[1], k[0]))
    expanders: dict[tuple[str, int], int] = {}
    for key, bus_nr in zip(keys, expander_bus_numbers(
            [(key[1], behind[key]) for key in keys])):
        index = controller('pcie-expander-bus', None)
        target = ET.SubElement(controllers[index], 'target',
                               {'busNr': str(bus_nr)})
        ET.SubElement(target, 'node').text = str(key[1])
        expanders[key] = index
    ports = 0
    for hostdev, key in hostdevs:
        port = controller('pcie-root-port',
                          expanders[key] if key is not None else None)
        ports += 1
        ET.SubElement(hostdev, 'address', _pci_address(port))
    for _free in range(num_pcie_ports - ports):
        controller('pcie-root-port', None)
    # Controllers come first, as libvirt writes them.
    for position, element in enumerate(controllers):
        devices.insert(position, element)
