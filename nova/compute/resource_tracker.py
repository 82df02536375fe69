"""Keep one compute node's resources in the database and in Placement.

Each update is a pipeline: it observes the host once (the driver's
``observe_host``: CPUs, memory, PCI devices, NUMA, health, NVLink
partitions), matches the devices against ``[pci]device_spec`` once, lifts
the quarantines the observed health allows, computes the offer once
(``nova.pci.offer``), tracks it in the PCI tracker, rebuilds the node's
provider tree (root inventory, then PCI devices and groups through the
translator) and makes Placement match it.
Configuration is parsed once, when the tracker is made, so bad config stops
the compute at start with a message naming the bad value.
"""

from collections.abc import Callable, Iterable, Mapping
import dataclasses
import math
import threading
import uuid as uuidlib

from oslo_config import cfg
from oslo_log import log as logging

from nova import exception
from nova.compute import pci_placement_translator as translator
from nova.compute import provider_tree as ptree
from nova.db import api as db
from nova.db import records
from nova.pci import config as pci_config
from nova.pci import device as pci_device
from nova.pci import devspec
from nova.pci import groups as pci_groups
from nova.pci import health as pci_health
from nova.pci import manager as pci_manager
from nova.pci import offer as pci_offer
from nova.pci import partitions as pci_partitions
from nova.pci import placement_names as names
from nova.scheduler.client import report
from nova.virt import driver as virt_driver
from nova.virt import hardware

LOG = logging.getLogger(__name__)

# Placement generation conflicts are retried this many times per update.
_UPDATE_ATTEMPTS = 4


@dataclasses.dataclass(frozen=True)
class _Seen:
    """What the previous update saw and logged, that the next one
    compares with: the warnings logged (group and alias warnings, each
    once), why Fabric Manager could not be read (logged once per
    outage), and the devices that were unhealthy (the operator's marks
    are found by comparing with it)."""

    warnings: frozenset[str] = frozenset()
    fabric_error: str | None = None
    unhealthy: frozenset[str] = frozenset()


class ResourceTracker:
    """Resources of the single node a nova-compute service manages."""

    def __init__(self, conf: cfg.ConfigOpts, host: str,
                 driver: virt_driver.ComputeDriver,
                 reportclient: report.SchedulerReportClient,
                 health_listener: Callable[
                     [list[pci_health.HealthChange]], None] | None = None
                 ) -> None:
        self.host = host
        # Told of every device health change the updates observe (the
        # compute manager, which tells the instances holding them).
        self.health_listener = health_listener
        self.driver = driver
        self.reportclient = reportclient
        self.report_in_placement = conf.pci.report_in_placement
        # DISK_GB: reserved is whole GB, as upstream rounds it up.
        self.disk_reserved_gb = math.ceil(conf.reserved_host_disk_mb / 1024)
        self.disk_allocation_ratio = conf.disk_allocation_ratio
        # The compute checks aliases against its groups, with the rules of
        # Placement scheduling (the only mode in which it gets devices to
        # claim); aliases need report_in_placement here.
        pci = pci_config.load(conf, for_compute=True)
        self.whitelist = pci.whitelist
        self.declared = pci_offer.Declared(
            pci.group_tree, conf.pci.device_group_source,
            conf.libvirt.nvlink_partitions)
        self._aliases = pci.aliases
        # The last update's observation and offer, and what it logged.
        self.observation: virt_driver.HostObservation | None = None
        self.offer = pci_offer.initial(self.declared)
        self._seen = _Seen()
        self._lock = threading.Lock()
        self.compute_node: records.ComputeNode | None = None
        self.pci_tracker: pci_manager.PciDevTracker | None = None
        self.static_groups: list[pci_groups.StaticGroup] = []
        # Spec of each assignable device (by address) of the last update.
        self.specs: dict[str, devspec.PciDeviceSpec] = {}

    @property
    def nodename(self) -> str:
        return self.host

    @property
    def group_tree(self) -> pci_groups.GroupTree:
        """The device groups offered as of the last update."""
        return self.offer.tree

    @property
    def withheld(self) -> pci_partitions.Withheld:
        """The devices not offered right now and why (Fabric Manager
        partitions, NVSwitches and device health), as Placement is told.
        """
        return self.offer.placement

    @property
    def numa_topology(self) -> hardware.HostNUMATopology:
        """The host's NUMA nodes as of the last update."""
        if self.observation is None:
            return hardware.HostNUMATopology()
        return self.observation.numa

    def update_available_resource(self, context) -> None:
        """Refresh the node from the hypervisor and report it; the
        device health changes it observes go to ``health_listener``."""
        with self._lock:
            changes = self._update(context)
        if changes and self.health_listener is not None:
            self.health_listener(changes)

    def _update(self, context) -> list[pci_health.HealthChange]:
        """One update, as a pipeline: observe the host (one driver call),
        lift the quarantines its health allows, compute the offer once,
        track it in the device rows, then translate it into the provider
        tree and report it to Placement."""
        observation = self.driver.observe_host()
        specs = self.whitelist.classify(list(observation.devices))
        tracker = self._tracker(context, observation.resources)
        tracked_health = tracker.unhealthy_after(observation.health,
                                                 set(specs))
        observation = self._release_quarantines(
            observation, tracked_health, set(specs))
        offer = pci_offer.offer(self.declared, observation, tracked_health,
                                self.offer)
        self._log_fabric(offer.fabric_error)
        self._track(observation, specs, offer)
        changes = tracker.apply_health(observation.health,
                                       'nova-compute %s' % self.host)
        changes += self._operator_changes(changes)
        self._log_withheld(offer.placement)
        self.observation = observation
        self.offer = offer
        self.specs = specs
        self._update_placement(observation.resources)
        return changes

    def _tracker(self, context, resources: Mapping[str, object]
                 ) -> pci_manager.PciDevTracker:
        """Sync the compute node with the host's ``resources``; the PCI
        tracker of the node (made at the first update)."""
        self.compute_node = self._sync_compute_node(context, resources)
        if self.pci_tracker is None:
            self.pci_tracker = pci_manager.PciDevTracker(
                context, self.compute_node.id)
            # Known at start: a restart does not tell the holders again.
            self._seen = dataclasses.replace(
                self._seen,
                unhealthy=frozenset(self.pci_tracker.unhealthy()))
        return self.pci_tracker

    def _operator_changes(self, observed: list[pci_health.HealthChange]
                          ) -> list[pci_health.HealthChange]:
        """The health changes made since the last update by others than
        this compute (``nova-manage pci device set``)."""
        by_address = {dev.address: dev for dev in self.pci_tracker.pci_devs}
        unhealthy = {a for a, dev in by_address.items() if not dev.healthy}
        changed = ((unhealthy ^ self._seen.unhealthy) & set(by_address)) - {
            c.address for c in observed}
        self._seen = dataclasses.replace(self._seen,
                                         unhealthy=frozenset(unhealthy))
        return [pci_health.HealthChange(
            address, by_address[address].health,
            by_address[address].health_reason,
            by_address[address].health_source or
            pci_health.SOURCE_OPERATOR, by_address[address].instance_uuid)
            for address in sorted(changed)]

    def _release_quarantines(self,
                             observation: virt_driver.HostObservation,
                             tracked_health: Mapping[str, str],
                             assignable: set[str]
                             ) -> virt_driver.HostObservation:
        """Release the quarantined partitions whose broken GPU or
        NVSwitch is healthy again: all when the NVSwitches that were down
        are all up, else those holding a device that was unhealthy (at
        the last update or by the operator since) and is not once this
        observation is applied. The observation as it is after that.
        """
        health = observation.health
        if self.offer.switches_down and health.switches_checked and \
                not health.switches_down:
            healed = None
        else:
            # Of the devices the rows keep: the assignable ones the host
            # lists and the in-use ones kept until freed.
            kept = assignable | {dev.address for dev in
                                 self.pci_tracker.pci_devs if dev.in_use}
            was = self._seen.unhealthy | set(self.pci_tracker.unhealthy())
            healed = (was & kept) - set(tracked_health)
            if not healed:
                return observation
        partitions = observation.fabric.to_release(healed)
        if not partitions:
            return observation
        released = self.driver.release_nvlink_quarantine(partitions)
        return dataclasses.replace(
            observation, fabric=observation.fabric.released(released))

    def _track(self, observation: virt_driver.HostObservation,
               specs: dict[str, devspec.PciDeviceSpec],
               offer: pci_offer.Offer) -> None:
        """Sync the PCI tracker with the observed devices and ``offer``:
        their groups and, in the rows, why each is withheld by the
        partitions and the NVSwitches (health has columns of its own).
        Logs the group and alias warnings not logged before."""
        devices = list(observation.devices)
        offer.tree.validate_devices(devices, specs)
        self.static_groups = pci_groups.static_groups(devices, specs)
        warnings = set(offer.warnings) | set(pci_config.check_aliases(
            self._aliases, offer.tree, self.static_groups))
        for warning in sorted(warnings - self._seen.warnings):
            LOG.warning('%s', warning)
        self._seen = dataclasses.replace(self._seen,
                                         warnings=frozenset(warnings))
        self.pci_tracker.update_devices_from_hypervisor_resources(
            devices, specs, lambda address: _group_path(offer.tree, address),
            offer.rows)

    def report_claimed(self, devices: list[pci_device.TrackedDevice]
                       ) -> None:
        """Report just-claimed devices to Placement now, not at the next
        periodic update: the reservation of one-time-use devices (an
        instance deleted before the update would free such a device for a
        second use) and the host's free-device band (the scheduler asks
        the fullest band first, see nova.pci.placement_names).
        """
        if not self.report_in_placement or not devices:
            return
        used_once = any(self.specs[dev.address].one_time_use
                        for dev in devices if dev.address in self.specs)
        self._publish('a claim', must_reach=used_once)

    def free_instance(self, instance_uuid: str,
                      request_ids: Iterable[str] | None = None) -> list[str]:
        """Free the instance's devices in the PCI tracker (see
        ``PciDevTracker.free_instance``) and publish the host's new
        free-device band at once, as after a claim: a host that was full
        at its last claim would otherwise stay out of the band queries
        until the next periodic update (never, with
        ``update_resources_interval = 0``). Returns the freed addresses.
        """
        freed = self.pci_tracker.free_instance(instance_uuid, request_ids)
        if self.report_in_placement and freed:
            self._publish('a free', must_reach=False)
        return freed

    # The compute's view of its devices: the manager and its modules use
    # these, never the PCI tracker itself.

    def claim(self, instance_uuid: str, request_id: str,
              addresses: list[str]) -> list[pci_device.TrackedDevice]:
        """Claim the devices at ``addresses`` for one PCI request of an
        instance, all or nothing (see ``PciDevTracker.claim``)."""
        return self.pci_tracker.claim(instance_uuid, request_id, addresses)

    def held_by(self, instance_uuid: str,
                request_ids: Iterable[str] | None = None
                ) -> list[pci_device.TrackedDevice]:
        """The devices ``instance_uuid`` holds here (only those claimed
        for the PCI requests ``request_ids``, if given: one end of a move
        when both are this host)."""
        return [dev for dev in self.pci_tracker.pci_devs
                if dev.instance_uuid == instance_uuid and (
                    request_ids is None or dev.request_id in request_ids)]

    def tracked_devices(self) -> list[pci_device.TrackedDevice]:
        """Every PCI device tracked on the node, as of the last update
        or claim."""
        return self.pci_tracker.pci_devs

    def _publish(self, after: str, must_reach: bool) -> None:
        """Sync the node's provider tree with Placement after ``after``.

        Best effort unless ``must_reach``: the band is a hint the next
        periodic update brings up to date, so an unreachable Placement
        does not fail the build or delete for it; a one-time-use
        reservation must not wait and raises. That reservation is also
        written on a verified tree: the remembered copy cannot know that
        an operator released the device (reserved back to 0) meanwhile,
        and would find nothing to change.
        """
        with self._lock:
            try:
                self._update_placement(self.observation.resources,
                                       verify=must_reach)
            except (exception.PlacementAPIConnectFailure,
                    exception.PlacementAPIError,
                    exception.PlacementPciException) as err:
                # PlacementPciException: a [pci] change Placement cannot
                # take yet (an allocation on a device it removes); the
                # periodic update reports it until the device is freed.
                if must_reach:
                    raise
                LOG.warning('Free-device band of %s not updated after %s '
                            '(the periodic update will): %s',
                            self.host, after, err)

    def refresh_offer(self, context) -> bool:
        """Update the node now if what it offers changed since the last
        update (a partition activated or deactivated behind nova's back,
        quarantined or released, the module map): the NVLink repair calls
        it, so this does not wait for ``update_resources_interval``.
        Only Fabric Manager's partitions are read again; the rest is the
        last update's. Returns whether it updated.
        """
        with self._lock:
            last = self.observation
            if last is None:
                # No update finished yet: nothing to compare with.
                changed = True
            else:
                try:
                    fabric = dataclasses.replace(
                        last.fabric, error=None,
                        fabric=self.driver.get_nvlink_partitions())
                except exception.FabricManagerError as err:
                    fabric = pci_partitions.FabricView(error=err.message)
                offer = pci_offer.offer(
                    self.declared, dataclasses.replace(
                        last, fabric=fabric,
                        health=pci_health.HealthReport()),
                    self.pci_tracker.unhealthy(), self.offer)
                self._log_fabric(offer.fabric_error)
                changed = offer.placement != self.offer.placement or \
                    offer.shape() != self.offer.shape()
        if changed:
            LOG.info('Devices offered by %s changed; updating its '
                     'resources now', self.nodename)
            self.update_available_resource(context)
        return changed

    def offers(self, addresses: list[str]) -> bool:
        """Whether a request may get exactly the devices ``addresses``
        as of the last update."""
        return self.withheld.offers(addresses)

    def _log_withheld(self, withheld: pci_partitions.Withheld) -> None:
        """Log each device that starts or stops being withheld, once."""
        before = {a: self.withheld.reason(a) for a in
                  set(self.withheld.devices) | set(self.withheld.alone) |
                  set(self.withheld.in_groups)}
        after = {a: withheld.reason(a) for a in
                 set(withheld.devices) | set(withheld.alone) |
                 set(withheld.in_groups)}
        for address, reason in sorted(after.items()):
            if before.get(address) != reason:
                LOG.warning('PCI device %s of %s is not offered: %s',
                            address, self.nodename, reason)
        for address in sorted(set(before) - set(after)):
            LOG.info('PCI device %s of %s is offered again (was: %s)',
                     address, self.nodename, before[address])

    def _log_fabric(self, error: str | None) -> None:
        """Log that Fabric Manager cannot be read once per outage (and
        when the reason changes: the repair asks every few seconds), and
        that it answers again."""
        if error is not None:
            log = LOG.warning if error != self._seen.fabric_error \
                else LOG.debug
            log('Cannot read NVLink partitions from Fabric Manager, '
                'keeping the device groups as they were: %s', error)
        elif self._seen.fabric_error is not None:
            LOG.info('Fabric Manager answers again on %s', self.nodename)
        self._seen = dataclasses.replace(self._seen, fabric_error=error)

    def _sync_compute_node(self, context, resources: Mapping[str, object]
                           ) -> records.ComputeNode:
        values = {'host': self.host,
                  'hypervisor_hostname': self.nodename,
                  'vcpus': resources['vcpus'],
                  'memory_mb': resources['memory_mb'],
                  'local_gb': resources.get('local_gb', 0),
                  'hypervisor_type': resources.get('hypervisor_type')}
        try:
            node = db.compute_node_get_by_nodename(context, self.nodename)
        except exception.NotFound:
            # A node Placement already knows (e.g. the database was
            # rebuilt) keeps its provider UUID, so its allocations stay
            # attached to it.
            provider = self.reportclient.get_provider_by_name(self.nodename)
            values['uuid'] = provider['uuid'] if provider else \
                str(uuidlib.uuid4())
            return db.compute_node_create(context, values)
        return db.compute_node_update(context, node.id, values)

    def _update_placement(self, resources: Mapping[str, object],
                          verify: bool = True) -> None:
        """Report the node's provider tree. With ``verify`` (the periodic
        update) the tree is checked against Placement first, so changes
        made behind nova's back are healed; without it (the publish after
        a claim or free) only what changed since nova last wrote is sent,
        on the remembered generations; a provider whose generation moved
        is read again and the tree made again from it, so a change another
        agent made to it is kept."""
        for attempt in range(1, _UPDATE_ATTEMPTS + 1):
            try:
                self._sync_provider_tree(resources, verify)
                return
            except exception.ResourceProviderUpdateConflict:
                if attempt == _UPDATE_ATTEMPTS:
                    raise
                # Routine for a publish: every claim moves the root.
                LOG.log(logging.INFO if verify else logging.DEBUG,
                        'Provider tree of %s changed concurrently; '
                        'retrying (%d/%d)', self.nodename, attempt,
                        _UPDATE_ATTEMPTS)

    def _sync_provider_tree(self, resources: Mapping[str, object],
                            verify: bool) -> None:
        root_uuid = self.compute_node.uuid
        # Unverified: every claim moves the generations of the providers
        # it allocates from, and re-reading each of them (inventory and
        # traits) before a build spawns cost more Placement requests than
        # the whole scheduling decision.
        tree = None if verify else self.reportclient.remembered_tree(
            root_uuid)
        if tree is None:
            # By UUID: the report client then checks its remembered copy
            # with one listing of the tree and re-reads only providers
            # that moved.
            tree = self.reportclient.get_provider_tree(root_uuid)
        if tree is None:
            tree = ptree.ProviderTree()
            tree.add(self.nodename, uuid=root_uuid)
        root = tree.data(root_uuid)
        tree.update_inventory(root.uuid, self._root_inventory(resources))
        # Upstream's host trait for the socket PCI NUMA affinity policy,
        # only while every NUMA node has one known socket.
        socket_trait = {names.SOCKET_AFFINITY_TRAIT} if \
            self.numa_topology.sockets_known else set()
        tree.update_traits(root.uuid, (
            root.traits - {names.SOCKET_AFFINITY_TRAIT}) | socket_trait |
            {names.OWNER_NOVA_TRAIT})
        rp_by_address: dict[str, str] = {}
        if self.report_in_placement:
            rp_by_address = translator.update_provider_tree_for_pci(
                tree, self.nodename, self.pci_tracker.pci_devs,
                self.specs, self.group_tree, self.static_groups,
                lambda: self.reportclient.get_allocations_for_tree(
                    root_uuid), self.numa_topology, self.withheld)
        else:
            translator.ensure_reporting_not_disabled(tree)
        self.reportclient.update_from_provider_tree(
            tree, from_memory=not verify)
        self._record_rp_uuids(rp_by_address)

    def _root_inventory(self, resources: Mapping[str, object]
                        ) -> dict[str, dict]:
        """VCPU, MEMORY_MB and DISK_GB of the compute node provider.

        DISK_GB keeps ``reserved_host_disk_mb`` (in GB) for the host and
        applies ``disk_allocation_ratio``, also to ``max_unit``; a
        reservation larger than the disk is a configuration error, not an
        empty inventory.
        """
        inventory = {}
        for rc, key in (('VCPU', 'vcpus'), ('MEMORY_MB', 'memory_mb'),
                        ('DISK_GB', 'local_gb')):
            total = resources.get(key) or 0
            if total > 0:
                inventory[rc] = names.inventory_record(total)
        disk = inventory.get('DISK_GB')
        if disk is not None:
            if self.disk_reserved_gb > disk['total']:
                raise exception.InvalidConfiguration(reason=(
                    'reserved_host_disk_mb = %d (%d GB) is more than the '
                    'local disk of %s (%d GB); it must be at most the '
                    'disk size' % (self.disk_reserved_gb * 1024,
                                   self.disk_reserved_gb, self.nodename,
                                   disk['total'])))
            disk['reserved'] = self.disk_reserved_gb
            disk['allocation_ratio'] = self.disk_allocation_ratio
            # A thin disk may be larger than the filesystem when the ratio
            # overcommits it; one instance may use all of the capacity.
            disk['max_unit'] = max(1, int(
                (disk['total'] - disk['reserved']) * disk['allocation_ratio']))
        return inventory

    def _record_rp_uuids(self, rp_by_address: dict[str, str]) -> None:
        """Remember on each device the provider that represents it, as the
        translator reported it (None: no provider)."""
        for dev in self.pci_tracker.pci_devs:
            rp_uuid = rp_by_address.get(dev.address)
            if dev.rp_uuid != rp_uuid:
                self.pci_tracker.set_rp_uuid(dev.address, rp_uuid)


def _group_path(tree: pci_groups.GroupTree, address: str) -> str:
    """The path of the groups holding ``address``, e.g. quad-a/pair-a1."""
    return '/'.join(g.name for g in tree.enclosing(address))
