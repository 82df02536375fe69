"""A fake: node XML for libvirt's ``test:///`` driver, modelling GPU hosts.

Nothing here describes real hardware nova runs on; it is for nova-all's
generated hosts, the demo, the tools and the tests. The test driver reads a
custom node file with the host CPU topology, memory and ``<device>`` node
devices, which makes it a fake hypervisor that speaks real libvirt.
``node_xml_from_devices`` builds such a file from ``NodeDevice`` records;
``hgx_h200_node_xml`` uses it for an NVIDIA HGX H200 8-GPU server so demos
and functional tests share one realistic host, and ``h200_nvl_node_xml``
for a 4-GPU PCIe server whose GPUs form two NVLink pairs. Each kind comes
with the ``[pci]`` options an operator writes for it (``h200_pci_config``,
``h200_nvl_pci_config``); ``write_compute_config`` writes a host and its
compute config file. Devices of a custom host (a GPU removed, a different
product) are made by editing the list from ``hgx_h200_devices`` and passing
it to ``node_xml_from_devices``.
"""

import dataclasses
import json
import os
import xml.etree.ElementTree as ET

from nova import exception
from nova.pci import device as pci_device
from nova.pci import utils as pci_utils
from nova.virt import hardware
from nova.virt.libvirt import pcie

# GPU n (1-based) of an HGX H200 board.
H200_GPU_ADDRESSES = (
    '0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0',
    '0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0',
)
H200_VENDOR_ID = '10de'
H200_PRODUCT_ID = '2335'
H200_PRODUCT_NAME = 'GH100 [H200 SXM 141GB]'
NVME_ADDRESS = '0000:c1:00.0'

# GPU n (1-based) of a 4-GPU PCIe server with H200 NVL cards, joined in
# pairs by 2-way NVLink bridges: {1, 2} and {3, 4}, no link between pairs.
H200_NVL_GPU_ADDRESSES = (
    '0000:17:00.0', '0000:31:00.0', '0000:b1:00.0', '0000:ca:00.0',
)
H200_NVL_PRODUCT_ID = '233b'
H200_NVL_PRODUCT_NAME = 'GH100 [H200 NVL]'
NIC_ADDRESS = '0000:4b:00.0'

# First IOMMU group number of the GPUs; each GPU has its own group.
_GPU_IOMMU_BASE = 20


@dataclasses.dataclass(frozen=True)
class NodeDevice(pci_device.HostDevice):
    """A device of a fake host: what the driver will report of it, plus
    what only the node file shows (names, PCIe link, and ``max_vfs``, the
    SR-IOV total VFs of a PF)."""

    vendor_name: str = ''
    product_name: str = ''
    link_speed: str | None = None
    link_width: str = '16'
    # The link trained down to nothing (the device fell off the bus).
    link_down: bool = False
    max_vfs: int = 8


def _split(address: str) -> tuple[int, int, int, int]:
    domain, bus, slot_fn = pci_utils.normalize_address(address).split(':')
    slot, function = slot_fn.split('.')
    return int(domain, 16), int(bus, 16), int(slot, 16), int(function, 16)


def _nodedev_name(address: str) -> str:
    return 'pci_%04x_%02x_%02x_%x' % _split(address)


def _switch_path(address: str) -> tuple[str, str]:
    """Return sysfs path and parent nodedev name behind a PCIe switch.

    An HGX baseboard puts each GPU (and the NICs and NVMe next to it)
    below a switch: root port on bus B-3, switch upstream port on B-2,
    downstream port on B-1, device on B.
    """
    domain, bus, _slot, _fn = _split(address)
    if bus < 3:
        # No room for a switch below bus 0: a root complex device.
        return ('/sys/devices/pci%04x:%02x/%s' % (
            domain, bus, pci_utils.normalize_address(address)), 'computer')
    root = bus - 3
    chain = ['%04x:%02x:01.0' % (domain, root),
             '%04x:%02x:00.0' % (domain, root + 1),
             '%04x:%02x:00.0' % (domain, root + 2),
             pci_utils.normalize_address(address)]
    path = '/sys/devices/pci%04x:%02x/%s' % (domain, root, '/'.join(chain))
    return path, _nodedev_name(chain[-2])


def _gpu_devices(addresses: tuple[str, ...], product_id: str,
                 product_name: str) -> list[NodeDevice]:
    """NVIDIA GPUs bound to vfio-pci, each in its own IOMMU group; the
    first half on NUMA node 0, the second half on node 1."""
    half = (len(addresses) + 1) // 2
    return [NodeDevice(
        address=address, vendor_id=H200_VENDOR_ID, product_id=product_id,
        numa_node=0 if index < half else 1,
        iommu_group=_GPU_IOMMU_BASE + index,
        driver='vfio-pci', pci_class='030200',
        vendor_name='NVIDIA Corporation', product_name=product_name,
        link_speed='32', link_width='16',
    ) for index, address in enumerate(addresses)]


def _nic_and_nvme() -> list[NodeDevice]:
    """A ConnectX-7 NIC (an SR-IOV PF) and a Samsung NVMe, which GPU device
    specs must not match."""
    return [NodeDevice(
        address=NIC_ADDRESS, vendor_id='15b3', product_id='1021',
        dev_type=pci_device.DEV_TYPE_PF, numa_node=0, iommu_group=40,
        driver='mlx5_core', pci_class='020000',
        vendor_name='Mellanox Technologies',
        product_name='MT2910 Family [ConnectX-7]',
        link_speed='32', link_width='16', max_vfs=16,
    ), NodeDevice(
        address=NVME_ADDRESS, vendor_id='144d', product_id='a80a',
        numa_node=1, iommu_group=41, driver='nvme', pci_class='010802',
        vendor_name='Samsung Electronics Co Ltd',
        product_name='NVMe SSD Controller PM9A1/PM9A3/980PRO',
        link_speed='16', link_width='4',
    )]


# H200-like memory BARs (what sysfs ``resource`` shows on a real host):
# BAR0 16 MiB of registers (32-bit), BAR1 256 GiB mapping the HBM and
# BAR3 32 MiB, both 64-bit prefetchable. An H100 SXM has BAR1 128 GiB.
_MiB = 1024 ** 2
_GPU_BARS = (pcie.Bar(0, 16 * _MiB, False, False),
             pcie.Bar(1, 256 * pcie.GiB, True, True),
             pcie.Bar(3, 32 * _MiB, True, True))
_BARS = {
    **{address: _GPU_BARS
       for address in H200_GPU_ADDRESSES + H200_NVL_GPU_ADDRESSES},
    NIC_ADDRESS: (pcie.Bar(0, 32 * _MiB, True, True),),
    NVME_ADDRESS: (pcie.Bar(0, 16 * 1024, True, False),),
}


def bar_sizes(address: str) -> tuple[pcie.Bar, ...] | None:
    """The memory BARs of a generated host's device (a
    nova.virt.libvirt.pcie.BarReader); None for other addresses."""
    return _BARS.get(pci_utils.normalize_address(address))


def hgx_h200_devices(num_gpus: int = 8,
                     extra_devices: bool = True) -> list[NodeDevice]:
    """Return the PCI devices of an HGX H200 host.

    GPUs 1..``num_gpus`` (1-4 on NUMA node 0, 5-8 on node 1) bound to
    vfio-pci, each in its own IOMMU group; with ``extra_devices`` also a
    Samsung NVMe and a ConnectX-7 NIC (an SR-IOV PF), which GPU device
    specs must not match.
    """
    if (isinstance(num_gpus, bool) or not isinstance(num_gpus, int)
            or not 0 <= num_gpus <= len(H200_GPU_ADDRESSES)):
        raise exception.Invalid(reason=(
            'num_gpus %r is not allowed; an HGX H200 board has 0 to %d '
            'GPUs' % (num_gpus, len(H200_GPU_ADDRESSES))))
    devices = _gpu_devices(H200_GPU_ADDRESSES, H200_PRODUCT_ID,
                           H200_PRODUCT_NAME)[:num_gpus]
    return devices + (_nic_and_nvme() if extra_devices else [])


def h200_nvl_node_xml(memory_mb: int = 1048576) -> str:
    """Return the node XML of a 4-GPU H200 NVL server.

    Two NUMA nodes with one 32-core, 2-thread socket each (128 vCPUs),
    ``memory_mb`` of RAM (1 TiB by default), four H200 NVL GPUs (two per
    NUMA node), a ConnectX-7 NIC and an NVMe.
    """
    devices = _gpu_devices(H200_NVL_GPU_ADDRESSES, H200_NVL_PRODUCT_ID,
                           H200_NVL_PRODUCT_NAME) + _nic_and_nvme()
    return node_xml_from_devices(devices, memory_mb=memory_mb,
                                 cores_per_socket=32)


def tracked_devices(devices: list[pci_device.HostDevice],
                    compute_node_id: int = 1
                    ) -> list[pci_device.TrackedDevice]:
    """``devices`` as a PCI tracker that just found them tracks them: all
    available, ungrouped, ids from 1 (for tools and tests that drive the
    translator without a database)."""
    tracked = []
    for index, dev in enumerate(devices, 1):
        fields = pci_device.TrackedFields.of(dev, dev.parent_addr, '', {})
        tracked.append(pci_device.TrackedDevice(
            id=index, compute_node_id=compute_node_id, address=dev.address,
            **fields.columns()))
    return tracked


def _device_element(dev: NodeDevice) -> ET.Element:
    """Return the ``<device>`` node device for one device (its card
    serial number written as the VPD capability libvirt reports)."""
    address = pci_utils.normalize_address(dev.address)
    domain, bus, slot, function = _split(address)
    path, parent = _switch_path(address)
    if dev.dev_type == pci_device.DEV_TYPE_VF:
        parent = _nodedev_name(dev.parent_addr)
    device = ET.Element('device')
    ET.SubElement(device, 'name').text = _nodedev_name(address)
    ET.SubElement(device, 'path').text = path
    ET.SubElement(device, 'parent').text = parent
    if dev.driver:
        drv = ET.SubElement(device, 'driver')
        ET.SubElement(drv, 'name').text = dev.driver
    cap = ET.SubElement(device, 'capability', {'type': 'pci'})
    if dev.pci_class:
        ET.SubElement(cap, 'class').text = '0x' + dev.pci_class
    # libvirt writes the address fields in decimal.
    for field, value in (('domain', domain), ('bus', bus), ('slot', slot),
                         ('function', function)):
        ET.SubElement(cap, field).text = str(value)
    ET.SubElement(cap, 'product', {'id': '0x' + dev.product_id}).text = (
        dev.product_name)
    ET.SubElement(cap, 'vendor', {'id': '0x' + dev.vendor_id}).text = (
        dev.vendor_name)
    if dev.dev_type == pci_device.DEV_TYPE_PF:
        ET.SubElement(cap, 'capability', {
            'type': 'virt_functions', 'maxCount': str(dev.max_vfs)})
    elif dev.dev_type == pci_device.DEV_TYPE_VF:
        phys = ET.SubElement(cap, 'capability', {'type': 'phys_function'})
        ET.SubElement(phys, 'address', _address_attrs(dev.parent_addr))
    if dev.card_serial_number:
        vpd = ET.SubElement(cap, 'capability', {'type': 'vpd'})
        ET.SubElement(vpd, 'name').text = dev.product_name or 'card'
        fields = ET.SubElement(vpd, 'fields', {'access': 'readonly'})
        ET.SubElement(fields, 'serial_number').text = dev.card_serial_number
    if dev.iommu_group is not None:
        group = ET.SubElement(cap, 'iommuGroup', {
            'number': str(dev.iommu_group)})
        ET.SubElement(group, 'address', _address_attrs(address))
    if dev.numa_node is not None:
        ET.SubElement(cap, 'numa', {'node': str(dev.numa_node)})
    if dev.link_speed:
        pcie = ET.SubElement(cap, 'pci-express')
        for validity in ('cap', 'sta'):
            attrs = {'validity': validity, 'speed': dev.link_speed,
                     'width': '0' if dev.link_down and validity == 'sta'
                     else dev.link_width}
            if validity == 'cap':
                attrs['port'] = '0'
            ET.SubElement(pcie, 'link', attrs)
    return device


def _address_attrs(address: str) -> dict:
    domain, bus, slot, function = _split(address)
    return {'domain': '0x%04x' % domain, 'bus': '0x%02x' % bus,
            'slot': '0x%02x' % slot, 'function': '0x%x' % function}


def node_xml_from_devices(devices: list[NodeDevice],
                          memory_mb: int = 2097152, numa_nodes: int = 2,
                          sockets_per_node: int = 1,
                          cores_per_socket: int = 56,
                          threads_per_core: int = 2,
                          cpu_mhz: int = 2000) -> str:
    """Return a test-driver node XML with the given host and devices.

    ``devices`` are as ``hgx_h200_devices`` returns them; a type-VF needs
    its parent_addr.
    All CPUs are online, so the host has ``numa_nodes * sockets_per_node *
    cores_per_socket * threads_per_core`` vCPUs.
    """
    for what, value in (('memory_mb', memory_mb), ('numa_nodes', numa_nodes),
                        ('sockets_per_node', sockets_per_node),
                        ('cores_per_socket', cores_per_socket),
                        ('threads_per_core', threads_per_core),
                        ('cpu_mhz', cpu_mhz)):
        if isinstance(value, bool) or not isinstance(value, int) or (
                value < 1):
            raise exception.Invalid(reason=(
                '%s %r is not allowed; a positive integer is required' % (
                    what, value)))
    addresses = [pci_utils.normalize_address(d.address) for d in devices]
    if len(set(addresses)) != len(addresses):
        raise exception.Invalid(reason=(
            'device addresses %s are not allowed; each address must be '
            'unique' % ', '.join(addresses)))

    node = ET.Element('node')
    cpu = ET.SubElement(node, 'cpu')
    cpus = numa_nodes * sockets_per_node * cores_per_socket * threads_per_core
    for tag, value in (('mode', 'fixed'), ('nodes', numa_nodes),
                       ('sockets', sockets_per_node),
                       ('cores', cores_per_socket),
                       ('threads', threads_per_core), ('active', cpus),
                       ('mhz', cpu_mhz), ('model', 'x86_64')):
        ET.SubElement(cpu, tag).text = str(value)
    ET.SubElement(node, 'memory').text = str(memory_mb * 1024)
    for dev in devices:
        node.append(_device_element(dev))
    ET.indent(node)
    return ET.tostring(node, encoding='unicode') + '\n'


def hgx_h200_node_xml(num_gpus: int = 8, memory_mb: int = 2097152,
                      extra_devices: bool = True) -> str:
    """Return the node XML of an HGX H200 server.

    Two NUMA nodes with one 56-core, 2-thread socket each (224 vCPUs),
    ``memory_mb`` of RAM (2 TiB by default) and the devices of
    ``hgx_h200_devices``.
    """
    return node_xml_from_devices(hgx_h200_devices(num_gpus, extra_devices),
                                 memory_mb=memory_mb)


# Share of each NUMA node's memory a generated host reserves as 1 GiB
# hugepages (as an operator would with hugepagesz=1G hugepages=N at boot),
# leaving the rest to the host and guests on ordinary pages.
HUGEPAGE_SHARE = 7 / 8
GIB_PAGE_KIB = 1024 * 1024


def hugepage_pools(cell: hardware.NUMACell) -> tuple[hardware.PagePool, ...]:
    """The hugepage pools of a generated host's NUMA node (the test:///
    driver reports none): ``HUGEPAGE_SHARE`` of its memory in 1 GiB
    pages, e.g. 896 per node of an HGX H200 host (1 TiB per node), so
    one 1.75 TiB guest in two cells takes them all."""
    return (hardware.PagePool(size_kib=GIB_PAGE_KIB,
                              total=int(cell.memory_mb // 1024 *
                                        HUGEPAGE_SHARE)),)


def write_node_xml(path: str, xml: str) -> str:
    """Write ``xml`` to ``path`` and return the ``test:///`` URI for it."""
    path = os.path.abspath(path)
    with open(path, 'w', encoding='utf-8') as node_file:
        node_file.write(xml)
    return 'test://' + path


# Module ID of each GPU of the HGX H200 board (what nvidia-smi -q shows and
# Fabric Manager numbers its partitions by). Module order is not PCI order:
# this is the map of a real HGX H100 with exactly these bus addresses, so
# its NVLink pairs are {3a,5d}, {18,2a}, {ba,db} and {9a,ab}.
H200_MODULE_IDS = {
    '0000:3a:00.0': 1, '0000:18:00.0': 2, '0000:5d:00.0': 3,
    '0000:2a:00.0': 4, '0000:ba:00.0': 5, '0000:9a:00.0': 6,
    '0000:db:00.0': 7, '0000:ab:00.0': 8,
}

# The board's NVLink pairs by module ID (Fabric Manager's partitions 3-6),
# named as the generated configs declare them.
H200_NVLINK_PAIR_MODULES = {'pair-a1': (1, 3), 'pair-a2': (2, 4),
                            'pair-b1': (5, 7), 'pair-b2': (6, 8)}


def _h200_gpu_number(module: int) -> int:
    """1-based PCI-order number of the HGX H200 GPU with ``module``."""
    by_module = {m: a for a, m in H200_MODULE_IDS.items()}
    return H200_GPU_ADDRESSES.index(by_module[module]) + 1


# The same pairs by 1-based GPU number (PCI order): the groups an operator
# declares in [pci]device_group for this host, each a real partition.
H200_NVLINK_PAIRS = {
    name: tuple(sorted(_h200_gpu_number(m) for m in modules))
    for name, modules in H200_NVLINK_PAIR_MODULES.items()}
H200_NVLINK_QUADS = {'quad-a': ('pair-a1', 'pair-a2'),
                     'quad-b': ('pair-b1', 'pair-b2')}
H200_NVLINK_BOARD = {'board': ('quad-a', 'quad-b')}

# The two bridged pairs of the H200 NVL server; nothing larger.
H200_NVL_NVLINK_PAIRS = {'pair-1': (1, 2), 'pair-2': (3, 4)}

# The alias both host kinds serve: any H200 GPU, in NVLink groups.
H200_ALIAS = {'name': 'h200', 'resource_class': 'PGPU',
              'group_type': 'nvlink'}


def _pci_config(addresses: tuple[str, ...], product_id: str,
                pairs: dict[str, tuple[int, int]],
                parents: tuple[dict[str, tuple[str, ...]], ...]
                ) -> dict[str, list[str]]:
    """[pci] option values for GPUs at ``addresses`` in NVLink ``pairs``
    (by 1-based GPU number) nested in the ``parents`` levels."""
    groups = []
    for name, (first, second) in pairs.items():
        groups.append({'name': name, 'type': 'nvlink', 'addresses': [
            addresses[first - 1], addresses[second - 1]]})
    for level in parents:
        for name, members in level.items():
            groups.append({'name': name, 'type': 'nvlink',
                           'members': list(members)})
    return {
        'device_spec': [json.dumps({'vendor_id': H200_VENDOR_ID,
                                    'product_id': product_id,
                                    'resource_class': 'PGPU'})],
        'device_group': [json.dumps(group) for group in groups],
        'alias': [json.dumps(H200_ALIAS)],
    }


def h200_pci_config() -> dict[str, list[str]]:
    """The [pci] option values an operator writes for the HGX H200 host.

    Returns ``device_spec``, ``device_group`` and ``alias`` values (JSON
    strings), shared by the demo and the functional tests.
    """
    return _pci_config(H200_GPU_ADDRESSES, H200_PRODUCT_ID,
                       H200_NVLINK_PAIRS,
                       (H200_NVLINK_QUADS, H200_NVLINK_BOARD))


def h200_nvl_pci_config() -> dict[str, list[str]]:
    """The [pci] option values for the 4-GPU H200 NVL server: its two
    pairs and the same ``h200`` alias as the HGX board."""
    return _pci_config(H200_NVL_GPU_ADDRESSES, H200_NVL_PRODUCT_ID,
                       H200_NVL_NVLINK_PAIRS, ())


# Generated host kinds: node XML and [pci] options of each.
HOST_KINDS = {
    'hgx-h200': (hgx_h200_node_xml, h200_pci_config),
    'h200-nvl': (h200_nvl_node_xml, h200_nvl_pci_config),
}


def pci_config_lines(pci: dict[str, list[str]]) -> list[str]:
    """nova.conf lines of a [pci] section with ``pci``'s values."""
    lines = ['[pci]', 'report_in_placement = true']
    for name in ('device_spec', 'device_group', 'alias'):
        lines += ['%s = %s' % (name, value) for value in pci.get(name, [])]
    return lines


def write_compute_config(kind: str, host: str, directory: str) -> str:
    """Write a generated host of ``kind`` and its compute config file.

    Writes ``<directory>/<host>.xml`` (the test:/// node file) and
    ``<directory>/<host>.conf`` with ``[libvirt]connection_uri`` and the
    host's ``[pci]`` section, for ``nova-all --compute HOST=FILE`` or a
    separate nova-compute. Returns the config file's path.
    """
    if kind not in HOST_KINDS:
        raise exception.Invalid(reason=(
            'host kind %r is not allowed; known kinds: %s' % (
                kind, ', '.join(sorted(HOST_KINDS)))))
    node_xml, pci_config = HOST_KINDS[kind]
    os.makedirs(directory, exist_ok=True)
    uri = write_node_xml(os.path.join(directory, '%s.xml' % host),
                         node_xml())
    lines = ['[libvirt]', 'connection_uri = %s' % uri, '']
    lines += pci_config_lines(pci_config())
    path = os.path.abspath(os.path.join(directory, '%s.conf' % host))
    with open(path, 'w', encoding='utf-8') as conf_file:
        conf_file.write('\n'.join(lines) + '\n')
    return path
