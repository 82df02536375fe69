"""Translate a compute node's PCI devices and device groups into providers.

The translator edits a ProviderTree in memory; the report client then makes
Placement match it. Shape of the tree it builds (names and traits from
nova.pci.placement_names)::

    <host>                              compute node (root)
      <host>_<group>                    one per [pci]device_group, nested as
        <host>_<group>                  declared, traits CUSTOM_PCI_GROUP_<T>
          <host>_<ADDRESS>              and CUSTOM_PCI_GROUP_<T>_<SIZE>
                                        device: 1 unit of its resource class
                                        and one member-index trait per
                                        enclosing group
      <host>_<ADDRESS>                  ungrouped device (as upstream)
      <host>_<static group name>        static spec group: 1 unit, whole

The root also carries the host's free-device bands and fitting sizes, and
the root and every PCI provider its shard traits (``CUSTOM_PCI_FREE_*``,
``CUSTOM_PCI_FIT_*``, ``CUSTOM_PCI_SHARD_*``: how the scheduler asks a
large fleet).

Changing the grouping of existing providers re-parents them (their UUIDs,
inventories and allocations stay). A change that would delete or redefine a
provider somebody holds allocations on, or split a multi-device allocation
across groups, is refused before anything is written, so the old tree
stays in place.
"""

import collections
from collections.abc import Iterable, Mapping
import dataclasses
from typing import Callable

from oslo_log import log as logging

from nova import exception
from nova.compute import provider_tree as ptree
from nova.pci import device as pci_device
from nova.pci import devspec
from nova.pci import free_groups
from nova.pci import groups as pci_groups
from nova.pci import numa as pci_numa
from nova.pci import partitions as pci_partitions
from nova.pci import placement_names as names
from nova.virt import hardware

LOG = logging.getLogger(__name__)


def _withheld_group_traits(traits: set[str]) -> set[str]:
    """The traits of a withheld group provider that has ``traits`` when
    offered: no size trait (no request of any size gets it) and
    ``CUSTOM_PCI_WITHHELD``."""
    return {t for t in traits if not names.is_group_size_trait(t)} | {
        names.WITHHELD_TRAIT}


def withhold_unhealthy(tree: ptree.ProviderTree, nodename: str,
                       address: str) -> bool:
    """Withhold in ``tree`` the device at ``address`` of node
    ``nodename``, just marked unhealthy, and every device group above it,
    as the node's next update will (``nova.pci.health.withhold``): its
    inventory reserved, ``CUSTOM_PCI_WITHHELD`` and
    ``CUSTOM_PCI_UNHEALTHY`` on it, its groups withheld.

    For ``nova-manage pci device set``, so that Placement stops offering
    the device when the command returns, not a resource update later;
    the compute lifts the reservation once the device is healthy again
    (its ``CUSTOM_PCI_WITHHELD``). False when the device has no provider
    of its own (a VF, a static group member): its compute withholds it.
    """
    name = names.device_rp_name(nodename, address)
    if not tree.exists(name):
        return False
    device = tree.data(name)
    tree.update_inventory(name, {
        rc: dict(record, reserved=record['total'])
        for rc, record in device.inventory.items()})
    tree.update_traits(name, device.traits | {names.WITHHELD_TRAIT,
                                              names.UNHEALTHY_TRAIT})
    parent = tree.data(device.parent_uuid)
    while parent.parent_uuid is not None and not parent.inventory and \
            names.is_pci_provider(parent.traits):
        tree.update_traits(parent.uuid, _withheld_group_traits(
            set(parent.traits)))
        parent = tree.data(parent.parent_uuid)
    return True


def _keep_reserved(wanted: dict[str, dict],
                   current: dict[str, dict]) -> dict[str, dict]:
    """``wanted`` with each class's ``reserved`` raised to Placement's.

    Nova reserves PCI inventory for one-time-use devices and withheld
    ones; any other ``reserved`` was set by an operator (e.g. to keep a
    device out of use) and nova must not undo it. Nova never lowers a
    reservation either (a used one-time-use device stays reserved until
    an operator clears it), except its own of a withheld device, which
    the caller lifts by passing no ``current``.
    The value is capped at the total, which Placement requires.
    """
    result = {}
    for rc, record in wanted.items():
        record = dict(record)
        have = current.get(rc, {}).get('reserved', 0)
        record['reserved'] = min(record['total'],
                                 max(record['reserved'], have))
        result[rc] = record
    return result


@dataclasses.dataclass
class _Wanted:
    """A provider as the current config and devices want it."""

    name: str
    parent: str
    inventory: dict[str, dict]
    traits: set[str]
    # Addresses of the devices behind this provider (empty for group RPs).
    addresses: list[str] = dataclasses.field(default_factory=list)
    # Whether a reservation nova made to withhold the device may be
    # lifted: it is no longer withheld, and not one-time-use (whose
    # reservation only an operator clears).
    lift_withheld: bool = False


class PlacementView:
    """The providers that the PCI config and devices of one node want."""

    def __init__(self, nodename: str, tree: ptree.ProviderTree,
                 topology: hardware.HostNUMATopology | None = None,
                 withheld: pci_partitions.Withheld | None = None) -> None:
        self.nodename = nodename
        self._current = tree
        self._topology = topology or hardware.HostNUMATopology()
        self._withheld = withheld or pci_partitions.Withheld()
        self.wanted: dict[str, _Wanted] = {}

    def locality(self, dev: pci_device.TrackedDevice | None
                 ) -> pci_numa.Locality:
        """The NUMA node and socket of device ``dev`` (unknown for
        None)."""
        node = dev.numa_node if dev is not None else None
        return pci_numa.Locality(node=node,
                                 socket=self._topology.socket_of(node))

    def add_group_localities(self, group_tree: pci_groups.GroupTree,
                             devices: dict[str, pci_device.TrackedDevice]
                             ) -> None:
        """Say on each group provider whether its devices share one NUMA
        node / socket (``devices`` by address)."""
        for group in group_tree.groups():
            name = names.group_rp_name(self.nodename, group.name)
            self.wanted[name].traits |= names.group_locality_traits(
                self.locality(devices.get(address))
                for address in group.addresses)

    def add_groups(self, group_tree: pci_groups.GroupTree) -> None:
        """Add one provider per declared group, nested as declared; a
        withheld group has no size trait (no request of any size gets
        it) and ``CUSTOM_PCI_WITHHELD``."""
        pending = [(group, self.nodename) for group in group_tree.roots]
        while pending:
            group, parent = pending.pop(0)
            name = names.group_rp_name(self.nodename, group.name)
            traits = set(group.traits)
            if group.name in self._withheld.groups:
                traits = _withheld_group_traits(traits)
            self.wanted[name] = _Wanted(name=name, parent=parent,
                                        inventory={}, traits=traits)
            pending.extend((member, name) for member in group.members)

    def add_static_group(self, group: pci_groups.StaticGroup,
                         traits: set[str], reserved: bool,
                         devices: dict[str, pci_device.TrackedDevice]
                         ) -> None:
        """Add a static spec group: one unit of its class, consumed whole;
        ``reserved`` reserves that unit (a used one-time-use group). Its
        locality is the one all its ``devices`` (by address) share."""
        name = names.group_rp_name(self.nodename, group.name)
        localities = [self.locality(devices.get(address))
                      for address in group.addresses]
        self.wanted[name] = _Wanted(
            name=name, parent=self.nodename,
            inventory=names.pci_inventory(group.resource_class, 1,
                                          int(reserved)),
            traits=set(traits) | names.MANAGED_TRAITS |
            names.locality_traits(pci_numa.common_locality(localities)) |
            names.group_locality_traits(localities),
            addresses=list(group.addresses))

    def add_device(self, dev: pci_device.TrackedDevice, spec,
                   group_tree: pci_groups.GroupTree) -> None:
        """Add a type-PCI/PF device, or a VF's unit on its parent PF."""
        address = names.provider_address(dev)
        if dev.dev_type not in pci_device.WHOLE_DEVICE_TYPES:
            if 'one_time_use' in spec.tags:
                # A VF's inventory sits on its PF's provider, shared with
                # its siblings, so one VF cannot be reserved on its own.
                raise exception.PlacementPciException(error=(
                    'one_time_use is only supported for type-PCI and '
                    'type-PF devices, but device spec %r matches VF %s; '
                    'remove one_time_use from it' % (spec, dev.address)))
            if not address:
                raise exception.PlacementPciException(error=(
                    'VF %s has no parent PF address' % dev.address))
        name = names.device_rp_name(self.nodename, address)
        enclosing = group_tree.enclosing(address)
        parent = (names.group_rp_name(self.nodename, enclosing[-1].name)
                  if enclosing else self.nodename)
        resource_class = spec.resource_class_for(dev)
        traits = set(spec.traits) | names.MANAGED_TRAITS | \
            group_tree.member_traits(address) | \
            names.locality_traits(self.locality(dev))
        existing = self.wanted.get(name)
        if existing is None:
            # A one-time-use device is reserved as soon as it is used, a
            # withheld one while it is withheld.
            withheld = dev.address in self._withheld.devices
            reserved = int(withheld or (spec.one_time_use and
                                        bool(dev.instance_uuid)))
            if withheld:
                traits.add(names.WITHHELD_TRAIT)
            if not dev.healthy and \
                    dev.dev_type in pci_device.WHOLE_DEVICE_TYPES:
                traits.add(names.UNHEALTHY_TRAIT)
            if dev.address in self._withheld.alone:
                traits.add(names.GROUP_ONLY_TRAIT)
            self.wanted[name] = _Wanted(
                name=name, parent=parent,
                inventory=names.pci_inventory(resource_class, 1, reserved),
                traits=traits, addresses=[dev.address],
                lift_withheld=not withheld and not spec.one_time_use)
            return
        # Several VFs of one PF share the PF's provider.
        if resource_class not in existing.inventory or \
                existing.traits != traits:
            raise exception.PlacementPciException(error=(
                'VFs of PF %s are configured with different resource '
                'classes or traits (%s vs %s); VFs of one PF must match' % (
                    address, sorted(existing.inventory), resource_class)))
        record = existing.inventory[resource_class]
        record['total'] += 1
        record['max_unit'] = record['total']
        existing.addresses.append(dev.address)

    def keep_allocated_device(self, dev: pci_device.TrackedDevice
                              ) -> None:
        """Keep the provider of an allocated device its spec no longer
        matches, so the instance's allocation survives until it is freed.
        """
        name = names.device_rp_name(self.nodename, dev.address)
        if name in self.wanted or not self._current.exists(name):
            return
        current = self._current.data(name)
        parent = self._current.data(current.parent_uuid).name
        if parent not in self.wanted:
            parent = self.nodename
        LOG.warning('Device %s of instance %s is no longer reported or '
                    'matched by a device spec; keeping its provider %s '
                    'until the device is freed.', dev.address,
                    dev.instance_uuid, name)
        self.wanted[name] = _Wanted(
            name=name, parent=parent,
            inventory={rc: dict(rec) for rc, rec in
                       current.inventory.items()},
            traits=set(current.traits), addresses=[dev.address])


def _consumers_on(allocations: dict, rp_uuid: str) -> dict[str, dict]:
    return {consumer: data['allocations'][rp_uuid]['resources']
            for consumer, data in allocations.items()
            if rp_uuid in data.get('allocations', {})}


def _shrinking(view: PlacementView,
               tree: ptree.ProviderTree) -> list[ptree.ProviderData]:
    """PCI providers of ``tree`` that the new view removes or gives less
    of some resource class they have: the only ones an allocation may not
    fit (a group provider without inventory holds no allocation)."""
    result = []
    for provider in tree.providers():
        if provider.parent_uuid is None or \
                not names.is_pci_provider(provider.traits):
            continue
        wanted = view.wanted.get(provider.name)
        inventory = wanted.inventory if wanted is not None else {}
        if any(inventory.get(rc, {}).get('total', 0) < record['total']
               for rc, record in provider.inventory.items()):
            result.append(provider)
    return result


def _check_allocations_fit(view: PlacementView, tree: ptree.ProviderTree,
                           read_allocations: Callable[[], dict]) -> None:
    """Refuse a new tree that could not hold the existing allocations.

    Allocations are read only when some provider shrinks, so a periodic
    update that changes nothing costs Placement no allocation reads.
    """
    shrinking = _shrinking(view, tree)
    if not shrinking:
        return
    allocations = read_allocations()
    for provider in shrinking:
        used = _consumers_on(allocations, provider.uuid)
        wanted = view.wanted.get(provider.name)
        for consumer, resources in used.items():
            for rc, amount in resources.items():
                have = (wanted.inventory.get(rc, {}).get('total', 0)
                        if wanted else 0)
                if amount > have:
                    raise exception.PlacementPciException(error=(
                        'the new [pci] configuration cannot hold the '
                        'allocation of consumer %s: it uses %d %s on '
                        'provider %s, which the new configuration %s. '
                        'Keeping the existing provider tree; free the '
                        'devices first or restore the configuration.' % (
                            consumer, amount, rc, provider.name,
                            'removes' if wanted is None else
                            'gives %d' % have)))


def _check_multi_device_requests(devices: list[pci_device.TrackedDevice],
                                 group_tree: pci_groups.GroupTree) -> None:
    """Refuse a grouping that splits what one request already holds.

    Devices handed to an instance by one request were valid together
    (e.g. an NVLink pair). If the new groups put some of them in a group
    and the set is not exactly one declared group, the instance would hold
    a partition that no longer exists.
    """
    held = collections.defaultdict(list)
    for dev in devices:
        if dev.instance_uuid and dev.request_id:
            held[(dev.instance_uuid, dev.request_id)].append(dev.address)
    for (instance, _request), addresses in sorted(held.items()):
        if len(addresses) < 2:
            continue
        if not any(group_tree.enclosing(a) for a in addresses):
            continue
        wanted = sorted(addresses)
        if any(group.addresses == wanted for group in group_tree.groups()):
            continue
        raise exception.PlacementPciException(error=(
            'instance %s holds devices %s together, which are not exactly '
            'one group of the new [pci]device_group configuration. Keeping '
            'the existing provider tree; delete or resize the instance '
            'first or restore the configuration.' % (
                instance, ', '.join(wanted))))


def _apply(view: PlacementView, tree: ptree.ProviderTree
           ) -> dict[str, str]:
    """Make ``tree`` hold exactly the wanted PCI providers; return the
    provider UUID of each device address behind one.

    Every PCI provider also carries the host's shard traits: a
    scheduler's shard query requires them in each single-provider group,
    so that Placement filters providers by shard before it reads any
    tree.
    """
    shard = names.shard_traits(view.nodename)
    for wanted in view.wanted.values():
        if not tree.exists(wanted.name):
            # Parents are added before children (dict order is pre-order
            # for groups and groups come before devices).
            tree.add(wanted.name, parent=wanted.parent)
        elif tree.data(tree.data(wanted.name).parent_uuid).name != \
                wanted.parent:
            tree.reparent(wanted.name, wanted.parent)
        current = tree.data(wanted.name)
        lift = wanted.lift_withheld and \
            names.WITHHELD_TRAIT in current.traits
        tree.update_inventory(wanted.name, _keep_reserved(
            wanted.inventory, {} if lift else current.inventory))
        tree.update_traits(wanted.name, wanted.traits | shard)
    stale = [p for p in tree.providers()
             if p.parent_uuid is not None and
             names.is_pci_provider(p.traits) and
             p.name not in view.wanted]
    # Children first: by now every wanted child has moved elsewhere.
    for provider in reversed(stale):
        if tree.exists(provider.uuid):
            tree.remove(provider.uuid)
    return {address: tree.data(wanted.name).uuid
            for wanted in view.wanted.values()
            for address in wanted.addresses}


def _refuse_pf_with_its_vfs(
        provided: list[tuple[pci_device.TrackedDevice,
                             devspec.PciDeviceSpec]]) -> None:
    """Refuse a PF given a provider together with its own VFs, as
    upstream does (the device_spec must match one or the other).

    Their units would share the PF's provider (three units for a PF with
    two VFs of one resource class), although the PF in use takes its VFs
    and a VF in use the PF. Raises PlacementPciException naming each such
    PF, its VFs and their resource classes.
    """
    pfs = {dev.address: (dev, spec) for dev, spec in provided
           if dev.dev_type == pci_device.DEV_TYPE_PF}
    vfs: dict[str, list[tuple[pci_device.TrackedDevice,
                              devspec.PciDeviceSpec]]] = {}
    for dev, spec in provided:
        if dev.dev_type == pci_device.DEV_TYPE_VF and dev.parent_addr in pfs:
            vfs.setdefault(dev.parent_addr, []).append((dev, spec))
    if not vfs:
        return
    problems = []
    for pf_address, children in sorted(vfs.items()):
        pf, pf_spec = pfs[pf_address]
        classes = sorted({spec.resource_class_for(vf)
                          for vf, spec in children})
        problems.append('PF %s (resource class %s) and its VFs %s '
                        '(resource class %s)' % (
                            pf_address, pf_spec.resource_class_for(pf),
                            ', '.join(sorted(vf.address
                                             for vf, _spec in children)),
                            ', '.join(classes)))
    raise exception.PlacementPciException(error=(
        'Configuring both %s in [pci]device_spec is not supported. Either '
        'the parent PF or its children VFs can be configured: make each '
        'spec match only one of them (e.g. by product_id or address)' %
        '; '.join(problems)))


def update_provider_tree_for_pci(tree: ptree.ProviderTree, nodename: str,
                                 devices: list[pci_device.TrackedDevice],
                                 specs: Mapping[str, devspec.PciDeviceSpec],
                                 group_tree: pci_groups.GroupTree,
                                 static_groups: list,
                                 read_allocations: Callable[[], dict],
                                 topology: hardware.HostNUMATopology |
                                 None = None,
                                 withheld: pci_partitions.Withheld |
                                 None = None) -> dict[str, str]:
    """Make ``tree`` reflect the node's PCI devices and groups, and
    return the provider UUID of each device address behind a provider
    (a VF's is its PF's, a static group member's its group's).

    ``devices`` are the PCI tracker's devices (status and instance
    included); ``specs`` the spec of each device the hypervisor reports
    and a spec matches, by address (``Whitelist.classify``: a tracked
    device missing from it is gone or no longer matched);
    ``read_allocations`` returns Placement's allocations on the
    tree, by consumer, and is called only if a provider would shrink;
    ``topology`` gives the socket of each NUMA node. Device providers
    carry their NUMA node and socket as traits, group providers whether
    all their devices share one (see nova.pci.numa). ``withheld`` devices
    get their inventory reserved (and ``CUSTOM_PCI_WITHHELD``, so nova
    lifts its reservation once they are offered again); devices withheld
    alone get ``CUSTOM_PCI_GROUP_ONLY``. Raises
    PlacementPciException, leaving ``tree`` untouched, when the result
    could not hold an existing allocation.
    """
    view = PlacementView(nodename, tree, topology, withheld)
    view.add_groups(group_tree)
    by_address = {dev.address: dev for dev in devices}
    view.add_group_localities(group_tree, by_address)
    in_static = {}
    for group in static_groups:
        for address in group.addresses:
            in_static[address] = group
    static_traits: dict[str, set[str]] = collections.defaultdict(set)
    static_used_once: set[str] = set()
    provided = []
    for dev in devices:
        if dev.status == pci_device.REMOVED:
            continue
        spec = specs.get(dev.address)
        if spec is None:
            if dev.instance_uuid:
                view.keep_allocated_device(dev)
            continue
        if spec.tags.get('physical_network') or spec.remote_managed:
            # Devices for Neutron ports (SR-IOV, or remote managed by a
            # DPU): upstream never gives them to flavor aliases, and this
            # fork has no Neutron ports, so they get no provider.
            continue
        provided.append((dev, spec))
    _refuse_pf_with_its_vfs(provided)
    for dev, spec in provided:
        group = in_static.get(dev.address)
        if group is not None:
            static_traits[group.name] |= set(spec.traits)
            if spec.one_time_use and dev.instance_uuid:
                static_used_once.add(group.name)
            continue
        view.add_device(dev, spec, group_tree)
    for group in static_groups:
        view.add_static_group(group, static_traits[group.name],
                              group.name in static_used_once, by_address)

    _check_multi_device_requests(devices, group_tree)
    _check_allocations_fit(view, tree, read_allocations)
    provider_of = _apply(view, tree)
    _publish_host_state(view, tree, by_address)
    return provider_of


def _publish_host_state(view: PlacementView, tree: ptree.ProviderTree,
                        devices: dict[str, pci_device.TrackedDevice]
                        ) -> None:
    """Put the host's free-device bands, fitting sizes and shard traits on
    its root provider.

    Free units of a provider: its total less Placement's reservation less
    its devices the PCI tracker does not have available (claimed or
    allocated to an instance). Fitting sizes (``nova.pci.free_groups``)
    count devices: a device with a unit reserved or taken is not free.
    The shard traits depend on the node name only. Other root traits are
    left alone.
    """
    free: dict[str, int] = collections.Counter()
    # Resource class -> provider name -> the devices at or below it.
    below: dict[str, dict[str, set[str]]] = collections.defaultdict(
        lambda: collections.defaultdict(set))
    busy = set()
    for wanted in view.wanted.values():
        taken = {address for address in wanted.addresses
                 if address not in devices or
                 devices[address].status != pci_device.AVAILABLE}
        for rc, record in tree.data(wanted.name).inventory.items():
            free[rc] += max(record['total'] - record['reserved'] -
                            len(taken), 0)
            busy |= taken if not record['reserved'] else set(
                wanted.addresses)
            name = wanted.name
            while name in view.wanted:
                below[rc][name].update(wanted.addresses)
                name = view.wanted[name].parent
    fits = {rc: free_groups.fitting_sizes(map(frozenset, groups.values()),
                                          busy)
            for rc, groups in below.items()}
    root = tree.data(view.nodename)
    tree.update_traits(root.uuid, host_state_traits(
        {trait for trait in root.traits if not names.is_shard_trait(trait)}
        | names.shard_traits(view.nodename), free, fits))


def host_state_traits(traits: Iterable[str], free: dict[str, int],
                      fits: Mapping[str, Iterable[int]]) -> set[str]:
    """A root provider's ``traits`` with its free-device bands and fitting
    sizes replaced by those of ``free`` (resource class -> free units)
    and ``fits`` (resource class -> sizes it can take without breaking a
    free group); its other traits are kept.

    What a compute publishes after each change of its devices' use
    (``update_provider_tree_for_pci``); public so that a tool replaying a
    fleet without computes (``tools/bench_fleet.py``) publishes the same.
    """
    return {trait for trait in traits
            if not (names.is_band_trait(trait) or names.is_fit_trait(trait))
            } | names.band_traits(free) | names.fit_traits(fits)


def ensure_reporting_not_disabled(tree: ptree.ProviderTree) -> None:
    """Refuse to run with reporting off on a node that reported PCI before.

    Turning [pci]report_in_placement off again would orphan the device
    providers and their allocations.
    """
    for provider in tree.providers():
        if names.MANAGED_PCI_TRAIT in provider.traits:
            raise exception.PlacementPciException(error=(
                '[pci]report_in_placement is False but it was enabled '
                'before on this compute (provider %s exists); disabling '
                'it is not supported' % provider.name))
