"""Instance ``vm_state`` values (``OS-EXT-STS:vm_state``), as upstream."""

BUILDING = 'building'
ACTIVE = 'active'
STOPPED = 'stopped'
ERROR = 'error'
SHELVED = 'shelved'
SHELVED_OFFLOADED = 'shelved_offloaded'

# States in which an instance holds its devices, guest and allocation on
# its host (an instance being built holds them once scheduled).
HOLDING = (BUILDING, ACTIVE, STOPPED, SHELVED)
