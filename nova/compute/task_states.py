"""Instance ``task_state`` values (``OS-EXT-STS:task_state``), as upstream.

nova-api sets the task state of an action when it accepts it, in one
compare-and-swap with the state the action needs, so of two concurrent
actions on one server exactly one is accepted; the service that finishes
the action clears it.
"""

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
# The steps of a resize or cold migration (see nova.conductor.migrate).
RESIZE_PREP = 'resize_prep'
RESIZE_MIGRATING = 'resize_migrating'
RESIZE_MIGRATED = 'resize_migrated'
RESIZE_FINISH = 'resize_finish'
RESIZE_REVERTING = 'resize_reverting'

# The task state an instance waits in for a host, by vm_state: a new
# build, or an unshelve of an offloaded instance. The scheduler, conductor
# and compute drive both alike.
WAITING_FOR_HOST = {'building': SCHEDULING, 'shelved_offloaded': UNSHELVING}
