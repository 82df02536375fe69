"""The board view of a host's PCI devices: groups, free devices, holders.

Built from the device rows the PCI tracker keeps in the database (each
row has its ``group_path``, e.g. ``board/quad-a/pair-a1``), so it shows
what nova believes, for any host and any group tree. ``nova-manage pci
board`` and the nova-all demo draw it; ``free_partitions`` counts, per
group size, the groups whose devices are all free: what the next request
of that size can get. Unhealthy devices are drawn as such, and a group
that is not offered (it holds an unhealthy or withheld device, or an
NVSwitch is down) says why, so the board shows which partitions a host
with a broken GPU still offers. Each reason is a ``Withholding`` record,
built from the device records' health and ``partition_hold`` (the
Fabric Manager partition that keeps a device out), which the text and
the picture (``nova.fleet.board_svg``) both draw.
"""

import dataclasses
import functools

from nova.db import api as db
from nova.db import records
from nova.pci import device as pci_device
from nova.pci import manager as pci_manager
from nova.pci import partitions as pci_partitions
from nova.pci import placement_names

# Label of devices outside any group.
UNGROUPED = '(no group)'

# What a device is to the board (``HostBoard.state``).
FREE = 'free'
USED = 'used'
UNHEALTHY = 'unhealthy'
WITHHELD = 'withheld'
STATES = (FREE, USED, UNHEALTHY, WITHHELD)


def unhealthy(dev: pci_device.TrackedDevice) -> bool:
    """Whether ``dev`` failed and must not be used (its health, see
    ``nova.pci.health``): the one place the board, its picture and the
    metrics read it from."""
    return not dev.healthy


def resource_class(dev: pci_device.TrackedDevice) -> str:
    """The Placement resource class the device's compute reports it as
    (``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` for a row written before the
    tracker recorded it)."""
    return dev.resource_class or placement_names.get_resource_class(
        None, dev.vendor_id, dev.product_id)


def _withheld_entirely(dev: pci_device.TrackedDevice) -> bool:
    reason = dev.withheld
    return bool(reason) and not reason.startswith(
        (pci_partitions.ALONE_PREFIX, pci_partitions.IN_GROUPS_PREFIX))


def _offered_alone(dev: pci_device.TrackedDevice) -> bool:
    reason = dev.withheld
    return not reason or reason.startswith(pci_partitions.IN_GROUPS_PREFIX)


@dataclasses.dataclass(frozen=True)
class Withholding:
    """One reason a host's devices are out of the offer, as the board
    (text and picture) says it.

    ``reason``: e.g. ``device 0000:18:00.0 unhealthy (operator: RMA
    1234)`` or ``foreign partition 3 active``. ``state``: ``UNHEALTHY``
    or ``WITHHELD``, how the picture colours it. ``mark``: the few words
    drawn on each device it takes out (None when the devices are still
    offered alone, e.g. an NVSwitch is down). ``addresses``: its
    devices; every group holding one of them is not offered.
    """

    reason: str
    state: str
    mark: str | None
    addresses: tuple[str, ...]

    @property
    def text(self) -> str:
        """The reason as the picture writes it under a host."""
        return '%s: %s' % (WITHHELD, self.reason)


def _partition_words(hold: pci_device.PartitionHold) -> tuple[str, str]:
    """(reason, mark) of a device a hardware partition keeps out."""
    if hold.state == pci_device.PARTITION_FOREIGN:
        return ('foreign partition %d active' % hold.partition,
                'foreign partition %d' % hold.partition)
    return 'partition %d quarantined' % hold.partition, 'quarantined'


def _causes(dev: pci_device.TrackedDevice
            ) -> list[tuple[str, str, str | None]]:
    """(state, reason, mark) of each reason ``dev`` is out of the
    offer: its health, then the partition keeping it, any other reason
    it is withheld, or why it is offered alone only."""
    causes = []
    if unhealthy(dev):
        causes.append((UNHEALTHY, 'device %s unhealthy (%s: %s)' % (
            dev.address, dev.health_source or '?',
            dev.health_reason or '?'), UNHEALTHY))
    hold = dev.partition_hold
    if hold is not None:
        causes.append((WITHHELD, *_partition_words(hold)))
    elif _withheld_entirely(dev):
        causes.append((WITHHELD, 'device %s %s' % (dev.address,
                                                   dev.withheld),
                       'not offered'))
    elif dev.withheld and dev.withheld.startswith(
            pci_partitions.IN_GROUPS_PREFIX):
        causes.append((WITHHELD, dev.withheld[
            len(pci_partitions.IN_GROUPS_PREFIX):], None))
    return causes


def _withholdings(devices: list[pci_device.TrackedDevice]
                  ) -> list[Withholding]:
    """Every reason devices of ``devices`` are out of the offer, one per
    cause (a partition of two devices is one reason), with its devices.
    """
    found: dict[tuple[str, str, str | None], list[str]] = {}
    for dev in sorted(devices, key=lambda d: d.address):
        for cause in _causes(dev):
            found.setdefault(cause, []).append(dev.address)
    return [Withholding(reason, state, mark, tuple(addresses))
            for (state, reason, mark), addresses in found.items()]


@dataclasses.dataclass
class Group:
    """A group of the board: its name, its subgroups by name and the
    devices directly in it."""

    name: str
    children: dict[str, 'Group'] = dataclasses.field(default_factory=dict)
    devices: list[pci_device.TrackedDevice] = dataclasses.field(
        default_factory=list)

    def all_devices(self) -> list[pci_device.TrackedDevice]:
        found = list(self.devices)
        for child in self.children.values():
            found.extend(child.all_devices())
        return found


@dataclasses.dataclass
class HostBoard:
    """The tracked PCI devices of one host and the names of instances."""

    host: str
    devices: list[pci_device.TrackedDevice]
    names: dict[str, str]

    def tree(self) -> 'Group':
        """The host's group tree (the host is the root), devices by
        address."""
        root = Group(self.host)
        for dev in sorted(self.devices, key=lambda d: d.address):
            node = root
            for name in (dev.group_path or UNGROUPED).split('/'):
                node = node.children.setdefault(name, Group(name))
            node.devices.append(dev)
        return root

    def holder(self, dev: pci_device.TrackedDevice) -> str:
        """``free``, ``unhealthy``, ``withheld``, the instance's name,
        or the device status."""
        if dev.status == pci_device.AVAILABLE:
            if unhealthy(dev):
                return UNHEALTHY
            return WITHHELD if _withheld_entirely(dev) else FREE
        uuid = dev.instance_uuid
        if uuid:
            return self.names.get(uuid) or uuid
        return dev.status

    def state(self, dev: pci_device.TrackedDevice) -> str:
        """One of ``STATES``: an unhealthy device is unhealthy whoever
        holds it; a device an instance holds is used."""
        if unhealthy(dev):
            return UNHEALTHY
        holder = self.holder(dev)
        return holder if holder in (FREE, WITHHELD) else USED

    @functools.cached_property
    def withholdings(self) -> list[Withholding]:
        """Every reason devices of the host are out of the offer."""
        return _withholdings(self.devices)

    def withholding(self, dev: pci_device.TrackedDevice
                    ) -> Withholding | None:
        """What takes ``dev`` itself out of the offer (its health first),
        None if it is offered, at least alone."""
        return next((w for w in self.withholdings if w.mark and
                     dev.address in w.addresses), None)

    def not_offered(self, members: list[pci_device.TrackedDevice]
                    ) -> list[Withholding]:
        """Why a group of ``members`` is not offered at any size (empty
        if it is)."""
        addresses = {d.address for d in members}
        return [w for w in self.withholdings
                if addresses.intersection(w.addresses)]

    def group_not_offered(self, group: 'Group') -> list[Withholding]:
        """Why ``group`` of the tree is not offered (empty if it is, or
        if it is no group of devices: ``UNGROUPED`` or a single device).
        """
        members = group.all_devices()
        if group.name == UNGROUPED or len(members) < 2:
            return []
        return self.not_offered(members)

    def groups(self) -> list[list[pci_device.TrackedDevice]]:
        """The devices of each group of two or more devices, nested groups
        included (a board, then its quads, then their pairs)."""
        return [members for _path, members in self.group_paths()]

    def group_paths(self) -> list[tuple[str, list[pci_device.TrackedDevice]]]:
        """``groups`` with the path of each (``board/quad-a``)."""
        found = []

        def visit(group: Group, parent: str) -> None:
            for child in group.children.values():
                path = parent + child.name
                members = child.all_devices()
                if child.name != UNGROUPED and len(members) > 1:
                    found.append((path, members))
                visit(child, path + '/')
        visit(self.tree(), '')
        return found

    def holders(self) -> dict[str, list[str]]:
        """Holder name -> addresses of the devices it holds."""
        held: dict[str, list[str]] = {}
        for dev in sorted(self.devices, key=lambda d: d.address):
            if dev.instance_uuid:
                held.setdefault(self.holder(dev), []).append(dev.address)
        return held

    def free_partitions(self) -> dict[int, int]:
        """Group size -> number of groups of that size with every device
        free; size 1 counts free devices offered alone."""
        counts = {1: 0}
        for dev in self.devices:
            if self.holder(dev) == FREE and _offered_alone(dev):
                counts[1] += 1
        for members in self.groups():
            free = all(self.holder(d) == FREE for d in members) \
                and not self.not_offered(members)
            counts[len(members)] = counts.get(len(members), 0) + int(free)
        return counts

    def fragmented(self) -> dict[int, int]:
        """Group size (2 or more) -> free devices that are in no wholly
        free group of that size: the free capacity a request of that
        size cannot use."""
        free = {d.address for d in self.devices if self.holder(d) == FREE}
        in_free_group: dict[int, set[str]] = {}
        for members in self.groups():
            covered = in_free_group.setdefault(len(members), set())
            if all(self.holder(d) == FREE for d in members) \
                    and not self.not_offered(members):
                covered.update(d.address for d in members)
        return {size: len(free - covered)
                for size, covered in in_free_group.items()}

    def draw(self) -> str:
        """The host's group tree; a group of devices is one line
        ``name [address holder | address holder]``, a group not offered
        ends with why; then each unhealthy device, and why each device not
        offered (alone) is not."""
        free = sum(1 for d in self.devices if self.holder(d) == FREE)
        broken = [d for d in sorted(self.devices, key=lambda d: d.address)
                  if unhealthy(d)]
        lines = ['%s: %d devices, %d free%s' % (
            self.host, len(self.devices), free,
            ', %d unhealthy' % len(broken) if broken else '')]

        def visit(group: Group, depth: int) -> None:
            for child in group.children.values():
                line = '  ' * depth + child.name
                if child.devices:
                    line += ' [%s]' % ' | '.join(
                        '%s %-8s' % (d.address, self.holder(d))
                        for d in child.devices)
                why = self.group_not_offered(child)
                if why:
                    line += ' NOT OFFERED: ' + '; '.join(
                        w.reason for w in why)
                lines.append(line)
                visit(child, depth + 1)
        visit(self.tree(), 1)
        for dev in broken:
            lines.append('  %s %s%s' % (
                dev.address, dev.describe_health(),
                '; held by %s' % self.holder(dev) if dev.instance_uuid
                else ''))
        for dev in sorted(self.devices, key=lambda d: d.address):
            if dev.withheld:
                lines.append('  %s not offered: %s' % (
                    dev.address, dev.withheld))
        return '\n'.join(lines)


def load(context, nodes: list[records.ComputeNode]) -> list[HostBoard]:
    """The boards of the compute ``nodes``, by host."""
    names = {i.uuid: i.display_name
             for i in db.instance_get_all(context)}
    return [HostBoard(node.host,
                      pci_manager.devices_of_node(context, node.id),
                      names)
            for node in sorted(nodes, key=lambda n: n.host)]


def load_fleet(context, names: bool = True) -> list[HostBoard]:
    """The board of every compute node, by host, in a fixed number of
    queries whatever the fleet's size: the nodes, every device and (with
    ``names``) the instances' names."""
    by_node: dict[int, list[pci_device.TrackedDevice]] = {}
    # One snapshot: nodes, devices and holders read together.
    with db.context_manager.reader.using(context):
        for dev in pci_manager.all_devices(context):
            by_node.setdefault(dev.compute_node_id, []).append(dev)
        held = {i.uuid: i.display_name
                for i in db.instance_get_all(context)} if names else {}
        nodes = db.compute_node_get_all(context)
    return [HostBoard(node.host, by_node.get(node.id, []), held)
            for node in sorted(nodes, key=lambda n: n.host)]


def draw_fleet_summary(boards: list[HostBoard]) -> str:
    """Free partitions per size, in total and per host."""
    per_host = {b.host: b.free_partitions() for b in boards}
    sizes = sorted({size for counts in per_host.values() for size in counts})
    lines = ['Free partitions by size (every device of the group free):',
             '  %-5s %-5s %s' % ('size', 'free', 'hosts')]
    for size in sizes:
        where = ['%s %d' % (host, counts[size])
                 for host, counts in sorted(per_host.items())
                 if counts.get(size)]
        lines.append('  %-5d %-5d %s' % (
            size, sum(c.get(size, 0) for c in per_host.values()),
            ', '.join(where) or '-'))
    return '\n'.join(lines)
