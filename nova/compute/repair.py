"""Bring a compute host back in line with nova's records: at start, and
periodically for power states and what no instance owns.

A compute killed with builds in flight repairs its host when it starts
again, before it serves requests (:func:`at_start`, from
``ComputeManager.init_host``): every instance it had started building
here is torn down (guest destroyed, devices freed) and handed back to its
conductor (``scheduling``, no host), which reschedules it - or, if that
conductor is gone too, the next conductor re-drives it (see
``nova.conductor.manager``). A build assigned here that it had not
started is left for its build request, which may still be queued.
Builds that failed here (ERROR, never ran) keep nothing on the host;
guests nova created for instances that are gone or live elsewhere are
destroyed, and device rows held by such instances are freed. Server
actions cut short (reboot, stop, start, rebuild, shelve, shelve offload,
unshelve of a shelved server) are finished, so their task state clears
and the server holds what its new state says; an unshelve of an
offloaded server that had started spawning here is rolled back to
SHELVED_OFFLOADED with nothing held. What instances evacuated away while
the host was down left here is cleaned up, and a settled server whose
guest the hypervisor lost gets it defined again. The log lists what was
repaired.

Periodically, :func:`sync_power_states` keeps the power state of settled
servers matched to their guests and :func:`release_unowned` removes the
guests and device claims of instances that own nothing here.

Each repair works through the compute manager's own steps (tear down,
hand back, finish an action, define a lost guest), so it does exactly
what the interrupted action would have done. :class:`Compute` lists
those steps: the public seam between this module and the
``ComputeManager`` that provides them (and calls this module).
"""

from __future__ import annotations

from typing import Protocol, TYPE_CHECKING

from oslo_log import log as logging

from nova import context as nova_context
from nova import exception
from nova import states
from nova.compute import audit
from nova.compute import instance_actions
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.db import api as db
from nova.db import records
from nova.scheduler import frees
from nova.virt import driver as virt_driver

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from oslo_config import cfg

    from nova.compute import resource_tracker
    from nova.scheduler.client import report

LOG = logging.getLogger(__name__)

# Task states of actions the start-up repair finishes (an unshelve of an
# offloaded server is rolled back instead, like a build handed back).
_RESUMED_AT_START = (task_states.REBOOTING, task_states.REBOOTING_HARD,
                     task_states.POWERING_OFF, task_states.POWERING_ON,
                     task_states.REBUILDING, task_states.SHELVING,
                     task_states.SHELVING_OFFLOADING,
                     task_states.UNSHELVING)

# vm_states whose power state the compute keeps matched to the guest's.
_POWER_SYNCED = (vm_states.ACTIVE, vm_states.STOPPED)


class Compute(Protocol):
    """What repair needs of the compute whose host it repairs
    (``nova.compute.manager.ComputeManager``): its host, hypervisor,
    devices and Placement client, and the steps of its own actions, so a
    repair does what the interrupted action would have done."""

    #: The host repaired: whose instances, guests and migrations.
    host: str
    #: Read for ``[DEFAULT]resume_guests_state_on_host_boot``.
    conf: cfg.ConfigOpts
    #: Lists, powers and destroys the guests found on the host.
    driver: virt_driver.ComputeDriver
    #: Frees the PCI devices of instances that no longer own them.
    rt: resource_tracker.ResourceTracker
    #: Frees the allocations of evacuated and rolled back instances.
    reportclient: report.SchedulerReportClient

    def tear_down(self, instance_uuid: str) -> None:
        """Destroy the guest and free the devices of an instance: what a
        half-built, failed or unowned instance must not keep here."""

    def hand_back_build(self, context, instance_uuid: str) -> bool:
        """Return a torn down build to the conductors to be rescheduled;
        False if it is no longer building here (e.g. being deleted)."""

    def finish_action(self, context, instance_uuid: str, task_state: str,
                      values: dict) -> bool:
        """Store the outcome of an action cut short, fenced by its task
        state so a delete that took over is not overwritten."""

    def fail_action(self, context, instance: records.Instance, task_state: str,
                    exc: Exception) -> None:
        """Record an action the repair could not finish as failed, as
        the action itself would (task state cleared, fault kept)."""

    def offload_from_host(self, instance: records.Instance) -> dict:
        """Finish a shelve offload: free guest, devices and allocation;
        the values of the offloaded server."""

    def rebuild_guest(self, instance: records.Instance) -> dict:
        """Finish a rebuild: define the guest again on the devices the
        instance holds; the values of the settled server."""

    def hard_reboot_guest(self, instance: records.Instance) -> None:
        """Finish a reboot, start or unshelve: power cycle the guest,
        defining it again if the hypervisor lost it."""

    def define_lost_guest(self, instance: records.Instance,
                          power_on: bool) -> bool:
        """Define a guest the hypervisor lost on the devices the
        instance holds; False if the guest exists."""

    def power_on_guest(self, instance: records.Instance) -> None:
        """Start a guest found not running at start (defining it again
        if lost), with ``resume_guests_state_on_host_boot``."""

    def instance_lock(self, instance_uuid: str
                      ) -> AbstractContextManager[object]:
        """The lock a build, action or delete of the instance holds; the
        periodic repairs hold it too so they never undercut one."""

    def forget_instance_lock(self, instance_uuid: str) -> None:
        """Drop the lock of an instance whose leftovers were removed."""


def at_start(compute: Compute, context) -> None:
    """Repair what a previous life of ``compute``'s service left half
    done: evacuated instances first, then every instance of the host.

    Runs before the RPC server starts, so no build or delete of this
    service runs concurrently.
    """
    _destroy_evacuated_instances(compute, context)
    _repair_instances(compute, context)


def _destroy_evacuated_instances(compute: Compute, context) -> None:
    """Clean up what instances evacuated away from this host while it
    was down left here, as upstream does at start.

    Driven by the evacuation migrations from this host: the guest is
    destroyed (and its NVLink partition released) whatever their
    status, since the instance may run elsewhere already; once the
    evacuation is ``done`` the instance's devices here are freed, the
    migration's source allocation deleted and the migration
    ``completed``. An evacuation still in flight keeps the devices
    and allocation for its rollback.
    """
    for migration in db.migration_get_all(context, {
            'source_compute': compute.host,
            'migration_type': 'evacuation',
            'status': [states.MIGRATION_ACCEPTED,
                       states.MIGRATION_PRE_MIGRATING,
                       states.MIGRATION_DONE]}):
        uuid = migration.instance_uuid
        had_guest = uuid in compute.driver.list_instance_uuids()
        # Also releases a partition whose guest is gone already.
        compute.driver.destroy(uuid)
        if had_guest:
            LOG.warning('Compute %s start-up repair: guest of instance '
                        '%s destroyed: it was evacuated to %s',
                        compute.host, uuid, migration.dest_compute)
        if migration.status != states.MIGRATION_DONE:
            continue
        freed = compute.rt.free_instance(uuid)
        compute.reportclient.delete_allocation_for_instance(
            migration.uuid)
        db.migration_update(context, migration.uuid,
                            {'status': states.MIGRATION_COMPLETED})
        LOG.warning('Compute %s start-up repair: instance %s was '
                    'evacuated to %s; PCI devices %s and its source '
                    'allocation (migration %s) freed', compute.host, uuid,
                    migration.dest_compute,
                    ', '.join(freed) or 'none', migration.uuid)


def _repair_instances(compute: Compute, context) -> None:
    """Undo builds in flight when the service stopped, and leftovers.

    Runs before the RPC server starts, so no build or delete of this
    service runs concurrently.
    """
    repairs = []
    mine = {}
    holders = _holders(compute)
    for instance in db.instance_get_all(context, {'host': compute.host}):
        uuid = instance.uuid
        waiting = task_states.WAITING_FOR_HOST.get(instance.vm_state)
        building = waiting is not None and \
            instance.task_state in (waiting, task_states.SPAWNING)
        started = instance.task_state == task_states.SPAWNING or \
            uuid in holders
        if building and started and waiting == task_states.UNSHELVING:
            repairs.append(_roll_back_unshelve(compute, context, instance))
            instance = db.instance_get_by_uuid(context, uuid)
        elif building and started:
            compute.tear_down(uuid)
            if compute.hand_back_build(context, uuid):
                repairs.append('half-built instance %s torn down and '
                               'handed back to be rescheduled' % uuid)
                continue
            try:
                instance = db.instance_get_by_uuid(context, uuid)
            except exception.InstanceNotFound:
                continue    # deleted meanwhile
        elif instance.vm_state == vm_states.ERROR and \
                not instance.power_state and started:
            # A failed build: its allocation is freed, so it must not
            # keep a guest or devices either.
            compute.tear_down(uuid)
            repairs.append('failed build of instance %s torn down' %
                           uuid)
        elif instance.task_state in _RESUMED_AT_START and \
                not building:
            repairs.append(_resume_action(compute, context, instance))
            instance = db.instance_get_by_uuid(context, uuid)
        elif instance.task_state is None and \
                instance.vm_state in _POWER_SYNCED:
            repair = _power_at_start(compute, context, instance)
            if repair is not None:
                repairs.append(repair)
                instance = db.instance_get_by_uuid(context, uuid)
        mine[uuid] = instance
    # An instance moving to or from this host owns what it holds here
    # until its move is over.
    for migration in db.migration_get_in_progress(context,
                                                  host=compute.host):
        uuid = migration.instance_uuid
        if uuid not in mine:
            try:
                mine[uuid] = db.instance_get_by_uuid(context, uuid)
            except exception.InstanceNotFound:
                pass
    for uuid in sorted(set(compute.driver.list_instance_uuids()) -
                       set(mine)):
        compute.driver.destroy(uuid)
        repairs.append('guest of instance %s destroyed: the instance is '
                       'deleted or not on this host' % uuid)
    for uuid in sorted(_device_holders(compute) - set(mine)):
        freed = compute.rt.free_instance(uuid)
        repairs.append('PCI devices %s freed: instance %s is deleted or '
                       'not on this host' % (', '.join(freed), uuid))
    for repair in repairs:
        LOG.warning('Compute %s start-up repair: %s', compute.host, repair)
    if not repairs:
        LOG.info('Compute %s start-up check: nothing to repair',
                 compute.host)


def _roll_back_unshelve(compute: Compute, context,
                        instance: records.Instance) -> str:
    """An unshelve cut short here: free guest, devices and the
    allocation and leave the server SHELVED_OFFLOADED (its conductor,
    if alive, finds it no longer unshelving and stops)."""
    uuid = instance.uuid
    compute.tear_down(uuid)
    frees.free_allocation(context, compute.reportclient, uuid, compute.host)
    compute.finish_action(context, uuid, instance.task_state, {
        'task_state': None, 'host': None, 'node': None,
        'fault_message': 'The unshelve was interrupted by a restart of '
                         'nova-compute on %s; unshelve again' %
                         compute.host})
    return ('interrupted unshelve of instance %s rolled back: guest, '
            'devices and allocation freed, SHELVED_OFFLOADED' % uuid)


def _resume_action(compute: Compute, context,
                   instance: records.Instance) -> str:
    """Finish an action a restart cut short (see
    ``_RESUMED_AT_START``); what was done, for the log."""
    uuid, task_state = instance.uuid, instance.task_state
    try:
        if task_state == task_states.SHELVING_OFFLOADING:
            values = compute.offload_from_host(instance)
        elif task_state == task_states.REBUILDING:
            values = compute.rebuild_guest(instance)
        elif task_state in (task_states.POWERING_OFF,
                            task_states.SHELVING):
            if compute.driver.get_power_state(uuid) != \
                    virt_driver.NOSTATE:
                compute.driver.power_off(uuid)
            values = compute_utils.SETTLED_STOPPED if task_state == \
                task_states.POWERING_OFF else {
                    'vm_state': vm_states.SHELVED,
                    'power_state': virt_driver.SHUTDOWN}
        else:    # rebooting, powering on, unshelving a SHELVED server
            compute.hard_reboot_guest(instance)
            values = compute_utils.SETTLED_ACTIVE
    except Exception as exc:
        compute.fail_action(context, instance, task_state, exc)
        return ('%s of instance %s could not be finished (%s); task '
                'state cleared' % (task_state, uuid, exc))
    compute.finish_action(context, uuid, task_state,
                          dict(values, task_state=None))
    return ('%s of instance %s, cut short by the restart, finished: '
            'now %s' % (task_state, uuid, values['vm_state']))


def _power_at_start(compute: Compute, context,
                    instance: records.Instance) -> str | None:
    """Match a settled ACTIVE or SHUTOFF server to its guest at start
    (the hypervisor may have lost it: a host reboot, libvirt's test
    driver at every restart, an operator's ``virsh undefine``); what
    was done, for the log, or None if they agree.

    A lost guest is defined again on the devices the server holds. A
    SHUTOFF server stays off. An ACTIVE one is started again with
    ``[DEFAULT]resume_guests_state_on_host_boot``, and otherwise
    becomes SHUTOFF (see ``_stopped_by_compute``), as upstream's
    power state sync stops it.
    """
    uuid = instance.uuid
    state = compute.driver.get_power_state(uuid)
    if instance.vm_state == vm_states.STOPPED:
        if state == virt_driver.SHUTDOWN:
            return None
        try:
            if not compute.define_lost_guest(instance, power_on=False):
                compute.driver.power_off(uuid)
        except Exception as exc:
            # Left as it is: a start defines the guest again.
            return ('guest of SHUTOFF instance %s could not be '
                    'defined again (%s); a start tries again' % (
                        uuid, exception.reason_of(exc)))
        _finish_settled(compute, context, instance,
                        {'power_state': virt_driver.SHUTDOWN})
        return ('guest of SHUTOFF instance %s %s, powered off' % (
            uuid, 'defined again' if state == virt_driver.NOSTATE
            else 'was running; it is'))
    if state == virt_driver.RUNNING:
        return None
    lost = ('was lost by the hypervisor' if state == virt_driver.NOSTATE
            else 'was not running')
    if compute.conf.resume_guests_state_on_host_boot:
        try:
            compute.power_on_guest(instance)
        except Exception as exc:
            reason = ('The guest of this server %s when nova-compute '
                      'started on %s and could not be started again '
                      '(resume_guests_state_on_host_boot): %s. Start '
                      'the server again.' % (
                          lost, compute.host,
                          exception.reason_of(exc)))
            _stopped_by_compute(
                compute, context, instance, 'compute_init_host', reason,
                compute.driver.get_power_state(uuid))
            return 'instance %s: %s' % (uuid, reason)
        _finish_settled(compute, context, instance,
                        compute_utils.SETTLED_ACTIVE)
        return ('guest of ACTIVE instance %s %s; started again '
                '(resume_guests_state_on_host_boot)' % (uuid, lost))
    reason = ('The guest of this server %s when nova-compute started on '
              '%s. It is defined again, powered off, on the devices the '
              'server holds, and the server is SHUTOFF because '
              '[DEFAULT]resume_guests_state_on_host_boot is False. '
              'Start the server again.' % (lost, compute.host))
    try:
        compute.define_lost_guest(instance, power_on=False)
    except Exception as exc:
        reason += (' Defining the guest failed (%s); the start defines '
                   'it.' % exception.reason_of(exc))
    _stopped_by_compute(compute, context, instance, 'compute_init_host',
                        reason, compute.driver.get_power_state(uuid))
    return 'instance %s: %s' % (uuid, reason)


def sync_power_states(compute: Compute) -> None:
    """Periodic task (``[DEFAULT]sync_power_state_interval``), as
    upstream's power state sync: an ACTIVE server whose guest is not
    running becomes SHUTOFF (with a ``stop`` action saying why), a
    SHUTOFF server whose guest runs has it powered off, and the power
    state shown follows the guest. Servers with a task in progress
    are skipped; each runs under its instance lock, so an action
    accepted meanwhile is never undercut."""
    context = nova_context.get_admin_context()
    for found in db.instance_get_all(context, {
            'host': compute.host, 'vm_state': list(_POWER_SYNCED),
            'task_state': [None]}):
        uuid = found.uuid
        with compute.instance_lock(uuid):
            try:
                instance = db.instance_get_by_uuid(context, uuid)
            except exception.InstanceNotFound:
                continue
            if instance.task_state is not None or \
                    instance.host != compute.host or \
                    instance.vm_state not in _POWER_SYNCED:
                continue
            try:
                _sync_power_state(compute, context, instance)
            except Exception:
                LOG.exception('Power state sync of instance %s on %s '
                              'failed', uuid, compute.host)


def _sync_power_state(compute: Compute, context,
                      instance: records.Instance) -> None:
    uuid = instance.uuid
    state = compute.driver.get_power_state(uuid)
    if instance.vm_state == vm_states.ACTIVE and \
            state != virt_driver.RUNNING:
        _stopped_by_compute(
            compute, context, instance, 'compute_sync_power_state',
            'The guest of this server was found %s on %s by the '
            'periodic power state sync; the server is SHUTOFF and keeps '
            'its devices. Start it again.' % (
                'gone from the hypervisor' if state == virt_driver.NOSTATE
                else 'shut down', compute.host), state)
    elif instance.vm_state == vm_states.STOPPED and \
            state == virt_driver.RUNNING:
        compute.driver.power_off(uuid)
        _stopped_by_compute(
            compute, context, instance, 'compute_sync_power_state',
            'The guest of this SHUTOFF server was found running on %s '
            'by the periodic power state sync; it was powered off.' %
            compute.host)
    elif instance.power_state != state:
        _finish_settled(compute, context, instance, {'power_state': state})


def _finish_settled(compute: Compute, context, instance: records.Instance,
                    values: dict) -> bool:
    """Store ``values`` unless an action or delete started since
    ``instance`` was read (its task state is set then)."""
    try:
        db.instance_update(context, instance.uuid, values, expected={
            'task_state': [None], 'vm_state': instance.vm_state})
    except (exception.InstanceUpdateConflict,
            exception.InstanceNotFound):
        return False
    return True


def _stopped_by_compute(compute: Compute, context, instance: records.Instance,
                        event: str, reason: str,
                        power_state: int = virt_driver.SHUTDOWN) -> None:
    """The compute, not a user, stopped the server: it is SHUTOFF
    (devices, allocation and partition kept, as a stopped server's)
    and its owner sees a ``stop`` action whose ``event`` failed with
    ``reason``, as upstream records the stop of its power state
    sync."""
    uuid = instance.uuid
    if not _finish_settled(compute, context, instance, dict(
            compute_utils.SETTLED_STOPPED, power_state=power_state)):
        return
    LOG.warning('Instance %s stopped on %s: %s', uuid, compute.host, reason)
    # Its own request id: a new action, not one of the caller's.
    own = nova_context.get_admin_context()
    instance_actions.start(own, uuid, instance_actions.STOP)
    with instance_actions.step(own, uuid, event,
                               host=compute.host) as step:
        step.fail(reason)


def release_unowned(compute: Compute, context) -> None:
    """Destroy the guests and free the PCI devices on this host of
    instances that do not own them here (``nova.compute.audit``):
    deleted (e.g. by the API while this compute was down), never
    existing, in ERROR, or on another host.

    Each instance is re-checked under its lock, so a build or delete
    running meanwhile is never undercut. Called by the periodic audit
    (at start, :func:`at_start` does the same for instances deleted or
    moved while this compute was down).
    """
    for instance_uuid, reason in sorted(audit.unowned(
            context, _holders(compute), compute.host).items()):
        with compute.instance_lock(instance_uuid):
            reason = audit.unowned(context, [instance_uuid],
                                   compute.host).get(instance_uuid)
            if reason is None:
                continue
            LOG.warning('Destroying the guest and freeing the PCI '
                        'devices of instance %s on %s: %s',
                        instance_uuid, compute.host, reason)
            try:
                compute.tear_down(instance_uuid)
            except exception.NovaException:
                # One guest that cannot be destroyed must not keep the
                # compute from starting or the others from being
                # cleaned; the next audit tries again.
                LOG.exception('Could not clean up instance %s on %s',
                              instance_uuid, compute.host)
                continue
        compute.forget_instance_lock(instance_uuid)


def _device_holders(compute: Compute) -> set[str]:
    """Instances holding a PCI device of this host."""
    return {dev.instance_uuid for dev in compute.rt.tracked_devices()
            if dev.instance_uuid}


def _holders(compute: Compute) -> set[str]:
    """Instances with a guest or a PCI device on this host."""
    return set(compute.driver.list_instance_uuids()) | \
        _device_holders(compute)
