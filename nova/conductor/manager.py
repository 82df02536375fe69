"""The nova-conductor manager: the build workflow of an instance.

For up to ``[scheduler]max_attempts`` hosts: the scheduler picks a host
and claims the allocation; the conductor records the host on the instance
and asks that compute to build it. A compute that fails and has cleaned up
its side raises RescheduledException; the conductor then frees the
allocation, excludes the host and tries again. Any other failure ends the
build: the allocation is freed and the instance goes to ERROR with a fault
naming the reason, so a failed boot holds nothing.
"""

import logging
import traceback

from oslo_config import cfg

from nova.compute import rpcapi as compute_rpcapi
from nova.db import api as db
from nova import manager
from nova import exception
from nova.scheduler.client import report
from nova.scheduler import rpcapi as scheduler_rpcapi

LOG = logging.getLogger(__name__)

BINARY = 'nova-conductor'


class _BuildAborted(Exception):
    """The instance was deleted (or is being deleted) during the build."""


class ConductorManager(manager.Manager):
    """RPC endpoint of the conductor (topic ``conductor``)."""

    def __init__(self, conf: cfg.ConfigOpts,
                 reportclient: report.SchedulerReportClient | None = None
                 ) -> None:
        super().__init__(conf, reportclient)
        self.scheduler_api = scheduler_rpcapi.SchedulerAPI()
        self.compute_api = compute_rpcapi.ComputeAPI()

    def build_instance(self, context, instance_uuid: str) -> None:
        """Schedule and build one instance, rescheduling on host failures.

        Never raises: the outcome is the instance's state (ACTIVE set by
        the compute, or ERROR with ``fault_message`` set here).
        """
        max_attempts = self.conf.scheduler.max_attempts
        excluded: list[str] = []
        failures: list[str] = []    # "host: reason" per reschedule
        try:
            for attempt in range(1, max_attempts + 1):
                try:
                    selection = self.scheduler_api.select_destination(
                        context, instance_uuid, excluded)
                except exception.NoValidHost as exc:
                    self._fail(context, instance_uuid,
                               _with_history(exc.message, failures))
                    return
                host = selection['host']
                self._record_host(context, instance_uuid, selection)
                LOG.info('Building instance %s on %s (attempt %d of %d)',
                         instance_uuid, host, attempt, max_attempts)
                try:
                    self.compute_api.build_and_run_instance(
                        context, host, instance_uuid, selection['mappings'])
                    return
                except exception.RescheduledException as exc:
                    LOG.warning('Build of instance %s failed on %s, '
                                'rescheduling: %s', instance_uuid, host,
                                exc.kwargs.get('reason', exc.message))
                    failures.append('%s: %s' % (
                        host, exc.kwargs.get('reason', exc.message)))
                    excluded.append(host)
                    self._free(instance_uuid)
                    self._clear_host(context, instance_uuid)
            self._fail(context, instance_uuid, _with_history(
                'Build of instance %s failed on every host tried '
                '([scheduler]max_attempts = %d)' % (instance_uuid,
                                                    max_attempts),
                failures))
        except _BuildAborted:
            LOG.info('Instance %s was deleted during its build; allocation '
                     'freed', instance_uuid)
            self._free(instance_uuid)
        except Exception as exc:
            LOG.exception('Build of instance %s failed', instance_uuid)
            self._fail(context, instance_uuid, _with_history(
                'Build of instance %s failed: %s' % (
                    instance_uuid, getattr(exc, 'message', None) or exc),
                failures), details=traceback.format_exc())

    def _record_host(self, context, instance_uuid: str,
                     selection: dict) -> None:
        """Record the chosen host, unless a delete got there first.

        Only while the task state is ``scheduling``: the API sets
        ``deleting`` before it decides who cleans up (see
        ``nova.compute.api.API.delete``).
        """
        try:
            db.instance_update(
                context, instance_uuid,
                {'host': selection['host'], 'node': selection['nodename']},
                expected={'task_state': 'scheduling'})
        except (exception.InstanceNotFound,
                exception.InstanceUpdateConflict) as exc:
            raise _BuildAborted() from exc

    def _clear_host(self, context, instance_uuid: str) -> None:
        """Back to ``scheduling`` on no host, unless being deleted.

        A compare-and-swap on the task state the compute left, so a delete
        arriving meanwhile (``deleting``) is never overwritten.
        """
        try:
            current = db.instance_get_by_uuid(context, instance_uuid)
            if current['task_state'] == 'deleting':
                raise _BuildAborted()
            db.instance_update(
                context, instance_uuid,
                {'host': None, 'node': None, 'task_state': 'scheduling'},
                expected={'task_state': current['task_state']})
        except (exception.InstanceNotFound,
                exception.InstanceUpdateConflict) as exc:
            raise _BuildAborted() from exc

    def _free(self, instance_uuid: str) -> None:
        try:
            self.reportclient.delete_allocation_for_instance(instance_uuid)
        except exception.NovaException:
            # Placement unreachable: nothing else to do from here; say
            # which consumer holds the leftover allocation.
            LOG.exception('Could not delete the allocation of instance %s '
                          'in Placement', instance_uuid)

    def _fail(self, context, instance_uuid: str, message: str,
              details: str | None = None) -> None:
        """Free the allocation and put the instance in ERROR."""
        LOG.error('Instance %s: %s', instance_uuid, message)
        self._free(instance_uuid)
        try:
            db.instance_update(context, instance_uuid, {
                'vm_state': 'error', 'task_state': None,
                'fault_message': message, 'fault_details': details})
        except exception.InstanceNotFound:
            LOG.info('Instance %s was deleted before its failure could be '
                     'recorded', instance_uuid)


def _with_history(message: str, failures: list[str]) -> str:
    """Append the earlier per-host failures to a final fault message."""
    if not failures:
        return message
    return '%s. Earlier attempts: %s' % (message, '; '.join(failures))
