"""Steps shared by the compute API and the compute manager."""

from oslo_log import log as logging


from nova.db import api as db
from nova import exception

LOG = logging.getLogger(__name__)


def free_allocation(reportclient, instance_uuid: str) -> None:
    """Free the instance's Placement allocation, for a delete or an
    offload.

    Placement being unreachable does not stop the caller half-way: the
    allocation is left to the allocation audit (``nova.compute.audit``),
    which removes allocations of deleted and offloaded instances.
    """
    try:
        reportclient.delete_allocation_for_instance(instance_uuid)
    except exception.NovaException as exc:
        LOG.warning('Could not delete the allocation of instance %s in '
                    'Placement (%s); the allocation audit removes it later',
                    instance_uuid, exc)


def free_and_destroy(context, reportclient, instance_uuid: str) -> None:
    """The last step of every delete: free the instance's Placement
    allocation (see ``free_allocation``) and mark the instance deleted.
    An instance already deleted is fine.
    """
    free_allocation(reportclient, instance_uuid)
    try:
        db.instance_destroy(context, instance_uuid)
    except exception.InstanceNotFound:
        pass
