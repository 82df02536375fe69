"""Translation between libvirt XML documents and nova's plain data.

Two directions are needed by the driver: node device XML (what the host
has) becomes a ``HostDevice``, and a spawn request becomes guest domain XML
with one PCI ``<hostdev>`` per assigned device. ElementTree is enough for
both; the documents are small and well-formed.
"""

import dataclasses
import uuid as uuidlib
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from nova import exception
from nova.pci import device as pci_device
from nova.pci import utils as pci_utils
from nova.virt import guest_hardware
from nova.virt import driver
from nova.virt import hardware
from nova.virt import hugepages
from nova.virt.libvirt import pcie


def _hex_attr(element: ET.Element | None, what: str, xml_name: str) -> str:
    """Return the ``id`` attribute of ``element`` as 4 lower hex digits."""
    value = element.get('id') if element is not None else None
    if value is None:
        raise exception.Invalid(reason=(
            'node device %s has no %s id; a PCI capability needs '
            '<vendor id="0x..."/> and <product id="0x..."/>' % (
                xml_name, what)))
    try:
        return '%04x' % int(value, 16)
    except ValueError:
        raise exception.Invalid(reason=(
            'node device %s has %s id %r; a hex number is required' % (
                xml_name, what, value)))


def _address_from_caps(cap: ET.Element, xml_name: str) -> str:
    """Build ``dddd:bb:ss.f`` from the decimal fields libvirt writes."""
    parts = []
    for field in ('domain', 'bus', 'slot', 'function'):
        text = cap.findtext(field)
        try:
            parts.append(int(text))
        except (TypeError, ValueError):
            raise exception.Invalid(reason=(
                'node device %s has PCI %s %r; a decimal integer is '
                'required' % (xml_name, field, text)))
    return pci_utils.normalize_address('%x:%x:%x.%x' % tuple(parts))


def _address_from_element(element: ET.Element) -> str:
    """Normalize an ``<address domain='0x..' bus=.. slot=.. function=..>``."""
    return pci_utils.normalize_address('%s:%s:%s.%s' % tuple(
        '%x' % int(element.get(field, ''), 16)
        for field in ('domain', 'bus', 'slot', 'function')))


def parse_pci_nodedev(xml: str) -> pci_device.HostDevice | None:
    """Return the device of a libvirt node device XML document.

    Returns None for node devices without a ``pci`` capability (the caller
    may list every device). Vendor and product ids are lower-case hex,
    ``numa_node`` is None when libvirt reports no NUMA affinity, and the
    device is type-PF when any ``virt_functions`` capability is present,
    type-VF (with ``parent_addr``) when it has a ``phys_function``. A VPD
    card serial number is ``card_serial_number`` when reported.
    """
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as err:
        raise exception.Invalid(reason=(
            'node device XML is not well-formed: %s' % err))
    name = root.findtext('name') or '<unnamed>'
    cap = root.find("capability[@type='pci']")
    if cap is None:
        return None

    address = _address_from_caps(cap, name)
    vendor_id = _hex_attr(cap.find('vendor'), 'vendor', name)
    product_id = _hex_attr(cap.find('product'), 'product', name)

    numa = cap.find('numa')
    numa_node = None
    if numa is not None and numa.get('node') is not None:
        node = int(numa.get('node'))
        # libvirt uses -1 where the kernel knows no affinity.
        numa_node = node if node >= 0 else None

    dev_type = pci_device.DEV_TYPE_PCI
    parent_addr = None
    if cap.find("capability[@type='virt_functions']") is not None:
        dev_type = pci_device.DEV_TYPE_PF
    phys_fn = cap.find("capability[@type='phys_function']/address")
    if phys_fn is not None:
        dev_type = pci_device.DEV_TYPE_VF
        parent_addr = _address_from_element(phys_fn)

    group = cap.find('iommuGroup')
    iommu_group = int(group.get('number')) if group is not None else None

    pci_class = cap.findtext('class')
    if pci_class:
        pci_class = '%06x' % int(pci_class, 16)

    return pci_device.HostDevice(
        address=address, vendor_id=vendor_id, product_id=product_id,
        dev_type=dev_type, parent_addr=parent_addr, numa_node=numa_node,
        iommu_group=iommu_group,
        driver=root.findtext('driver/name') or None,
        pci_class=pci_class or None,
        card_serial_number=_vpd_serial_number(cap),
        health_problem=_link_down(cap))


def _link_down(cap: ET.Element) -> str | None:
    """Why a PCIe device's link is down, None if it is up or libvirt
    reports no link: a device capable of a link (``<link
    validity='cap'>`` with a width) whose status link (``validity='sta'``,
    from sysfs ``current_link_width``) is missing or has width 0 has
    fallen off the bus while still listed."""
    capable = cap.find("pci-express/link[@validity='cap']")
    if capable is None or not capable.get('width', '0').strip('0'):
        return None
    status = cap.find("pci-express/link[@validity='sta']")
    width = status.get('width', '0') if status is not None else '0'
    if width.strip('0'):
        return None
    return 'PCIe link down (capable of x%s, now x0)' % capable.get('width')


def _vpd_serial_number(cap: ET.Element) -> str | None:
    """The card serial number of a PCI capability's VPD, if libvirt
    reports one: ``<capability type='vpd'>`` holds it in
    ``<fields access='readonly'><serial_number>``."""
    text = cap.findtext(
        "capability[@type='vpd']/fields[@access='readonly']/serial_number")
    return text.strip() if text and text.strip() else None


def domain_type_for_uri(uri: str, virt_type: str = 'kvm') -> str:
    """Return the guest domain type the hypervisor at ``uri`` accepts:
    'test' on libvirt's test driver, else ``virt_type`` ('kvm' or
    'qemu', ``[libvirt]virt_type``)."""
    return 'test' if uri.startswith('test://') else virt_type


def hostdev_element(device: pci_device.Passthrough) -> ET.Element:
    """Return the ``<hostdev>`` element that passes ``device`` through.

    The source address fields are 0x-prefixed hex; libvirt picks the guest
    side address itself. ``managed`` is 'yes' when libvirt detaches the
    device from its host driver.
    """
    address = pci_utils.normalize_address(device.address)
    domain, bus, slot_fn = address.split(':')
    slot, function = slot_fn.split('.')
    hostdev = ET.Element('hostdev', {
        'mode': 'subsystem', 'type': 'pci',
        'managed': 'yes' if device.managed else 'no'})
    source = ET.SubElement(hostdev, 'source')
    ET.SubElement(source, 'address', {
        'domain': '0x' + domain, 'bus': '0x' + bus,
        'slot': '0x' + slot, 'function': '0x' + function})
    return hostdev


def _positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise exception.Invalid(reason=(
            '%s %r is not allowed; a positive integer is required' % (
                what, value)))
    return value


# Domains nova creates are named this prefix + instance uuid.
DOMAIN_NAME_PREFIX = 'instance-'


def domain_name(instance_uuid: str) -> str:
    """The libvirt domain name of an instance: ``instance-<uuid>``.

    Unique per instance whatever its display name (libvirt refuses two
    domains of one name), stable across database rebuilds (unlike the
    ``instance-%08x`` of upstream's database id) and, by the prefix,
    telling nova's guests apart from other domains on the host.
    """
    return DOMAIN_NAME_PREFIX + instance_uuid


def instance_uuid_of_domain(name: str) -> str | None:
    """The instance uuid of a domain nova named, or None for others."""
    if not name.startswith(DOMAIN_NAME_PREFIX):
        return None
    try:
        return str(uuidlib.UUID(name[len(DOMAIN_NAME_PREFIX):]))
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True)
class GuestPlatform:
    """What the guest's machine is built from besides the flavor's size:
    its hardware (see nova.virt.guest_hardware), the host architecture,
    ``[libvirt]num_pcie_ports``, the BARs of the devices nova could
    read, by device address (see nova.virt.libvirt.pcie), and the host
    CPUs of each NUMA node (to pin each guest cell's vCPUs)."""

    hardware: guest_hardware.GuestHardware = guest_hardware.GuestHardware(
        machine_type='q35')
    arch: str = 'x86_64'
    num_pcie_ports: int = 0
    bars: Mapping[str, tuple[pcie.Bar, ...]] = dataclasses.field(
        default_factory=dict)
    # Host CPUs of each host NUMA node the guest may be confined to.
    node_cpus: Mapping[int, tuple[int, ...]] = dataclasses.field(
        default_factory=dict)


def _guest_cells(vcpus: int, memory_mb: int, cells: int
                 ) -> list[tuple[tuple[int, ...], int]]:
    """(vCPUs, MiB) of each guest NUMA cell, split evenly as upstream."""
    try:
        cpus = guest_hardware.split_evenly(vcpus, cells)
        memory = guest_hardware.split_evenly(memory_mb, cells)
    except exception.Invalid:
        raise exception.GuestHardwareUnsupported(reason=(
            '%d vCPUs and %d MiB cannot be split evenly over %s=%d NUMA '
            'cells' % (vcpus, memory_mb, guest_hardware.NUMA_NODES_SPEC,
                       cells)))
    result, first = [], 0
    for count, mib in zip(cpus, memory):
        result.append((tuple(range(first, first + count)), mib))
        first += count
    return result


def _add_numa(domain: ET.Element, cpu: ET.Element, vcpus: int,
              memory_mb: int, cells: int, numa_nodes: tuple[int, ...],
              host_cpus: tuple[int, ...],
              node_cpus: Mapping[int, tuple[int, ...]]) -> dict[int, int]:
    """Give the guest ``cells`` NUMA cells; with ``numa_nodes``, cell i
    is bound strictly to host node ``numa_nodes[i % len(numa_nodes)]``,
    the vCPUs to ``host_cpus`` and, when ``node_cpus`` knows the node,
    each cell's vCPUs to its node's CPUs; QEMU's emulator threads run on
    ``host_cpus`` too, so a confined guest's I/O and device emulation
    stay on its nodes. Returns host node -> its first guest cell (where
    that node's devices are local)."""
    if numa_nodes and host_cpus:
        vcpu = domain.find('vcpu')
        vcpu.set('placement', 'static')
        vcpu.set('cpuset', hardware.format_cpu_set(host_cpus))
    numa = ET.SubElement(cpu, 'numa')
    cell_of_node: dict[int, int] = {}
    cputune = ET.Element('cputune')
    numatune = ET.SubElement(domain, 'numatune') if numa_nodes else None
    if numatune is not None:
        ET.SubElement(numatune, 'memory', {
            'mode': 'strict',
            'nodeset': hardware.format_cpu_set(numa_nodes)})
    for index, (cpus, mib) in enumerate(
            _guest_cells(vcpus, memory_mb, cells)):
        ET.SubElement(numa, 'cell', {
            'id': str(index), 'cpus': hardware.format_cpu_set(cpus),
            'memory': str(mib), 'unit': 'MiB'})
        if numatune is not None:
            node = numa_nodes[index % len(numa_nodes)]
            cell_of_node.setdefault(node, index)
            ET.SubElement(numatune, 'memnode', {
                'cellid': str(index), 'mode': 'strict',
                'nodeset': str(node)})
            if cells > 1 and node_cpus.get(node):
                for vcpu_id in cpus:
                    ET.SubElement(cputune, 'vcpupin', {
                        'vcpu': str(vcpu_id),
                        'cpuset': hardware.format_cpu_set(node_cpus[node])})
    if numa_nodes and host_cpus:
        ET.SubElement(cputune, 'emulatorpin', {
            'cpuset': hardware.format_cpu_set(host_cpus)})
    if len(cputune):
        domain.append(cputune)
    return cell_of_node


def _add_hugepages(domain: ET.Element, page_size_kib: int,
                   cells: int) -> None:
    """Back every guest NUMA cell with hugepages of ``page_size_kib``
    KiB; ``<numatune>`` (see _add_numa) takes each cell's pages from its
    host node. A guest without cells cannot say where its pages come
    from: the compute always places a hugepage guest (at least one
    cell)."""
    if not cells:
        raise exception.Invalid(reason=(
            'hugepages of %d KiB are not allowed for a guest without NUMA '
            'cells; each cell is backed on one host node' % page_size_kib))
    backing = ET.Element('memoryBacking')
    pages = ET.SubElement(backing, 'hugepages')
    ET.SubElement(pages, 'page', {
        'size': str(page_size_kib), 'unit': 'KiB',
        'nodeset': hardware.format_cpu_set(tuple(range(cells)))})
    # Beside <memory>, where libvirt writes it.
    domain.insert(list(domain).index(domain.find('vcpu')), backing)


def _add_machine(domain: ET.Element, platform: GuestPlatform,
                 firmware: str) -> None:
    """``<os>`` with the machine type and firmware, and the features a
    PCIe/UEFI guest needs. UEFI is libvirt's firmware autoselection
    (``firmware='efi'``), which picks OVMF from the QEMU firmware
    descriptors; Secure Boot is not asked for (it needs SMM and enrolled
    keys). ACPI and the APIC as upstream gives every x86 guest: without
    ACPI the guest has no power button, so a soft reboot (libvirt presses
    it) does nothing."""
    os_el = domain.find('os')
    type_el = os_el.find('type')
    type_el.set('arch', platform.arch)
    if platform.hardware.machine_type:
        type_el.set('machine', platform.hardware.machine_type)
    if firmware == guest_hardware.UEFI:
        os_el.set('firmware', 'efi')
        fw = ET.SubElement(os_el, 'firmware')
        ET.SubElement(fw, 'feature', {'enabled': 'no',
                                      'name': 'secure-boot'})
    features = ET.SubElement(domain, 'features')
    ET.SubElement(features, 'acpi')
    ET.SubElement(features, 'apic')


def _add_cpu(domain: ET.Element, has_devices: bool,
             domain_type: str) -> ET.Element:
    """``<cpu>``; a guest with passed-through devices gets the host CPU
    and its physical address width, so its 64-bit MMIO window fits (see
    nova.virt.libvirt.pcie.GUEST_PHYS_BITS). Under QEMU's emulator
    (domain type ``qemu``) libvirt refuses ``host-passthrough``: such a
    guest gets ``maximum``, every feature the emulator has, and the
    emulator's own address width (40 bits), which a host's would not
    change."""
    if not has_devices:
        return ET.SubElement(domain, 'cpu')
    emulated = domain_type == 'qemu'
    cpu = ET.SubElement(domain, 'cpu', {
        'mode': 'maximum' if emulated else 'host-passthrough',
        'check': 'none', 'migratable': 'off'})
    if not emulated:
        ET.SubElement(cpu, 'maxphysaddr', {'mode': 'passthrough'})
    return cpu


def _add_topology(cpu: ET.Element, vcpus: int, cells: int) -> None:
    """A CPU ``<topology>`` of one socket per guest NUMA cell (one
    without cells) with one thread per core, so the guest's sockets match
    its cells instead of libvirt's default of a one-core socket per
    vCPU. The cells split the vCPUs evenly (see _guest_cells)."""
    sockets = cells or 1
    topology = ET.Element('topology', {
        'sockets': str(sockets), 'dies': '1',
        'cores': str(vcpus // sockets), 'threads': '1'})
    # <topology> before <maxphysaddr> and <numa>, as libvirt writes it.
    cpu.insert(0, topology)


# libvirt's namespace for QEMU command line arguments.
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
ET.register_namespace('qemu', QEMU_NS)


def _add_fw_cfg(domain: ET.Element, firmware: str, window: int) -> None:
    """Tell OVMF how large a 64-bit MMIO aperture to open
    (``opt/ovmf/X-PciMmio64Mb`` through fw_cfg): older OVMF builds open
    a fixed 32 GiB and leave GPUs whose BARs do not fit unassigned.
    libvirt's ``<sysinfo type='fwcfg'>`` refuses the ``opt/ovmf/`` names
    as reserved, so the entry is a QEMU ``-fw_cfg`` argument."""
    aperture = pcie.ovmf_aperture_mb(window)
    if firmware != guest_hardware.UEFI or not aperture:
        return
    commandline = ET.SubElement(domain, '{%s}commandline' % QEMU_NS)
    for value in ('-fw_cfg', 'name=opt/ovmf/X-PciMmio64Mb,string=%d' %
                  aperture):
        ET.SubElement(commandline, '{%s}arg' % QEMU_NS, {'value': value})


@dataclasses.dataclass(frozen=True)
class GuestIO:
    """A guest's root disk (a qcow2 file), serial console log file and
    NIC's libvirt network; None where the guest has none."""
    disk_path: str | None = None
    console_log: str | None = None
    network: str | None = None


def disk_element(path: str) -> ET.Element:
    """The virtio root disk backed by the qcow2 file ``path``, first in
    the boot order."""
    disk = ET.Element('disk', {'type': 'file', 'device': 'disk'})
    ET.SubElement(disk, 'driver', {'name': 'qemu', 'type': 'qcow2'})
    ET.SubElement(disk, 'source', {'file': path})
    ET.SubElement(disk, 'target', {'dev': 'vda', 'bus': 'virtio'})
    ET.SubElement(disk, 'boot', {'order': '1'})
    return disk


def serial_console_element(log_path: str) -> ET.Element:
    """The first serial port (the guest's ttyS0, and libvirt's console),
    logged by virtlogd to ``log_path``, appended across boots."""
    serial = ET.Element('serial', {'type': 'pty'})
    ET.SubElement(serial, 'log', {'file': log_path, 'append': 'on'})
    ET.SubElement(serial, 'target', {'port': '0'})
    return serial


def interface_element(network: str) -> ET.Element:
    """A virtio NIC on the libvirt network ``network``."""
    interface = ET.Element('interface', {'type': 'network'})
    ET.SubElement(interface, 'source', {'network': network})
    ET.SubElement(interface, 'model', {'type': 'virtio'})
    return interface


def _add_guest_io(devices: ET.Element, io: GuestIO) -> None:
    """Add the disk, console and NIC ``io`` names to ``<devices>``."""
    if io.disk_path:
        devices.append(disk_element(io.disk_path))
    if io.network:
        devices.append(interface_element(io.network))
    if io.console_log:
        devices.append(serial_console_element(io.console_log))


def build_guest_xml(spec: driver.GuestSpec, domain_type: str,
                    host_cpus: tuple[int, ...] = (),
                    platform: GuestPlatform | None = None,
                    io: GuestIO = GuestIO()) -> str:
    """Return the domain XML of the guest ``spec`` describes.

    The domain uuid is the instance uuid and its name ``domain_name()``,
    so the instance can be found on the hypervisor without any other
    bookkeeping; the display name is the domain's title. With NUMA nodes
    the guest is confined to them, its vCPUs to ``host_cpus`` (see
    nova.pci.numa for how they are chosen). ``platform`` gives machine
    type, firmware, NUMA cell count and the PCIe layout's inputs
    (default: q35); a guest whose devices could not work on it raises
    GuestHardwareUnsupported saying why. ``io`` adds a root disk, a
    console log and a NIC.
    """
    platform = platform or GuestPlatform()
    name, vcpus, memory_mb = spec.name, spec.vcpus, spec.memory_mb
    numa_nodes, pci_devices = tuple(spec.numa_nodes), spec.pci_devices
    try:
        canonical_uuid = str(uuidlib.UUID(str(spec.instance_uuid)))
    except ValueError:
        raise exception.Invalid(reason=(
            'instance uuid %r is not a valid UUID' % (spec.instance_uuid,)))
    if not isinstance(name, str) or not name.strip():
        raise exception.Invalid(reason=(
            'instance name %r is not allowed; a non-empty string is '
            'required' % (name,)))
    _positive_int(vcpus, 'vcpus')
    _positive_int(memory_mb, 'memory_mb')
    addresses = [pci_utils.normalize_address(dev.address)
                 for dev in pci_devices]
    if len(set(addresses)) != len(addresses):
        raise exception.Invalid(reason=(
            'PCI devices %s are not allowed; each device can be passed '
            'through once' % ', '.join(addresses)))
    firmware = pcie.firmware_for(platform.hardware, bool(pci_devices))
    window = pcie.check_guest(
        platform.hardware, firmware,
        {address: platform.bars[address] for address in addresses
         if address in platform.bars},
        len(addresses), memory_mb)

    domain = ET.Element('domain', {'type': domain_type})
    ET.SubElement(domain, 'name').text = domain_name(canonical_uuid)
    # libvirt refuses a title with a line break.
    ET.SubElement(domain, 'title').text = ' '.join(name.splitlines())
    ET.SubElement(domain, 'uuid').text = canonical_uuid
    ET.SubElement(domain, 'memory', {'unit': 'MiB'}).text = str(memory_mb)
    ET.SubElement(domain, 'vcpu').text = str(vcpus)
    os_el = ET.SubElement(domain, 'os')
    ET.SubElement(os_el, 'type').text = 'hvm'
    _add_machine(domain, platform, firmware)
    cpu = _add_cpu(domain, bool(pci_devices), domain_type)
    cells = platform.hardware.numa_cells or (1 if numa_nodes else 0)
    cell_of_node = _add_numa(domain, cpu, vcpus, memory_mb, cells,
                             numa_nodes, tuple(host_cpus),
                             platform.node_cpus) if cells else {}
    # A <cpu> with neither a mode nor cells says nothing: left out.
    if len(cpu) or cpu.get('mode'):
        _add_topology(cpu, vcpus, cells)
    else:
        domain.remove(cpu)
    if spec.page_size_kib:
        _add_hugepages(domain, spec.page_size_kib, cells)
    _add_fw_cfg(domain, firmware, window)
    devices = ET.SubElement(domain, 'devices')
    _add_guest_io(devices, io)
    hostdevs = []
    for dev in pci_devices:
        hostdev = hostdev_element(dev)
        devices.append(hostdev)
        cell = cell_of_node.get(dev.numa_node)
        hostdevs.append((hostdev, None if cell is None else (
            dev.request_id or '', cell)))
    if platform.hardware.is_q35:
        pcie.add_pcie_layout(devices, hostdevs, window,
                             platform.num_pcie_ports)
    if pci_devices:
        # A balloon cannot take back memory pinned for device DMA, and
        # libvirt would add a virtio one by default.
        ET.SubElement(devices, 'memballoon', {'model': 'none'})
    return ET.tostring(domain, encoding='unicode')


def parse_guest_hostdevs(xml: str) -> list[pci_device.Passthrough]:
    """Return each PCI hostdev of a domain as the spawn input has it.

    Used to check what a running guest really got.
    """
    root = ET.fromstring(xml)
    return [pci_device.Passthrough(
        address=_address_from_element(hostdev.find('source/address')),
        managed=hostdev.get('managed', 'no') == 'yes')
        for hostdev in root.findall("devices/hostdev[@type='pci']")]


def parse_guest_numa(xml: str) -> dict:
    """Return the NUMA confinement of a domain: ``nodeset`` (memory),
    ``cpuset`` (vCPUs) and ``cells`` (guest NUMA cells); None or 0 where
    the domain has none."""
    root = ET.fromstring(xml)
    memory = root.find('numatune/memory')
    return {'nodeset': memory.get('nodeset') if memory is not None
            else None,
            'cpuset': root.find('vcpu').get('cpuset'),
            'cells': len(root.findall('cpu/numa/cell'))}


def parse_guest_hugepages(xml: str) -> hugepages.GuestPages | None:
    """The hugepages a domain this driver wrote is backed by: the page
    size, the host node of each guest cell (``<numatune><memnode>``) and
    each cell's memory; None for a domain on ordinary pages."""
    root = ET.fromstring(xml)
    page = root.find('memoryBacking/hugepages/page')
    if page is None:
        return None
    size = int(page.get('size'))
    unit = page.get('unit', 'KiB')
    if unit != 'KiB':
        raise exception.Invalid(reason=(
            'hugepage unit %r is not supported; this driver writes KiB' %
            unit))
    nodes = {int(memnode.get('cellid')): int(memnode.get('nodeset'))
             for memnode in root.findall('numatune/memnode')}
    cells = []
    for cell in root.findall('cpu/numa/cell'):
        mib = int(cell.get('memory'))
        if cell.get('unit', 'KiB') == 'KiB':
            mib //= 1024
        cells.append((int(cell.get('id')), mib))
    cells.sort()
    return hugepages.GuestPages(
        page_size_kib=size,
        numa_nodes=tuple(nodes[cell_id] for cell_id, _mib in cells),
        cell_memory_mb=tuple(mib for _cell_id, mib in cells))
