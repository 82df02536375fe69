"""Steps shared by the compute API and the compute manager."""

from nova.compute import vm_states
from nova.db import api as db
from nova.db import records
from nova import exception
from nova.image import glance
from nova.scheduler import frees
from nova.virt import driver as virt_driver

# What a server settled running, or stopped, is recorded as: its vm_state
# and the power state of its guest.
SETTLED_ACTIVE = {'vm_state': vm_states.ACTIVE,
                  'power_state': virt_driver.RUNNING}
SETTLED_STOPPED = {'vm_state': vm_states.STOPPED,
                   'power_state': virt_driver.SHUTDOWN}

# The image reference of a server without an image (``--image none``).
NO_IMAGE = 'none'


def root_disk(instance: records.Instance,
              flavor: records.FlavorSnapshot | None = None
              ) -> virt_driver.RootDisk | None:
    """The root disk of ``instance`` with ``flavor`` (default: its own):
    its image in a disk of the flavor's ``root_gb``, with the properties
    the image had when the server was built; None without an image."""
    image_ref = instance.image_ref or ''
    if image_ref in ('', NO_IMAGE):
        return None
    flavor = flavor if flavor is not None else instance.flavor
    meta = instance.image_meta
    properties = glance.ImageMeta.from_primitive(meta).properties \
        if meta else {}
    return virt_driver.RootDisk(image_ref,
                                flavor.root_gb if flavor else 0,
                                properties=properties)


def free_and_destroy(context, reportclient, instance_uuid: str,
                     host: str | None) -> None:
    """The last step of every delete: free the instance's Placement
    allocation (see ``nova.scheduler.frees``; ``host`` is the
    instance's) and mark the instance deleted. An instance already
    deleted is fine.
    """
    frees.free_allocation(context, reportclient, instance_uuid, host)
    try:
        db.instance_destroy(context, instance_uuid)
    except exception.InstanceNotFound:
        pass
