"""Client side of the nova-compute RPC API (topic ``compute``, server =
the compute host name).

API versions (the ComputeManager serves VERSION; each method is sent at
the version that introduced it, see nova.rpc):

* 1.0: build_and_run_instance, terminate_instance
* 1.1: reboot_instance, stop_instance, start_instance, rebuild_instance,
  shelve_instance, shelve_offload_instance, unshelve_instance
* 1.2: prep_resize, resize_instance, finish_resize, confirm_resize,
  revert_resize, finish_revert_resize
* 1.3: build_and_run_instance and prep_resize take the scheduler's
  per-PCI-request providers as ``pci_providers`` (``mappings`` before,
  which the manager still accepts); under an ``[upgrade_levels]compute``
  cap below 1.3 they are sent in their older form.
* 1.4: get_console_output; under a cap below 1.4 it is refused (409,
  RPCVersionCapped) as no older compute can answer it.
* 1.5: snapshot_instance (createImage); refused likewise below 1.5.
* 1.6: backup_instance (createBackup); refused likewise below 1.6.
"""

from oslo_config import cfg

import nova.conf
from nova import rpc

TOPIC = 'compute'
VERSION = '1.6'
_ACTIONS = '1.1'
_MOVES = '1.2'
# The version that names the scheduler's PCI providers ``pci_providers``.
_PCI_PROVIDERS = '1.3'
_CONSOLE = '1.4'
_SNAPSHOT = '1.5'
_BACKUP = '1.6'
# The services row of a compute (liveness) is under this binary name.
BINARY = 'nova-compute'
# A build may wait for devices to be bound, the guest to start and the
# NVLink partition to be activated; 30 minutes bounds a stuck compute
# without failing slow but healthy builds.
BUILD_TIMEOUT = 1800


class ComputeAPI:
    """Calls the ComputeManager of one host."""

    def __init__(self, conf: cfg.ConfigOpts | None = None) -> None:
        self.client = rpc.VersionedClient(
            conf if conf is not None else nova.conf.CONF, TOPIC)

    def _providers_arg(self, introduced: str,
                       pci_providers: dict[str, list[str]]
                       ) -> tuple[str, dict]:
        """The version to send a method taking the scheduler's PCI
        providers at, and the keyword argument carrying them: 1.3 and
        ``pci_providers``, or (capped below 1.3) the version that
        introduced the method and ``mappings``."""
        if self.client.can_send_version(_PCI_PROVIDERS):
            return _PCI_PROVIDERS, {'pci_providers': pci_providers}
        return introduced, {'mappings': pci_providers}

    def build_and_run_instance(self, context, host: str, instance_uuid: str,
                               pci_providers: dict[str, list[str]]
                               ) -> None:
        """Build the instance on ``host`` and wait until it runs.

        ``pci_providers`` is PCI request id -> the device provider UUIDs
        the scheduler claimed for it, in device order. Raises
        RescheduledException when the compute failed and cleaned up, so
        another host may be tried.
        """
        version, providers = self._providers_arg('1.0', pci_providers)
        cctxt = self.client.prepare(
            'build_and_run_instance', version, server=host,
            timeout=BUILD_TIMEOUT,
            call_monitor_timeout=rpc.CALL_MONITOR_TIMEOUT)
        cctxt.call(context, 'build_and_run_instance',
                   instance_uuid=instance_uuid, **providers)

    def terminate_instance(self, context, host: str,
                           instance_uuid: str) -> None:
        """Destroy the instance on ``host``; returns when it is gone."""
        cctxt = self.client.prepare('terminate_instance', '1.0',
                                    server=host)
        cctxt.call(context, 'terminate_instance',
                   instance_uuid=instance_uuid)

    def get_console_output(self, context, host: str, instance_uuid: str,
                           tail_length: int | None) -> str:
        """The last ``tail_length`` lines (None: all) of the console log
        of the instance's guest on ``host``."""
        cctxt = self.client.prepare('get_console_output', _CONSOLE,
                                    server=host)
        return cctxt.call(context, 'get_console_output',
                          instance_uuid=instance_uuid,
                          tail_length=tail_length)

    def snapshot_instance(self, context, host: str, instance_uuid: str,
                          image_id: str) -> None:
        """Upload the guest's root disk as the data of the queued
        Glance image ``image_id``."""
        self.client.prepare('snapshot_instance', _SNAPSHOT,
                            server=host).cast(
            context, 'snapshot_instance', instance_uuid=instance_uuid,
            image_id=image_id)

    def backup_instance(self, context, host: str, instance_uuid: str,
                        image_id: str, backup_type: str,
                        rotation: int) -> None:
        """Upload the guest's root disk as the queued backup image
        ``image_id``, then keep only the newest ``rotation`` backups of
        ``backup_type``."""
        self.client.prepare('backup_instance', _BACKUP, server=host).cast(
            context, 'backup_instance', instance_uuid=instance_uuid,
            image_id=image_id, backup_type=backup_type, rotation=rotation)

    # Server actions: casts, as upstream; the compute clears the task state
    # nova-api set when it is done.

    def _cast(self, context, host: str, method: str, **kwargs) -> None:
        self.client.prepare(method, _ACTIONS, server=host).cast(
            context, method, **kwargs)

    def reboot_instance(self, context, host: str, instance_uuid: str,
                        hard: bool) -> None:
        """Reboot the guest (soft or hard)."""
        self._cast(context, host, 'reboot_instance',
                   instance_uuid=instance_uuid, hard=hard)

    def stop_instance(self, context, host: str, instance_uuid: str) -> None:
        """Power the guest off."""
        self._cast(context, host, 'stop_instance',
                   instance_uuid=instance_uuid)

    def start_instance(self, context, host: str,
                       instance_uuid: str) -> None:
        """Power a stopped guest on."""
        self._cast(context, host, 'start_instance',
                   instance_uuid=instance_uuid)

    def rebuild_instance(self, context, host: str,
                         instance_uuid: str) -> None:
        """Redefine the guest with the devices it has."""
        self._cast(context, host, 'rebuild_instance',
                   instance_uuid=instance_uuid)

    def shelve_instance(self, context, host: str,
                        instance_uuid: str) -> None:
        """Shelve (and, per ``shelved_offload_time``, offload) it."""
        self._cast(context, host, 'shelve_instance',
                   instance_uuid=instance_uuid)

    def shelve_offload_instance(self, context, host: str,
                                instance_uuid: str) -> None:
        """Free the host resources of a shelved server."""
        self._cast(context, host, 'shelve_offload_instance',
                   instance_uuid=instance_uuid)

    def unshelve_instance(self, context, host: str,
                          instance_uuid: str) -> None:
        """Power a shelved (not offloaded) server on where it is."""
        self._cast(context, host, 'unshelve_instance',
                   instance_uuid=instance_uuid)

    def _move_step(self, context, host: str, method: str,
                   instance_uuid: str, version: str = _MOVES,
                   **kwargs) -> None:
        """One step of a move on ``host``, waited for like a build."""
        cctxt = self.client.prepare(
            method, version, server=host, timeout=BUILD_TIMEOUT,
            call_monitor_timeout=rpc.CALL_MONITOR_TIMEOUT)
        cctxt.call(context, method, instance_uuid=instance_uuid, **kwargs)

    def prep_resize(self, context, host: str, instance_uuid: str,
                    migration_uuid: str,
                    pci_providers: dict[str, list[str]]) -> None:
        """Destination claims the allocated devices (``pci_providers`` as
        for a build); RescheduledException if it cannot (it has cleaned
        up)."""
        version, providers = self._providers_arg(_MOVES, pci_providers)
        self._move_step(context, host, 'prep_resize', instance_uuid,
                        version, migration_uuid=migration_uuid, **providers)

    def resize_instance(self, context, host: str, instance_uuid: str,
                        migration_uuid: str) -> None:
        """Source stops the guest, keeping its devices."""
        self._move_step(context, host, 'resize_instance', instance_uuid,
                        migration_uuid=migration_uuid)

    def finish_resize(self, context, host: str, instance_uuid: str,
                      migration_uuid: str) -> None:
        """Destination starts the guest with the new flavor."""
        self._move_step(context, host, 'finish_resize', instance_uuid,
                        migration_uuid=migration_uuid)

    def confirm_resize(self, context, host: str, instance_uuid: str,
                       migration_uuid: str) -> None:
        """Source frees what the instance held there before the move."""
        self._move_step(context, host, 'confirm_resize', instance_uuid,
                        migration_uuid=migration_uuid)

    def revert_resize(self, context, host: str, instance_uuid: str,
                      migration_uuid: str) -> None:
        """Destination removes the guest and frees the move's devices."""
        self._move_step(context, host, 'revert_resize', instance_uuid,
                        migration_uuid=migration_uuid)

    def finish_revert_resize(self, context, host: str, instance_uuid: str,
                             migration_uuid: str) -> None:
        """Source starts the guest again with the old flavor."""
        self._move_step(context, host, 'finish_revert_resize',
                        instance_uuid, migration_uuid=migration_uuid)
