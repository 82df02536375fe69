"""Device groups from the hardware's own partitions (NVLink, Fabric Manager).

On an HGX board only the partitions NVIDIA Fabric Manager defines can
join GPUs by NVLink. The driver reports them as ``FabricPartitions``; this
module decides from them, and from the declared ``[pci]device_group``
tree, which groups a host offers, which devices it withholds, and what to
warn the operator about (``effective_offer``). Trees are built from
``groups.Declaration`` values, through the same structural checks as the
declared ones.
"""

from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
from typing import NamedTuple

from nova import exception
from nova.pci import device as pci_device
from nova.pci import groups

# How Withheld.reason starts for a device withheld only alone.
ALONE_PREFIX = 'not offered alone: '
# How Withheld.reason starts for a device offered only alone (every
# multi-device group of it is withheld).
IN_GROUPS_PREFIX = 'not offered in groups: '

# The [pci]device_group_source that makes the partitions the groups.
SOURCE_FABRIC_MANAGER = 'fabric_manager'

# The group type of the groups made from NVLink partitions.
NVLINK = 'nvlink'


@dataclasses.dataclass(frozen=True)
class HardwarePartition:
    """A device partition the hardware defines (an NVLink FM partition).
    """

    id: int
    module_ids: frozenset[int]
    # PCI addresses of its devices, sorted; None if one is not known.
    addresses: tuple[str, ...] | None
    # Active, but not by nova: its devices are someone else's.
    foreign: bool = False
    # Why nova keeps it out of use (its activation failed for a hardware
    # reason), None if it does not.
    quarantined: str | None = None

    def describe(self) -> str:
        return '%d (modules %s%s)' % (
            self.id, ','.join(str(m) for m in sorted(self.module_ids)),
            ': ' + ', '.join(self.addresses) if self.addresses else '')


@dataclasses.dataclass(frozen=True)
class FabricPartitions:
    """What a driver knows of the board's NVLink partitions.

    ``partitions``: every partition the hardware defines. ``module_ids``:
    address -> GPU module ID, for the GPUs whose module is known.
    ``unmapped``: address -> why the GPU's module ID is unknown (only a
    driver that asks Fabric Manager reports these).
    """

    partitions: tuple[HardwarePartition, ...]
    module_ids: Mapping[str, int]
    unmapped: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class FabricView:
    """What one look at a host showed of its NVLink partitions.

    ``fabric``: Fabric Manager's partitions, when nova drives them and
    Fabric Manager answered. ``known``: without Fabric Manager mode, the
    partitions the GPUs' module IDs imply (``unmapped`` empty), for a
    check of the declared groups. ``error``: why Fabric Manager could
    not be read (then ``fabric`` is None and the host keeps the groups
    it had). All None: nothing is known of partitions.
    """

    fabric: FabricPartitions | None = None
    known: FabricPartitions | None = None
    error: str | None = None

    def to_release(self, healed: set[str] | None
                   ) -> tuple[HardwarePartition, ...]:
        """The quarantined partitions to offer again: those holding any
        of the ``healed`` addresses (every one when None: an NVSwitch
        came back)."""
        if self.fabric is None:
            return ()
        return tuple(
            p for p in self.fabric.partitions if p.quarantined and (
                healed is None or set(p.addresses or ()) & healed))

    def released(self, partition_ids: Sequence[int]) -> 'FabricView':
        """This view once the partitions ``partition_ids`` are no longer
        quarantined."""
        if self.fabric is None or not partition_ids:
            return self
        return dataclasses.replace(self, fabric=dataclasses.replace(
            self.fabric, partitions=tuple(
                dataclasses.replace(p, quarantined=None)
                if p.id in partition_ids else p
                for p in self.fabric.partitions)))


@dataclasses.dataclass(frozen=True)
class Withheld:
    """The devices of a host that nova does not offer right now, and why.

    ``devices``: address -> reason; no request may get them (their
    Placement inventory is reserved). ``alone``: address -> reason; they
    may be given only as part of one of their groups, never as a single
    device. ``groups``: group name -> reason; the group is not offered at
    any size (its provider loses its size trait), e.g. it holds an
    unhealthy device. ``in_groups``: address -> reason; every
    multi-device group of the device is withheld, so it is offered alone
    only (an NVSwitch is down). ``holds``: address -> the hardware
    partition that withholds the device (foreign or quarantined), for
    the board. Computed beside the group tree on every update, so a
    device comes back as soon as the reason is gone.
    """

    devices: Mapping[str, str] = dataclasses.field(default_factory=dict)
    alone: Mapping[str, str] = dataclasses.field(default_factory=dict)
    groups: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Group name -> its devices, for ``offers``.
    group_devices: Mapping[str, tuple[str, ...]] = dataclasses.field(
        default_factory=dict)
    in_groups: Mapping[str, str] = dataclasses.field(default_factory=dict)
    holds: Mapping[str, pci_device.PartitionHold] = dataclasses.field(
        default_factory=dict)

    def reason(self, address: str) -> str | None:
        """Why the device is not (fully) offered; None if it is."""
        if address in self.devices:
            return self.devices[address]
        if address in self.alone:
            return ALONE_PREFIX + self.alone[address]
        if address in self.in_groups:
            return IN_GROUPS_PREFIX + self.in_groups[address]
        return None

    def hold(self, address: str) -> pci_device.PartitionHold | None:
        """The hardware partition that withholds the device (None if no
        partition does)."""
        return self.holds.get(address)

    def offers(self, addresses: list[str]) -> bool:
        """Whether a request may get exactly the devices ``addresses``."""
        if any(a in self.devices for a in addresses):
            return False
        if len(addresses) == 1:
            return addresses[0] not in self.alone
        wanted = tuple(sorted(addresses))
        return not any(wanted == devices and name in self.groups
                       for name, devices in self.group_devices.items())


class PartitionOffer(NamedTuple):
    """What a host offers: its group tree, the devices it withholds, and
    the warnings for the operator (logged by the caller, once each)."""

    tree: groups.GroupTree
    withheld: Withheld
    warnings: list[str]


def effective_offer(declared: groups.GroupTree, source: str,
                    fabric: FabricPartitions | None, *,
                    known: FabricPartitions | None = None,
                    mode: str = '') -> PartitionOffer:
    """The groups, withheld devices and warnings of a host.

    ``fabric`` is Fabric Manager's view (None: nova does not activate
    partitions on this host). With it, the groups are the partitions
    themselves (``source`` ``fabric_manager``) or the ``declared`` ones
    checked against them, and the devices nova cannot activate a
    partition for are withheld. Without it, the declared tree is used as
    it is and nothing is withheld; if the partitions the module IDs imply
    are ``known``, declared NVLink groups that are none of them are
    warned about (``mode``: the host's [libvirt]nvlink_partitions, named
    in the warning).
    Raises PciGroupConfigInvalid for a declared group that is no
    partition of ``fabric``.
    """
    if fabric is None:
        warnings = [] if known is None else groups_off_partitions(
            declared, known.partitions, known.module_ids, mode)
        return PartitionOffer(declared, Withheld(), warnings)
    if source == SOURCE_FABRIC_MANAGER:
        tree, warnings = tree_from_partitions(fabric.partitions, NVLINK)
    else:
        tree, warnings = check_declared_against_partitions(
            declared, fabric.partitions, fabric.module_ids, fabric.unmapped)
    return PartitionOffer(tree, withheld_devices(
        fabric.partitions, fabric.module_ids, fabric.unmapped), warnings)


def partition_group_name(partition: HardwarePartition) -> str:
    return 'partition-%d' % partition.id


def tree_from_partitions(partitions: Sequence[HardwarePartition],
                         group_type: str
                         ) -> tuple[groups.GroupTree, list[str]]:
    """Build the group tree from hardware partitions, by containment.

    Every multi-device partition whose addresses are known becomes a
    group; its members are the largest partitions strictly inside it (a
    quad holds two pairs, the board two quads). A partition only partly
    covered by smaller ones, or overlapping another without containing
    it, cannot be a tree node and is left out. Returns the tree and a
    warning per partition left out.
    """
    usable = sorted((p for p in partitions
                     if p.addresses and len(p.addresses) > 1),
                    key=lambda p: (len(p.addresses), p.id))
    warnings = []
    kept: list[HardwarePartition] = []
    for partition in usable:
        devices = set(partition.addresses)
        crossing = [k for k in kept if set(k.addresses) & devices and
                    not set(k.addresses) < devices]
        if crossing:
            warnings.append('partition %s overlaps partition %s without '
                            'containing it; it is not a group' % (
                                partition.describe(),
                                crossing[0].describe()))
            continue
        kept.append(partition)
    declarations: dict[str, groups.Declaration] = {}
    for partition in kept:
        devices = set(partition.addresses)
        inside = [k for k in kept if set(k.addresses) < devices]
        # Direct members: those inside no other partition inside this one.
        members = [k for k in inside if not any(
            set(k.addresses) < set(o.addresses) for o in inside)]
        covered = set().union(*(set(m.addresses) for m in members))
        name = partition_group_name(partition)
        if not members:
            declarations[name] = groups.Declaration(
                name, group_type, addresses=tuple(partition.addresses))
        elif covered == devices:
            declarations[name] = groups.Declaration(
                name, group_type,
                members=tuple(partition_group_name(m) for m in members))
        else:
            warnings.append('partition %s is only partly made of smaller '
                            'partitions; it is not a group' %
                            partition.describe())
    # A dropped partition's parent would name an unknown member: drop up.
    while True:
        bad = {name for name, decl in declarations.items()
               if any(m not in declarations for m in decl.members)}
        if not bad:
            break
        for name in bad:
            del declarations[name]
    return (groups.GroupTree.from_declarations(list(declarations.values())),
            warnings)


def check_declared_against_partitions(
        tree: groups.GroupTree,
        partitions: Sequence[HardwarePartition],
        module_ids: Mapping[str, int], unmapped: Mapping[str, str]
) -> tuple[groups.GroupTree, list[str]]:
    """Check declared groups against the hardware's partitions.

    A multi-device group must be exactly one partition; otherwise
    PciGroupConfigInvalid names the group, its addresses, their module
    IDs and the partitions that exist. A group with a device whose module
    ID is unknown (``unmapped``: address -> reason) cannot be checked or
    activated: it and the groups enclosing it are left out, with a
    warning, and its devices stay usable one by one.
    Returns the tree to use and the warnings.
    """
    dropped: set[str] = set()
    warnings: list[str] = []
    by_modules = {p.module_ids: p for p in partitions}
    for group in tree.groups():
        unknown = [a for a in group.addresses if a in unmapped or
                   a not in module_ids]
        if unknown:
            dropped.add(group.name)
            continue
        wanted = frozenset(module_ids[a] for a in group.addresses)
        if wanted not in by_modules:
            raise exception.PciGroupConfigInvalid(reason=(
                'group %s (%s, module IDs %s) is not a Fabric Manager '
                'partition; partitions: %s' % (
                    group.name, ', '.join(group.addresses),
                    ','.join(str(module_ids[a]) for a in group.addresses),
                    '; '.join(p.describe() for p in partitions
                              if len(p.module_ids) > 1) or 'none')))
    if not dropped:
        return tree, warnings
    # Every group enclosing an unknown device is dropped; the others,
    # siblings included, stay.
    for name in sorted(dropped):
        group = tree.get(name)
        warnings.append(
            'device group %s (%s) is not offered: %s' % (
                name, ', '.join(group.addresses), '; '.join(
                    '%s %s' % (a, unmapped.get(a, 'has no module ID'))
                    for a in group.addresses
                    if a in unmapped or a not in module_ids)))
    return _without(tree, dropped), warnings


def groups_off_partitions(
        tree: groups.GroupTree,
        partitions: Sequence[HardwarePartition],
        module_ids: Mapping[str, int], mode: str) -> list[str]:
    """Warnings for declared nvlink groups that are no hardware partition.

    For a compute that does not check its groups with Fabric Manager
    (``mode`` is its [libvirt]nvlink_partitions): such a group still
    hands out GPUs, but they are not joined by NVLink. Groups with a
    device whose module ID (``module_ids``) is unknown are not judged.
    """
    known = {p.module_ids for p in partitions}
    multi = '; '.join(p.describe() for p in sorted(
        partitions, key=lambda p: (len(p.module_ids), p.id))
        if len(p.module_ids) > 1)
    warnings = []
    for group in tree.groups():
        if group.type != NVLINK or not all(
                a in module_ids for a in group.addresses):
            continue
        modules = [module_ids[a] for a in group.addresses]
        if frozenset(modules) in known:
            continue
        warnings.append(
            'device group %s (%s, module IDs %s) is not an NVLink '
            'partition of this board: with [libvirt]nvlink_partitions = '
            '%s its GPUs are handed out together but are not joined by '
            'NVLink. Partitions: %s. Derive the groups from fmpm -l and '
            'the module IDs of nvidia-smi -q, or let the compute build '
            'them ([libvirt]nvlink_partitions = fabric_manager with '
            '[pci]device_group_source = fabric_manager)' % (
                group.name, ', '.join(group.addresses),
                ','.join(map(str, modules)), mode, multi))
    return warnings


def _without(tree: groups.GroupTree, dropped: set[str]) -> groups.GroupTree:
    """``tree`` less the ``dropped`` groups, which must include every
    group enclosing a dropped one; orphaned members become roots."""
    return groups.GroupTree.from_declarations(
        [d for d in tree.declarations() if d.name not in dropped])


def withheld_devices(
        partitions: Sequence[HardwarePartition],
        module_ids: Mapping[str, int],
        unmapped: Mapping[str, str]) -> Withheld:
    """The devices nova cannot activate a partition for, from the
    hardware's partitions and the module map (address -> module ID) and
    the devices without one (``unmapped``: address -> why).

    Withheld entirely: a device without a module ID (no partition of it
    can be found), a device of a partition someone else activated (it is
    in use), a device of a quarantined partition (its activation failed
    for a hardware reason). Withheld alone: a device no single-device
    partition holds, while its multi-device partitions can still be
    activated.
    """
    devices: dict[str, str] = {}
    holds: dict[str, pci_device.PartitionHold] = {}
    for address, why in unmapped.items():
        devices[address] = 'cannot be activated: it %s' % why
    for partition in partitions:
        if partition.foreign:
            reason = ('in Fabric Manager partition %s, which is active but '
                      'was not activated by nova; deactivate it to offer '
                      'the device again' % partition.describe())
            state = pci_device.PARTITION_FOREIGN
        elif partition.quarantined:
            reason = 'in quarantined Fabric Manager partition %s: %s' % (
                partition.describe(), partition.quarantined)
            state = pci_device.PARTITION_QUARANTINED
        else:
            continue
        for address in partition.addresses or ():
            if address not in devices:
                devices[address] = reason
                holds[address] = pci_device.PartitionHold(partition.id,
                                                          state)
    singles = {p.module_ids for p in partitions if len(p.module_ids) == 1}
    alone = {address: 'no Fabric Manager partition of its own (module %d)'
             % module for address, module in module_ids.items()
             if frozenset({module}) not in singles and
             address not in devices}
    return Withheld(devices, alone, holds=holds)
