"""The conductor's move workflows: resize, cold migration, evacuation,
confirm, revert.

A move follows upstream Nova's allocation model. Before the destination
is scheduled, the instance's allocation on the source is moved to the
migration record (consumer = migration UUID, consumer type MIGRATION) in
one ``POST /allocations``; the scheduler then claims the destination for
the instance with the new flavor's request, exactly as for a boot, so the
server always lands on one free partition of the new size. Until the move
is confirmed the source keeps everything (allocation held by the
migration, PCI device rows still claimed), so a revert can never find its
old devices given away.

Steps (the migration's ``status`` in brackets, as upstream)::

    API: task resize_prep, migration recorded          [pre-migrating]
    move source allocation instance -> migration
    scheduler: destination claim (reschedule on a failing prep)
    destination prep_resize: claim the devices
    source resize_instance: stop the guest             [migrating,
                                                        post-migrating]
    destination finish_resize: start the guest          [finished]
      -> server VERIFY_RESIZE
    confirm: source frees devices, migration allocation deleted
                                                        [confirmed]
    revert: destination frees, its allocation deleted, source allocation
      moved back to the instance, source starts the guest [reverted]

An evacuation (migration status ``accepted`` -> ``done``) takes the same
path without the source step, since the source compute is down: the
migration holds the source allocation until that compute starts again
and cleans up (``nova.compute.repair.at_start``, status ``completed``);
the server is ACTIVE on the destination at once (SHUTOFF if it was, or if
evacuated at microversion 2.95 or later). A SHUTOFF server stays powered
off through any move, confirm and revert.

Any failure before the server runs on the destination rolls back: what
the destination claimed is freed, the source allocation goes back to the
instance and, if the guest was stopped already, the source starts it
again (powered off if it was SHUTOFF); the server is in its state
before the move on its old devices and the migration
``error``.

Every move starts, and every confirm or revert is taken, through
:func:`start`, :func:`confirm` and :func:`revert`: the Compute API's
REST handlers (``nova.compute.api``) and the conductor's automatic
defragmentation (``nova.conductor.defrag``) share them, so a move the
conductor makes by itself is recorded exactly as one a user asked for.
"""


from collections.abc import Sequence

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_utils import timeutils

from nova import exception
from nova import states
from nova.compute import instance_actions
from nova.compute import rpcapi as compute_rpcapi
from nova.compute import task_states
from nova.compute import vm_states
from nova.conductor import rpcapi as conductor_rpcapi
from nova.db import api as db
from nova.db import records
from nova.pci import request as pci_request
from nova.scheduler.client import report
from nova.scheduler import rpcapi as scheduler_rpcapi
from nova.servicegroup import api as servicegroup
from nova.virt import driver as virt_driver

LOG = logging.getLogger(__name__)

# migration_type -> (action name for errors, task state, first migration
# status), as upstream.
_MOVE_STEPS = {
    'resize': (instance_actions.RESIZE, task_states.RESIZE_PREP,
               states.MIGRATION_PRE_MIGRATING),
    'migration': (instance_actions.MIGRATE, task_states.RESIZE_PREP,
                  states.MIGRATION_PRE_MIGRATING),
    'evacuation': (instance_actions.EVACUATE, task_states.REBUILDING,
                   states.MIGRATION_ACCEPTED),
}


def _hand_over(task_state: str | None) -> dict:
    """Instance values that start a move step: its task state, and the
    move lease handed to whichever conductor takes the step (see
    ``nova.db.api.instance_move_lease_take``); a step nobody takes within
    ``[conductor]build_lease_timeout`` is recovered by a conductor."""
    return {'task_state': task_state, 'build_owner': None,
            'build_heartbeat': timeutils.utcnow()}


# Starting and finishing moves (the Compute API and the automatic
# defragmentation) -----------------------------------------------------------

def start(context, conductor: conductor_rpcapi.ConductorAPI,
          instance: records.Instance,
          migration_type: str, host: str | None = None,
          new_flavor: records.FlavorSnapshot | None = None,
          new_pci_requests: Sequence[pci_request.InstancePCIRequest]
          | None = None,
          values: dict | None = None) -> records.Migration:
    """Mark the server as moving (plus ``values``), record the migration
    (``migration_type`` as upstream: resize, migration, evacuation) and
    hand it to a conductor; return the migration. ``host`` is the
    destination asked for (None: the scheduler chooses); the flavor and
    PCI requests stay the server's unless ``new_flavor`` and
    ``new_pci_requests`` say otherwise (a resize).

    Only an ACTIVE or SHUTOFF server with no task in progress moves, as
    upstream (a SHUTOFF one stays powered off through the move); the
    check and the change are one compare-and-swap, so of two concurrent
    moves (or a move and a delete) exactly one starts.
    InstanceInvalidState otherwise; MigrationFailed (the move undone)
    when no conductor takes it.
    """
    uuid = instance.uuid
    action, task_state, status = _MOVE_STEPS[migration_type]
    if new_flavor is None:
        new_flavor = instance.flavor
    if new_pci_requests is None:
        new_pci_requests = instance.pci_requests
    try:
        db.instance_update(
            context, uuid, dict(values or {}, **_hand_over(task_state)),
            expected={'vm_state': [vm_states.ACTIVE, vm_states.STOPPED],
                      'task_state': None})
    except exception.InstanceUpdateConflict as exc:
        raise exception.InstanceInvalidState(
            action=action, instance_uuid=uuid,
            attr=exc.kwargs['field'], state=exc.kwargs['actual'],
            allowed='vm_state active or stopped with no task in '
                    'progress')
    instance_actions.start(context, uuid, action)
    old_flavor = instance.flavor
    migration = db.migration_create(context, {
        'instance_uuid': uuid,
        'source_compute': instance.host,
        'source_node': instance.node,
        'old_instance_type_id': old_flavor.id if old_flavor else None,
        'new_instance_type_id': new_flavor.id if new_flavor else None,
        'migration_type': migration_type,
        'status': status,
        'project_id': instance.project_id,
        'user_id': instance.user_id,
        'old_flavor': old_flavor,
        'new_flavor': new_flavor,
        'old_pci_requests': instance.pci_requests,
        'new_pci_requests': new_pci_requests,
    })
    try:
        conductor.migrate_server(context, uuid, migration.uuid, host)
    except oslo_messaging.MessagingException as exc:
        db.migration_update(context, migration.uuid, {
            'status': states.failed_migration_status(migration_type)})
        db.instance_update(context, uuid, {'task_state': None})
        raise exception.MigrationFailed(
            instance_uuid=uuid,
            reason='it could not be handed to nova-conductor: %s' % exc)
    LOG.info('Instance %s: %s %s from %s to flavor %s started',
             uuid, migration_type, migration.uuid, instance.host,
             new_flavor.flavorid if new_flavor else None)
    return migration


def _take_finished(context, instance: records.Instance, action: str,
                   status: str) -> records.Migration:
    """Take the finished migration of a VERIFY_RESIZE server for a
    confirm or revert (status ``status``); InstanceInvalidState (409)
    otherwise, also for the loser of a confirm racing a revert."""
    uuid = instance.uuid
    if instance.vm_state != vm_states.RESIZED:
        raise exception.InstanceInvalidState(
            action=action, instance_uuid=uuid, attr='vm_state',
            state=instance.vm_state, allowed=vm_states.RESIZED)
    migrations = db.migration_get_all(
        context, {'instance_uuid': uuid,
                  'status': states.MIGRATION_FINISHED})
    if not migrations:
        raise exception.MigrationNotFound(
            migration_id='(finished migration of instance %s)' % uuid)
    try:
        migration = db.migration_update(context, migrations[0].uuid,
                                        {'status': status},
                                        expected_status=(
                                            states.MIGRATION_FINISHED))
    except exception.MigrationUpdateConflict as exc:
        raise exception.InstanceInvalidState(
            action=action, instance_uuid=uuid, attr='migration status',
            state=exc.kwargs['actual'],
            allowed=states.MIGRATION_FINISHED)
    task_state = (task_states.RESIZE_REVERTING
                  if status == states.MIGRATION_REVERTING else None)
    db.instance_update(context, uuid, _hand_over(task_state))
    instance_actions.start(context, uuid, action)
    return migration


def confirm(context, conductor: conductor_rpcapi.ConductorAPI,
            instance: records.Instance, wait: bool = False) -> None:
    """Confirm the resize or cold migration of a VERIFY_RESIZE server:
    its source is freed. ``wait`` returns only when it is done."""
    migration = _take_finished(context, instance,
                               instance_actions.CONFIRM_RESIZE,
                               states.MIGRATION_CONFIRMING)
    conductor.confirm_resize(context, instance.uuid, migration.uuid,
                             wait=wait)


def revert(context, conductor: conductor_rpcapi.ConductorAPI,
           instance: records.Instance) -> None:
    """Revert the resize or cold migration of a VERIFY_RESIZE server: it
    runs again where it was, with its old flavor and devices."""
    migration = _take_finished(context, instance,
                               instance_actions.REVERT_RESIZE,
                               states.MIGRATION_REVERTING)
    conductor.revert_resize(context, instance.uuid, migration.uuid)


# Driving moves (the conductor's RPC methods) -------------------------------

class MoveTasks:
    """Drives moves; the conductor manager's RPC methods call these."""

    def __init__(self, conf: cfg.ConfigOpts,
                 reportclient: report.SchedulerReportClient,
                 scheduler_api: scheduler_rpcapi.SchedulerAPI,
                 compute_api: compute_rpcapi.ComputeAPI) -> None:
        self.conf = conf
        self.reportclient = reportclient
        self.scheduler_api = scheduler_api
        self.compute_api = compute_api

    # Resize and cold migration ---------------------------------------------

    def migrate_server(self, context, instance_uuid: str,
                       migration_uuid: str,
                       requested_host: str | None) -> str | None:
        """Run a move the API recorded, up to VERIFY_RESIZE or rolled
        back. Never raises: the outcome is in the migration's status, and
        the reason of a failure is returned (None when it finished)."""
        migration = db.migration_get_by_uuid(context, migration_uuid)
        if not _expect(migration, (states.MIGRATION_PRE_MIGRATING,
                                   states.MIGRATION_ACCEPTED)):
            return None
        source = migration.source_compute
        excluded = {source}
        if migration.migration_type == 'resize' and \
                self.conf.allow_resize_to_same_host:
            excluded = set()
        try:
            self.reportclient.move_allocations(
                instance_uuid, migration_uuid,
                report.CONSUMER_TYPE_MIGRATION)
        except exception.NovaException as exc:
            self._roll_back(context, instance_uuid, migration, None, False,
                            'the source allocation could not be moved to '
                            'the migration: %s' % exc.message)
            return exc.message
        dest = None
        stopped = False
        try:
            dest = self._prepare_destination(context, instance_uuid,
                                             migration, excluded,
                                             requested_host)
            # The source of an evacuation is down: nothing to stop there.
            if migration.migration_type != 'evacuation':
                self.compute_api.resize_instance(context, source,
                                                 instance_uuid,
                                                 migration_uuid)
                stopped = True
            self.compute_api.finish_resize(context, dest, instance_uuid,
                                           migration_uuid)
        except Exception as exc:
            reason = exception.reason_of(exc)
            if not isinstance(exc, exception.NoValidHost):
                LOG.exception('Migration %s of instance %s failed',
                              migration_uuid, instance_uuid)
            self._roll_back(context, instance_uuid, migration, dest,
                            stopped, reason)
            return reason
        LOG.info('Instance %s: %s %s finished on %s', instance_uuid,
                 migration.migration_type, migration_uuid, dest)
        return None

    def _prepare_destination(self, context, instance_uuid: str,
                             migration: records.Migration, excluded: set[str],
                             requested_host: str | None) -> str:
        """Schedule and claim a destination whose compute claimed the
        devices; the host. NoValidHost when every try failed."""
        failures = []
        for _attempt in range(self.conf.scheduler.max_attempts):
            try:
                selection = self.scheduler_api.select_destination_for_move(
                    context, instance_uuid, migration.uuid,
                    sorted(excluded), requested_host)
            except exception.NoValidHost as exc:
                if failures:
                    raise exception.NoValidHost(
                        reason='%s. Earlier attempts: %s' % (
                            exc.message, '; '.join(failures)),
                        codes=exc.kwargs['codes'])
                raise
            host = selection.host
            db.migration_update(context, migration.uuid, {
                'dest_compute': host, 'dest_host': host,
                'dest_node': selection.nodename})
            try:
                self.compute_api.prep_resize(
                    context, host, instance_uuid, migration.uuid,
                    selection.pci_providers)
                return host
            except exception.RescheduledException as exc:
                reason = exc.kwargs.get('reason', exc.message)
                LOG.warning('Migration %s: destination %s failed, trying '
                            'another: %s', migration.uuid, host, reason)
                failures.append('%s: %s' % (host, reason))
                excluded.add(host)
                self.reportclient.delete_allocation_for_instance(
                    instance_uuid)
        raise exception.NoValidHost(reason=(
            'every destination tried failed ([scheduler]max_attempts = %d):'
            ' %s' % (self.conf.scheduler.max_attempts, '; '.join(failures))))

    def _roll_back(self, context, instance_uuid: str,
                   migration: records.Migration,
                   dest: str | None, stopped: bool, reason: str) -> None:
        """Undo a move that did not finish: destination freed, source
        allocation back to the instance, guest running on the source."""
        migration_uuid = migration.uuid
        LOG.warning('Migration %s of instance %s failed, rolling back: %s',
                    migration_uuid, instance_uuid, reason)
        try:
            if dest is not None:
                self._undo_destination(context, dest, instance_uuid,
                                       migration_uuid)
            # Only while the migration holds the source: if it does not,
            # the move never started or was rolled back already, and the
            # instance's allocation is the source's.
            if self.reportclient.get_allocations_for_consumer(
                    migration_uuid)['allocations']:
                self.reportclient.delete_allocation_for_instance(
                    instance_uuid)
                self.reportclient.move_allocations(
                    migration_uuid, instance_uuid,
                    report.CONSUMER_TYPE_INSTANCE)
            # Over before the server shows ACTIVE again: the instance is
            # on its source host, which owns what it holds there.
            db.migration_update(context, migration_uuid,
                                {'status': states.failed_migration_status(
                                    migration.migration_type)})
            if stopped:
                self.compute_api.finish_revert_resize(
                    context, migration.source_compute, instance_uuid,
                    migration_uuid)
            else:
                db.instance_update(context, instance_uuid,
                                   {'task_state': None})
        except Exception as exc:
            LOG.exception('Rolling back migration %s of instance %s failed',
                          migration_uuid, instance_uuid)
            db.migration_update(context, migration_uuid,
                                {'status': states.failed_migration_status(
                                    migration.migration_type)})
            self._set_error(context, instance_uuid, 'Migration %s failed '
                            '(%s) and could not be rolled back: %s' % (
                                migration_uuid, reason,
                                exception.reason_of(exc)))

    def _undo_destination(self, context, dest: str, instance_uuid: str,
                          migration_uuid: str) -> None:
        """Have the destination remove the guest and free the devices of
        a move being rolled back. A destination that is down or does not
        answer frees them itself once the move is over: at its restart or
        in its periodic audit the instance is not its (see
        ``nova.compute.repair.release_unowned``)."""
        if not self._is_up(context, dest):
            LOG.warning('Migration %s: destination %s is down; it frees '
                        'what it holds for instance %s when it starts',
                        migration_uuid, dest, instance_uuid)
            return
        try:
            self.compute_api.revert_resize(context, dest, instance_uuid,
                                           migration_uuid)
        except Exception as exc:
            LOG.warning('Migration %s: destination %s did not undo its '
                        'part (%s); its audit or restart frees what it '
                        'holds for instance %s', migration_uuid, dest,
                        exception.reason_of(exc), instance_uuid)

    def recover(self, context, instance_uuid: str,
                migration_uuid: str) -> str | None:
        """Finish or roll back a move whose conductor died: a confirm or
        revert is done again (every step is idempotent), a move that had
        not finished is rolled back (its reason is returned)."""
        migration = db.migration_get_by_uuid(context, migration_uuid)
        status = migration.status
        if status == states.MIGRATION_CONFIRMING:
            return self.confirm_resize(context, instance_uuid,
                                       migration_uuid)
        if status == states.MIGRATION_REVERTING:
            return self.revert_resize(context, instance_uuid, migration_uuid)
        if status in states.MIGRATION_DRIVEN_STATUSES:
            reason = 'its conductor stopped while it was %s' % status
            self._roll_back(
                context, instance_uuid, migration,
                migration.dest_compute,
                status in (states.MIGRATION_MIGRATING,
                           states.MIGRATION_POST_MIGRATING), reason)
            return reason
        return None

    # Confirm and revert ------------------------------------------------------

    def confirm_resize(self, context, instance_uuid: str,
                       migration_uuid: str) -> str | None:
        """Free the source of a finished move (the API set the migration
        ``confirming``); the server is ACTIVE on the destination.

        A source compute that is down frees its devices and guest when
        it starts again (the instance is no longer on it and the move is
        over); the allocation is freed here either way.
        """
        migration = db.migration_get_by_uuid(context, migration_uuid)
        if not _expect(migration, (states.MIGRATION_CONFIRMING,)):
            return None
        source = migration.source_compute
        try:
            if self._is_up(context, source):
                self.compute_api.confirm_resize(context, source,
                                                instance_uuid,
                                                migration_uuid)
            else:
                LOG.warning('Confirming migration %s without its source '
                            'compute %s, which is down; it frees the '
                            'instance\'s devices when it starts',
                            migration_uuid, source)
            self.reportclient.delete_allocation_for_instance(migration_uuid)
        except Exception as exc:
            return self._step_failed(context, instance_uuid, migration_uuid,
                                     'Confirming', exc)
        db.migration_update(context, migration_uuid, {
            'status': states.MIGRATION_CONFIRMED})
        # A server moved while SHUTOFF waits powered off: it stays SHUTOFF
        # (as upstream, by the power state of the destination's guest).
        instance = db.instance_get_by_uuid(context, instance_uuid)
        db.instance_update(context, instance_uuid, {
            'vm_state': vm_states.STOPPED if instance.power_state ==
            virt_driver.SHUTDOWN else vm_states.ACTIVE, 'task_state': None})
        LOG.info('Instance %s: migration %s confirmed', instance_uuid,
                 migration_uuid)
        return None

    def revert_resize(self, context, instance_uuid: str,
                      migration_uuid: str) -> str | None:
        """Put a finished move back (the API set the migration
        ``reverting``): the server runs on its source again with the old
        flavor and devices, which it never let go."""
        migration = db.migration_get_by_uuid(context, migration_uuid)
        if not _expect(migration, (states.MIGRATION_REVERTING,)):
            return None
        try:
            self.compute_api.revert_resize(
                context, migration.dest_compute, instance_uuid,
                migration_uuid)
            self.reportclient.delete_allocation_for_instance(instance_uuid)
            self.reportclient.move_allocations(
                migration_uuid, instance_uuid, report.CONSUMER_TYPE_INSTANCE)
            self.compute_api.finish_revert_resize(
                context, migration.source_compute, instance_uuid,
                migration_uuid)
        except Exception as exc:
            return self._step_failed(context, instance_uuid, migration_uuid,
                                     'Reverting', exc)
        LOG.info('Instance %s: migration %s reverted', instance_uuid,
                 migration_uuid)
        return None

    # Helpers -------------------------------------------------------------

    def _step_failed(self, context, instance_uuid: str, migration_uuid: str,
                     doing: str, exc: Exception) -> str:
        """A confirm or revert that failed half-way: the server goes to
        ERROR and the migration to ``error`` (an operator must look);
        returns the reason."""
        LOG.exception('%s migration %s of instance %s failed', doing,
                      migration_uuid, instance_uuid)
        reason = '%s migration %s failed: %s' % (
            doing, migration_uuid, exception.reason_of(exc))
        self._set_error(context, instance_uuid, reason)
        db.migration_update(context, migration_uuid,
                            {'status': states.MIGRATION_ERROR})
        return reason

    def _is_up(self, context, host: str) -> bool:
        try:
            service = db.service_get_by_host_and_binary(
                context, host, compute_rpcapi.BINARY)
        except exception.ServiceHostBinaryNotFound:
            return False
        return servicegroup.is_up(service, self.conf)

    @staticmethod
    def _set_error(context, instance_uuid: str, message: str) -> None:
        LOG.error('Instance %s: %s', instance_uuid, message)
        try:
            db.instance_update(context, instance_uuid, {
                'vm_state': vm_states.ERROR, 'task_state': None,
                'fault_message': message})
        except exception.InstanceNotFound:
            pass


def _expect(migration: records.Migration, statuses: tuple[str, ...]) -> bool:
    """True if the migration is in one of ``statuses``; a step for a
    move that is past it (a late or replayed message) is logged and
    skipped."""
    if migration.status in statuses:
        return True
    LOG.info('Ignoring a step of migration %s: it is %s, not %s',
             migration.uuid, migration.status, ' or '.join(statuses))
    return False
