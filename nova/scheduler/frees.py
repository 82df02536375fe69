"""Freeing a consumer's Placement allocation when its claim ends.

The one policy every service follows when an instance gives its
allocation back (a delete, an offload, a failed or abandoned build, a
claim that came too late): try to delete it now; if Placement does not
answer, record the free as pending (a ``pending_frees`` row, so it
survives restarts) and never stop the caller half-way. The compute of
the recorded host (any compute for a row without a host) retries the
pending frees at its next resource update; the allocation audit
(``nova.compute.audit``) stays the safety net.

A retry deletes an allocation only while the instance still owns
nothing (deleted, offloaded and not being unshelved, or a build that
failed without a host) and only at the consumer generation it read
before that check, so a claim made for the instance in between (an
unshelve) is never deleted: its write moved the generation on, and the
guarded delete is refused.

Moves are not frees: the allocation steps of a migration raise, and the
move rolls back (``nova.conductor.migrate``).

The pending frees are a database-backed queue, so this policy lives with
the scheduler, whose claims the allocations are, and not in the
Placement client (``nova.scheduler.client``), which only talks to
Placement. The compute and the conductor import it as a shared module.
"""

from oslo_log import log as logging

from nova.db import api as db
from nova import exception
from nova import states

LOG = logging.getLogger(__name__)


def free_allocation(context, reportclient, instance_uuid: str,
                    host: str | None) -> bool:
    """Free the instance's allocation; True once it is gone.

    ``host`` is the compute that retries the free if Placement does not
    answer now (None: any compute). Never raises for Placement.
    """
    try:
        reportclient.delete_allocation_for_instance(instance_uuid)
    except exception.NovaException as exc:
        LOG.warning('Could not delete the allocation of instance %s in '
                    'Placement (%s); freed when Placement answers again',
                    instance_uuid, exc)
        db.pending_free_add(context, instance_uuid, host)
        return False
    return True


def retry_pending_frees(context, reportclient, host: str) -> list[str]:
    """Delete the allocations whose free is pending on ``host`` (and
    those recorded without a host); returns the consumers freed. Stops
    at the first Placement failure: it is still away, the next call
    tries again."""
    freed = []
    for pending in db.pending_free_get_all(context, host,
                                           with_unhosted=True):
        consumer = pending['consumer_uuid']
        try:
            current = reportclient.get_allocations_for_consumer(consumer)
            if not current['allocations']:
                db.pending_free_delete(context, consumer)
                continue
            # Read before the check: a claim after it moves the
            # generation on and the guarded delete below is refused.
            if not _released(context, consumer):
                LOG.info('Pending allocation free of %s dropped: it was '
                         'scheduled again', consumer)
                db.pending_free_delete(context, consumer)
                continue
            if not reportclient.delete_allocation_at_generation(
                    consumer, current):
                LOG.info('Pending allocation free of %s waits: its '
                         'allocation changed since it was read', consumer)
                continue
        except exception.NovaException as exc:
            LOG.info('Pending allocation frees on %s wait for Placement: '
                     '%s', host, exc)
            break
        db.pending_free_delete(context, consumer)
        freed.append(consumer)
    if freed:
        LOG.info('Freed the allocations of %s in Placement (pending since '
                 'Placement did not answer)', ', '.join(freed))
    return freed


def _released(context, consumer: str) -> bool:
    """Whether ``consumer`` owns nothing in Placement now: its instance
    is deleted, offloaded and not being unshelved, or its build failed
    and it has no host."""
    try:
        instance = db.instance_get_by_uuid(context, consumer)
    except exception.InstanceNotFound:
        return True
    if instance.task_state is not None:
        return False
    if instance.vm_state == states.SHELVED_OFFLOADED:
        return True
    return instance.vm_state == states.ERROR and \
        instance.host is None
