"""Instance ``vm_state`` values (``OS-EXT-STS:vm_state``), as upstream."""

BUILDING = 'building'
ACTIVE = 'active'
STOPPED = 'stopped'
ERROR = 'error'
SHELVED = 'shelved'
SHELVED_OFFLOADED = 'shelved_offloaded'
# A finished resize or cold migration waiting for confirm or revert.
RESIZED = 'resized'
