"""The PCI device tracker of one compute node.

It keeps the ``pci_devices`` rows of the node in line with what the
hypervisor reports and ``[pci]device_spec`` allows, and hands devices to
instances and back.

Device lifecycle: a newly reported, assignable device is created
``available``; ``claim`` makes it ``allocated`` to one instance and PCI
request; ``free_instance`` makes it ``available`` again. A device that
disappears (from the hypervisor, or from the config) while free is
**deleted** from the database rather than kept with status ``removed``, so
every row is a device the node can still use or an instance still holds. A
device that disappears while in use cannot be taken from its instance: it
stays tracked, a warning names it and its instance, and it is deleted when
that instance frees it (the set ``to_be_removed_when_freed`` lives in
memory only; if the service restarts meanwhile, the next sync notices the
device is gone again).
"""

import threading
from collections.abc import Callable, Iterable, Mapping

from oslo_log import log as logging
from oslo_utils import timeutils

from nova.db import api as db_api
from nova import exception
from nova.pci import device as pci_device
from nova.pci import devspec
from nova.pci import health as pci_health
from nova.pci import partitions as pci_partitions
from nova.pci import utils

LOG = logging.getLogger(__name__)


def devices_of_node(context, compute_node_id: int
                    ) -> list[pci_device.TrackedDevice]:
    """The tracked devices of one compute node, by address, as the
    database has them now."""
    return [pci_device.TrackedDevice.from_row(row) for row in
            db_api.pci_device_get_all_by_node(context, compute_node_id)]


def record_health(context, device: pci_device.TrackedDevice,
                  change: pci_health.HealthChange, actor: str
                  ) -> pci_device.TrackedDevice:
    """Write ``change`` to the device's row and the audit trail (in the
    caller's transaction, if any) and return the updated device; ``actor``
    names who made it (a compute host, or the operator's command)."""
    unhealthy = change.health == pci_device.UNHEALTHY
    row = db_api.pci_device_update(context, device.id, pci_device.row_values(
        health=change.health,
        health_reason=change.reason if unhealthy else None,
        health_since=timeutils.utcnow(),
        health_source=change.source))
    db_api.pci_device_health_event_create(context, {
        'compute_node_id': device.compute_node_id,
        'address': device.address, 'health': change.health,
        'reason': change.reason, 'source': change.source, 'actor': actor,
        'instance_uuid': device.instance_uuid})
    log = LOG.warning if unhealthy else LOG.info
    log('PCI device %(address)s is %(health)s (%(source)s, by %(actor)s)'
        '%(reason)s%(holder)s', {
            'address': device.address, 'health': change.health,
            'source': change.source, 'actor': actor,
            'reason': ': %s' % change.reason if change.reason else '',
            'holder': '; instance %s holds it' % device.instance_uuid
            if device.instance_uuid else ''})
    return pci_device.TrackedDevice.from_row(row)


def set_device_health(context, compute_node_id: int, address: str,
                      unhealthy: bool, reason: str | None, actor: str
                      ) -> pci_health.HealthChange | None:
    """The operator's ``nova-manage pci device set``: mark the device
    at ``address`` of the node unhealthy with ``reason``, or clear that
    mark (see ``health.operator_change``); returns the change, None if
    there was nothing to change. Raises PciDeviceNotFound for an address
    the node does not track, Invalid for a bad reason."""
    address = utils.normalize_address(address)
    with db_api.context_manager.writer.using(context):
        device = next((d for d in devices_of_node(context, compute_node_id)
                       if d.address == address), None)
        if device is None:
            raise exception.PciDeviceNotFound(
                address=address, compute_node_id=compute_node_id)
        change = pci_health.operator_change(device, unhealthy, reason)
        if change is not None:
            record_health(context, device, change, actor)
    return change


def all_devices(context) -> list[pci_device.TrackedDevice]:
    """The tracked devices of every compute node, in one query."""
    return [pci_device.TrackedDevice.from_row(row) for row in
            db_api.pci_device_get_all(context)]


class PciDevTracker:
    """Tracks the assignable PCI devices of compute node
    ``compute_node_id``; every change is written to the database at once
    (one transaction per call), so there is nothing to save."""

    def __init__(self, context, compute_node_id: int) -> None:
        self._context = context
        self.compute_node_id = compute_node_id
        # Serializes this tracker's read-check-write sequences.
        self._lock = threading.Lock()
        self._to_be_removed_when_freed: set[str] = set()
        self._devices: dict[str, pci_device.TrackedDevice] = {}
        self._load()

    def _current(self) -> dict[str, pci_device.TrackedDevice]:
        """The node's devices in the database, by address."""
        return {device.address: device for device in
                devices_of_node(self._context, self.compute_node_id)}

    def _load(self) -> None:
        """Refresh the in-memory copy from the database."""
        self._devices = self._current()

    @property
    def pci_devs(self) -> list[pci_device.TrackedDevice]:
        """All tracked devices, by address."""
        return [self._devices[address] for address in sorted(self._devices)]

    @property
    def to_be_removed_when_freed(self) -> frozenset[str]:
        """Addresses of in-use devices that are gone and will be deleted
        when their instance frees them."""
        return frozenset(self._to_be_removed_when_freed)

    def get_by_address(self, address: str
                       ) -> pci_device.TrackedDevice | None:
        """Return the tracked device at ``address``, or None."""
        return self._devices.get(utils.normalize_address(address))

    # Sync with the hypervisor ----------------------------------------------

    @staticmethod
    def _wanted_devices(devices: list[pci_device.HostDevice],
                        specs: Mapping[str, devspec.PciDeviceSpec],
                        group_path: Callable[[str], str] | None,
                        withheld: pci_partitions.Withheld | None
                        ) -> dict[str, pci_device.TrackedFields]:
        """Map address -> tracked fields of each assignable device."""
        wanted = {}
        for dev in devices:
            address = utils.normalize_address(dev.address)
            spec = specs.get(address)
            if spec is None:
                continue
            parent = dev.parent_addr
            # What the libvirt driver and live migration need to know
            # about the device, from its spec (defaults as upstream), why
            # nova does not offer it (and the partition that keeps it
            # out), and what a remote backend identifies the card by.
            info = pci_device.extra_info(
                managed=spec.tags.get('managed', 'true'),
                live_migratable=spec.tags.get('live_migratable', 'false'),
                withheld=withheld.reason(address) if withheld else None,
                partition_hold=withheld.hold(address) if withheld
                else None,
                card_serial_number=(dev.card_serial_number
                                    if spec.remote_managed else None),
                resource_class=spec.resource_class_for(dev))
            wanted[address] = pci_device.TrackedFields.of(
                dev, utils.normalize_address(parent) if parent else None,
                group_path(address) if group_path else '', info)
        return wanted

    def update_devices_from_hypervisor_resources(
            self, devices: list[pci_device.HostDevice],
            specs: Mapping[str, devspec.PciDeviceSpec],
            group_path: Callable[[str], str] | None = None,
            withheld: pci_partitions.Withheld | None = None) -> None:
        """Make the tracked devices match the hypervisor's ``devices``
        that have a spec in ``specs``
        (``Whitelist.classify``).

        New devices are created available, changed fields are updated,
        vanished free devices are deleted and vanished in-use devices are
        kept until freed (see the module docstring). ``group_path(address)``
        gives the device's group path, e.g. ``quad-a/pair-a1``;
        ``withheld`` says why a device is not offered and which hardware
        partition keeps it out, kept in its ``extra_info``.
        """
        wanted = self._wanted_devices(devices, specs, group_path, withheld)
        with self._lock:
            pending = self._sync(wanted)
            # Only once the transaction has committed.
            self._to_be_removed_when_freed = pending

    def _sync(self, wanted: dict[str, pci_device.TrackedFields]
              ) -> set[str]:
        """Apply ``wanted`` in one transaction; return the addresses to
        remove when freed."""
        with db_api.context_manager.writer.using(self._context):
            current = self._current()
            pending = set(self._to_be_removed_when_freed) & set(current)
            for address, device in current.items():
                if address in wanted:
                    pending.discard(address)
                    self._update_fields(device, wanted[address])
                elif device.in_use:
                    if address not in pending:
                        LOG.warning(
                            'Unable to remove PCI device %(address)s with '
                            'status %(status)s: it is no longer reported '
                            'or assignable but instance %(instance)s uses '
                            'it. It will be removed when freed.',
                            {'address': address,
                             'status': device.status,
                             'instance': device.instance_uuid})
                    pending.add(address)
                else:
                    LOG.info('Removing PCI device %s: no longer reported or '
                             'assignable.', address)
                    db_api.pci_device_destroy(self._context, device.id)
            for address in sorted(set(wanted) - set(current)):
                LOG.info('Tracking new PCI device %s.', address)
                db_api.pci_device_create(self._context, {
                    **wanted[address].columns(),
                    **pci_device.row_values(
                        address=address,
                        compute_node_id=self.compute_node_id,
                        status=pci_device.AVAILABLE)})
        self._load()
        return pending

    def _update_fields(self, device: pci_device.TrackedDevice,
                       fields: pci_device.TrackedFields) -> None:
        changes = pci_device.changed_columns(device, fields)
        if changes:
            LOG.info('Updating PCI device %s: %s', device.address,
                     ', '.join(sorted(changes)))
            db_api.pci_device_update(self._context, device.id, changes)

    # Claims ----------------------------------------------------------------

    def claim(self, instance_uuid: str, request_id: str,
              addresses: list[str]) -> list[pci_device.TrackedDevice]:
        """Allocate the devices at ``addresses`` to one PCI request of an
        instance, all or nothing, and return them.

        Raises PciDeviceRequestFailed naming every address that is not
        available (in use, unhealthy, not tracked, or repeated) and changes
        nothing; PciDeviceUnhealthy when some are unhealthy (Placement
        offered them before the compute withheld them).
        """
        wanted = [utils.normalize_address(address) for address in addresses]
        with self._lock:
            with db_api.context_manager.writer.using(self._context):
                current = self._current()
                problems = self._claim_problems(wanted, current)
                if problems:
                    unhealthy = sorted(
                        address for address in set(wanted) & set(current)
                        if not current[address].healthy)
                    error = exception.PciDeviceUnhealthy if unhealthy \
                        else exception.PciDeviceRequestFailed
                    raise error(
                        requests='%s of instance %s (not available: %s)' % (
                            request_id, instance_uuid, '; '.join(problems)),
                        addresses=unhealthy)
                values = pci_device.row_values(
                    status=pci_device.ALLOCATED,
                    instance_uuid=instance_uuid, request_id=request_id)
                claimed = [pci_device.TrackedDevice.from_row(
                    db_api.pci_device_update(
                        self._context, current[address].id, values))
                    for address in wanted]
            self._load()
        return claimed

    def _claim_problems(self, wanted: list[str],
                        current: dict[str, pci_device.TrackedDevice]
                        ) -> list[str]:
        """Say why each of the ``wanted`` addresses cannot be claimed."""
        problems = []
        for index, address in enumerate(wanted):
            device = current.get(address)
            if address in wanted[:index]:
                problems.append('%s is requested twice' % address)
            elif device is None:
                problems.append('%s is not tracked on compute node %s' % (
                    address, self.compute_node_id))
            elif device.status != pci_device.AVAILABLE:
                problems.append('%s is %s to instance %s' % (
                    address, device.status, device.instance_uuid))
            elif not device.healthy:
                # Read from the database: an operator's mark counts at
                # once, before the compute's next update withholds it.
                problems.append('%s is %s' % (address,
                                              device.describe_health()))
        return problems

    def free_instance(self, instance_uuid: str,
                      request_ids: Iterable[str] | None = None) -> list[str]:
        """Release the devices of ``instance_uuid`` and return their
        addresses: available again, or deleted if marked to be removed.

        With ``request_ids`` only the devices claimed for those PCI
        requests: a resize on one host holds the old flavor's devices and
        the new one's at once, under different request ids.
        """
        with self._lock:
            freed = self._free(instance_uuid, request_ids)
            self._to_be_removed_when_freed.difference_update(freed)
        return freed

    def _free(self, instance_uuid: str,
              request_ids: Iterable[str] | None) -> list[str]:
        wanted = None if request_ids is None else set(request_ids)
        with db_api.context_manager.writer.using(self._context):
            devices = [device for device in self._current().values()
                       if device.instance_uuid == instance_uuid and
                       (wanted is None or device.request_id in wanted)]
            for device in devices:
                if device.address in self._to_be_removed_when_freed:
                    LOG.info('Removing PCI device %s freed by instance %s: '
                             'it is no longer reported or assignable.',
                             device.address, instance_uuid)
                    db_api.pci_device_destroy(self._context, device.id)
                else:
                    db_api.pci_device_update(
                        self._context, device.id, pci_device.row_values(
                            status=pci_device.AVAILABLE,
                            instance_uuid=None, request_id=None))
        self._load()
        return sorted(device.address for device in devices)

    def apply_health(self, report: pci_health.HealthReport, actor: str
                     ) -> list[pci_health.HealthChange]:
        """Update the devices' health from what the compute observed
        (``health.decide``), in one transaction with its audit records;
        return the changes made."""
        changes = []
        with self._lock:
            with db_api.context_manager.writer.using(self._context):
                for device in self._current().values():
                    change = pci_health.decide(device, report)
                    if change is not None:
                        record_health(self._context, device, change, actor)
                        changes.append(change)
            self._load()
        return changes

    def unhealthy_after(self, report: pci_health.HealthReport,
                        addresses: set[str]) -> dict[str, str]:
        """``unhealthy`` as it will be once the devices are synced with
        the assignable ``addresses`` the hypervisor lists (vanished free
        devices go, in-use ones stay until freed) and ``report`` is
        applied: for the offer, decided before the rows are written.
        Reads the rows first: the operator may have changed a device's
        health since (``nova-manage pci device set``)."""
        with self._lock:
            self._load()
            devices = dict(self._devices)
        kept = [dev for dev in devices.values()
                if dev.address in addresses or dev.in_use]
        return pci_health.unhealthy_after(
            kept, addresses - set(devices), report)

    def unhealthy(self) -> dict[str, str]:
        """Address -> reason of each unhealthy device."""
        return {dev.address: dev.health_reason or dev.health_source or ''
                for dev in self._devices.values() if not dev.healthy}

    def set_rp_uuid(self, address: str, rp_uuid: str | None
                    ) -> pci_device.TrackedDevice:
        """Record the Placement resource provider of a device."""
        address = utils.normalize_address(address)
        with self._lock:
            device = self._devices.get(address)
            if device is None:
                raise exception.PciDeviceNotFound(
                    address=address, compute_node_id=self.compute_node_id)
            updated = pci_device.TrackedDevice.from_row(
                db_api.pci_device_update(
                    self._context, device.id,
                    pci_device.row_values(rp_uuid=rp_uuid)))
            self._devices[address] = updated
        return updated
