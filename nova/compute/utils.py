"""Steps shared by the compute API and the compute manager."""

from oslo_log import log as logging


from nova.compute import vm_states
from nova.db import api as db
from nova import exception
from nova.virt import driver as virt_driver

LOG = logging.getLogger(__name__)

# What a server settled running, or stopped, is recorded as: its vm_state
# and the power state of its guest.
SETTLED_ACTIVE = {'vm_state': vm_states.ACTIVE,
                  'power_state': virt_driver.RUNNING}
SETTLED_STOPPED = {'vm_state': vm_states.STOPPED,
                   'power_state': virt_driver.SHUTDOWN}

# The image reference of a server without an image (``--image none``).
NO_IMAGE = 'none'


def root_disk(instance: dict,
              flavor: dict | None = None) -> virt_driver.RootDisk | None:
    """The root disk of ``instance`` with ``flavor`` (default: its own):
    its image in a disk of the flavor's ``root_gb``; None without an
    image."""
    image_ref = instance.get('image_ref') or ''
    if image_ref in ('', NO_IMAGE):
        return None
    flavor = flavor if flavor is not None else instance['flavor']
    return virt_driver.RootDisk(image_ref, int(flavor.get('root_gb') or 0))


def free_allocation(context, reportclient, instance_uuid: str,
                    host: str | None) -> None:
    """Free the instance's Placement allocation, for a delete or an
    offload.

    Placement being unreachable does not stop the caller half-way: the
    free is recorded as pending (a DB row, so it survives restarts) and
    the compute of ``host`` retries it at its next resource update once
    Placement answers (see ``retry_pending_frees``); the allocation audit
    (``nova.compute.audit``) stays the safety net.
    """
    try:
        reportclient.delete_allocation_for_instance(instance_uuid)
    except exception.NovaException as exc:
        LOG.warning('Could not delete the allocation of instance %s in '
                    'Placement (%s); freed when Placement answers again',
                    instance_uuid, exc)
        db.pending_free_add(context, instance_uuid, host)


def retry_pending_frees(context, reportclient, host: str) -> list[str]:
    """Delete the allocations whose free is pending on ``host`` (and
    those recorded without a host); returns the consumers freed. Stops
    at the first failure: Placement is still away, the next call tries
    again."""
    freed = []
    for pending in db.pending_free_get_all(context, host,
                                           with_unhosted=True):
        consumer = pending['consumer_uuid']
        if not _released(context, consumer):
            # Unshelved since: its allocation now is the new claim's.
            LOG.info('Pending allocation free of %s dropped: it was '
                     'scheduled again', consumer)
            db.pending_free_delete(context, consumer)
            continue
        try:
            reportclient.delete_allocation_for_instance(consumer)
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
    """Whether ``consumer`` still owns nothing in Placement: its instance
    is deleted, or offloaded and not being unshelved."""
    try:
        instance = db.instance_get_by_uuid(context, consumer)
    except exception.InstanceNotFound:
        return True
    return instance['vm_state'] == vm_states.SHELVED_OFFLOADED and \
        instance['task_state'] is None


def free_and_destroy(context, reportclient, instance_uuid: str,
                     host: str | None) -> None:
    """The last step of every delete: free the instance's Placement
    allocation (see ``free_allocation``; ``host`` is the instance's) and
    mark the instance deleted. An instance already deleted is fine.
    """
    free_allocation(context, reportclient, instance_uuid, host)
    try:
        db.instance_destroy(context, instance_uuid)
    except exception.InstanceNotFound:
        pass
