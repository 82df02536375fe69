"""Steps shared by the compute API and the compute manager."""

from nova.compute import vm_states
from nova.db import api as db
from nova import exception
from nova.scheduler.client import frees
from nova.virt import driver as virt_driver

# What a server settled running, or stopped, is recorded as: its vm_state
# and the power state of its guest.
SETTLED_ACTIVE = {'vm_state': vm_states.ACTIVE,
                  'power_state': virt_driver.RUNNING}
SETTLED_STOPPED = {'vm_state': vm_states.STOPPED,
                   'power_state': virt_driver.SHUTDOWN}


def free_and_destroy(context, reportclient, instance_uuid: str,
                     host: str | None) -> None:
    """The last step of every delete: free the instance's Placement
    allocation (see ``nova.scheduler.client.frees``; ``host`` is the
    instance's) and mark the instance deleted. An instance already
    deleted is fine.
    """
    frees.free_allocation(context, reportclient, instance_uuid, host)
    try:
        db.instance_destroy(context, instance_uuid)
    except exception.InstanceNotFound:
        pass
