"""The compute's side of moves: resize, cold migration, evacuation,
confirm, revert.

The conductor drives a move (``nova.conductor.migrate``); each step here
runs on one end of it and does only that end's part, called by the
``ComputeManager`` RPC method of the same name::

    destination prep_resize: claim the devices Placement allocated
    source resize_instance: stop the guest (its devices stay claimed
                            for a revert)
    destination finish_resize: start the guest with the new flavor
      -> server VERIFY_RESIZE (an evacuation: ACTIVE, or SHUTOFF)
    confirm: source confirm_resize frees what it kept
    revert: destination revert_resize frees what it claimed, source
            finish_revert_resize starts the guest again

A move copies no disk: each end that starts the guest makes its root disk
again from the image. The PCI request ids tell the source's device claims
(the migration's old requests) from the destination's (its new ones)
when both ends are this host. Moves that waited in VERIFY_RESIZE longer
than ``[DEFAULT]resize_confirm_window`` are confirmed by this host's
periodic :func:`confirm_expired_resizes`.

:class:`Compute` lists what the steps use of the compute manager, as
``nova.compute.repair.Compute`` does for the repairs.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Protocol, TYPE_CHECKING

from oslo_log import log as logging
from oslo_utils import timeutils

from nova import context as nova_context
from nova import exception
from nova import states
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.db import api as db
from nova.db import records
from nova.pci import request as pci_request
from nova.virt import driver as virt_driver

if TYPE_CHECKING:
    import threading

    from oslo_config import cfg

    from nova.compute import hugepages as compute_hugepages
    from nova.compute import resource_tracker
    from nova.conductor import rpcapi as conductor_rpcapi
    from nova.pci import device as pci_device

LOG = logging.getLogger(__name__)


class Compute(Protocol):
    """What the move steps need of the compute at their end of a move
    (``nova.compute.manager.ComputeManager``): its host, hypervisor and
    devices, and the build's own steps to claim devices and describe a
    guest, so a moved guest is claimed and defined as a booted one."""

    #: This end of the move.
    host: str
    #: Read for ``[DEFAULT]resize_confirm_window``.
    conf: cfg.ConfigOpts
    #: Starts, stops and destroys the moved guest.
    driver: virt_driver.ComputeDriver
    #: Frees and lists the devices each end of the move holds.
    rt: resource_tracker.ResourceTracker
    #: Frees the hugepages each end of the move holds.
    hugepages: compute_hugepages.HugepageTracker
    #: Confirms the moves whose confirm window expired.
    conductor_api: conductor_rpcapi.ConductorAPI

    def instance_lock(self, instance_uuid: str) -> threading.Lock:
        """Serializes a move step with builds, actions and deletes of
        the same instance on this host."""

    def claim_devices(self, instance_uuid: str,
                      pci_requests: Sequence[pci_request.InstancePCIRequest],
                      pci_providers: dict[str, list[str]]
                      ) -> list[pci_device.TrackedDevice]:
        """Claim the devices Placement allocated to each PCI request, as
        a build does."""

    def guest_spec(self, instance: records.Instance,
                   flavor: records.FlavorSnapshot,
                   devices: list[pci_device.TrackedDevice],
                   pci_requests: Sequence[pci_request.InstancePCIRequest]
                   ) -> virt_driver.GuestSpec:
        """The guest of ``instance`` with ``flavor`` on ``devices``, as a
        build describes it."""


def prep_resize(compute: Compute, context, instance_uuid: str,
                migration_uuid: str,
                pci_providers: dict[str, list[str]]) -> None:
    """Destination: claim the devices Placement allocated for the new
    flavor (``pci_providers``). On failure nothing stays claimed here and
    RescheduledException lets the conductor try another host."""
    with compute.instance_lock(instance_uuid):
        migration = db.migration_get_by_uuid(context, migration_uuid)
        new_ids = _request_ids(migration.new_pci_requests)
        try:
            if migration.status not in (
                    states.MIGRATION_PRE_MIGRATING,
                    states.MIGRATION_ACCEPTED) or \
                    migration.dest_compute != compute.host:
                raise exception.MigrationFailed(
                    instance_uuid=instance_uuid,
                    reason='migration %s is %s towards %s' % (
                        migration_uuid, migration.status,
                        migration.dest_compute))
            devices = compute.claim_devices(
                instance_uuid, migration.new_pci_requests, pci_providers)
        except Exception as exc:
            LOG.warning('Preparing the move of instance %s to %s '
                        'failed: %s', instance_uuid, compute.host, exc)
            compute.rt.free_instance(instance_uuid, new_ids)
            raise exception.RescheduledException(
                instance_uuid=instance_uuid,
                reason=exception.reason_of(exc))
        LOG.info('Instance %s: PCI devices %s claimed on %s for '
                 'migration %s', instance_uuid,
                 ', '.join(d.address for d in devices) or 'none',
                 compute.host, migration_uuid)


def resize_instance(compute: Compute, context, instance_uuid: str,
                    migration_uuid: str) -> None:
    """Source: stop the guest (its devices stay claimed here, for a
    revert, until the move is confirmed)."""
    with compute.instance_lock(instance_uuid):
        db.migration_update(context, migration_uuid,
                            {'status': states.MIGRATION_MIGRATING},
                            expected_status=(
                                states.MIGRATION_PRE_MIGRATING))
        db.instance_update(context, instance_uuid,
                           {'task_state': task_states.RESIZE_MIGRATING})
        # No disk is copied (the destination makes the root disk
        # again from the image): stopping the guest is the whole
        # source side. Its domain and files go (a guest of the same
        # UUID is defined on the destination, possibly this host).
        compute.driver.destroy(instance_uuid)
        db.migration_update(context, migration_uuid,
                            {'status': states.MIGRATION_POST_MIGRATING})
        db.instance_update(context, instance_uuid, {
            'task_state': task_states.RESIZE_MIGRATED,
            'power_state': virt_driver.SHUTDOWN})


def finish_resize(compute: Compute, context, instance_uuid: str,
                  migration_uuid: str) -> None:
    """Destination: start the guest with the new flavor on the devices
    ``prep_resize`` claimed; the server waits in VERIFY_RESIZE (or,
    evacuated, is ACTIVE).

    On failure the guest and the devices claimed here are gone again
    and MigrationFailed is raised; the conductor rolls back.
    """
    with compute.instance_lock(instance_uuid):
        migration = db.migration_get_by_uuid(context, migration_uuid)
        instance = db.instance_update(
            context, instance_uuid,
            {'task_state': task_states.RESIZE_FINISH})
        new_ids = _request_ids(migration.new_pci_requests)
        flavor = migration.new_flavor
        # A SHUTOFF server stays powered off on the destination, as
        # upstream (its partition stays active, as a stopped one's).
        stopped = instance.vm_state == vm_states.STOPPED
        try:
            devices = _spawn_claimed(
                compute, instance, flavor, migration.new_pci_requests)
            if stopped:
                compute.driver.power_off(instance_uuid)
        except Exception as exc:
            LOG.warning('Starting instance %s on %s for migration %s '
                        'failed: %s', instance_uuid, compute.host,
                        migration_uuid, exc)
            compute.driver.destroy(instance_uuid)
            _free_pages(compute, instance_uuid, migration.source_compute)
            compute.rt.free_instance(instance_uuid, new_ids)
            raise exception.MigrationFailed(
                instance_uuid=instance_uuid,
                reason=exception.reason_of(exc))
        # An evacuation is over here; a resize or cold migration
        # waits in VERIFY_RESIZE for a confirm or revert.
        # The migration first: whoever sees the server settled finds
        # its migration settled too.
        evacuation = migration.migration_type == 'evacuation'
        db.migration_update(context, migration_uuid, {
            'status': states.MIGRATION_DONE if evacuation
            else states.MIGRATION_FINISHED})
        db.instance_update(context, instance_uuid, {
            'flavor': flavor, 'flavor_id': flavor.id,
            'pci_requests': migration.new_pci_requests,
            'host': compute.host, 'node': compute.rt.nodename,
            'vm_state': (vm_states.RESIZED if not evacuation else
                         vm_states.STOPPED if stopped
                         else vm_states.ACTIVE),
            'task_state': None,
            'power_state': virt_driver.SHUTDOWN if stopped
            else virt_driver.RUNNING})
        LOG.info('Instance %s runs on %s with PCI devices %s after its '
                 '%s', instance_uuid, compute.host,
                 ', '.join(d.address for d in devices) or 'none',
                 migration.migration_type)


def confirm_resize(compute: Compute, context, instance_uuid: str,
                   migration_uuid: str) -> None:
    """Source: free what the instance held here before the move."""
    with compute.instance_lock(instance_uuid):
        migration = db.migration_get_by_uuid(context, migration_uuid)
        if migration.dest_compute != compute.host:
            compute.driver.destroy(instance_uuid)
        _free_pages(compute, instance_uuid, migration.dest_compute)
        freed = compute.rt.free_instance(
            instance_uuid, _request_ids(migration.old_pci_requests))
        LOG.info('Instance %s: %s confirmed; PCI devices %s freed on '
                 'the source %s', instance_uuid,
                 migration.migration_type,
                 ', '.join(freed) or 'none', compute.host)


def revert_resize(compute: Compute, context, instance_uuid: str,
                  migration_uuid: str) -> None:
    """Destination: remove the guest and free the devices the move
    claimed here (also after a failed finish: idempotent)."""
    with compute.instance_lock(instance_uuid):
        migration = db.migration_get_by_uuid(context, migration_uuid)
        compute.driver.destroy(instance_uuid)
        _free_pages(compute, instance_uuid, migration.source_compute)
        freed = compute.rt.free_instance(
            instance_uuid, _request_ids(migration.new_pci_requests))
        LOG.info('Instance %s: migration %s undone on the destination '
                 '%s; PCI devices %s freed', instance_uuid,
                 migration_uuid, compute.host, ', '.join(freed) or 'none')


def finish_revert_resize(compute: Compute, context, instance_uuid: str,
                         migration_uuid: str) -> None:
    """Source: start the guest again with the old flavor on the devices
    it kept here; the server is ACTIVE on its old host, or SHUTOFF
    (guest powered off) if it was moved while SHUTOFF."""
    with compute.instance_lock(instance_uuid):
        migration = db.migration_get_by_uuid(context, migration_uuid)
        instance = db.instance_get_by_uuid(context, instance_uuid)
        flavor = migration.old_flavor
        # Stopped before the move: still SHUTOFF while it is rolled
        # back, or powered off on the destination in VERIFY_RESIZE.
        stopped = instance.vm_state == vm_states.STOPPED or (
            instance.vm_state == vm_states.RESIZED and
            instance.power_state == virt_driver.SHUTDOWN)
        compute.driver.destroy(instance_uuid)
        devices = _spawn_claimed(
            compute, instance, flavor, migration.old_pci_requests)
        if stopped:
            compute.driver.power_off(instance_uuid)
        # A revert is over once the guest runs here again (a rolled
        # back move has its final status already).
        if migration.status == states.MIGRATION_REVERTING:
            db.migration_update(context, migration_uuid,
                                {'status': states.MIGRATION_REVERTED})
        db.instance_update(context, instance_uuid, {
            'flavor': flavor, 'flavor_id': flavor.id,
            'pci_requests': migration.old_pci_requests,
            'host': compute.host, 'node': migration.source_node,
            'task_state': None,
            **(compute_utils.SETTLED_STOPPED if stopped
               else compute_utils.SETTLED_ACTIVE)})
        LOG.info('Instance %s runs on %s again with PCI devices %s',
                 instance_uuid, compute.host,
                 ', '.join(d.address for d in devices) or 'none')


def confirm_expired_resizes(compute: Compute) -> list[str]:
    """Confirm the moves to this host that waited in VERIFY_RESIZE
    longer than ``[DEFAULT]resize_confirm_window``, as upstream's
    ``_poll_unconfirmed_resizes``; returns the migrations confirmed.

    The migration goes ``finished`` -> ``confirming`` in one
    compare-and-swap, so a user's confirm or revert racing it wins or
    loses cleanly; the confirm itself is a conductor's.
    """
    window = compute.conf.resize_confirm_window
    if not window:
        return []
    context = nova_context.get_admin_context()
    expired_before = timeutils.utcnow() - datetime.timedelta(seconds=window)
    confirmed = []
    for migration in db.migration_get_all(context, {
            'dest_compute': compute.host,
            'status': states.MIGRATION_FINISHED}):
        if migration.updated_at is None or \
                migration.updated_at > expired_before:
            continue
        try:
            db.migration_update(context, migration.uuid,
                                {'status': states.MIGRATION_CONFIRMING},
                                expected_status=states.MIGRATION_FINISHED)
            db.instance_update(context, migration.instance_uuid, {
                'build_owner': None,
                'build_heartbeat': timeutils.utcnow()},
                expected={'vm_state': vm_states.RESIZED})
        except (exception.MigrationUpdateConflict,
                exception.InstanceUpdateConflict,
                exception.InstanceNotFound):
            continue
        LOG.info('Confirming migration %s of instance %s: it waited '
                 'longer than resize_confirm_window (%ss)',
                 migration.uuid, migration.instance_uuid, window)
        compute.conductor_api.confirm_resize(
            context, migration.instance_uuid, migration.uuid)
        confirmed.append(migration.uuid)
    return confirmed


def _spawn_claimed(compute: Compute, instance: records.Instance,
                   flavor: records.FlavorSnapshot,
                   pci_requests: Sequence[pci_request.InstancePCIRequest]
                   ) -> list[pci_device.TrackedDevice]:
    """Start the guest with the devices claimed here for
    ``pci_requests`` (one end of a move), confined to their NUMA nodes
    as at a boot, on a root disk made from its image (a move copies no
    disk); returns the devices."""
    devices = compute.rt.held_by(instance.uuid,
                                 _request_ids(pci_requests))
    compute.driver.spawn(compute.guest_spec(
        instance, flavor, devices, pci_requests))
    return devices


def _free_pages(compute: Compute, instance_uuid: str,
                other_end: str) -> None:
    """Free the hugepages this end of a move held, unless the other end
    is this host too: then the instance's one claim here is the guest's,
    replaced when the other end starts it (``guest_spec``)."""
    if other_end != compute.host:
        compute.hugepages.free(instance_uuid)


def _request_ids(pci_requests: Sequence[pci_request.InstancePCIRequest]
                 ) -> set[str]:
    """The request ids of ``pci_requests``."""
    return {request.request_id for request in pci_requests}
