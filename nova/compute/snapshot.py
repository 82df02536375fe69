"""createImage on the compute: the guest's root disk, flattened to one
qcow2 file by the virt driver, uploaded to Glance as the data of the
image nova-api created (queued) for it.

The copy is written under ``$instances_path/snapshots`` and removed once
uploaded; if anything fails the queued image is deleted again, so a
failed snapshot leaves no image behind (as upstream). A backup
(createBackup) is such a snapshot, after which :func:`rotate` keeps the
newest backups of its type.
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


def rotate(client: glance.GlanceClient, instance_uuid: str,
           backup_type: str, rotation: int) -> list[str]:
    """Delete the backups of ``instance_uuid`` of ``backup_type`` beyond
    the newest ``rotation`` (all of them for 0, as upstream); the ids
    deleted. A backup that cannot be deleted is logged and kept."""
    backups = client.list(instance_uuid=instance_uuid, image_type='backup',
                          backup_type=backup_type, sort_key='created_at',
                          sort_dir='desc', limit='1000')
    deleted = []
    for image in backups[rotation:]:
        try:
            client.delete(image.id)
        except exception.NovaException as err:
            LOG.warning('Backup %s of instance %s beyond the rotation of '
                        '%d could not be deleted: %s', image.id,
                        instance_uuid, rotation, err.message)
            continue
        deleted.append(image.id)
    if deleted:
        LOG.info('Instance %s: backups %s rotated out (%s, keeping %d)',
                 instance_uuid, ', '.join(deleted), backup_type, rotation)
    return deleted
