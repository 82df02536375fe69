"""What no instance owns: Placement allocations, PCI device claims, guests.

Failures leave such leftovers: a free that could not reach Placement, a
delete done by the API while the compute was down, a scheduler claim that
landed after the conductor gave the build up. The periodic audit of each
compute (``ComputeManager.audit_allocations``) and ``nova-manage placement
audit`` use this module to find them, so both apply the same rule.

The rule (:func:`unowned`): an instance owns what it holds while its record
exists, is not deleted and is not in ERROR (every failure in this project
frees what the instance held before it sets ERROR, so an ERROR instance
holding something is a free that did not happen). An instance being built
owns its allocation from the scheduler's claim on. Device claims and guests
belong to one host, so there the instance must also be on that host.
An instance being moved (a migration in progress) owns what it holds on
the source and the destination host. A consumer whose Placement consumer
type is ``MIGRATION`` owns the source allocation of its move while the
migration is in progress, and nothing once it is confirmed, reverted or
failed.

A SHELVED_OFFLOADED server owns nothing either (offloading freed its
guest, devices and allocation; what is left is a free that failed), unless
an unshelve of it is under way (``unshelving``/``spawning``).

Every other state that makes something unowned is final (a deleted or
failed instance never builds again, and a consumer UUID is an instance's
before any allocation is claimed for it), so what is found stays unowned
until it is removed. An offloaded server claims again only once nova-api
accepted an unshelve of it, which the rule excludes; an unshelve accepted
between the audit's read and its removal loses its claim, fails to spawn
and is rescheduled.
"""

import dataclasses
from collections.abc import Iterable

from oslo_log import log as logging

from nova.compute import task_states
from nova.compute import vm_states
from nova.db import api as db
from nova.db import records
from nova import exception
from nova.pci import manager as pci_manager
from nova import states

LOG = logging.getLogger(__name__)

CONSUMER_TYPE_MIGRATION = 'MIGRATION'


@dataclasses.dataclass(frozen=True)
class OrphanAllocation:
    """A consumer's allocations that no instance owns."""

    consumer_uuid: str
    reason: str
    # Provider UUID -> resource class -> amount, for every provider of the
    # consumer (also outside the audited trees: a delete removes them all).
    resources: dict[str, dict[str, int]]


@dataclasses.dataclass(frozen=True)
class OrphanDeviceClaim:
    """A PCI device row claimed by an instance that does not own it."""

    host: str
    compute_node_id: int
    address: str
    instance_uuid: str
    reason: str


def instances_by_uuid(context, uuids: Iterable[str]
                      ) -> dict[str, records.Instance]:
    """UUID -> instance record, deleted ones included; unknown UUIDs are
    missing from the result."""
    uuids = sorted(set(uuids))
    if not uuids:
        return {}
    return {instance.uuid: instance for instance in db.instance_get_all(
        context, {'uuid': uuids}, read_deleted=True)}


def owner_problem(instance: records.Instance | None,
                  host: str | None = None) -> str | None:
    """Why ``instance`` does not own what it holds (on ``host`` if given);
    None if it does."""
    if instance is None:
        return 'no instance has this UUID'
    if instance.deleted_at is not None:
        return 'instance was deleted at %s UTC' % (
            instance.deleted_at.strftime('%Y-%m-%d %H:%M:%S'))
    if instance.vm_state == vm_states.ERROR:
        return 'instance is in ERROR'
    if instance.vm_state == vm_states.SHELVED_OFFLOADED and \
            instance.task_state not in (task_states.UNSHELVING,
                                        task_states.SPAWNING):
        return 'instance is shelved and offloaded'
    if host is not None and instance.host != host:
        return 'instance is on host %s, not %s' % (
            instance.host or '(none)', host)
    return None


def unowned(context, uuids: Iterable[str],
            host: str | None = None) -> dict[str, str]:
    """UUID -> reason for each of ``uuids`` whose holder is no owner."""
    uuids = set(uuids)
    instances = instances_by_uuid(context, uuids)
    moving = _moving_hosts(context, uuids) if host is not None else {}
    # An instance being moved owns what it holds on both ends of the move
    # until the move is confirmed, reverted or failed.
    problems = {uuid: owner_problem(
        instances.get(uuid),
        None if host in moving.get(uuid, ()) else host)
        for uuid in uuids}
    return {uuid: problem for uuid, problem in problems.items()
            if problem is not None}


def _moving_hosts(context, uuids: Iterable[str]) -> dict[str, set[str]]:
    """Instance UUID -> source and destination hosts of its migrations in
    progress."""
    hosts: dict[str, set[str]] = {}
    for migration in db.migration_get_in_progress(context, uuids):
        hosts.setdefault(migration.instance_uuid, set()).update(
            host for host in (migration.source_compute,
                              migration.dest_compute) if host)
    return hosts


def migration_problem(migration: records.Migration | None
                      ) -> str | None:
    """Why a migration consumer owns nothing any more; None if it does
    (a migration in progress holds the source of its move)."""
    if migration is None:
        return 'no migration has this UUID'
    if migration.status in states.MIGRATION_FINAL_STATUSES:
        return 'migration is %s' % migration.status
    return None


def find_orphan_allocations(context, reportclient,
                            root_uuids: Iterable[str]
                            ) -> list[OrphanAllocation]:
    """Allocations on the provider trees of ``root_uuids`` (compute node
    UUIDs) held by consumers that own nothing, by consumer UUID."""
    consumers: dict[str, dict] = {}
    migrations: dict[str, dict] = {}
    for root_uuid in root_uuids:
        for consumer, body in reportclient.get_allocations_for_tree(
                root_uuid).items():
            if body.get('consumer_type') == CONSUMER_TYPE_MIGRATION:
                migrations[consumer] = body
            else:
                consumers[consumer] = body
    problems = unowned(context, consumers)
    by_uuid = {migration.uuid: migration for migration in
               db.migration_get_all(context, {'uuid': sorted(migrations)})
               } if migrations else {}
    for consumer in migrations:
        problem = migration_problem(by_uuid.get(consumer))
        if problem is not None:
            problems[consumer] = problem
    consumers.update(migrations)
    orphans = []
    for consumer in sorted(problems):
        allocations = consumers[consumer]['allocations']
        orphans.append(OrphanAllocation(
            consumer_uuid=consumer, reason=problems[consumer],
            resources={rp: dict(alloc['resources'])
                       for rp, alloc in allocations.items()}))
    return orphans


def remove_allocations(reportclient,
                       orphans: Iterable[OrphanAllocation]) -> list[str]:
    """Delete the allocations of each orphan; the consumers done.

    A consumer that cannot be deleted (Placement failing) is logged and
    left for the next audit; the others are still removed.
    """
    removed = []
    for orphan in orphans:
        try:
            reportclient.delete_allocation_for_instance(orphan.consumer_uuid)
        except exception.NovaException as exc:
            LOG.warning('Could not delete the orphaned allocation of '
                        'consumer %s: %s', orphan.consumer_uuid, exc)
            continue
        LOG.warning('Deleted the allocation of consumer %s (%s): %s',
                    orphan.consumer_uuid, orphan.reason,
                    describe_resources(orphan.resources))
        removed.append(orphan.consumer_uuid)
    return removed


def find_orphan_device_claims(context,
                              nodes: Iterable[records.ComputeNode]
                              ) -> list[OrphanDeviceClaim]:
    """PCI device rows of ``nodes`` (compute node records) claimed by an
    instance that does not own them on that node's host."""
    claims = [(node, device) for node in nodes
              for device in pci_manager.devices_of_node(context, node.id)
              if device.instance_uuid]
    found = []
    for host in sorted({node.host for node, _device in claims}):
        on_host = [(node, device) for node, device in claims
                   if node.host == host]
        problems = unowned(context, {device.instance_uuid
                                     for _node, device in on_host}, host)
        found.extend(OrphanDeviceClaim(
            host=host, compute_node_id=node.id,
            address=device.address,
            instance_uuid=device.instance_uuid,
            reason=problems[device.instance_uuid])
            for node, device in on_host
            if device.instance_uuid in problems)
    return found


def describe_resources(resources: dict[str, dict[str, int]]) -> str:
    """e.g. ``VCPU=4, MEMORY_MB=4096 on 1a2b...; PGPU=1 on 3c4d...``."""
    return '; '.join(
        '%s on %s' % (', '.join('%s=%d' % (rc, amount) for rc, amount in
                                sorted(by_rc.items())), rp)
        for rp, by_rc in sorted(resources.items())) or 'nothing'
