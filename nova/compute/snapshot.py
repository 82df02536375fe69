"""createImage on the compute: the guest's root disk, flattened to one
qcow2 file by the virt driver, uploaded to Glance as the data of the
image nova-api created (queued) for it.

The copy is written under ``$instances_path/snapshots`` and removed once
uploaded; if anything fails the queued image is deleted again, so a
failed snapshot leaves no image behind (as upstream).
"""

import os
import tempfile

from oslo_log import log as logging

from nova import exception
from nova.image import glance
from nova.virt import driver as virt_driver

LOG = logging.getLogger(__name__)

SUBDIRECTORY = 'snapshots'


def upload(driver: virt_driver.ComputeDriver, client: glance.GlanceClient,
           instances_path: str, instance_uuid: str, image_id: str) -> None:
    """Snapshot the guest of ``instance_uuid`` into the queued image
    ``image_id``; the image is deleted if that fails."""
    directory = os.path.join(instances_path, SUBDIRECTORY)
    os.makedirs(directory, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            path = os.path.join(tmp, 'disk.qcow2')
            driver.snapshot(instance_uuid, path)
            client.upload(image_id, path)
    except Exception as err:
        LOG.error('Snapshot of instance %s into image %s failed: %s',
                  instance_uuid, image_id, exception.reason_of(err))
        try:
            client.delete(image_id)
        except exception.NovaException as delete_err:
            LOG.warning('Image %s of the failed snapshot could not be '
                        'deleted: %s', image_id, delete_err.message)
        raise
    LOG.info('Instance %s snapshot uploaded as image %s', instance_uuid,
             image_id)
