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

LOG = logging.getLogger(__name__)


def _ignore_libvirt_error(_ctx, _err) -> None:
    """Keep libvirt from printing every error; callers report them."""


libvirt.registerErrorHandler(_ignore_libvirt_error, None)


@dataclasses.dataclass(frozen=True)
class HostInfo:
    """CPU and memory totals of the hypervisor host."""

    cpu_model: str
    vcpus: int
    memory_mb: int
    cpu_mhz: int
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
            model, memory_mb, cpus, mhz, nodes = conn.getInfo()[:5]
            caps = conn.getCapabilities()
            hv_type = conn.getType()
        except libvirt.libvirtError as err:
            raise self._unavailable(err)
        # getInfo() says 1 node for unusual topologies; the capabilities
        # list the real cells when libvirt knows them.
        cells = ET.fromstring(caps).findall('host/topology/cells/cell')
        return HostInfo(cpu_model=model, vcpus=cpus, memory_mb=memory_mb,
                        cpu_mhz=mhz, numa_nodes=len(cells) or nodes,
                        hypervisor_type=hv_type)

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
