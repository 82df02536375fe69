"""The libvirt connection of a compute service and host-level queries.

One ``Host`` keeps one connection for the life of the process. Besides
saving reconnects, this matters for the ``test:///`` driver used as a fake
hypervisor: every open of it starts from the node file again, so a second
connection would not see the guests defined through the first.
"""

import dataclasses
import threading
import xml.etree.ElementTree as ET

import libvirt
from oslo_log import log as logging

from nova import exception
from nova.virt import hardware

LOG = logging.getLogger(__name__)


def _ignore_libvirt_error(_ctx, _err) -> None:
    """Keep libvirt from printing every error; callers report them."""


libvirt.registerErrorHandler(_ignore_libvirt_error, None)


@dataclasses.dataclass(frozen=True)
class HostInfo:
    """CPU and memory totals of the hypervisor host."""

    vcpus: int
    memory_mb: int
    numa_nodes: int
    hypervisor_type: str


class Host:
    """Lazily opened, thread-safe libvirt connection to ``uri``."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._conn: libvirt.virConnect | None = None
        self._lock = threading.Lock()

    def _unavailable(self, err: Exception) -> exception.HypervisorUnavailable:
        return exception.HypervisorUnavailable(uri=self.uri, error=err)

    def get_connection(self) -> libvirt.virConnect:
        """Return the connection, opening it on first use.

        A connection a remote daemon dropped is reopened; a live one is
        never replaced. Raises HypervisorUnavailable naming the URI.
        """
        with self._lock:
            if self._conn is not None:
                try:
                    if self._conn.isAlive():
                        return self._conn
                except libvirt.libvirtError:
                    pass
                LOG.warning('Libvirt connection to %s was lost; reopening',
                            self.uri)
                self._conn = None
            try:
                self._conn = libvirt.open(self.uri)
            except libvirt.libvirtError as err:
                raise self._unavailable(err)
            LOG.info('Connected to libvirt at %s', self.uri)
            return self._conn

    def get_info(self) -> HostInfo:
        """Return CPU count, memory and NUMA node count of the host."""
        conn = self.get_connection()
        try:
            _model, memory_mb, cpus, _mhz, nodes = conn.getInfo()[:5]
            caps = conn.getCapabilities()
            hv_type = conn.getType()
        except libvirt.libvirtError as err:
            raise self._unavailable(err)
        # getInfo() says 1 node for unusual topologies; the capabilities
        # list the real cells when libvirt knows them.
        cells = ET.fromstring(caps).findall('host/topology/cells/cell')
        return HostInfo(vcpus=cpus, memory_mb=memory_mb,
                        numa_nodes=len(cells) or nodes,
                        hypervisor_type=hv_type)

    def get_numa_topology(self) -> hardware.HostNUMATopology:
        """Return the host's NUMA nodes with their CPUs, memory and socket.

        From the capabilities' ``host/topology/cells`` where libvirt lists
        them (a real host); otherwise (the test driver with a custom node
        file lists none) derived from ``getInfo()``: equal nodes numbered
        in order, each with ``sockets`` sockets of its own, so a node has
        one known socket only when there is one socket per node.
        """
        conn = self.get_connection()
        try:
            caps = conn.getCapabilities()
            info = conn.getInfo()
        except libvirt.libvirtError as err:
            raise self._unavailable(err)
        cells = parse_numa_cells(caps)
        if cells:
            return hardware.HostNUMATopology(cells)
        memory_mb, nodes, sockets, cores, threads = (
            info[1], info[4], info[5], info[6], info[7])
        nodes = max(1, nodes)
        per_node = sockets * cores * threads
        return hardware.HostNUMATopology(tuple(hardware.NUMACell(
            id=node, cpus=tuple(range(node * per_node,
                                      (node + 1) * per_node)),
            memory_mb=memory_mb // nodes,
            socket=node if sockets == 1 else None)
            for node in range(nodes)))

    def list_pci_device_xml(self) -> list[str]:
        """Return the XML description of every PCI node device."""
        conn = self.get_connection()
        try:
            devices = conn.listAllDevices(
                libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)
            return [dev.XMLDesc(0) for dev in devices]
        except libvirt.libvirtError as err:
            raise self._unavailable(err)

    def lookup_domain(self, instance_uuid: str) -> libvirt.virDomain | None:
        """Return the domain whose uuid is ``instance_uuid``, or None."""
        conn = self.get_connection()
        try:
            return conn.lookupByUUIDString(instance_uuid)
        except libvirt.libvirtError as err:
            if err.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                return None
            raise self._unavailable(err)

    def list_domains(self) -> dict[str, str]:
        """Return uuid -> name of all defined domains, running or not."""
        conn = self.get_connection()
        try:
            return {dom.UUIDString(): dom.name()
                    for dom in conn.listAllDomains(0)}
        except libvirt.libvirtError as err:
            raise self._unavailable(err)


def parse_numa_cells(caps_xml: str) -> tuple[hardware.NUMACell, ...]:
    """The NUMA cells of a capabilities document (empty if it has none).

    A cell's socket is the ``socket_id`` all its CPUs share; None when
    they name several sockets or none. Its hugepage pools are its
    ``<pages>`` but the smallest size (the base page).
    """
    cells = []
    root = ET.fromstring(caps_xml)
    for cell in root.findall('host/topology/cells/cell'):
        cpus = cell.findall('cpus/cpu')
        sockets = {cpu.get('socket_id') for cpu in cpus}
        memory = cell.find('memory')
        memory_kib = int(memory.text) if memory is not None else 0
        if memory is not None and memory.get('unit', 'KiB') != 'KiB':
            raise exception.Invalid(reason=(
                'NUMA cell %s memory unit %r is not supported; libvirt '
                'reports KiB' % (cell.get('id'), memory.get('unit'))))
        socket = sockets.pop() if len(sockets) == 1 else None
        cells.append(hardware.NUMACell(
            id=int(cell.get('id')),
            cpus=tuple(sorted(int(cpu.get('id')) for cpu in cpus)),
            memory_mb=memory_kib // 1024,
            socket=int(socket) if socket is not None else None,
            pages=_page_pools(cell)))
    return tuple(cells)


def _page_pools(cell: ET.Element) -> tuple[hardware.PagePool, ...]:
    """The hugepage pools of a capabilities ``<cell>``: its ``<pages>``
    (sizes in KiB, counts of pages) but the base page, the smallest."""
    pools = []
    for pages in cell.findall('pages'):
        if pages.get('unit', 'KiB') != 'KiB':
            raise exception.Invalid(reason=(
                'NUMA cell %s page unit %r is not supported; libvirt '
                'reports KiB' % (cell.get('id'), pages.get('unit'))))
        pools.append(hardware.PagePool(size_kib=int(pages.get('size')),
                                       total=int(pages.text or 0)))
    pools.sort(key=lambda pool: pool.size_kib)
    return tuple(pools[1:])
