"""The nova-compute manager: owns the hypervisor driver of one host, keeps
its resources reported and builds, acts on and destroys its instances.

It serves the compute's RPC API and runs its periodic tasks; three jobs
live in modules of their own, which it calls with itself as their seam
(a ``Compute`` protocol each):

* ``nova.compute.repair``: a compute killed with builds in flight repairs
  its host when it starts again, before it serves requests
  (``init_host``), and keeps power states and unowned guests and devices
  in line periodically;
* ``nova.compute.moves``: this host's end of resizes, migrations,
  evacuations, confirms and reverts (the RPC methods delegate to it);
* ``nova.compute.health``: telling, and maybe stopping, the servers whose
  devices became unhealthy (the resource tracker's health listener).
"""

from collections.abc import Callable, Sequence
import dataclasses
import datetime
import functools
import threading

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_utils import timeutils

from nova import context as nova_context
from nova import exception
from nova import manager
from nova import rpc
from nova.compute import audit
from nova.compute import health
from nova.compute import hugepages as compute_hugepages
from nova.compute import instance_actions
from nova.compute import moves
from nova.compute import repair
from nova.compute import resource_tracker
from nova.compute import rpcapi as compute_rpcapi
from nova.compute import snapshot
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.conductor import rpcapi as conductor_rpcapi
from nova.db import api as db
from nova.db import records
from nova.image import glance
from nova.pci import device as pci_device
from nova.pci import numa as pci_numa
from nova.pci import request as pci_request
from nova.scheduler import frees
from nova.scheduler.client import report
from nova.virt import driver as virt_driver
from nova.virt import guest_hardware
from nova.virt import hugepages

LOG = logging.getLogger(__name__)

BINARY = 'nova-compute'
TOPIC = 'compute'
# What runs once a snapshot's data is in Glance (a backup's rotation).
AfterUpload = Callable[[glance.GlanceClient], None]


class ComputeManager(manager.Manager):
    """Manages the instances and resources of one compute host.

    Its public methods taking a context are its RPC API
    (``nova.compute.rpcapi``); those marked ``rpc.local_only`` are not
    served: they are the steps of its actions that ``nova.compute.repair``,
    ``moves`` and ``health`` use in-process (their ``Compute`` protocols).
    """

    binary = BINARY
    topic = TOPIC
    # The RPC API version served (history: nova.compute.rpcapi).
    target = rpc.endpoint_target(compute_rpcapi.VERSION)

    def __init__(self, conf: cfg.ConfigOpts,
                 driver: virt_driver.ComputeDriver,
                 reportclient: report.SchedulerReportClient | None = None,
                 host: str | None = None) -> None:
        super().__init__(conf)
        # Reports this host's provider tree and frees allocations.
        self.reportclient = report.client_for(conf, reportclient)
        self.host = host or conf.host
        self.driver = driver
        # Built here so bad [pci] config stops the service at start.
        self.rt = resource_tracker.ResourceTracker(
            conf, self.host, driver, self.reportclient,
            health_listener=functools.partial(health.react, self))
        self._conductor_api: conductor_rpcapi.ConductorAPI | None = None
        # Built on first snapshot: a compute that never snapshots
        # needs no [glance] credentials of its own.
        self._glance: glance.GlanceClient | None = None
        # One build or delete at a time per instance.
        self._instance_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._claim_lock = threading.Lock()
        # Hugepage claims take the PCI claims' lock.
        self.hugepages = compute_hugepages.HugepageTracker(self._claim_lock)

    def init_host(self) -> None:
        """Connect to the hypervisor, register, report resources and
        repair what a previous life of this service left half done."""
        context = nova_context.get_admin_context()
        self.driver.init_host(self.host)
        self.rt.update_available_resource(context)
        # The pages the guests hold: before the repair (which may define
        # guests again) and after it (which may destroy some directly).
        self.hugepages.load(self.driver.get_guest_hugepages())
        repair.at_start(self, context)
        self.hugepages.load(self.driver.get_guest_hugepages())
        # After half-built guests are gone, so their partitions are freed.
        self.repair_nvlink_partitions()
        LOG.info('Compute %s started with %d PCI devices tracked',
                 self.host, len(self.rt.tracked_devices()))

    def sync_power_states(self) -> None:
        """Periodic task (``[DEFAULT]sync_power_state_interval``): match
        servers to their guests' power (``repair.sync_power_states``)."""
        repair.sync_power_states(self)

    @rpc.local_only
    def hand_back_build(self, context, instance_uuid: str,
                        vm_state: str = vm_states.BUILDING) -> bool:
        """Return a build (or unshelve) this host cleaned up to the
        conductors (waiting for a host again, on no host); False if it is
        no longer building here (e.g. being deleted)."""
        waiting = task_states.WAITING_FOR_HOST[vm_state]
        try:
            db.instance_update(
                context, instance_uuid,
                {'task_state': waiting, 'host': None, 'node': None},
                expected={'vm_state': vm_state, 'host': self.host,
                          'task_state': [waiting, task_states.SPAWNING]})
        except (exception.InstanceUpdateConflict,
                exception.InstanceNotFound):
            return False
        return True

    def update_available_resource(self) -> None:
        """Periodic task: free the allocations whose free is pending
        (Placement did not answer a delete; ``nova.scheduler.client.
        frees``), then refresh and report this host's
        resources, so the band published counts the GPUs just freed."""
        context = nova_context.get_admin_context()
        frees.retry_pending_frees(context, self.reportclient, self.host)
        self.rt.update_available_resource(context)

    def audit_allocations(self) -> None:
        """Periodic task: remove what no instance of this host owns.

        Guests and PCI device claims first (see
        ``nova.compute.repair.release_unowned``),
        then the Placement allocations on this host's providers held by
        consumers that own nothing (``nova.compute.audit``), e.g. left by
        a free that failed while Placement was down. Builds in progress own
        their allocations and are never touched.
        """
        context = nova_context.get_admin_context()
        repair.release_unowned(self, context)
        orphans = audit.find_orphan_allocations(
            context, self.reportclient, [self.rt.compute_node.uuid])
        audit.remove_allocations(self.reportclient, orphans)

    def repair_nvlink_partitions(self) -> None:
        """Periodic and at start: let the driver settle NVLink partitions;
        an instance whose partition it cannot make active again goes to
        ERROR with the driver's reason as fault. Then the host's offer is
        brought up to date if it changed (see ResourceTracker.refresh_offer),
        at this task's interval rather than update_resources_interval."""
        context = nova_context.get_admin_context()
        for instance_uuid, reason in sorted(
                self.driver.repair_nvlink_partitions().items()):
            try:
                db.instance_update(context, instance_uuid, {
                    'vm_state': vm_states.ERROR, 'fault_message': reason})
            except exception.InstanceNotFound:
                pass
        # Partitions activated or cleared behind nova's back, and
        # quarantines lifted by the repair, change the offer now.
        self.rt.refresh_offer(context)

    @property
    def conductor_api(self) -> conductor_rpcapi.ConductorAPI:
        """Made on first use: a compute needs messaging only to hand an
        expired resize to a conductor."""
        if self._conductor_api is None:
            self._conductor_api = conductor_rpcapi.ConductorAPI(self.conf)
        return self._conductor_api

    def confirm_expired_resizes(self) -> list[str]:
        """Periodic task (with ``[DEFAULT]resize_confirm_window``): confirm
        the moves to this host that waited longer than the window
        (``moves.confirm_expired_resizes``); the migrations confirmed."""
        return moves.confirm_expired_resizes(self)

    def periodic_tasks(self) -> list:
        return [('update_available_resource', self.update_available_resource,
                 self.conf.update_resources_interval),
                ('confirm_expired_resizes', self.confirm_expired_resizes,
                 self.conf.update_resources_interval),
                ('audit_allocations', self.audit_allocations,
                 self.conf.allocation_audit_interval),
                ('sync_power_states', self.sync_power_states,
                 self.conf.sync_power_state_interval),
                ('repair_nvlink_partitions', self.repair_nvlink_partitions,
                 self.conf.libvirt.nvlink_repair_interval),
                ('offload_shelved_instances', self.offload_shelved_instances,
                 self.conf.shelved_poll_interval
                 if self.conf.shelved_offload_time > 0 else 0),
                ('manage_image_cache', self.manage_image_cache,
                 _image_cache_interval(self.conf))]

    def manage_image_cache(self) -> list[str]:
        """Age out unused base images ([image_cache]); their ids."""
        options = self.conf.image_cache
        return self.driver.manage_image_cache(
            options.remove_unused_base_images,
            options.remove_unused_original_minimum_age_seconds)

    # Instances --------------------------------------------------------------

    @rpc.local_only
    def instance_lock(self, instance_uuid: str) -> threading.Lock:
        """The lock that serializes builds, actions, deletes and repairs
        of one instance on this host."""
        with self._locks_guard:
            return self._instance_locks.setdefault(instance_uuid,
                                                   threading.Lock())

    def _devices_for(self,
                     pci_requests: Sequence[pci_request.InstancePCIRequest],
                     pci_providers: dict[str, list[str]]
                     ) -> list[tuple[str, list[str]]]:
        """(request id, device addresses) for each PCI request, from
        ``pci_providers``: request id -> the provider the scheduler chose
        for each of its devices, in device order. Each entry is one unit
        of that provider (see ``_unit_of``)."""
        by_rp: dict[str, list[pci_device.TrackedDevice]] = {}
        for dev in self.rt.tracked_devices():
            if dev.rp_uuid:
                by_rp.setdefault(dev.rp_uuid, []).append(dev)
        # VFs already given to an earlier unit of this build.
        taken: set[str] = set()
        claims = []
        for request in pci_requests:
            rp_uuids = list(pci_providers.get(request.request_id) or [])
            if len(rp_uuids) != request.count:
                raise exception.PciDeviceRequestFailed(requests=(
                    '%s: the scheduler chose %d provider(s) %s for %d '
                    'device(s)' % (request.request_id, len(rp_uuids),
                                   rp_uuids, request.count)))
            addresses = []
            for index, rp_uuid in enumerate(rp_uuids):
                if rp_uuid not in by_rp:
                    raise exception.PciDeviceRequestFailed(requests=(
                        '%s: Placement allocated provider %s for device %d, '
                        'which holds no PCI device tracked on %s' % (
                            request.request_id, rp_uuid, index, self.host)))
                unit = _unit_of(by_rp[rp_uuid], taken)
                if not unit:
                    raise exception.PciDeviceRequestFailed(requests=(
                        '%s: Placement allocated provider %s for device %d, '
                        'but none of its VFs %s on %s is free' % (
                            request.request_id, rp_uuid, index,
                            ', '.join(d.address for d in by_rp[rp_uuid]),
                            self.host)))
                taken.update(unit)
                addresses.extend(unit)
            claims.append((request.request_id, addresses))
        return claims

    def _guest_numa_nodes(
            self, pci_requests: Sequence[pci_request.InstancePCIRequest],
            devices: list[pci_device.TrackedDevice],
            flavor: records.FlavorSnapshot) -> tuple[int, ...]:
        """Host NUMA nodes the guest is confined to, from the NUMA nodes
        of the devices each PCI request claimed, the requests' NUMA
        policies and the flavor's ``hw:numa_nodes`` (see nova.pci.numa);
        PciNumaAffinityViolation if the devices cannot meet a policy
        (Placement's traits were stale)."""
        topology = self.rt.numa_topology
        placed = []
        for request in pci_requests:
            placed.append(pci_numa.PlacedRequest(
                policy=request.numa_policy,
                label='%s:%d' % (request.alias_name, request.count),
                devices=tuple(pci_numa.Locality(
                    node=dev.numa_node,
                    socket=topology.socket_of(dev.numa_node))
                    for dev in devices
                    if dev.request_id == request.request_id)))
        return pci_numa.guest_nodes(placed, guest_hardware.numa_cells_of(
            flavor.extra_specs) or 1)

    @rpc.local_only
    def guest_spec(self, instance: records.Instance,
                   flavor: records.FlavorSnapshot,
                   devices: list[pci_device.TrackedDevice],
                   pci_requests: Sequence[pci_request.InstancePCIRequest]
                   ) -> virt_driver.GuestSpec:
        """The guest of ``instance`` with ``flavor`` (its own, or a move's
        new one) on ``devices``, claimed here for ``pci_requests``: the
        one description of a guest every build, rebuild and move end
        hands the driver. Its hugepages are claimed here too (kept when
        it holds them already); with hugepages the guest runs on the host
        nodes they are on (HugepagesUnavailable when they do not fit)."""
        numa_nodes = self._guest_numa_nodes(pci_requests, devices, flavor)
        root_disk = compute_utils.root_disk(instance, flavor)
        extra_specs = flavor.extra_specs
        pages = self.hugepages.claim(
            instance.uuid, hugepages.request_of(
                extra_specs, root_disk.properties if root_disk else None),
            flavor.memory_mb,
            guest_hardware.numa_cells_of(extra_specs) or 1,
            self.rt.numa_topology, numa_nodes)
        return virt_driver.GuestSpec(
            instance_uuid=instance.uuid, name=instance.display_name,
            vcpus=flavor.vcpus, memory_mb=flavor.memory_mb,
            pci_devices=tuple(dev.passthrough() for dev in devices),
            numa_nodes=pages.numa_nodes if pages else numa_nodes,
            extra_specs=dict(extra_specs), root_disk=root_disk,
            page_size_kib=pages.page_size_kib if pages else None)

    # A reschedule is an answer, not a crash: the RPC server should not log
    # a traceback for it.
    @oslo_messaging.expected_exceptions(exception.RescheduledException,
                                        exception.BuildAbortException)
    def build_and_run_instance(
            self, context, instance_uuid: str,
            pci_providers: dict[str, list[str]] | None = None,
            mappings: dict[str, list[str]] | None = None) -> None:
        """Claim the allocated devices, start the guest, mark it ACTIVE.

        ``pci_providers`` (``mappings`` from an RPC API 1.0 - 1.2 caller)
        are the device providers the scheduler claimed for each PCI
        request.

        On failure everything done here is undone (guest destroyed,
        devices freed), the build is handed back (``scheduling``, no
        host) and RescheduledException tells the conductor to try another
        host, or BuildAbortException when no host could build the guest
        (its domain could not work); the conductor owns the Placement
        allocation.

        Only a build waiting for this host is built. A request for an
        instance that is active, failed, being deleted or gone (a replayed
        message) is ignored, never torn down; one for a build that is no
        longer this host's (taken over, or handed back at a restart) is
        answered with RescheduledException.
        """
        with self.instance_lock(instance_uuid):
            try:
                instance = db.instance_get_by_uuid(context, instance_uuid)
            except exception.InstanceNotFound:
                LOG.info('Ignoring the build request of instance %s: it '
                         'is deleted', instance_uuid)
                return
            waiting = task_states.WAITING_FOR_HOST.get(instance.vm_state)
            if waiting is None or instance.task_state != waiting:
                LOG.info('Ignoring the build request of instance %s: it '
                         'is %s/%s, not waiting to be built',
                         instance_uuid, instance.vm_state,
                         instance.task_state)
                return
            if instance.host != self.host:
                raise exception.RescheduledException(
                    instance_uuid=instance_uuid,
                    reason='the build is no longer assigned to %s' %
                           self.host)
            event = ('compute_unshelve_instance' if waiting ==
                     task_states.UNSHELVING else 'compute_build_instance')
            with instance_actions.step(context, instance_uuid, event,
                                       host=self.host):
                devices = self._claim_and_spawn(
                    context, instance, _sent_providers(pci_providers,
                                                       mappings), waiting)
            try:
                db.instance_update(context, instance_uuid, dict(
                    compute_utils.SETTLED_ACTIVE, task_state=None,
                    host=self.host, node=self.rt.nodename),
                    expected={'task_state': task_states.SPAWNING,
                              'host': self.host})
            except (exception.InstanceUpdateConflict,
                    exception.InstanceNotFound):
                # Deleted while spawning: the delete, waiting for this
                # instance's lock, tears the guest down next.
                LOG.info('Instance %s was deleted while it spawned on %s',
                         instance_uuid, self.host)
                return
            LOG.info('Instance %s is running on %s with PCI devices %s',
                     instance_uuid, self.host,
                     ', '.join(d.address for d in devices) or 'none')

    def _claim_and_spawn(self, context, instance: records.Instance,
                         pci_providers: dict[str, list[str]],
                         waiting: str) -> list[pci_device.TrackedDevice]:
        """Claim the allocated devices and start the guest; on failure
        undo both, hand the instance back and raise
        RescheduledException.

        A failed NVLink partition activation, or a claim refused for an
        unhealthy device (marked after Placement offered it), updates the
        host's offer at once (a partition quarantined, or found active
        behind nova's back, or an unhealthy device and its groups are
        withheld); if that took the devices out of the offer, the
        exception says ``same_host``: this host's other free groups may
        still take the build.
        """
        instance_uuid = instance.uuid
        devices: list[pci_device.TrackedDevice] = []
        try:
            pci_requests = instance.pci_requests
            devices = self.claim_devices(
                instance_uuid, pci_requests, pci_providers)
            flavor = instance.flavor
            # Only while no delete has started (it sets 'deleting')
            # and the build is still this host's.
            db.instance_update(context, instance_uuid,
                               {'task_state': task_states.SPAWNING},
                               expected={'task_state': waiting,
                                         'host': self.host})
            self.driver.spawn(self.guest_spec(
                instance, flavor, devices, pci_requests))
        except Exception as exc:
            LOG.warning('Build of instance %s failed on %s: %s',
                        instance_uuid, self.host, exc)
            self.tear_down(instance_uuid)
            same_host = self._withheld_now(_refused_devices(exc, devices))
            self.hand_back_build(context, instance_uuid, instance.vm_state)
            if isinstance(exc, exception.GuestHardwareUnsupported):
                # Every host would build the same domain: no reschedule.
                raise exception.BuildAbortException(
                    instance_uuid=instance_uuid,
                    reason=exception.reason_of(exc))
            raise exception.RescheduledException(
                instance_uuid=instance_uuid,
                reason=exception.reason_of(exc),
                same_host=same_host)
        return devices

    def _withheld_now(self, addresses: list[str] | None) -> bool:
        """Publish the host's offer now, for devices ``addresses`` that
        failed (None: none did, nothing to publish); whether it no longer
        offers exactly them (the reschedule then cannot pick them
        again)."""
        if addresses is None:
            return False
        try:
            self.rt.update_available_resource(
                nova_context.get_admin_context())
        except Exception as err:
            LOG.warning('Could not update the resources of %s after PCI '
                        'devices %s failed: %s', self.host,
                        ', '.join(addresses), err)
            return False
        return not self.rt.offers(addresses)

    @rpc.local_only
    def claim_devices(self, instance_uuid: str,
                      pci_requests: Sequence[pci_request.InstancePCIRequest],
                      pci_providers: dict[str, list[str]]
                      ) -> list[pci_device.TrackedDevice]:
        """Claim the devices Placement allocated to each PCI request."""
        devices = []
        # The free VFs of a provider are chosen and claimed under one
        # lock, so two builds given a unit of one PF each take different
        # VFs.
        with self._claim_lock:
            for request_id, addresses in self._devices_for(pci_requests,
                                                           pci_providers):
                devices += self.rt.claim(instance_uuid, request_id,
                                         addresses)
        self.rt.report_claimed(devices)
        return devices

    @rpc.local_only
    def tear_down(self, instance_uuid: str) -> None:
        """Destroy the guest and free its devices and hugepages (all
        idempotent)."""
        try:
            self.driver.destroy(instance_uuid)
        finally:
            self.hugepages.free(instance_uuid)
            self.rt.free_instance(instance_uuid)

    @rpc.local_only
    def forget_instance_lock(self, instance_uuid: str) -> None:
        """Drop the lock of an instance that is gone from this host."""
        with self._locks_guard:
            self._instance_locks.pop(instance_uuid, None)

    def terminate_instance(self, context, instance_uuid: str) -> None:
        """Destroy the guest, free devices and allocation, delete it.

        Placement being unreachable does not stop the delete half-way: the
        free is recorded as pending and retried by the periodic resource
        update once Placement answers (the allocation audit is the safety
        net).
        """
        with self.instance_lock(instance_uuid), instance_actions.step(
                context, instance_uuid, 'compute_terminate_instance',
                host=self.host):
            self.tear_down(instance_uuid)
            compute_utils.free_and_destroy(context, self.reportclient,
                                           instance_uuid, self.host)
        self.forget_instance_lock(instance_uuid)
        LOG.info('Instance %s deleted from %s', instance_uuid, self.host)

    def snapshot_instance(self, context, instance_uuid: str,
                          image_id: str) -> None:
        """createImage: upload the guest's root disk as the queued image
        ``image_id`` (see nova.compute.snapshot); the server keeps its
        state, and gets a fault if the snapshot fails."""
        self._upload_image(context, instance_uuid, image_id,
                           task_states.IMAGE_SNAPSHOT,
                           'compute_snapshot_instance')

    def backup_instance(self, context, instance_uuid: str, image_id: str,
                        backup_type: str, rotation: int) -> None:
        """createBackup: a snapshot into the queued image ``image_id``,
        then only the newest ``rotation`` backups of ``backup_type``
        kept (see nova.compute.snapshot.rotate)."""
        def rotate(glance_client: glance.GlanceClient) -> None:
            snapshot.rotate(glance_client, instance_uuid, backup_type,
                            rotation)
        self._upload_image(context, instance_uuid, image_id,
                           task_states.IMAGE_BACKUP,
                           'compute_backup_instance', then=rotate)

    def _upload_image(self, context, instance_uuid: str, image_id: str,
                      task_state: str, step: str,
                      then: AfterUpload | None = None) -> None:
        """The guest's root disk uploaded into the queued image
        ``image_id`` as the action ``step`` of ``task_state``; ``then``
        runs with the Glance client once the upload is done."""
        if self._glance is None:
            self._glance = glance.GlanceClient(self.conf)

        def work(instance):
            snapshot.upload(self.driver, self._glance,
                            self.conf.instances_path, instance_uuid,
                            image_id)
            if then is not None:
                then(self._glance)
            return {}
        self._act(context, instance_uuid, task_state, step, work)

    @oslo_messaging.expected_exceptions(exception.ConsoleOutputNotSupported)
    def get_console_output(self, context, instance_uuid: str,
                           tail_length: int | None = None) -> str:
        """The guest's console log, its last ``tail_length`` lines if
        given (as upstream: whole lines from the end)."""
        try:
            output = self.driver.get_console_output(instance_uuid)
        except NotImplementedError:
            raise exception.ConsoleOutputNotSupported(host=self.host)
        if tail_length is None:
            return output
        lines = output.splitlines(keepends=True)
        return ''.join(lines[-tail_length:]) if tail_length > 0 else ''

    # Server actions ---------------------------------------------------------
    #
    # nova-api accepted each action by setting its task state (see
    # nova.compute.api); the compute runs it under the instance's lock and
    # clears the task state again, fenced by that task state so a delete
    # that started meanwhile is never overwritten. A failed action leaves
    # the server in its vm_state with no task state, its power state as
    # the hypervisor reports it, and the failure in its action's events.

    def _act(self, context, instance_uuid: str, task_state: str,
             event: str, work) -> None:
        """Run ``work(instance) -> values`` for an action accepted with
        ``task_state`` and store ``values`` (plus ``task_state: None``)."""
        with self.instance_lock(instance_uuid):
            try:
                instance = db.instance_get_by_uuid(context, instance_uuid)
            except exception.InstanceNotFound:
                LOG.info('Ignoring %s of instance %s: it is deleted', event,
                         instance_uuid)
                return
            if instance.task_state != task_state or \
                    instance.host != self.host:
                LOG.info('Ignoring %s of instance %s: it is %s/%s on %s',
                         event, instance_uuid, instance.vm_state,
                         instance.task_state, instance.host)
                return
            with instance_actions.step(context, instance_uuid, event,
                                       host=self.host):
                try:
                    values = work(instance)
                except Exception as exc:
                    self.fail_action(context, instance, task_state, exc)
                    raise
                self.finish_action(context, instance_uuid, task_state,
                                   dict(values, task_state=None))

    @rpc.local_only
    def finish_action(self, context, instance_uuid: str, task_state: str,
                      values: dict) -> bool:
        """Store the outcome of an action unless a delete took over."""
        try:
            db.instance_update(context, instance_uuid, values,
                               expected={'task_state': task_state})
        except (exception.InstanceUpdateConflict,
                exception.InstanceNotFound):
            LOG.info('Instance %s is being deleted; its %s outcome is '
                     'dropped', instance_uuid, task_state)
            return False
        return True

    @rpc.local_only
    def fail_action(self, context, instance: records.Instance, task_state: str,
                    exc: Exception) -> None:
        """End an action that raised ``exc``: clear its task state, keep
        the reason as the server's fault and the power state the
        hypervisor reports (unless a delete took over)."""
        reason = exception.reason_of(exc)
        LOG.error('Action %s of instance %s failed on %s: %s', task_state,
                  instance.uuid, self.host, reason)
        self.finish_action(context, instance.uuid, task_state, {
            'task_state': None, 'fault_message': reason,
            'power_state': self.driver.get_power_state(instance.uuid)})

    def reboot_instance(self, context, instance_uuid: str,
                        hard: bool) -> None:
        """Reboot the guest; it is ACTIVE and running afterwards."""
        def work(instance):
            if hard:
                self.hard_reboot_guest(instance)
            else:
                self.driver.reboot(instance_uuid, hard=False)
            return compute_utils.SETTLED_ACTIVE
        self._act(context, instance_uuid,
                  task_states.REBOOTING_HARD if hard
                  else task_states.REBOOTING, 'compute_reboot_instance',
                  work)

    @rpc.local_only
    def hard_reboot_guest(self, instance: records.Instance) -> None:
        """Power cycle the guest; one that is gone is defined again on
        the devices the instance holds (as upstream, a hard reboot
        recreates the guest from nova's records)."""
        if not self.define_lost_guest(instance, power_on=True):
            self.driver.reboot(instance.uuid, hard=True)

    @rpc.local_only
    def power_on_guest(self, instance: records.Instance) -> None:
        """Start the guest; one that is gone is defined again first."""
        if not self.define_lost_guest(instance, power_on=True):
            self.driver.power_on(instance.uuid)

    @rpc.local_only
    def define_lost_guest(self, instance: records.Instance,
                          power_on: bool) -> bool:
        """If the hypervisor has no guest of the instance, define it again
        on the devices the instance holds (with its partition), started
        if ``power_on``; False if the guest exists."""
        if self.driver.get_power_state(instance.uuid) != \
                virt_driver.NOSTATE:
            return False
        LOG.warning('Instance %s has no guest on %s; defining it again on '
                    'the devices it holds', instance.uuid, self.host)
        self.rebuild_guest(dataclasses.replace(
            instance, vm_state=vm_states.ACTIVE if power_on
            else vm_states.STOPPED), keep_disk=True)
        return True

    def stop_instance(self, context, instance_uuid: str) -> None:
        """Power the guest off; it keeps devices, partition, allocation."""
        def work(instance):
            self.driver.power_off(instance_uuid)
            return compute_utils.SETTLED_STOPPED
        self._act(context, instance_uuid, task_states.POWERING_OFF,
                  'compute_stop_instance', work)

    def start_instance(self, context, instance_uuid: str) -> None:
        """Power a stopped guest on with the devices it has (a guest the
        hypervisor lost is defined again on them)."""
        def work(instance):
            self.power_on_guest(instance)
            return compute_utils.SETTLED_ACTIVE
        self._act(context, instance_uuid, task_states.POWERING_ON,
                  'compute_start_instance', work)

    def rebuild_instance(self, context, instance_uuid: str) -> None:
        """Redefine the guest with the same devices and a root disk made
        again from its image; a stopped server stays stopped (as
        upstream)."""
        self._act(context, instance_uuid, task_states.REBUILDING,
                  'compute_rebuild_instance', self.rebuild_guest)

    @rpc.local_only
    def rebuild_guest(self, instance: records.Instance,
                      keep_disk: bool = False) -> dict:
        """Define the guest again on the devices the instance holds,
        running unless the server is stopped, with a root disk made again
        from its image (kept with ``keep_disk``); the settled values."""
        stopped = instance.vm_state == vm_states.STOPPED
        flavor = instance.flavor
        devices = self.rt.held_by(instance.uuid)
        self.driver.rebuild(
            self.guest_spec(instance, flavor, devices,
                            instance.pci_requests),
            power_on=not stopped, keep_disk=keep_disk)
        return (compute_utils.SETTLED_STOPPED if stopped
                else compute_utils.SETTLED_ACTIVE)

    def shelve_instance(self, context, instance_uuid: str) -> None:
        """Power the guest off and mark the server SHELVED; with
        ``[DEFAULT]shelved_offload_time = 0`` offload it right away."""
        def work(instance):
            self.driver.power_off(instance_uuid)
            return {'vm_state': vm_states.SHELVED,
                    'power_state': virt_driver.SHUTDOWN}
        self._act(context, instance_uuid, task_states.SHELVING,
                  'compute_shelve_instance', work)
        if self.conf.shelved_offload_time == 0:
            self._offload_if_shelved(context, instance_uuid)

    def _offload_if_shelved(self, context, instance_uuid: str) -> bool:
        """Offload a SHELVED server with no task; False if it is not."""
        try:
            db.instance_update(
                context, instance_uuid,
                {'task_state': task_states.SHELVING_OFFLOADING},
                expected={'vm_state': vm_states.SHELVED, 'task_state': None,
                          'host': self.host})
        except (exception.InstanceUpdateConflict,
                exception.InstanceNotFound):
            return False
        self.shelve_offload_instance(context, instance_uuid)
        return True

    def shelve_offload_instance(self, context, instance_uuid: str) -> None:
        """Remove a shelved server from this host: guest destroyed (its
        partition released), devices and Placement allocation freed."""
        self._act(context, instance_uuid, task_states.SHELVING_OFFLOADING,
                  'compute_shelve_offload_instance', self.offload_from_host)

    @rpc.local_only
    def offload_from_host(self, instance: records.Instance) -> dict:
        """Destroy the guest and free its devices and allocation; the
        values of a SHELVED_OFFLOADED server."""
        # Freed before the record says so: a crash in between leaves the
        # task state, and the start-up repair finishes the offload.
        self.tear_down(instance.uuid)
        frees.free_allocation(nova_context.get_admin_context(),
                              self.reportclient, instance.uuid, self.host)
        LOG.info('Instance %s offloaded from %s', instance.uuid,
                 self.host)
        return {'vm_state': vm_states.SHELVED_OFFLOADED, 'host': None,
                'node': None, 'power_state': virt_driver.SHUTDOWN}

    def unshelve_instance(self, context, instance_uuid: str) -> None:
        """Power a SHELVED (not offloaded) server on where it is; an
        offloaded one is scheduled again by the conductor instead."""
        def work(instance):
            self.power_on_guest(instance)
            return compute_utils.SETTLED_ACTIVE
        self._act(context, instance_uuid, task_states.UNSHELVING,
                  'compute_unshelve_instance', work)

    def offload_shelved_instances(self) -> None:
        """Periodic task: offload servers shelved here for longer than
        ``[DEFAULT]shelved_offload_time`` (when it is above 0)."""
        if self.conf.shelved_offload_time <= 0:
            return
        context = nova_context.get_admin_context()
        cutoff = timeutils.utcnow() - datetime.timedelta(
            seconds=self.conf.shelved_offload_time)
        for instance in db.instance_get_all(context, {
                'host': self.host, 'vm_state': vm_states.SHELVED,
                'task_state': [None]}):
            if instance.updated_at and instance.updated_at < cutoff:
                LOG.info('Offloading instance %s, shelved since %s',
                         instance.uuid, instance.updated_at)
                self._offload_if_shelved(context, instance.uuid)

    # Moves: the RPC entry points of the steps in nova.compute.moves ------

    @oslo_messaging.expected_exceptions(exception.RescheduledException)
    def prep_resize(self, context, instance_uuid: str, migration_uuid: str,
                    pci_providers: dict[str, list[str]] | None = None,
                    mappings: dict[str, list[str]] | None = None) -> None:
        """Destination: claim the devices Placement allocated for the new
        flavor (``pci_providers``, or ``mappings`` from an RPC API 1.2
        caller); RescheduledException if that fails."""
        moves.prep_resize(self, context, instance_uuid, migration_uuid,
                          _sent_providers(pci_providers, mappings))

    def resize_instance(self, context, instance_uuid: str,
                        migration_uuid: str) -> None:
        """Source: stop the guest, keeping its devices for a revert."""
        moves.resize_instance(self, context, instance_uuid, migration_uuid)

    def finish_resize(self, context, instance_uuid: str,
                      migration_uuid: str) -> None:
        """Destination: start the guest with the new flavor."""
        moves.finish_resize(self, context, instance_uuid, migration_uuid)

    def confirm_resize(self, context, instance_uuid: str,
                       migration_uuid: str) -> None:
        """Source: free what the instance held here before the move."""
        moves.confirm_resize(self, context, instance_uuid, migration_uuid)

    def revert_resize(self, context, instance_uuid: str,
                      migration_uuid: str) -> None:
        """Destination: remove the guest and the devices the move
        claimed here."""
        moves.revert_resize(self, context, instance_uuid, migration_uuid)

    def finish_revert_resize(self, context, instance_uuid: str,
                             migration_uuid: str) -> None:
        """Source: start the guest again with the old flavor."""
        moves.finish_revert_resize(self, context, instance_uuid,
                                   migration_uuid)


def _unit_of(devices: list[pci_device.TrackedDevice],
             taken: set[str]) -> list[str]:
    """Addresses of the devices one allocated unit of their provider
    stands for: a free VF not in ``taken`` (healthy ones first) when the
    provider is a PF's holding VFs, one unit each, as upstream takes
    exactly the allocated count; otherwise every device behind it (a
    device's own provider, or a static group's, whose one unit is the
    whole group). Empty if no VF is free."""
    vfs = [d for d in devices if d.dev_type == pci_device.DEV_TYPE_VF]
    if not vfs:
        return [d.address for d in devices]
    free = sorted((d for d in vfs if d.status == pci_device.AVAILABLE and
                   d.address not in taken),
                  key=lambda d: (not d.healthy, d.address))
    return [free[0].address] if free else []


def _refused_devices(exc: Exception,
                     claimed: list[pci_device.TrackedDevice]
                     ) -> list[str] | None:
    """The addresses of the devices a build failed on that the host may
    stop offering at once (see ``_claim_and_spawn``): the claimed ones
    whose NVLink partition did not activate, the unhealthy ones a claim
    refused; None for any other failure."""
    if isinstance(exc, exception.NVLinkPartitionFailed):
        return [dev.address for dev in claimed]
    if isinstance(exc, exception.PciDeviceUnhealthy):
        return list(exc.kwargs['addresses'])
    return None


def _sent_providers(pci_providers: dict[str, list[str]] | None,
                    mappings: dict[str, list[str]] | None
                    ) -> dict[str, list[str]]:
    """The scheduler's PCI providers as a build or move message carries
    them: ``pci_providers`` from RPC API 1.3 on, ``mappings`` from an
    older sender (see nova.compute.rpcapi)."""
    return (pci_providers if pci_providers is not None else mappings) or {}


def _image_cache_interval(conf) -> int:
    """Seconds between image cache manager runs: ``[image_cache]
    manager_interval``; 0 means the resource update interval, as upstream
    (the default periodic spacing), and a negative value never (0 to
    nova.service)."""
    interval = conf.image_cache.manager_interval
    if interval < 0:
        return 0
    return interval or conf.update_resources_interval
