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
Placement beyond the trait names from nova.pci.placement_names. Trees made
from the hardware's own partitions, and which tree a host offers, are
nova.pci.partitions'.
"""

from collections.abc import Mapping
import dataclasses
import json
import re

from nova import exception
from nova.pci import device as pci_device
from nova.pci import devspec
from nova.pci import placement_names
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
_GROUPABLE_DEV_TYPES = pci_device.WHOLE_DEVICE_TYPES


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


@dataclasses.dataclass(frozen=True)
class Declaration:
    """One group as declared, before its members are linked: its devices
    (normalized addresses) or the names of its member groups.

    ``[pci]device_group`` values parse into these, and the Fabric Manager
    partitions (nova.pci.partitions) are turned into them directly, so
    both kinds of tree pass the same structural checks.
    """

    name: str
    type: str
    addresses: tuple[str, ...] = ()
    members: tuple[str, ...] = ()


def _parse_value(value: str) -> Declaration:
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
        return Declaration(name, group_type, addresses=tuple(addresses))

    for index, item in enumerate(items):
        if item in items[:index]:
            raise _invalid('group %s lists member %s twice' % (name, item))
    return Declaration(name, group_type, members=tuple(items))


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
        return cls.from_declarations([_parse_value(v) for v in values])

    @classmethod
    def from_declarations(cls, declarations: list[Declaration]
                          ) -> 'GroupTree':
        """Link ``declarations`` into a tree and check its structure: one
        declaration per name, a device in one group per level, known
        members of the same type, one parent per group, no cycle, members
        of equal size. Declaration order does not matter, except that a
        cycle is named from the group declared first.
        Raises PciGroupConfigInvalid naming the offending group.
        """
        by_name: dict[str, Declaration] = {}
        for decl in declarations:
            if decl.name in by_name:
                raise _invalid('group name %s is declared twice' % decl.name)
            by_name[decl.name] = decl
        order = {name: i for i, name in enumerate(by_name)}

        owner: dict[str, str] = {}
        for decl in by_name.values():
            for address in decl.addresses:
                if address in owner:
                    raise _invalid(
                        'device %s is listed by both group %s and group %s; '
                        'a device belongs to one group per level, enclose '
                        'groups with "members" instead' % (
                            address, owner[address], decl.name))
                owner[address] = decl.name

        # Fresh groups, so linking never changes another tree's groups.
        groups = {name: DeviceGroup(name, decl.type,
                                    own_addresses=list(decl.addresses))
                  for name, decl in by_name.items()}
        parent_of: dict[str, str] = {}
        for decl in by_name.values():
            for member_name in decl.members:
                member = by_name.get(member_name)
                if member is None:
                    raise _invalid(
                        'group %s has unknown member %s; declared groups: '
                        '%s' % (decl.name, member_name, ', '.join(by_name)))
                if member.type != decl.type:
                    raise _invalid(
                        'group %s of type %s has member %s of type %s; '
                        'members must have the type of their group' % (
                            decl.name, decl.type, member_name, member.type))
                if member_name in parent_of:
                    raise _invalid(
                        'group %s is a member of both group %s and group '
                        '%s; a group can have only one parent' % (
                            member_name, parent_of[member_name],
                            decl.name))
                parent_of[member_name] = decl.name
                groups[decl.name].members.append(groups[member_name])

        # Every group has at most one parent, so a group that no root
        # reaches lies on, or hangs below, a cycle.
        roots = [group for name, group in groups.items()
                 if name not in parent_of]
        reached: set[str] = set()
        stack = list(roots)
        while stack:
            group = stack.pop()
            reached.add(group.name)
            stack.extend(group.members)
        for name in by_name:
            if name not in reached:
                cycle = _find_cycle(name, parent_of, order)
                raise _invalid('groups form a cycle: %s; a group cannot '
                               'contain itself' % ' -> '.join(cycle))

        for root in roots:
            _check_sizes(root)
        return cls(roots)

    def declarations(self) -> list[Declaration]:
        """The declarations this tree is built from, parents first: the
        input of ``from_declarations`` for a changed copy of the tree."""
        return [Declaration(g.name, g.type, tuple(g.own_addresses),
                            tuple(m.name for m in g.members))
                for g in self.groups()]

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

    def validate_devices(self, devices: list[pci_device.HostDevice],
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
        by_address = {utils.normalize_address(d.address): d
                      for d in devices}
        resource_class: dict[str, str] = {}
        for group in self.groups():
            for address in group.own_addresses:
                dev = by_address.get(address)
                if dev is None:
                    raise _invalid('group %s lists %s, which is not a PCI '
                                   'device on this host' % (
                                       group.name, address))
                if dev.dev_type not in _GROUPABLE_DEV_TYPES:
                    raise _invalid(
                        'group %s lists %s of type %s; only whole devices '
                        '(%s) can be grouped' % (
                            group.name, address, dev.dev_type,
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


def static_groups(devices: list[pci_device.HostDevice],
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
        address = utils.normalize_address(dev.address)
        spec = specs.get(address)
        if spec is None or not spec.group_name:
            continue
        name, group_type = spec.group_name, spec.group_type
        if dev.dev_type not in _GROUPABLE_DEV_TYPES:
            raise exception.PciConfigInvalidSpec(reason=(
                'static group %s would contain %s of type %s; only whole '
                'devices (%s) can be grouped' % (
                    name, address, dev.dev_type,
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
