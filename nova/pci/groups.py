"""PCI device groups: sets of devices that are only useful together.

Two forms are supported:

* ``[pci]device_group`` declares a tree of groups, for example the NVLink
  partitions of an HGX board (pairs inside quads inside the board). Every
  group becomes a Placement provider and a request for N devices of a group
  type gets exactly the devices of one group of size N.
* The approved upstream static form tags ``device_spec`` entries with
  ``group_name`` and ``group_type``; such a group is one unit of resource,
  always assigned whole.

This module parses and validates both forms. It knows nothing about
Placement beyond the trait names from nova.pci.placement_names.
"""

from collections.abc import Mapping
import dataclasses
import json
import re

from nova import exception
from nova.pci import devspec
from nova.pci import placement_names
from nova.pci import request
from nova.pci import utils

# Keys of one [pci]device_group value.
_ALLOWED_KEYS = ('name', 'type', 'addresses', 'members')
# Group names end up in provider names (<host>_<name>) and in the PCI
# tracker's group path ('quad-a/pair-a1'), so keep them to a safe alphabet.
_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')
_NAME_HELP = ('letters, digits, ".", "_" and "-", starting with a letter '
              'or digit')
# Only whole devices have a provider of their own; a VF is inventory of its
# parent PF's provider and cannot be placed in a group.
_GROUPABLE_DEV_TYPES = placement_names.WHOLE_DEVICE_TYPES


def _invalid(reason: str) -> exception.PciGroupConfigInvalid:
    return exception.PciGroupConfigInvalid(reason=reason)


@dataclasses.dataclass
class DeviceGroup:
    """One declared group: either a set of devices or a set of groups."""

    name: str
    type: str
    # Child groups, in the order the config lists them.
    members: list['DeviceGroup'] = dataclasses.field(default_factory=list)
    # Devices listed directly by this group (normalized addresses).
    own_addresses: list[str] = dataclasses.field(default_factory=list)

    @property
    def addresses(self) -> list[str]:
        """Every device below this group, sorted by PCI address.

        Normalized addresses have fixed-width hex fields, so string order
        is address order.
        """
        found = list(self.own_addresses)
        for member in self.members:
            found.extend(member.addresses)
        return sorted(found)

    @property
    def size(self) -> int:
        return len(self.addresses)

    def member_index(self, address: str) -> int:
        """Stable position (0..size-1) of ``address`` inside this group.

        It names the member-index trait of the device, so it must not
        depend on config order: it is the rank of the address.
        """
        try:
            return self.addresses.index(address)
        except ValueError:
            raise exception.PciDeviceNotInGroup(
                address=address, name=self.name) from None

    @property
    def traits(self) -> set[str]:
        """Traits of this group's provider: its type and its size."""
        return {placement_names.group_type_trait(self.type),
                placement_names.group_size_trait(self.type, self.size)}


@dataclasses.dataclass
class _Declaration:
    """One parsed config value before the members are linked."""

    group: DeviceGroup
    member_names: list[str]


def _parse_value(value: str) -> _Declaration:
    """Parse and check one ``[pci]device_group`` value on its own."""
    try:
        data = json.loads(value)
    except (TypeError, ValueError) as e:
        raise _invalid('value %r is not valid JSON: %s' % (value, e))
    if not isinstance(data, dict):
        raise _invalid('value %r is not a JSON object; each device_group '
                       'value declares one group' % (value,))

    name = data.get('name')
    if not isinstance(name, str) or not name:
        raise _invalid('value %r has no group name; "name" must be a '
                       'non-empty string' % (value,))
    if not _NAME_RE.match(name):
        raise _invalid('group name %r is not allowed; use %s' % (
            name, _NAME_HELP))

    unknown = sorted(set(data) - set(_ALLOWED_KEYS))
    if unknown:
        raise _invalid('group %s has unknown key(s) %s; allowed keys: %s' % (
            name, ', '.join(unknown), ', '.join(_ALLOWED_KEYS)))

    if 'type' not in data:
        raise _invalid('group %s has no "type", e.g. "nvlink"' % name)
    try:
        group_type = utils.validate_group_type(
            data['type'], 'group %s' % name)
    except exception.Invalid as e:
        raise _invalid(e.kwargs['reason'])

    has_addresses = 'addresses' in data
    has_members = 'members' in data
    if has_addresses == has_members:
        raise _invalid('group %s must have exactly one of "addresses" (PCI '
                       'devices) or "members" (names of smaller groups)' %
                       name)
    key = 'addresses' if has_addresses else 'members'
    items = data[key]
    if not isinstance(items, list) or not all(
            isinstance(item, str) for item in items):
        raise _invalid('group %s: "%s" must be a list of strings, got %r' %
                       (name, key, items))
    if len(items) < 2:
        what = 'device' if has_addresses else 'member'
        raise _invalid('group %s lists %d %s(s) in "%s" %r; a group needs '
                       'at least 2' % (name, len(items), what, key, items))

    if has_addresses:
        addresses = []
        for item in items:
            try:
                address = utils.normalize_address(item)
            except exception.PciDeviceWrongAddressFormat:
                raise _invalid('group %s: %r is not a PCI address; use the '
                               'full form dddd:bb:ss.f, e.g. 0000:18:00.0' %
                               (name, item))
            if address in addresses:
                raise _invalid('group %s lists device %s twice' % (
                    name, address))
            addresses.append(address)
        return _Declaration(DeviceGroup(name, group_type,
                                        own_addresses=addresses), [])

    for index, item in enumerate(items):
        if item in items[:index]:
            raise _invalid('group %s lists member %s twice' % (name, item))
    return _Declaration(DeviceGroup(name, group_type), list(items))


def _find_cycle(start: str, parent_of: dict[str, str],
                order: dict[str, int]) -> list[str]:
    """Return the cycle reached from ``start`` by following parents.

    The result lists groups parent first, starting at the one declared
    first, and repeats it at the end: ['a', 'b', 'a'] means a has member b
    and b has member a.
    """
    chain = [start]
    while parent_of[chain[-1]] not in chain:
        chain.append(parent_of[chain[-1]])
    cycle = chain[chain.index(parent_of[chain[-1]]):]
    cycle.reverse()
    first = min(range(len(cycle)), key=lambda i: order[cycle[i]])
    cycle = cycle[first:] + cycle[:first]
    return cycle + [cycle[0]]


def _check_sizes(group: DeviceGroup) -> int:
    """Check that every group below ``group`` has equal members.

    The tree must be built from equal subgroups so that each size names
    one level: a quad is two pairs, never a pair and a triple.
    """
    if not group.members:
        return len(group.own_addresses)
    sizes = [_check_sizes(member) for member in group.members]
    if len(set(sizes)) > 1:
        raise _invalid(
            'group %s is made of members of unequal sizes (%s); all members '
            'of a group must have the same size' % (group.name, ', '.join(
                '%s: %d' % (m.name, s)
                for m, s in zip(group.members, sizes))))
    return sum(sizes)


class GroupTree:
    """All ``[pci]device_group`` groups of one host: a forest."""

    def __init__(self, roots: list[DeviceGroup]) -> None:
        self.roots = roots
        self._by_name: dict[str, DeviceGroup] = {}
        # address -> groups containing it, outermost first
        self._enclosing: dict[str, list[DeviceGroup]] = {}
        for root in roots:
            self._index(root, [])

    def _index(self, group: DeviceGroup, outer: list[DeviceGroup]) -> None:
        self._by_name[group.name] = group
        chain = outer + [group]
        for address in group.own_addresses:
            self._enclosing[address] = chain
        for member in group.members:
            self._index(member, chain)

    @classmethod
    def from_config(cls, values: list[str]) -> 'GroupTree':
        """Build the tree from ``[pci]device_group`` values.

        Only the structure is checked here (no host devices needed), so
        every service can load the option; ``validate_devices`` checks it
        against the host. Declaration order does not matter.
        Raises PciGroupConfigInvalid naming the offending group or value.
        """
        declarations: dict[str, _Declaration] = {}
        for value in values:
            decl = _parse_value(value)
            if decl.group.name in declarations:
                raise _invalid('group name %s is declared twice' %
                               decl.group.name)
            declarations[decl.group.name] = decl
        order = {name: i for i, name in enumerate(declarations)}

        owner: dict[str, str] = {}
        for decl in declarations.values():
            for address in decl.group.own_addresses:
                if address in owner:
                    raise _invalid(
                        'device %s is listed by both group %s and group %s; '
                        'a device belongs to one group per level, enclose '
                        'groups with "members" instead' % (
                            address, owner[address], decl.group.name))
                owner[address] = decl.group.name

        parent_of: dict[str, str] = {}
        for decl in declarations.values():
            group = decl.group
            for member_name in decl.member_names:
                member = declarations.get(member_name)
                if member is None:
                    raise _invalid(
                        'group %s has unknown member %s; declared groups: '
                        '%s' % (group.name, member_name,
                                ', '.join(declarations)))
                if member.group.type != group.type:
                    raise _invalid(
                        'group %s of type %s has member %s of type %s; '
                        'members must have the type of their group' % (
                            group.name, group.type, member_name,
                            member.group.type))
                if member_name in parent_of:
                    raise _invalid(
                        'group %s is a member of both group %s and group '
                        '%s; a group can have only one parent' % (
                            member_name, parent_of[member_name],
                            group.name))
                parent_of[member_name] = group.name
                group.members.append(member.group)

        # Every group has at most one parent, so a group that no root
        # reaches lies on, or hangs below, a cycle.
        roots = [d.group for d in declarations.values()
                 if d.group.name not in parent_of]
        reached: set[str] = set()
        stack = list(roots)
        while stack:
            group = stack.pop()
            reached.add(group.name)
            stack.extend(group.members)
        for name in declarations:
            if name not in reached:
                cycle = _find_cycle(name, parent_of, order)
                raise _invalid('groups form a cycle: %s; a group cannot '
                               'contain itself' % ' -> '.join(cycle))

        for root in roots:
            _check_sizes(root)
        return cls(roots)

    def groups(self) -> list[DeviceGroup]:
        """Every group, parents before their members (pre-order)."""
        ordered: list[DeviceGroup] = []

        def visit(group: DeviceGroup) -> None:
            ordered.append(group)
            for member in group.members:
                visit(member)

        for root in self.roots:
            visit(root)
        return ordered

    def get(self, name: str) -> DeviceGroup:
        try:
            return self._by_name[name]
        except KeyError:
            raise exception.PciDeviceGroupNotFound(
                name=name,
                known=', '.join(g.name for g in self.groups()) or 'none'
            ) from None

    def enclosing(self, address: str) -> list[DeviceGroup]:
        """Groups containing the device, outermost first ([] if none)."""
        return list(self._enclosing.get(address, []))

    def member_traits(self, address: str) -> set[str]:
        """One member-index trait per group enclosing the device."""
        return {placement_names.group_member_trait(
            g.type, g.size, g.member_index(address))
                for g in self.enclosing(address)}

    def sizes(self, group_type: str) -> set[int]:
        """Sizes of the declared groups of ``group_type``."""
        return {g.size for g in self.groups() if g.type == group_type}

    def validate_devices(self, devices: list[dict],
                         specs: Mapping[str, devspec.PciDeviceSpec]
                         ) -> None:
        """Check the groups against the devices found on this host and
        their specs (``Whitelist.classify``).

        Run at compute start, once devices are known: every grouped
        address must be a whole device matched by a device_spec, without
        static group tags, and one group must hold one resource class (its
        requests ask for N units of one class). A device_group name must
        not also be a static group_name, as both become ``<host>_<name>``
        providers.
        Raises PciGroupConfigInvalid.
        """
        by_address = {utils.normalize_address(d['address']): d
                      for d in devices}
        resource_class: dict[str, str] = {}
        for group in self.groups():
            for address in group.own_addresses:
                dev = by_address.get(address)
                if dev is None:
                    raise _invalid('group %s lists %s, which is not a PCI '
                                   'device on this host' % (
                                       group.name, address))
                if dev.get('dev_type') not in _GROUPABLE_DEV_TYPES:
                    raise _invalid(
                        'group %s lists %s of type %s; only whole devices '
                        '(%s) can be grouped' % (
                            group.name, address, dev.get('dev_type'),
                            ', '.join(_GROUPABLE_DEV_TYPES)))
                spec = specs.get(address)
                if spec is None:
                    raise _invalid('group %s lists %s, which no '
                                   '[pci]device_spec matches' % (
                                       group.name, address))
                if spec.group_name:
                    raise _invalid(
                        'device %s of group %s is also tagged with static '
                        'group_name %s in [pci]device_spec; use only one '
                        'of the two group forms for a device' % (
                            address, group.name, spec.group_name))
                resource_class[address] = spec.resource_class_for(dev)

        for group in self.groups():
            classes: dict[str, list[str]] = {}
            for address in group.addresses:
                classes.setdefault(resource_class[address], []).append(
                    address)
            if len(classes) > 1:
                raise _invalid(
                    'group %s mixes resource classes (%s); all devices of '
                    'a group must have one resource class' % (
                        group.name, '; '.join(
                            '%s: %s' % (rc, ', '.join(addrs))
                            for rc, addrs in sorted(classes.items()))))

        for static in static_groups(devices, specs):
            if static.name in self._by_name:
                raise _invalid(
                    'name %s is both a [pci]device_group and a static '
                    'group_name in [pci]device_spec; group names must be '
                    'unique on the host' % static.name)


@dataclasses.dataclass
class StaticGroup:
    """A group of the upstream static form, consumed whole as one unit."""

    name: str
    type: str
    # Member devices, sorted by address.
    addresses: list[str]
    resource_class: str


def static_groups(devices: list[dict],
                  specs: Mapping[str, devspec.PciDeviceSpec]
                  ) -> list[StaticGroup]:
    """Collect the static groups formed by ``group_name`` spec tags
    (``specs``: the spec of each device, ``Whitelist.classify``).

    All devices whose matching spec carries the same ``group_name`` form
    one group. Its resource class is the spec's explicit ``resource_class``
    tag or else ``CUSTOM_PCI_GROUP_<TYPE>``. Groups are returned sorted by
    name.
    Raises PciConfigInvalidSpec for a group of fewer than 2 devices, a
    group_name given two resource classes, or a VF in a group. (A
    group_name given two types is already refused by the Whitelist.)
    """
    found: dict[str, StaticGroup] = {}
    for dev in devices:
        address = utils.normalize_address(dev['address'])
        spec = specs.get(address)
        if spec is None or not spec.group_name:
            continue
        name, group_type = spec.group_name, spec.group_type
        if dev.get('dev_type') not in _GROUPABLE_DEV_TYPES:
            raise exception.PciConfigInvalidSpec(reason=(
                'static group %s would contain %s of type %s; only whole '
                'devices (%s) can be grouped' % (
                    name, address, dev.get('dev_type'),
                    ', '.join(_GROUPABLE_DEV_TYPES))))
        # The spec gives a static group its explicit resource_class tag,
        # else CUSTOM_PCI_GROUP_<TYPE>.
        resource_class = spec.resource_class_for(dev)
        group = found.setdefault(
            name, StaticGroup(name, group_type, [], resource_class))
        if group.resource_class != resource_class:
            raise exception.PciConfigInvalidSpec(reason=(
                'static group %s is given resource classes %s and %s; one '
                'group_name must have one resource_class' % (
                    name, group.resource_class, resource_class)))
        group.addresses.append(address)

    for group in found.values():
        if len(group.addresses) < 2:
            raise exception.PciConfigInvalidSpec(reason=(
                'static group %s matches %d device(s) (%s); a group needs '
                'at least 2' % (group.name, len(group.addresses),
                                ', '.join(group.addresses) or 'none')))
        group.addresses.sort()
    return [found[name] for name in sorted(found)]


def check_aliases(aliases: dict[str, request.PciAlias], tree: GroupTree,
                  statics: list[StaticGroup]) -> list[str]:
    """Warn about aliases whose ``group_type`` no group here declares.

    Aliases are shared by every host while groups are per host, so this is
    a warning for the compute log, not an error.
    """
    declared = ({g.type for g in tree.groups()} |
                {s.type for s in statics})
    warnings = []
    for name in sorted(aliases):
        group_type = aliases[name].group_type
        if group_type and group_type not in declared:
            warnings.append(
                'PCI alias %s requests group_type %s, but no device group '
                'of that type is declared on this host; declared group '
                'types: %s' % (name, group_type,
                               ', '.join(sorted(declared)) or 'none'))
    return warnings


# Groups from the hardware's own partitions ---------------------------------

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


def partition_group_name(partition: HardwarePartition) -> str:
    return 'partition-%d' % partition.id


def tree_from_partitions(partitions: list[HardwarePartition],
                         group_type: str) -> tuple[GroupTree, list[str]]:
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
        inside = [k for k in kept if set(k.addresses) < devices]
        crossing = [k for k in kept if set(k.addresses) & devices and
                    not set(k.addresses) < devices]
        if crossing:
            warnings.append('partition %s overlaps partition %s without '
                            'containing it; it is not a group' % (
                                partition.describe(),
                                crossing[0].describe()))
            continue
        kept.append(partition)
    values = []
    for partition in kept:
        devices = set(partition.addresses)
        inside = [k for k in kept if set(k.addresses) < devices]
        # Direct members: those inside no other partition inside this one.
        members = [k for k in inside if not any(
            set(k.addresses) < set(o.addresses) for o in inside)]
        covered = set().union(*(set(m.addresses) for m in members))
        group = {'name': partition_group_name(partition), 'type': group_type}
        if not members:
            group['addresses'] = list(partition.addresses)
        elif covered == devices:
            group['members'] = [partition_group_name(m) for m in members]
        else:
            warnings.append('partition %s is only partly made of smaller '
                            'partitions; it is not a group' %
                            partition.describe())
            continue
        values.append(json.dumps(group))
    # A dropped partition's parent would name an unknown member: drop up.
    names = {json.loads(v)['name'] for v in values}
    while True:
        bad = {json.loads(v)['name'] for v in values if any(
            m not in names for m in json.loads(v).get('members', []))}
        if not bad:
            break
        values = [v for v in values if json.loads(v)['name'] not in bad]
        names -= bad
    return GroupTree.from_config(values), warnings


def check_declared_against_partitions(
        tree: GroupTree, partitions: list[HardwarePartition],
        module_ids: dict[str, int], unmapped: dict[str, str]
) -> tuple[GroupTree, list[str]]:
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
            raise _invalid(
                'group %s (%s, module IDs %s) is not a Fabric Manager '
                'partition; partitions: %s' % (
                    group.name, ', '.join(group.addresses),
                    ','.join(str(module_ids[a]) for a in group.addresses),
                    '; '.join(p.describe() for p in partitions
                              if len(p.module_ids) > 1) or 'none'))
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


def groups_off_partitions(tree: GroupTree,
                          partitions: list[HardwarePartition],
                          module_ids: dict[str, int], mode: str
                          ) -> list[str]:
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
        if group.type != 'nvlink' or not all(
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


def _without(tree: GroupTree, dropped: set[str]) -> GroupTree:
    """``tree`` less the ``dropped`` groups, which must include every
    group enclosing a dropped one; orphaned members become roots."""
    values = []
    for group in tree.groups():
        if group.name in dropped:
            continue
        value = {'name': group.name, 'type': group.type}
        if group.members:
            value['members'] = [m.name for m in group.members]
        else:
            value['addresses'] = list(group.own_addresses)
        values.append(json.dumps(value))
    return GroupTree.from_config(values)


# How Withheld.reason starts for a device withheld only alone.
ALONE_PREFIX = 'not offered alone: '


@dataclasses.dataclass(frozen=True)
class Withheld:
    """The devices of a host that nova does not offer right now, and why.

    ``devices``: address -> reason; no request may get them (their
    Placement inventory is reserved). ``alone``: address -> reason; they
    may be given only as part of one of their groups, never as a single
    device. Computed beside the group tree on every update, so a device
    comes back as soon as the reason is gone.
    """

    devices: Mapping[str, str] = dataclasses.field(default_factory=dict)
    alone: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def reason(self, address: str) -> str | None:
        """Why the device is not (fully) offered; None if it is."""
        if address in self.devices:
            return self.devices[address]
        if address in self.alone:
            return ALONE_PREFIX + self.alone[address]
        return None

    def offers(self, addresses: list[str]) -> bool:
        """Whether a request may get exactly the devices ``addresses``."""
        if any(a in self.devices for a in addresses):
            return False
        return not (len(addresses) == 1 and addresses[0] in self.alone)


def withheld_devices(partitions: list[HardwarePartition],
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
    for address, why in unmapped.items():
        devices[address] = 'cannot be activated: it %s' % why
    for partition in partitions:
        if partition.foreign:
            reason = ('in Fabric Manager partition %s, which is active but '
                      'was not activated by nova; deactivate it to offer '
                      'the device again' % partition.describe())
        elif partition.quarantined:
            reason = 'in quarantined Fabric Manager partition %s: %s' % (
                partition.describe(), partition.quarantined)
        else:
            continue
        for address in partition.addresses or ():
            devices.setdefault(address, reason)
    singles = {p.module_ids for p in partitions if len(p.module_ids) == 1}
    alone = {address: 'no Fabric Manager partition of its own (module %d)'
             % module for address, module in module_ids.items()
             if frozenset({module}) not in singles and
             address not in devices}
    return Withheld(devices, alone)
