"""The interface every hypervisor driver offers the compute manager.

The compute manager and resource tracker only talk to this interface, so
the hypervisor behind it (a real libvirt/KVM host or libvirt's test
driver) is a deployment choice.
"""

import abc
import dataclasses
from collections.abc import Mapping
from collections.abc import Sequence

from nova.pci import device as pci_device
from nova.pci import health as pci_health
from nova.pci import partitions as pci_partitions
# The power states get_power_state reports, defined with the other
# states and named here for the drivers and their callers.
from nova.states import NOSTATE  # noqa: F401
from nova.states import RUNNING  # noqa: F401
from nova.states import SHUTDOWN  # noqa: F401
from nova.virt import hardware
from nova.virt import hugepages


@dataclasses.dataclass(frozen=True)
class HostObservation:
    """One look at the host, taken once per resource update so every
    step after it works on the same moment: the host totals
    (``resources``: vcpus, memory_mb, local_gb, hypervisor_type,
    hypervisor_hostname, numa_nodes), every PCI device, the NUMA nodes
    (no cells when the driver cannot tell), what the host shows of the
    devices' and NVSwitches' health (see nova.pci.health) and of its
    NVLink partitions (one Fabric Manager snapshot, see
    nova.pci.partitions.FabricView)."""

    resources: Mapping[str, object]
    devices: tuple[pci_device.HostDevice, ...]
    numa: hardware.HostNUMATopology = dataclasses.field(
        default_factory=hardware.HostNUMATopology)
    health: pci_health.HealthReport = dataclasses.field(
        default_factory=pci_health.HealthReport)
    fabric: pci_partitions.FabricView = dataclasses.field(
        default_factory=pci_partitions.FabricView)

    def __post_init__(self) -> None:
        object.__setattr__(self, 'resources', dict(self.resources))
        object.__setattr__(self, 'devices', tuple(self.devices))


@dataclasses.dataclass(frozen=True)
class RootDisk:
    """The root disk a guest boots from: the Glance image ``image_ref``,
    in a disk of ``size_gb`` GiB (the flavor's ``disk``; 0: the image's
    own size). ``properties`` are the image's (``hw_machine_type``,
    ``hw_firmware_type``: see nova.virt.guest_hardware)."""
    image_ref: str
    size_gb: int = 0
    properties: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class GuestSpec:
    """What a guest is, as the compute manager decides it once per build,
    rebuild or move end and every driver defines it: the instance it
    belongs to (``name`` is its display name), the flavor's size, the
    devices passed through, the host NUMA nodes its vCPUs and memory are
    confined to (none: not confined; guest NUMA cell i is on
    ``numa_nodes[i % len(numa_nodes)]``), the flavor's extra specs (machine
    type, firmware, NUMA cells: see nova.virt.guest_hardware), the image
    it boots from (None: no disk) and the size of the hugepages that back
    every guest NUMA cell on its host node (None: ordinary pages; see
    nova.virt.hugepages, the compute chose the size and nodes)."""

    instance_uuid: str
    name: str
    vcpus: int
    memory_mb: int
    pci_devices: tuple[pci_device.Passthrough, ...] = ()
    numa_nodes: tuple[int, ...] = ()
    extra_specs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    root_disk: RootDisk | None = None
    page_size_kib: int | None = None

    def __post_init__(self) -> None:
        # Frozen through and through: a list of devices or no extra specs
        # from a caller become a tuple and an empty mapping.
        object.__setattr__(self, 'pci_devices', tuple(self.pci_devices))
        object.__setattr__(self, 'numa_nodes', tuple(self.numa_nodes))
        object.__setattr__(self, 'extra_specs', dict(self.extra_specs or {}))

    @property
    def addresses(self) -> list[str]:
        """The host addresses of the devices passed through."""
        return [dev.address for dev in self.pci_devices]


class ComputeDriver(abc.ABC):
    """Abstract hypervisor driver."""

    @abc.abstractmethod
    def init_host(self, host: str) -> None:
        """Connect to the hypervisor; ``host`` is the hypervisor hostname.

        Called once at service start, before any other method, so a host
        that cannot be reached fails the start with a clear error.
        """

    @abc.abstractmethod
    def observe_host(self) -> HostObservation:
        """Look at the host once: its totals, PCI devices, NUMA nodes,
        device health and NVLink partitions, as of one moment (the
        resource tracker calls this once per update).
        """

    @abc.abstractmethod
    def spawn(self, spec: GuestSpec) -> None:
        """Create and start the guest ``spec`` describes.

        GuestHardwareUnsupported when the guest could not work on any
        host; on failure nothing of the guest stays on the hypervisor.
        """

    @abc.abstractmethod
    def destroy(self, instance_uuid: str) -> None:
        """Stop and remove the guest; a guest that is gone is not an error.
        """

    @abc.abstractmethod
    def power_off(self, instance_uuid: str) -> None:
        """Stop the guest; it keeps its definition and devices. A guest
        that is gone is off already: not an error."""

    @abc.abstractmethod
    def power_on(self, instance_uuid: str) -> None:
        """Start a stopped guest with the devices it has."""

    @abc.abstractmethod
    def reboot(self, instance_uuid: str, hard: bool) -> None:
        """Reboot the guest (soft: by the guest OS; hard: power cycle)."""

    @abc.abstractmethod
    def rebuild(self, spec: GuestSpec, power_on: bool,
                keep_disk: bool = False) -> None:
        """Redefine the guest as ``spec`` describes it (the devices it
        holds), started if ``power_on``. Its root disk is made again from
        the spec's image, unless ``keep_disk`` and the disk exists (a
        guest the hypervisor lost is defined again on its disk)."""

    @abc.abstractmethod
    def get_power_state(self, instance_uuid: str) -> int:
        """RUNNING, SHUTDOWN, or NOSTATE when the guest does not exist."""

    @abc.abstractmethod
    def list_instance_uuids(self) -> list[str]:
        """Return the uuids of the guests nova created on the hypervisor."""

    def get_console_output(self, instance_uuid: str) -> str:
        """The end of the guest's serial console log ('' before it wrote
        any); NotImplementedError where the driver keeps none."""
        raise NotImplementedError(
            'this hypervisor driver keeps no console log')

    def snapshot(self, instance_uuid: str, target: str) -> None:
        """Write the guest's root disk, as one self-contained qcow2 file,
        to ``target`` (createImage). Invalid when the guest has no root
        disk; NotImplementedError where the driver cannot."""
        raise NotImplementedError('this hypervisor driver cannot snapshot')

    def manage_image_cache(self, remove_unused: bool,
                           min_age_seconds: int) -> list[str]:
        """Age out the cached base images no guest uses (see
        ``[image_cache]``); the image ids removed. Drivers without an
        image cache remove nothing."""
        return []

    def get_guest_hugepages(self) -> dict[str, hugepages.GuestPages]:
        """Instance uuid -> the hugepages its guest, defined on the
        hypervisor, is backed by (guests on ordinary pages left out): what
        the compute counts as used when it starts. None by default."""
        return {}

    def get_nvlink_partitions(self) -> pci_partitions.FabricPartitions | None:
        """The NVLink partitions Fabric Manager defines, with the GPU
        module map and the GPUs without a module ID; None when nova does
        not activate partitions on this host. Only for the offer's check
        between updates after the NVLink repair (one Fabric Manager read,
        no health): an update takes all of it from ``observe_host``.
        """
        return None

    def release_nvlink_quarantine(
            self, partitions: Sequence[pci_partitions.HardwarePartition]
            ) -> list[int]:
        """Offer again the quarantined NVLink ``partitions``, whose
        hardware was found healthy again (see FabricView.to_release);
        returns the IDs released. Only drivers that activate partitions
        quarantine any."""
        return []

    def repair_nvlink_partitions(self) -> dict[str, str]:
        """Settle NVLink partitions left by crashes and restarts.

        Returns instance uuid -> fault message for instances whose
        partition could not be made active again. Only drivers that
        activate partitions themselves do anything.
        """
        return {}
