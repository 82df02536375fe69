"""The state vocabulary of servers and moves: vm states, task states,
power states and migration statuses, with the sets the services share.

It sits at the bottom of nova and imports nothing from it, so the
database layer and every service above it name a state the same way
instead of retyping its string. ``nova.compute.vm_states`` and
``nova.compute.task_states`` re-export the vm and task states under
upstream's import paths; the virt driver interface re-exports the power
states. ``nova.tests.unit.test_states`` fails when production code
retypes one of these values as a literal.
"""

# vm_state (``OS-EXT-STS:vm_state``), upstream's values ---------------------

BUILDING = 'building'
ACTIVE = 'active'
STOPPED = 'stopped'
ERROR = 'error'
SHELVED = 'shelved'
SHELVED_OFFLOADED = 'shelved_offloaded'
# A finished resize or cold migration waiting for confirm or revert.
RESIZED = 'resized'
# Upstream's states this deployment never sets; the API still shows
# them as upstream does.
DELETED = 'deleted'
PAUSED = 'paused'
SUSPENDED = 'suspended'
SOFT_DELETED = 'soft-delete'

# task_state (``OS-EXT-STS:task_state``), upstream's values -----------------
#
# nova-api sets the task state of an action when it accepts it, in one
# compare-and-swap with the state the action needs, so of two concurrent
# actions on one server exactly one is accepted; the service that
# finishes the action clears it.

SCHEDULING = 'scheduling'
SPAWNING = 'spawning'
DELETING = 'deleting'
REBOOTING = 'rebooting'
REBOOTING_HARD = 'rebooting_hard'
POWERING_OFF = 'powering-off'
POWERING_ON = 'powering-on'
REBUILDING = 'rebuilding'
SHELVING = 'shelving'
SHELVING_OFFLOADING = 'shelving_offloading'
UNSHELVING = 'unshelving'
# createImage: the root disk is copied and uploaded to Glance.
IMAGE_SNAPSHOT = 'image_snapshot'
# createBackup: the same, then the oldest backups beyond the rotation
# are deleted.
IMAGE_BACKUP = 'image_backup'
# The steps of a resize or cold migration (see nova.conductor.migrate).
RESIZE_PREP = 'resize_prep'
RESIZE_MIGRATING = 'resize_migrating'
RESIZE_MIGRATED = 'resize_migrated'
RESIZE_FINISH = 'resize_finish'
RESIZE_REVERTING = 'resize_reverting'

# The task state an instance waits in for a host, by vm_state: a new
# build, or an unshelve of an offloaded instance. The scheduler, conductor
# and compute drive both alike; the database finds them by it.
WAITING_FOR_HOST = {BUILDING: SCHEDULING, SHELVED_OFFLOADED: UNSHELVING}

# power_state (``OS-EXT-STS:power_state``), upstream's values ---------------

NOSTATE = 0
RUNNING = 1
SHUTDOWN = 4

# Migration status, upstream's values ----------------------------------------
#
# A resize or cold migration: pre-migrating -> migrating -> post-migrating
# -> finished (VERIFY_RESIZE) -> confirming -> confirmed, or reverting ->
# reverted. An evacuation: accepted -> done -> completed (when its source
# compute has cleaned up). A failed move: error (evacuation: failed).

MIGRATION_ACCEPTED = 'accepted'
MIGRATION_PRE_MIGRATING = 'pre-migrating'
MIGRATION_MIGRATING = 'migrating'
MIGRATION_POST_MIGRATING = 'post-migrating'
MIGRATION_FINISHED = 'finished'
MIGRATION_CONFIRMING = 'confirming'
MIGRATION_CONFIRMED = 'confirmed'
MIGRATION_REVERTING = 'reverting'
MIGRATION_REVERTED = 'reverted'
MIGRATION_DONE = 'done'
MIGRATION_COMPLETED = 'completed'
MIGRATION_ERROR = 'error'
MIGRATION_FAILED = 'failed'
MIGRATION_CANCELLED = 'cancelled'

# Statuses after which a migration holds nothing any more, as upstream.
# An evacuation that is ``done`` still holds its source until the source
# compute comes back and cleans up (``completed``).
MIGRATION_FINAL_STATUSES = (
    MIGRATION_CONFIRMED, MIGRATION_REVERTED, MIGRATION_ERROR,
    MIGRATION_FAILED, MIGRATION_COMPLETED, MIGRATION_CANCELLED)

# Statuses of a move a conductor is driving (not settled, not over).
MIGRATION_DRIVEN_STATUSES = (
    MIGRATION_PRE_MIGRATING, MIGRATION_MIGRATING, MIGRATION_POST_MIGRATING,
    MIGRATION_ACCEPTED, MIGRATION_CONFIRMING, MIGRATION_REVERTING)


def failed_migration_status(migration_type: str) -> str:
    """The final status of a move that failed, as upstream: ``failed``
    for an evacuation, ``error`` for a resize or cold migration."""
    return (MIGRATION_FAILED if migration_type == 'evacuation'
            else MIGRATION_ERROR)
