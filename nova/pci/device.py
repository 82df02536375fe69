"""What a PCI device is: the one module that names a device's fields.

Three records, each for one seam:

* ``HostDevice``: what a virt driver reports of a host PCI device (parsed
  from libvirt node device XML, or made by the fake hosts);
* ``TrackedDevice``: a ``pci_devices`` row as the PCI tracker keeps it
  (its status and holder, its group path and Placement provider);
* ``Passthrough``: what the driver needs to pass one device to a guest.

The device types and statuses are defined here too. Where a device has a
wire form (the database row and its ``extra_info`` JSON) it is read and
written only by this module (``TrackedDevice.from_row``, ``to_row``,
``row_values``, ``extra_info``), so no other module reads a device field
by its string key; ``nova/tests/unit/test_device_keys.py`` enforces it.

It sits at the bottom of ``nova.pci``: the virt drivers, the PCI tracker,
the Placement names and the compute all import it, and it imports
nothing of nova but the exceptions.
"""

from collections.abc import Mapping
import dataclasses
import datetime

from nova import exception

# Device types, as libvirt and upstream Nova name them.
DEV_TYPE_PCI = 'type-PCI'
DEV_TYPE_PF = 'type-PF'
DEV_TYPE_VF = 'type-VF'
DEVICE_TYPES = (DEV_TYPE_PCI, DEV_TYPE_PF, DEV_TYPE_VF)
# Devices with a Placement provider of their own; a VF is a unit of its
# PF's.
WHOLE_DEVICE_TYPES = (DEV_TYPE_PCI, DEV_TYPE_PF)

# Statuses of a tracked device (upstream's values; the tracker deletes a
# device that is gone rather than keep it ``removed``).
AVAILABLE = 'available'
CLAIMED = 'claimed'
ALLOCATED = 'allocated'
REMOVED = 'removed'
# Statuses in which a device belongs to an instance.
IN_USE = (CLAIMED, ALLOCATED)

# Health of a tracked device (nova.pci.health decides it).
HEALTHY = 'healthy'
UNHEALTHY = 'unhealthy'
HEALTH_STATES = (HEALTHY, UNHEALTHY)

# How a hardware partition keeps a device out of nova's offer
# (``PartitionHold.state``): it is active but nova did not activate it, or
# nova quarantined it after its activation failed for a hardware reason.
PARTITION_FOREIGN = 'foreign'
PARTITION_QUARANTINED = 'quarantined'
PARTITION_HOLD_STATES = (PARTITION_FOREIGN, PARTITION_QUARANTINED)

# Prefix of a HostDevice's dev_id, as libvirt names node devices.
_DEV_ID_PREFIX = 'pci_'


@dataclasses.dataclass(frozen=True)
class HostDevice:
    """One PCI device of the host, as the virt driver reports it.

    ``address`` is ``dddd:bb:ss.f`` (lower-case hex), ``vendor_id`` and
    ``product_id`` 4 lower-case hex digits, ``parent_addr`` the PF of a
    VF, ``numa_node`` None when the host knows no affinity, ``pci_class``
    the 6-digit PCI class code, ``card_serial_number`` the VPD serial
    number of the card (a VF reports its PF's), ``health_problem`` why the
    hypervisor shows the device unusable although it still lists it
    (None: it shows nothing wrong).
    """

    address: str
    vendor_id: str
    product_id: str
    dev_type: str = DEV_TYPE_PCI
    parent_addr: str | None = None
    numa_node: int | None = None
    iommu_group: int | None = None
    driver: str | None = None
    pci_class: str | None = None
    card_serial_number: str | None = None
    health_problem: str | None = None

    def __post_init__(self) -> None:
        if self.dev_type not in DEVICE_TYPES:
            raise exception.Invalid(reason=(
                'PCI device %s has type %r; allowed types: %s' % (
                    self.address, self.dev_type, ', '.join(DEVICE_TYPES))))

    @property
    def dev_id(self) -> str:
        """The libvirt node device name, e.g. ``pci_0000_18_00_0``."""
        return _DEV_ID_PREFIX + self.address.replace(
            ':', '_').replace('.', '_')

    @property
    def label(self) -> str:
        """Upstream's label of a device: ``label_<vendor>_<product>``."""
        return 'label_%s_%s' % (self.vendor_id, self.product_id)


@dataclasses.dataclass(frozen=True)
class Passthrough:
    """A device as the driver passes it to a guest: its host address,
    whether libvirt detaches it from its host driver (``managed``), and
    what lays out the guest's PCIe topology: its host NUMA node and the
    PCI request (one NVLink partition) it was claimed for."""

    address: str
    managed: bool = True
    numa_node: int | None = None
    request_id: str | None = None


@dataclasses.dataclass(frozen=True)
class PartitionHold:
    """The hardware partition (an NVLink Fabric Manager partition) that
    keeps a device out of nova's offer, and how (one of
    ``PARTITION_HOLD_STATES``): what the board names as the reason,
    e.g. "foreign partition 3 active"."""

    partition: int
    state: str

    def __post_init__(self) -> None:
        if self.state not in PARTITION_HOLD_STATES:
            raise exception.Invalid(reason=(
                'partition %d holds a device as %r; allowed: %s' % (
                    self.partition, self.state,
                    ', '.join(PARTITION_HOLD_STATES))))


def _flag(value: str) -> bool:
    """A "true"/"false" tag as stored in ``extra_info`` (anything but
    "false" is true, as upstream reads ``managed``)."""
    return str(value).lower() != 'false'


def extra_info(managed: str, live_migratable: str,
               withheld: str | None = None,
               card_serial_number: str | None = None,
               resource_class: str | None = None,
               partition_hold: PartitionHold | None = None
               ) -> dict[str, str]:
    """The ``extra_info`` JSON of a tracked device: the spec's
    ``managed`` and ``live_migratable`` tags (what the libvirt driver and
    live migration need), why nova does not offer the device and the
    hardware partition that keeps it out, if one does (for
    ``nova-manage pci list``/``board``), for a remote-managed
    device the card serial number its backend identifies it by, and the
    Placement resource class its compute reports it as (for the
    metrics, which read no Placement)."""
    info = {'managed': managed, 'live_migratable': live_migratable}
    if resource_class:
        info['resource_class'] = resource_class
    if withheld:
        info['withheld'] = withheld
    if partition_hold is not None:
        info['withheld_partition'] = str(partition_hold.partition)
        info['withheld_partition_state'] = partition_hold.state
    if card_serial_number is not None:
        info['remote_managed'] = 'true'
        info['card_serial_number'] = card_serial_number
    return info


@dataclasses.dataclass(frozen=True)
class TrackedFields:
    """The fields of a tracked device that follow the hypervisor and the
    config (everything but its identity, status, holder and provider)."""

    vendor_id: str
    product_id: str
    dev_type: str
    dev_id: str | None
    label: str | None
    numa_node: int | None
    parent_addr: str | None
    group_path: str
    extra_info: Mapping[str, str]

    @classmethod
    def of(cls, dev: HostDevice, parent_addr: str | None, group_path: str,
           info: Mapping[str, str]) -> 'TrackedFields':
        """What the tracker keeps of ``dev`` (``parent_addr``
        normalized by the caller)."""
        return cls(vendor_id=dev.vendor_id, product_id=dev.product_id,
                   dev_type=dev.dev_type, dev_id=dev.dev_id,
                   label=dev.label, numa_node=dev.numa_node,
                   parent_addr=parent_addr, group_path=group_path,
                   extra_info=dict(info))

    def columns(self) -> dict[str, object]:
        """These fields as ``pci_devices`` column values."""
        return {field.name: getattr(self, field.name)
                for field in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True)
class TrackedDevice:
    """A ``pci_devices`` row: a device of one compute node that a
    ``[pci]device_spec`` makes assignable, and who holds it."""

    id: int
    compute_node_id: int
    address: str
    vendor_id: str
    product_id: str
    dev_type: str
    status: str = AVAILABLE
    dev_id: str | None = None
    label: str | None = None
    numa_node: int | None = None
    parent_addr: str | None = None
    instance_uuid: str | None = None
    request_id: str | None = None
    group_path: str = ''
    rp_uuid: str | None = None
    extra_info: Mapping[str, str] = dataclasses.field(
        default_factory=dict, hash=False)
    created_at: datetime.datetime | None = None
    updated_at: datetime.datetime | None = None
    health: str = HEALTHY
    health_reason: str | None = None
    health_since: datetime.datetime | None = None
    health_source: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> 'TrackedDevice':
        """The device of a ``pci_devices`` row (a dict of its columns).

        Raises Invalid naming a column the record does not know or a
        required one the row lacks.
        """
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(row) - known)
        if unknown:
            raise exception.Invalid(reason=(
                'PCI device row has unknown column(s) %s; known columns: '
                '%s' % (', '.join(unknown), ', '.join(sorted(known)))))
        values = dict(row)
        values['extra_info'] = dict(values.get('extra_info') or {})
        if values.get('group_path') is None:
            values['group_path'] = ''
        if values.get('health') is None:
            values['health'] = HEALTHY
        try:
            return cls(**values)
        except TypeError as err:
            raise exception.Invalid(reason=(
                'PCI device row %r is incomplete: %s' % (row, err)))

    def to_row(self) -> dict[str, object]:
        """This device as a ``pci_devices`` row (a dict of columns)."""
        row = dataclasses.asdict(self)
        row['extra_info'] = dict(self.extra_info)
        return row

    def fields(self) -> TrackedFields:
        """The fields the hypervisor and the config decide."""
        return TrackedFields(**{
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(TrackedFields)})

    @property
    def in_use(self) -> bool:
        """Whether the device belongs to an instance."""
        return self.status in IN_USE

    @property
    def managed(self) -> bool:
        """Whether libvirt detaches the device from its host driver (the
        spec's ``managed`` tag, true unless it says "false")."""
        return _flag(self.extra_info.get('managed', 'true'))

    @property
    def healthy(self) -> bool:
        """Whether the device is usable (see nova.pci.health)."""
        return self.health != UNHEALTHY

    def describe_health(self) -> str | None:
        """``unhealthy since <time> (<source>): <reason>``, None while
        healthy (for ``nova-manage pci list`` and ``board``)."""
        if self.healthy:
            return None
        since = self.health_since.isoformat(timespec='seconds') \
            if self.health_since else '?'
        return 'unhealthy since %s (%s): %s' % (
            since, self.health_source or '?', self.health_reason or '')

    @property
    def withheld(self) -> str | None:
        """Why the device's compute does not offer it (None if it does).
        """
        return self.extra_info.get('withheld') or None

    @property
    def partition_hold(self) -> PartitionHold | None:
        """The hardware partition that keeps the device out of the offer
        (None if none does)."""
        partition = self.extra_info.get('withheld_partition')
        if partition is None:
            return None
        return PartitionHold(int(partition),
                             self.extra_info.get('withheld_partition_state',
                                                 ''))

    @property
    def resource_class(self) -> str | None:
        """The Placement resource class recorded by the device's compute
        (None in a row written before it was recorded)."""
        return self.extra_info.get('resource_class') or None

    def passthrough(self) -> Passthrough:
        """The device as the driver passes it to a guest."""
        return Passthrough(address=self.address, managed=self.managed,
                           numa_node=self.numa_node,
                           request_id=self.request_id)


def changed_columns(device: TrackedDevice,
                    wanted: TrackedFields) -> dict[str, object]:
    """The columns of ``device`` whose values differ from ``wanted``."""
    current = device.fields().columns()
    return {name: value for name, value in wanted.columns().items()
            if current[name] != value}


def row_values(**values: object) -> dict[str, object]:
    """Column values to write to a ``pci_devices`` row, checked against
    the record: e.g. ``row_values(status=AVAILABLE, instance_uuid=None)``.
    Raises Invalid naming an unknown column."""
    known = {field.name for field in dataclasses.fields(TrackedDevice)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise exception.Invalid(reason=(
            'PCI device column(s) %s unknown; known columns: %s' % (
                ', '.join(unknown), ', '.join(sorted(known)))))
    return dict(values)
