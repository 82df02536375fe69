"""The nova-conductor manager: the build workflow of an instance, and
the unshelve of an offloaded one, which is the same workflow (the server
waits in ``unshelving`` instead of ``scheduling``, and a failure leaves it
SHELVED_OFFLOADED instead of ERROR).

For up to ``[scheduler]max_attempts`` hosts: the scheduler picks a host
and claims the allocation; the conductor records the host on the instance
and asks that compute to build it. A compute that fails and has cleaned up
its side raises RescheduledException; the conductor then frees the
allocation, excludes the host (unless the compute says ``same_host``: it
withheld the devices that failed, e.g. a quarantined NVLink partition,
and may have others) and tries again. A compute that refuses the guest
itself (BuildAbortException: its domain could not work, so every host
would refuse it) ends the build at once, as any other failure ends the
build: the allocation is freed and the instance goes to ERROR with a fault
naming the reason, so a failed boot holds nothing.

A build the scheduler refused for fragmentation alone, when
``[scheduler]defrag_max_moves`` allows moves, does not wait for them in
its thread: it stays ``scheduling`` under its lease while a task of its
own moves other servers (``nova.conductor.defrag``) and then drives the
build again, once, as a re-driven build.

Builds survive crashes through a **build lease** on the instance row
(``build_owner``, ``build_heartbeat``):

* The conductor that receives ``build_instance`` takes the lease with a
  compare-and-swap; a replayed request, or one for a build another
  conductor drives, finds the lease taken and is ignored.
* While it drives builds, a conductor renews their heartbeats every third
  of ``[conductor]build_lease_timeout``.
* Every conductor (at start and then periodically) looks for builds still
  in ``scheduling`` whose lease expired, or that nobody ever took (nova-api
  died between recording the instance and handing it over). It takes each
  with the same compare-and-swap, so with several conductors exactly one
  re-drives a build; it frees whatever an earlier attempt claimed and
  schedules again. A build a compute is already spawning is the compute's
  until it answers: on failure, or when a restarted compute finds it half
  built, the compute tears it down and hands it back (``scheduling``, no
  host) for its conductor or, if that one is gone, the next one. A
  compute that does not answer before it started spawning is rescheduled
  away from: it spawns only while it is the instance's recorded host.
* Unshelves take the lease the same way and are re-driven the same way
  (nova-api stamps ``build_heartbeat`` when it accepts one, so an
  unshelve nobody took is orphaned that long after it was accepted).
* Every write a conductor makes during a build is fenced by its lease
  (``expected build_owner``). A conductor that lost its lease stops and
  frees nothing: the allocation belongs to the new owner.

Scheduler answers and RPC timeouts cannot leak a claim: the conductor
tells the scheduler which owner asks. The scheduler claims only for a
build still in ``scheduling`` under that owner and checks again once the
claim is made; if meanwhile the build failed, was deleted or is being
deleted, the scheduler gives its claim back itself (nothing else claims
for such an instance, so it can only free its own claim). A conductor that
times out waiting for the scheduler first marks the instance ERROR and
then frees, so a claim made before that is freed by the conductor and one
made after it is given back by the scheduler. If the build was taken over
meanwhile, the late claim is left alone: the new owner frees before it
schedules, or its own claim is refused and it fails the build, freeing.
"""

import collections
import contextlib
import datetime
import threading
import traceback

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_utils import timeutils
from oslo_utils import uuidutils

from nova.compute import instance_actions
from nova.compute import rpcapi as compute_rpcapi
from nova.compute import task_states
from nova.compute import vm_states
from nova.conductor import defrag
from nova.conductor import migrate
from nova.conductor import rpcapi as conductor_rpcapi
from nova import context as nova_context
from nova.db import api as db
from nova.db import records
from nova import manager
from nova import exception
from nova import rpc
from nova.scheduler import frees
from nova.scheduler.client import report
from nova.scheduler import rpcapi as scheduler_rpcapi

LOG = logging.getLogger(__name__)

BINARY = 'nova-conductor'


class _BuildAborted(Exception):
    """The instance was deleted (or is being deleted) during the build."""


class _LeaseLost(Exception):
    """Another conductor took the build over; this one must stop."""


class ConductorManager(manager.Manager):
    """RPC endpoint of the conductor (topic ``conductor``)."""

    binary = BINARY
    topic = 'conductor'
    # The RPC API version served (history: nova.conductor.rpcapi).
    target = rpc.endpoint_target(conductor_rpcapi.VERSION)

    def __init__(self, conf: cfg.ConfigOpts,
                 reportclient: report.SchedulerReportClient | None = None
                 ) -> None:
        super().__init__(conf)
        # Frees allocations of failed builds and moves them for migrations.
        self.reportclient = report.client_for(conf, reportclient)
        self.scheduler_api = scheduler_rpcapi.SchedulerAPI(conf)
        self.compute_api = compute_rpcapi.ComputeAPI(conf)
        # Unique per process: a restarted conductor does not inherit the
        # leases of its previous life, it re-drives them once expired.
        self.owner = '%s:%s' % (conf.host, uuidutils.generate_uuid())
        # Builds (and moves) this process drives, with how many of its
        # threads hold each: a build handed to its defragmentation task
        # stays held across the hand-over.
        self._builds: collections.Counter[str] = collections.Counter()
        self._builds_lock = threading.Lock()
        self.moves = migrate.MoveTasks(conf, self.reportclient,
                                       self.scheduler_api, self.compute_api)
        self.defrag = defrag.AutoDefrag(conf)

    # Leases -----------------------------------------------------------------

    def init_host(self) -> None:
        """Re-drive builds and recover moves orphaned while no conductor
        was running."""
        self.redrive_orphaned_builds()
        self.recover_orphaned_moves()

    def periodic_tasks(self) -> list:
        interval = self.conf.conductor.build_lease_timeout / 3.0
        return [('renew_build_leases', self.renew_build_leases, interval),
                ('redrive_orphaned_builds', self.redrive_orphaned_builds,
                 interval),
                ('recover_orphaned_moves', self.recover_orphaned_moves,
                 interval)]

    def _stale_before(self) -> datetime.datetime:
        return timeutils.utcnow() - datetime.timedelta(
            seconds=self.conf.conductor.build_lease_timeout)

    def renew_build_leases(self) -> None:
        """Periodic task: tell other conductors our builds are alive."""
        with self._builds_lock:
            builds = set(self._builds)
        db.instance_build_lease_renew(nova_context.get_admin_context(),
                                      self.owner, builds)

    def redrive_orphaned_builds(self) -> list[threading.Thread]:
        """Take over every build whose lease expired and drive it again,
        each in its own thread (returned, for callers that wait)."""
        context = nova_context.get_admin_context()
        stale_before = self._stale_before()
        threads = []
        for uuid in db.instance_get_orphaned_builds(context, stale_before):
            if not db.instance_build_lease_take(context, uuid, self.owner,
                                                stale_before):
                continue    # another conductor was quicker
            LOG.warning('Instance %s: its build had no live conductor for '
                        '%ss; freeing what it held and scheduling it again',
                        uuid, self.conf.conductor.build_lease_timeout)
            waiting = task_states.WAITING_FOR_HOST[
                db.instance_get_by_uuid(context, uuid).vm_state]
            thread = threading.Thread(
                target=self._drive, args=(context, uuid, True, waiting),
                name='redrive-%s' % uuid, daemon=True)
            thread.start()
            threads.append(thread)
        return threads

    def build_instance(self, context, instance_uuid: str) -> None:
        """Schedule and build one instance, rescheduling on host failures.

        Never raises: the outcome is the instance's state (ACTIVE set by
        the compute, or ERROR with ``fault_message`` set here). A request
        for a build that is driven already, or no longer waits for a
        host, is ignored.
        """
        if self._take_new_lease(context, instance_uuid, 'build',
                                'scheduled'):
            self._drive(context, instance_uuid, False)

    def _take_new_lease(self, context, instance_uuid: str, request: str,
                        waiting_to_be: str) -> bool:
        """Take the lease of a build or unshelve this conductor was asked
        to drive; False (logged) if another conductor drives it or it no
        longer waits."""
        if db.instance_build_lease_take(context, instance_uuid, self.owner,
                                        self._stale_before(),
                                        any_unowned=True):
            return True
        LOG.info('Ignoring the %s request of instance %s: it is driven by '
                 'another conductor or no longer waits to be %s', request,
                 instance_uuid, waiting_to_be)
        return False

    def unshelve_instance(self, context, instance_uuid: str) -> None:
        """Schedule a SHELVED_OFFLOADED server (``unshelving``) again and
        start it, exactly as a build: the flavor's request, the scheduler's
        claim, reschedules on compute failures, all under a build lease.

        Never raises. On failure (e.g. no valid host) the server is
        SHELVED_OFFLOADED again with no task state and nothing held, the
        reason in ``fault_message`` and in the unshelve action's events.
        """
        if not self._take_new_lease(context, instance_uuid, 'unshelve',
                                    'unshelved'):
            return
        with instance_actions.step(context, instance_uuid,
                                   'conductor_unshelve_instance') as step:
            failure = self._drive(context, instance_uuid, False,
                                  task_states.UNSHELVING)
            if failure is not None:
                step.fail(failure)

    # Moves (nova.conductor.migrate) ------------------------------------------
    #
    # A conductor drives a move under the instance's lease (the build lease
    # columns, renewed like a build's), so when it dies mid-move another
    # conductor takes the move over and finishes or rolls it back.

    def _hold(self, instance_uuid: str) -> None:
        """Renew the instance's lease until as many :meth:`_release`."""
        with self._builds_lock:
            self._builds[instance_uuid] += 1

    def _release(self, instance_uuid: str) -> None:
        with self._builds_lock:
            self._builds[instance_uuid] -= 1
            if self._builds[instance_uuid] <= 0:
                del self._builds[instance_uuid]

    @contextlib.contextmanager
    def _driving(self, instance_uuid: str):
        """Renew the instance's lease while the block runs."""
        self._hold(instance_uuid)
        try:
            yield
        finally:
            self._release(instance_uuid)

    def _drive_move(self, context, instance_uuid: str, step, *args,
                    taken: bool = False) -> None:
        """Run one move step under the instance's lease, recorded as a
        step of the instance action that asked for it (failed when the
        step returns a reason); a step whose lease another conductor
        holds (a late or replayed message, or a move taken over) is
        ignored."""
        # A takeover runs in a thread of its own: its logs and Placement
        # requests carry this context's ids too.
        context.update_store()
        if not taken and not db.instance_move_lease_take(
                context, instance_uuid, self.owner, self._stale_before()):
            LOG.info('Ignoring %s of instance %s: another conductor drives '
                     'its move', step.__name__, instance_uuid)
            return
        with self._driving(instance_uuid), instance_actions.step(
                context, instance_uuid,
                'conductor_%s' % step.__name__) as record:
            failure = step(context, instance_uuid, *args)
            if failure is not None:
                record.fail(failure)

    def migrate_server(self, context, instance_uuid: str,
                       migration_uuid: str,
                       requested_host: str | None) -> None:
        """Resize, cold-migrate or evacuate an instance (a cast from the
        API)."""
        self._drive_move(context, instance_uuid, self.moves.migrate_server,
                         migration_uuid, requested_host)

    def confirm_resize(self, context, instance_uuid: str,
                       migration_uuid: str) -> None:
        """Confirm a finished resize or cold migration."""
        self._drive_move(context, instance_uuid, self.moves.confirm_resize,
                         migration_uuid)

    def revert_resize(self, context, instance_uuid: str,
                      migration_uuid: str) -> None:
        """Revert a finished resize or cold migration."""
        self._drive_move(context, instance_uuid, self.moves.revert_resize,
                         migration_uuid)

    def recover_orphaned_moves(self) -> list[threading.Thread]:
        """Take over every move whose conductor died (its lease expired)
        and finish or roll it back, each in its own thread (returned)."""
        context = nova_context.get_admin_context()
        stale_before = self._stale_before()
        threads = []
        for migration in db.migration_get_orphaned(context, stale_before):
            uuid = migration.instance_uuid
            if not db.instance_move_lease_take(context, uuid, self.owner,
                                               stale_before):
                continue    # another conductor was quicker
            LOG.warning('Instance %s: its %s %s (%s) had no live conductor '
                        'for %ss; recovering it', uuid,
                        migration.migration_type, migration.uuid,
                        migration.status,
                        self.conf.conductor.build_lease_timeout)
            thread = threading.Thread(
                target=self._drive_move,
                args=(context, uuid, self.moves.recover, migration.uuid),
                kwargs={'taken': True},
                name='recover-%s' % migration.uuid, daemon=True)
            thread.start()
            threads.append(thread)
        return threads

    def _drive(self, context, instance_uuid: str, takeover: bool,
               waiting: str = task_states.SCHEDULING,
               defragment: bool = True) -> str | None:
        """Run a build whose lease this conductor holds; the instance
        waits for a host in task state ``waiting``. With ``defragment``,
        a refusal moving servers can serve hands the build to
        :meth:`_defragment`. Returns the fault message if the build
        failed."""
        context.update_store()    # see _drive_move
        with self._driving(instance_uuid):
            if takeover:
                # What the previous owner's scheduler may have claimed.
                self._free(context, instance_uuid)
            return self._build(context, instance_uuid, waiting, defragment)

    # Automatic defragmentation ([scheduler]defrag_max_moves) ----------------
    #
    # Moving other servers takes minutes, so it never runs in a build's
    # thread: the build goes back to waiting for a host (still
    # ``scheduling`` under this conductor's lease, renewed), the moves run
    # as a task of their own (recorded as the build's
    # ``conductor_defragment`` step) and then drive the build again. If
    # this conductor dies meanwhile, its lease expires and another
    # conductor re-drives the build as any orphaned one; the moves made
    # or in flight are ordinary migrations, recovered as such.

    def _defragment(self, context, instance_uuid: str, codes: list[str],
                    waiting: str) -> None:
        """Start the moves that free a group for the refused build
        (refusal ``codes``) in a thread of their own; return at once."""
        LOG.info('Instance %s: refused for fragmentation; it waits while '
                 'servers move to free a group for it', instance_uuid)
        self._hold(instance_uuid)    # across the hand-over to the thread
        thread = threading.Thread(
            target=self._defragment_then_build,
            args=(context, instance_uuid, codes, waiting),
            name='defrag-%s' % instance_uuid, daemon=True)
        try:
            thread.start()
        except BaseException:
            self._release(instance_uuid)
            raise

    def _defragment_then_build(self, context, instance_uuid: str,
                               codes: list[str], waiting: str) -> None:
        """Move servers for the build, then drive it again (once, with no
        further moves: a refusal now fails it as any other)."""
        context.update_store()    # see _drive_move
        try:
            with instance_actions.step(context, instance_uuid,
                                       'conductor_defragment') as step:
                try:
                    self.defrag.free_for(context, instance_uuid, codes)
                except Exception:
                    # The build is scheduled again all the same: it fails
                    # with the scheduler's reason if nothing was freed.
                    LOG.exception('Instance %s: moving servers to free a '
                                  'group for it failed', instance_uuid)
                failure = self._drive(context, instance_uuid, False, waiting,
                                      defragment=False)
                if failure is not None:
                    step.fail(failure)
        finally:
            self._release(instance_uuid)

    # The build --------------------------------------------------------------

    def _build(self, context, instance_uuid: str, waiting: str,
               defragment: bool) -> str | None:
        max_attempts = self.conf.scheduler.max_attempts
        excluded: list[str] = []
        failures: list[str] = []    # "host: reason" per reschedule
        try:
            for attempt in range(1, max_attempts + 1):
                try:
                    selection = self.scheduler_api.select_destination(
                        context, instance_uuid, excluded, self.owner)
                except exception.NoValidHost as exc:
                    codes = exc.kwargs['codes']
                    if defragment and attempt == 1 and self.defrag.wants(
                            context, instance_uuid, codes) is not None:
                        self._defragment(context, instance_uuid, codes,
                                         waiting)
                        return None
                    return self._fail(context, instance_uuid,
                                      _with_history(exc.message, failures),
                                      waiting=waiting)
                except exception.BuildLeaseLost as exc:
                    raise _LeaseLost() from exc
                host = selection.host
                self._record_host(context, instance_uuid, selection,
                                  waiting)
                LOG.info('Building instance %s on %s (attempt %d of %d)',
                         instance_uuid, host, attempt, max_attempts)
                try:
                    self._call_compute(context, host, instance_uuid,
                                       selection.pci_providers, waiting)
                    return None
                except exception.BuildAbortException as exc:
                    return self._fail(context, instance_uuid, _with_history(
                        exc.message, failures), waiting=waiting)
                except exception.RescheduledException as exc:
                    LOG.warning('Build of instance %s failed on %s, '
                                'rescheduling: %s', instance_uuid, host,
                                exc.kwargs.get('reason', exc.message))
                    failures.append('%s: %s' % (
                        host, exc.kwargs.get('reason', exc.message)))
                    # A compute that took the failed devices out of its
                    # offer may still have other free groups.
                    if not exc.kwargs.get('same_host'):
                        excluded.append(host)
                    # Lease checked first: a conductor that lost the
                    # build must not free the new owner's claim.
                    self._clear_host(context, instance_uuid, waiting)
                    self._free(context, instance_uuid)
            return self._fail(context, instance_uuid, _with_history(
                'Build of instance %s failed on every host tried '
                '([scheduler]max_attempts = %d)' % (instance_uuid,
                                                    max_attempts),
                failures), waiting=waiting)
        except _LeaseLost:
            LOG.warning('Instance %s: another conductor took its build '
                        'over; %s stops driving it', instance_uuid,
                        self.owner)
        except _BuildAborted:
            LOG.info('Instance %s was deleted (or its unshelve rolled '
                     'back) during its build; allocation freed',
                     instance_uuid)
            self._free(context, instance_uuid)
        except Exception as exc:
            LOG.exception('Build of instance %s failed', instance_uuid)
            return self._fail(context, instance_uuid, _with_history(
                'Build of instance %s failed: %s' % (
                    instance_uuid, exception.reason_of(exc)),
                failures), details=traceback.format_exc(), waiting=waiting)
        return None

    def _call_compute(self, context, host: str, instance_uuid: str,
                      pci_providers: dict[str, list[str]],
                      waiting: str) -> None:
        """Build on ``host``; a compute that stopped answering before it
        started spawning (or that handed the build back when it
        restarted) counts as a reschedule."""
        try:
            self.compute_api.build_and_run_instance(
                context, host, instance_uuid, pci_providers)
        except oslo_messaging.MessagingTimeout as exc:
            # Still 'scheduling': nothing runs there, and a compute that
            # answers late cannot start it any more once the host is
            # cleared (it spawns only while it is the recorded host).
            current = db.instance_get_by_uuid(context, instance_uuid)
            if current.task_state != waiting or \
                    current.build_owner != self.owner:
                raise
            raise exception.RescheduledException(
                instance_uuid=instance_uuid,
                reason='the compute did not answer (%s) before it started '
                       'spawning' % exc) from exc

    def _update(self, context, instance_uuid: str, values: dict,
                expected: dict) -> records.Instance:
        """Update the instance while this conductor holds its lease.

        _LeaseLost if another conductor owns the build now, _BuildAborted
        if it is gone or another expected value differs (a delete).
        """
        try:
            return db.instance_update(
                context, instance_uuid, values,
                expected={'build_owner': self.owner, **expected})
        except exception.InstanceUpdateConflict as exc:
            if exc.kwargs.get('field') == 'build_owner':
                raise _LeaseLost() from exc
            raise _BuildAborted() from exc
        except exception.InstanceNotFound as exc:
            raise _BuildAborted() from exc

    def _record_host(self, context, instance_uuid: str,
                     selection: scheduler_rpcapi.Selection,
                     waiting: str) -> None:
        """Record the chosen host, unless a delete got there first.

        Only while the task state is ``scheduling``: the API sets
        ``deleting`` before it decides who cleans up (see
        ``nova.compute.api.API.delete``).
        """
        self._update(
            context, instance_uuid,
            {'host': selection.host, 'node': selection.nodename},
            {'task_state': waiting})

    def _clear_host(self, context, instance_uuid: str,
                    waiting: str) -> None:
        """Back to waiting for a host, unless being deleted or rolled
        back.

        A compare-and-swap on the task state the compute left, so a delete
        arriving meanwhile (``deleting``) is never overwritten.
        """
        try:
            current = db.instance_get_by_uuid(context, instance_uuid)
        except exception.InstanceNotFound as exc:
            raise _BuildAborted() from exc
        if current.task_state not in (waiting, task_states.SPAWNING):
            # Being deleted, or rolled back by a restarted compute (an
            # unshelve it was spawning): nothing left to drive.
            raise _BuildAborted()
        self._update(context, instance_uuid,
                     {'host': None, 'node': None,
                      'task_state': waiting},
                     {'task_state': current.task_state})

    def _free(self, context, instance_uuid: str) -> None:
        """Give the build's claim back (``nova.scheduler.frees``:
        pending for any compute to retry if Placement is away; the retry
        spares an instance scheduled again)."""
        frees.free_allocation(context, self.reportclient, instance_uuid,
                              None)

    def _fail(self, context, instance_uuid: str, message: str,
              details: str | None = None,
              waiting: str = task_states.SCHEDULING) -> str:
        """Put a build in ERROR (an unshelve back to SHELVED_OFFLOADED
        with no task state), then free the allocation; return
        ``message``.

        In this order: a scheduler claim that lands after the failure is
        given back by the scheduler, one before it is freed here. Nothing
        is freed if another conductor took the build over.
        """
        LOG.error('Instance %s: %s', instance_uuid, message)
        values = {'task_state': None, 'fault_message': message,
                  'fault_details': details}
        if waiting == task_states.SCHEDULING:
            values['vm_state'] = vm_states.ERROR
        else:
            values.update(host=None, node=None)
        try:
            db.instance_update(context, instance_uuid, values,
                               expected={'build_owner': self.owner})
        except exception.InstanceUpdateConflict:
            LOG.warning('Instance %s: another conductor took its build '
                        'over; leaving the failure to it', instance_uuid)
            return message
        except exception.InstanceNotFound:
            LOG.info('Instance %s was deleted before its failure could be '
                     'recorded', instance_uuid)
        self._free(context, instance_uuid)
        return message


def _with_history(message: str, failures: list[str]) -> str:
    """Append the earlier per-host failures to a final fault message."""
    if not failures:
        return message
    return '%s. Earlier attempts: %s' % (message, '; '.join(failures))
