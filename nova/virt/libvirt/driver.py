"""Compute driver that runs guests through libvirt.

Guests are plain domains whose uuid is the instance uuid and whose name is
``instance-<uuid>`` (the display name is the title). Their devices are the
PCI ``<hostdev>`` entries of the assigned devices and, with an
``instances_path``, a serial console logged to
``<instances_path>/<uuid>/console.log``, a root disk (a qcow2 overlay of a
local image, see ``imagebackend``) when the server has an image, and a NIC
when ``[libvirt]guest_network`` names a network.
"""

from collections.abc import Sequence
import dataclasses
import os
import platform
import threading
import uuid as uuidlib
from collections.abc import Callable, Iterable

import libvirt
from oslo_config import cfg
from oslo_log import log as logging

from nova import exception
from nova.pci import device as pci_device
from nova.pci import health as pci_health
from nova.pci import partitions as pci_partitions
from nova.virt import driver
from nova.virt import guest_hardware
from nova.virt import hardware
from nova.virt import hugepages
from nova.virt.libvirt import config
from nova.virt.libvirt import gpu_modules
from nova.virt.libvirt import guest_files
from nova.virt.libvirt import host as libvirt_host
from nova.virt.libvirt import imagebackend
from nova.virt.libvirt import imagecache
from nova.virt.libvirt import nvlink as nvlink_partitions
from nova.virt.libvirt import pcie

LOG = logging.getLogger(__name__)

# Used when [libvirt]connection_uri is empty.
DEFAULT_URI = 'qemu:///system'

# The hugepage pools of a host NUMA node whose capabilities list none.
PagePoolReader = Callable[[hardware.NUMACell],
                          Iterable[hardware.PagePool]]

# How a guest's definition is removed (virDomainUndefineFlags). QEMU
# refuses to undefine a UEFI guest whose NVRAM (its UEFI variable store,
# made from OVMF's template at its first start) exists unless told what
# to do with it. Removing the guest removes the NVRAM, as upstream, with
# any managed save image and snapshot metadata (its disk goes too);
# redefining it with the disk kept keeps the NVRAM (the boot entries and
# keys the guest wrote), while a managed save image of the old
# definition must never be restored into the new one.
UNDEFINE_REMOVE = (libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                   libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                   libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
UNDEFINE_KEEP_NVRAM = (libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                       libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM)
_NVRAM_FLAGS = (libvirt.VIR_DOMAIN_UNDEFINE_NVRAM |
                libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM)


def _canonical_uuid(instance_uuid: str) -> str:
    try:
        return str(uuidlib.UUID(str(instance_uuid)))
    except ValueError:
        raise exception.Invalid(reason=(
            'instance uuid %r is not a valid UUID' % (instance_uuid,)))


def _canonical(spec: driver.GuestSpec) -> driver.GuestSpec:
    """``spec`` with its instance uuid in canonical form (the domain's
    name and uuid are made from it)."""
    return dataclasses.replace(
        spec, instance_uuid=_canonical_uuid(spec.instance_uuid))


def undefine(domain: libvirt.virDomain, keep_nvram: bool) -> None:
    """Undefine ``domain`` (stopped), removing its NVRAM file or, with
    ``keep_nvram``, keeping it for the guest defined again in its place.

    A hypervisor driver without NVRAM (libvirt's ``test:///``, whose
    domains keep no file) refuses the NVRAM flags as unsupported; it is
    undefined without them.
    """
    flags = UNDEFINE_KEEP_NVRAM if keep_nvram else UNDEFINE_REMOVE
    try:
        domain.undefineFlags(flags)
    except libvirt.libvirtError as err:
        if err.get_error_code() != libvirt.VIR_ERR_INVALID_ARG:
            raise
        LOG.debug('Undefine of domain %s with flags %#x refused (%s); '
                  'undefining it without the NVRAM flags', domain.name(),
                  flags, err)
        domain.undefineFlags(flags & ~_NVRAM_FLAGS)


def _is_nvidia_gpu(dev: pci_device.HostDevice) -> bool:
    """An NVIDIA display/3D controller (NVSwitches are bridges)."""
    return dev.vendor_id == gpu_modules.NVIDIA_VENDOR_ID and \
        (dev.pci_class or '').startswith('03')


@dataclasses.dataclass(frozen=True)
class GuestOptions:
    """The ``[libvirt]`` options guest domains are built with:
    ``hw_machine_type`` (parsed: architecture -> machine type) and
    ``num_pcie_ports``."""

    machine_types: dict[str, str] = dataclasses.field(
        default_factory=lambda: {'x86_64': 'q35'})
    num_pcie_ports: int = 0

    @classmethod
    def from_config(cls, conf: cfg.ConfigOpts) -> 'GuestOptions':
        """Read the options; InvalidConfiguration naming a bad value."""
        try:
            machine_types = guest_hardware.parse_machine_types(
                conf.libvirt.hw_machine_type)
        except exception.Invalid as exc:
            raise exception.InvalidConfiguration(
                reason=exception.reason_of(exc)) from exc
        if conf.libvirt.num_pcie_ports and not any(
                'q35' in machine for machine in machine_types.values()):
            LOG.warning('[libvirt]num_pcie_ports = %d only adds ports to q35 '
                        'guests, and [libvirt]hw_machine_type = %s gives '
                        'none; only flavors with hw:machine_type=q35 get '
                        'them', conf.libvirt.num_pcie_ports,
                        ','.join(conf.libvirt.hw_machine_type) or '<empty>')
        return cls(machine_types, conf.libvirt.num_pcie_ports)


class LibvirtDriver(driver.ComputeDriver):
    """ComputeDriver backed by one libvirt connection to ``uri``.

    ``instances_path`` is where guests' files live; the filesystem holding
    it is the local disk reported as ``local_gb``. None means the host has
    no local instance storage (``local_gb`` 0). ``nvlink`` is set when this
    driver makes NVLink partitions live itself
    (``[libvirt]nvlink_partitions = fabric_manager``); otherwise
    ``module_reader``, if given, reads the GPU module IDs at start so
    declared groups can be checked against the board's partitions.
    ``guest_options`` shape the guests' machines; ``bar_reader`` gives
    the BARs of a host device (default: sysfs), which size a guest's
    64-bit MMIO window. ``virt_type`` is the domain type on a
    ``qemu://`` hypervisor, ``image_cache`` where root disks' base images
    come from (None: guests get no disk), ``network`` the libvirt
    network of the guests' NIC (empty: no NIC). ``page_pools`` gives the
    hugepage pools of a NUMA node whose capabilities list none (the
    ``test:///`` driver's generated hosts; a real host's libvirt reports
    its pools).
    """

    def __init__(self, uri: str, instances_path: str | None = None,
                 nvlink: nvlink_partitions.NVLinkPartitions | None = None,
                 module_reader: gpu_modules.ModuleMapReader | None
                 = None, guest_options: GuestOptions | None = None,
                 bar_reader: pcie.BarReader | None = None,
                 virt_type: str = 'kvm',
                 image_cache: imagecache.ImageCache | None = None,
                 network: str = '',
                 page_pools: PagePoolReader | None = None) -> None:
        self.host = libvirt_host.Host(uri)
        self.page_pools = page_pools
        self.guest_options = guest_options or GuestOptions()
        self.bar_reader = bar_reader or pcie.sysfs_bar_reader()
        self.instances_path = instances_path
        self.domain_type = config.domain_type_for_uri(uri, virt_type)
        self.image_cache = image_cache
        self.network = network
        self.nvlink = nvlink
        self.module_reader = module_reader
        # GPU module IDs module_reader found at start (address -> ID),
        # kept only on an HGX board, the one kind they give partitions.
        self._module_ids: dict[str, int] = {}
        self._hostname: str | None = None
        # Serializes the exists-check and define of spawn, so two spawns of
        # one uuid cannot both pass the check and redefine each other.
        self._define_lock = threading.Lock()

    @classmethod
    def from_config(cls, conf: cfg.ConfigOpts, uri: str | None = None,
                    fmpm_path: str | None = None,
                    nvidia_smi_path: str | None = None,
                    bar_reader: pcie.BarReader | None = None,
                    page_pools: PagePoolReader | None = None
                    ) -> 'LibvirtDriver':
        """The driver a compute running with ``conf`` uses: the one place
        every service (nova-compute, nova-all) builds it.

        It connects to ``uri``, else ``[libvirt]connection_uri``, else
        the local system hypervisor; its local disk is the filesystem of
        ``[DEFAULT]instances_path``; ``[libvirt]nvlink_partitions`` picks
        the NVLink partition handling. The Fabric Manager tool paths,
        when given, replace ``[libvirt]fmpm_path`` and
        ``nvidia_smi_path`` (nova-all's generated hosts with their own
        fake Fabric Manager); ``bar_reader`` replaces sysfs as the source
        of device BARs and ``page_pools`` declares the hugepage pools
        (nova-all's generated hosts). ``[libvirt]
        virt_type`` and ``guest_network`` shape the guests' hypervisor and
        NIC; root disks come from Glance through the image cache under
        ``instances_path`` (``[image_cache]``, ``[glance]``).
        """
        return cls(uri or conf.libvirt.connection_uri or DEFAULT_URI,
                   conf.instances_path,
                   nvlink=nvlink_partitions.from_config(
                       conf, fmpm_path=fmpm_path,
                       nvidia_smi_path=nvidia_smi_path),
                   module_reader=gpu_modules.module_reader_from_config(
                       conf),
                   guest_options=GuestOptions.from_config(conf),
                   bar_reader=bar_reader,
                   virt_type=conf.libvirt.virt_type,
                   image_cache=imagecache.ImageCache.from_config(conf)
                   if conf.instances_path else None,
                   network=conf.libvirt.guest_network,
                   page_pools=page_pools)

    @property
    def uri(self) -> str:
        return self.host.uri

    def init_host(self, host: str) -> None:
        """Remember the hypervisor hostname and connect right away."""
        if not isinstance(host, str) or not host:
            raise exception.InvalidConfiguration(reason=(
                'host %r is not allowed; the hypervisor hostname must be a '
                'non-empty string' % (host,)))
        self._hostname = host
        if self.instances_path:
            try:
                os.makedirs(self.instances_path, exist_ok=True)
            except OSError as err:
                raise exception.InvalidConfiguration(reason=(
                    'instances_path %s cannot be created: %s' % (
                        self.instances_path, err))) from err
        self.host.get_connection()
        if self.nvlink is None and self.module_reader is None:
            return
        gpu_devices = [dev for dev in self.get_pci_devices()
                       if _is_nvidia_gpu(dev)]
        gpus = [dev.address for dev in gpu_devices]
        if self.nvlink is not None:
            self.nvlink.start(host, gpus)
            self.nvlink.forget_missing(set(self.list_instance_uuids()))
            return
        module_ids = self.module_reader.read(host, gpus)
        mismatch = gpu_modules.hgx_board_mismatch(
            [dev.product_id for dev in gpu_devices])
        if module_ids and mismatch:
            # Module IDs alone do not make an HGX board; on any other
            # board the table would invent partitions (and warnings).
            LOG.info('Host %s is no HGX 8-GPU NVSwitch board: %s. No '
                     'NVLink partitions are derived from its GPU module '
                     'IDs %s, and its declared nvlink groups are not '
                     'checked against any', host, mismatch,
                     ','.join(map(str, sorted(module_ids.values()))))
            module_ids = {}
        self._module_ids = module_ids

    def get_nvlink_partitions(self) -> pci_partitions.FabricPartitions | None:
        """FM's partitions and the GPU module map, None without FM mode.
        """
        if self.nvlink is None:
            return None
        return self.nvlink.fabric_partitions()

    def observe_host(self) -> driver.HostObservation:
        """The host as libvirt lists it now (totals, devices with their
        PCIe link state, NUMA nodes) and, when nova drives Fabric Manager
        partitions, one Fabric Manager snapshot with the GPUs' and
        NVSwitches' health from it and nvidia-smi; otherwise the HGX
        board's fixed partitions by the GPU module IDs read at start
        (none when no module ID is known or the host is no HGX 8-GPU
        board, see init_host), for a check of the declared groups."""
        devices = self.get_pci_devices()
        health = pci_health.from_host_devices(devices)
        if self.nvlink is not None:
            fabric, fabric_health = self.nvlink.observe()
            health = health.merge(fabric_health)
        elif self._module_ids:
            fabric = pci_partitions.FabricView(
                known=pci_partitions.FabricPartitions(
                    tuple(gpu_modules.hgx_partitions(self._module_ids)),
                    dict(self._module_ids)))
        else:
            fabric = pci_partitions.FabricView()
        return driver.HostObservation(
            resources=self.get_available_resource(), devices=devices,
            numa=self.get_numa_topology(), health=health, fabric=fabric)

    def release_nvlink_quarantine(
            self, partitions: Sequence[pci_partitions.HardwarePartition]
            ) -> list[int]:
        if self.nvlink is None:
            return []
        return self.nvlink.release_quarantined(partitions)

    def repair_nvlink_partitions(self) -> dict[str, str]:
        """Periodic: make Fabric Manager's active set match nova's."""
        if self.nvlink is None:
            return {}
        return self.nvlink.repair()

    def _local_gb(self) -> int:
        """Size in whole GiB of the filesystem holding instances_path."""
        if not self.instances_path:
            return 0
        stat = os.statvfs(self.instances_path)
        return stat.f_frsize * stat.f_blocks // (1024 ** 3)

    def get_available_resource(self) -> dict:
        """Return the host totals as the resource tracker expects them."""
        info = self.host.get_info()
        return {
            'vcpus': info.vcpus,
            'memory_mb': info.memory_mb,
            'local_gb': self._local_gb(),
            'hypervisor_type': info.hypervisor_type,
            'hypervisor_hostname': self._hostname,
            'numa_nodes': info.numa_nodes,
        }

    def get_pci_devices(self) -> list[pci_device.HostDevice]:
        """Return every host PCI device, by address.

        A VF whose own node device has no VPD serial number gets its PF's:
        the card serial number identifies the card, which the VFs share.
        """
        devices = []
        for xml in self.host.list_pci_device_xml():
            dev = config.parse_pci_nodedev(xml)
            if dev is not None:
                devices.append(dev)
        by_address = {dev.address: dev for dev in devices}
        for index, dev in enumerate(devices):
            parent = by_address.get(dev.parent_addr)
            if not dev.card_serial_number and parent is not None and \
                    parent.card_serial_number:
                devices[index] = dataclasses.replace(
                    dev, card_serial_number=parent.card_serial_number)
        return sorted(devices, key=lambda dev: dev.address)

    def get_numa_topology(self) -> hardware.HostNUMATopology:
        """The host's NUMA nodes, as libvirt reports them; a node without
        hugepage pools gets those ``page_pools`` declares, if given."""
        topology = self.host.get_numa_topology()
        if self.page_pools is None:
            return topology
        return hardware.HostNUMATopology(tuple(
            cell if cell.pages else dataclasses.replace(
                cell, pages=tuple(self.page_pools(cell)))
            for cell in topology.cells))

    def get_guest_hugepages(self) -> dict[str, hugepages.GuestPages]:
        """The hugepages of each nova guest defined here, read from its
        domain XML (where the compute's choice of size and nodes is
        written)."""
        result = {}
        for instance_uuid in self.list_instance_uuids():
            domain = self.host.lookup_domain(instance_uuid)
            if domain is None:
                continue
            try:
                xml = domain.XMLDesc(0)
            except libvirt.libvirtError as err:
                if err.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                    continue
                raise exception.HypervisorUnavailable(
                    uri=self.uri, error=err) from err
            pages = config.parse_guest_hugepages(xml)
            if pages is not None:
                result[instance_uuid] = pages
        return result

    def spawn(self, spec: driver.GuestSpec) -> None:
        """Define and start the guest; undefine it again (and remove its
        files) on any failure. With NUMA nodes its vCPUs and memory stay
        on them; the flavor's extra specs choose its machine (see
        nova.virt.guest_hardware); with a root disk it boots from an
        overlay of that image."""
        spec = _canonical(spec)
        instance_uuid = spec.instance_uuid
        # GuestHardwareUnsupported before anything is made.
        guest_platform = self._platform(spec)
        conn = self.host.get_connection()
        with self._define_lock:
            if self.host.lookup_domain(instance_uuid) is not None:
                raise exception.InstanceExists(uuid=instance_uuid)
            try:
                io = self._prepare_files(instance_uuid, spec.root_disk)
                xml = self._guest_xml(spec, guest_platform, io)
                domain = conn.defineXML(xml)
            except BaseException as err:
                self._remove_files(instance_uuid)
                if isinstance(err, libvirt.libvirtError):
                    raise exception.InstanceSpawnFailed(
                        uuid=instance_uuid, uri=self.uri, error=err)
                raise
        try:
            # The partition is live before the guest starts: a guest never
            # runs on GPUs whose partition is not active.
            if self.nvlink is not None:
                self.nvlink.activate(instance_uuid, spec.addresses)
            domain.create()
        except BaseException as err:
            self._remove_failed_domain(domain, instance_uuid)
            self._remove_files(instance_uuid)
            self._release_partition(instance_uuid)
            if isinstance(err, libvirt.libvirtError):
                raise exception.InstanceSpawnFailed(
                    uuid=instance_uuid, uri=self.uri, error=err) from err
            raise
        LOG.info('Spawned instance %s with PCI devices %s', instance_uuid,
                 spec.addresses)

    # Power actions ----------------------------------------------------------
    #
    # A stopped guest stays defined and keeps its devices, and its NVLink
    # partition stays active (the GPUs are still the instance's, as its
    # Placement allocation is): starting it again cannot fail for want of
    # a partition another guest took. Every path that starts a guest
    # (re)activates its partition first, which is a no-op when it is
    # active and held by the instance.

    def _domain(self, instance_uuid: str, action: str) -> libvirt.virDomain:
        domain = self.host.lookup_domain(_canonical_uuid(instance_uuid))
        if domain is None:
            raise exception.InstancePowerActionFailed(
                action=action, uuid=instance_uuid, uri=self.uri,
                error='the hypervisor has no domain of this instance')
        return domain

    def _start(self, domain: libvirt.virDomain, instance_uuid: str) -> None:
        """Start a defined guest on its partition (if not running)."""
        if domain.isActive():
            return
        if self.nvlink is not None:
            self.nvlink.activate(instance_uuid, [
                dev.address for dev in
                config.parse_guest_hostdevs(domain.XMLDesc())])
        domain.create()

    def _power(self, action: str, instance_uuid: str, operation) -> None:
        """Run ``operation(domain)``; libvirt errors name the action."""
        domain = self._domain(instance_uuid, action)
        try:
            operation(domain)
        except libvirt.libvirtError as err:
            raise exception.InstancePowerActionFailed(
                action=action, uuid=instance_uuid, uri=self.uri,
                error=err) from err
        LOG.info('%s of instance %s done', action.capitalize(),
                 instance_uuid)

    def power_off(self, instance_uuid: str) -> None:
        """Stop the guest at once; it stays defined with its devices. A
        guest the hypervisor no longer has is off already: done."""
        if self.host.lookup_domain(_canonical_uuid(instance_uuid)) is None:
            LOG.warning('Power off of instance %s: the hypervisor has no '
                        'domain of it; it is off already', instance_uuid)
            return
        self._power('power off', instance_uuid,
                    lambda dom: dom.destroy() if dom.isActive() else None)

    def power_on(self, instance_uuid: str) -> None:
        """Start the stopped guest again with the devices it has."""
        self._power('power on', instance_uuid,
                    lambda dom: self._start(dom, instance_uuid))

    def reboot(self, instance_uuid: str, hard: bool) -> None:
        """Soft: ask the guest to reboot (falling back to a hard reboot
        if the hypervisor refuses, as upstream does); hard: power cycle.
        Either way the guest runs afterwards."""
        def soft(domain):
            try:
                domain.reboot(0)
            except libvirt.libvirtError as err:
                LOG.warning('Soft reboot of instance %s failed (%s); '
                            'rebooting it hard', instance_uuid, err)
                power_cycle(domain)

        def power_cycle(domain):
            if domain.isActive():
                domain.destroy()
            self._start(domain, instance_uuid)
        self._power('hard reboot' if hard else 'reboot', instance_uuid,
                    power_cycle if hard else soft)

    def rebuild(self, spec: driver.GuestSpec, power_on: bool,
                keep_disk: bool = False) -> None:
        """Redefine the guest from scratch with the same devices (and NUMA
        confinement), and start it if ``power_on``. The partition stays
        the instance's throughout, and is made active if it is not (a
        guest defined again after the hypervisor lost it, started or
        not, holds its partition as any defined guest does); a missing
        domain (a rebuild cut short, a host restart) is defined. The
        root disk is a new overlay of the spec's image, unless
        ``keep_disk`` and the disk is there; a UEFI guest's NVRAM is
        kept with ``keep_disk`` and made again otherwise; the console
        log is kept."""
        spec = _canonical(spec)
        instance_uuid = spec.instance_uuid
        # GuestHardwareUnsupported before the old guest is touched.
        guest_platform = self._platform(spec)
        conn = self.host.get_connection()
        if self.nvlink is not None:
            self.nvlink.activate(instance_uuid, spec.addresses)
        try:
            with self._define_lock:
                old = self.host.lookup_domain(instance_uuid)
                if old is not None:
                    if old.isActive():
                        old.destroy()
                    # The NVRAM goes with the root disk: kept with it,
                    # made again from OVMF's template with a new one.
                    undefine(old, keep_nvram=keep_disk)
                io = self._prepare_files(instance_uuid, spec.root_disk,
                                         keep_disk=keep_disk)
                domain = conn.defineXML(self._guest_xml(
                    spec, guest_platform, io))
            if power_on:
                self._start(domain, instance_uuid)
        except libvirt.libvirtError as err:
            raise exception.InstancePowerActionFailed(
                action='rebuild', uuid=instance_uuid, uri=self.uri,
                error=err) from err
        LOG.info('Rebuilt instance %s with PCI devices %s', instance_uuid,
                 spec.addresses)

    def get_power_state(self, instance_uuid: str) -> int:
        """1 (running), 4 (shut down) or 0 (no domain), as upstream."""
        domain = self.host.lookup_domain(_canonical_uuid(instance_uuid))
        if domain is None:
            return driver.NOSTATE
        return driver.RUNNING if domain.isActive() else driver.SHUTDOWN

    def domain_xml(self, spec: driver.GuestSpec,
                   io: config.GuestIO = config.GuestIO()) -> str:
        """The domain XML this driver defines for ``spec`` with ``io``,
        without defining it: what the docs and the boot tests show of a
        guest shape; GuestHardwareUnsupported as for ``spawn``."""
        spec = _canonical(spec)
        return self._guest_xml(spec, self._platform(spec), io)

    def _guest_xml(self, spec: driver.GuestSpec,
                   guest_platform: config.GuestPlatform,
                   io: config.GuestIO) -> str:
        """The domain XML of a guest (spawned or rebuilt) on
        ``guest_platform`` with ``io``, confined to its NUMA nodes and
        their host CPUs (read once, by ``_platform``) when it has any."""
        host_cpus = tuple(sorted(
            cpu for cpus in guest_platform.node_cpus.values()
            for cpu in cpus))
        return config.build_guest_xml(
            spec, self.domain_type, host_cpus, guest_platform, io=io)

    def _platform(self, spec: driver.GuestSpec) -> config.GuestPlatform:
        """The machine a guest gets: options, flavor, image properties,
        device BARs, the host CPUs of its NUMA nodes;
        GuestHardwareUnsupported when its devices could not work."""
        numa_nodes = spec.numa_nodes
        topology = self.host.get_numa_topology() if numa_nodes else None
        node_cpus = {node: topology.cpus_of((node,))
                     for node in numa_nodes} if topology else {}
        arch = platform.machine() or 'x86_64'
        bars = {}
        for dev in spec.pci_devices:
            address = dev.address
            found = self.bar_reader(address)
            if found is None:
                LOG.warning('The BARs of PCI device %s cannot be read; '
                            'the 64-bit MMIO window leaves it out',
                            address)
            else:
                bars[address] = found
        try:
            guest_hw = guest_hardware.resolve(
                self.guest_options.machine_types, arch, spec.extra_specs,
                spec.root_disk.properties if spec.root_disk else None)
        except exception.Invalid as exc:
            raise exception.GuestHardwareUnsupported(
                reason=exception.reason_of(exc)) from exc
        return config.GuestPlatform(
            hardware=guest_hw, arch=arch,
            num_pcie_ports=self.guest_options.num_pcie_ports, bars=bars,
            node_cpus=node_cpus)

    # Guest files ------------------------------------------------------------

    def _files(self, instance_uuid: str) -> guest_files.GuestFiles | None:
        if not self.instances_path:
            return None
        return guest_files.GuestFiles.of(self.instances_path, instance_uuid)

    def _prepare_files(self, instance_uuid: str,
                       root_disk: driver.RootDisk | None,
                       keep_disk: bool = False) -> config.GuestIO:
        """Create the guest's directory and root disk overlay (an existing
        disk is replaced unless ``keep_disk``); return what its domain
        gets. Without an ``instances_path`` a guest has no files."""
        files = self._files(instance_uuid)
        if files is None:
            if root_disk is not None:
                LOG.warning('Instance %s: image %r ignored: this host has '
                            'no instances_path', instance_uuid,
                            root_disk.image_ref)
            return config.GuestIO(network=self.network or None)
        files.create_directory()
        disk = None
        if root_disk is not None and self.image_cache is None:
            LOG.warning('Instance %s: image %r ignored: this driver has '
                        'no image cache, so guests have no disk',
                        instance_uuid, root_disk.image_ref)
        elif root_disk is not None:
            disk = files.disk
            if not (keep_disk and os.path.exists(disk)):
                with self.image_cache.use(root_disk.image_ref) as base:
                    image = imagebackend.image_info(base)
                    files.remove_disk()
                    imagebackend.create_overlay(image, disk,
                                                root_disk.size_gb)
        return config.GuestIO(disk_path=disk, console_log=files.console_log,
                              network=self.network or None)

    def snapshot(self, instance_uuid: str, target: str) -> None:
        """Flatten the guest's overlay and its base into a qcow2 file at
        ``target``; a running guest is paused while its disk is read, so
        the copy is consistent, and resumed after."""
        instance_uuid = _canonical_uuid(instance_uuid)
        files = self._files(instance_uuid)
        if files is None or not os.path.exists(files.disk):
            raise exception.Invalid(reason=(
                'instance %s has no root disk on %s to snapshot' % (
                    instance_uuid, self._hostname)))
        domain = self.host.lookup_domain(instance_uuid)
        paused = domain is not None and domain.isActive()
        if paused:
            domain.suspend()
        try:
            imagebackend.convert_to_qcow2(files.disk, target)
        finally:
            if paused:
                domain.resume()

    def manage_image_cache(self, remove_unused: bool,
                           min_age_seconds: int) -> list[str]:
        """Remove cached base images no guest's disk is backed by and
        last used over ``min_age_seconds`` ago (when ``remove_unused``);
        the image ids removed."""
        if self.image_cache is None or not remove_unused or \
                not os.path.isdir(self.instances_path):
            return []
        in_use = set()
        for name in os.listdir(self.instances_path):
            disk = guest_files.GuestFiles.of(self.instances_path, name).disk
            if os.path.exists(disk):
                backing = imagebackend.backing_file(disk)
                if backing:
                    in_use.add(backing)
        return self.image_cache.remove_unused(in_use, min_age_seconds)

    def _remove_files(self, instance_uuid: str) -> None:
        files = self._files(instance_uuid)
        if files is not None:
            files.remove()

    def get_console_output(self, instance_uuid: str) -> str:
        """The end of the guest's console log ('' before it wrote any, or
        on a host without an ``instances_path``)."""
        files = self._files(_canonical_uuid(instance_uuid))
        return files.read_console() if files is not None else ''

    def _remove_failed_domain(self, domain: libvirt.virDomain,
                              instance_uuid: str) -> None:
        """Undo a define whose start failed; the start error matters more.
        """
        try:
            if domain.isActive():
                domain.destroy()
            undefine(domain, keep_nvram=False)
        except libvirt.libvirtError as err:
            LOG.error('Could not undefine domain %s after a failed spawn: '
                      '%s', instance_uuid, err)

    def destroy(self, instance_uuid: str) -> None:
        """Stop and undefine the guest (with its NVRAM) and remove its
        files and NVLink partition; a missing guest is fine.

        Once the guest is stopped its files and partition go even if
        the undefine fails (InstanceDestroyFailed is raised after): its
        devices are freed by the caller either way, and a partition kept
        for a guest that cannot run would block their next guest. A
        guest that cannot be stopped keeps them (it may still run on
        them)."""
        instance_uuid = _canonical_uuid(instance_uuid)
        domain = self.host.lookup_domain(instance_uuid)
        failure = None
        if domain is not None:
            try:
                if domain.isActive():
                    domain.destroy()
            except libvirt.libvirtError as err:
                self._destroy_failed(instance_uuid, err)
            try:
                undefine(domain, keep_nvram=False)
                LOG.info('Destroyed instance %s', instance_uuid)
            except libvirt.libvirtError as err:
                failure = err
        # Only once the guest is stopped may its files and partition go.
        self._remove_files(instance_uuid)
        self._release_partition(instance_uuid)
        if failure is not None:
            self._destroy_failed(instance_uuid, failure)

    def _destroy_failed(self, instance_uuid: str,
                        err: libvirt.libvirtError) -> None:
        """InstanceDestroyFailed, unless the domain is gone already (a
        concurrent destroy got there first: the goal is reached)."""
        if err.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
            raise exception.InstanceDestroyFailed(
                uuid=instance_uuid, uri=self.uri, error=err) from err

    def _release_partition(self, instance_uuid: str) -> None:
        if self.nvlink is not None:
            self.nvlink.release(instance_uuid)

    def list_instance_uuids(self) -> list[str]:
        """Return the instance uuids of the domains nova created (named
        ``instance-<uuid>``); other domains on the host are not nova's."""
        return sorted(
            uuid for uuid, name in self.host.list_domains().items()
            if config.instance_uuid_of_domain(name) == uuid)
