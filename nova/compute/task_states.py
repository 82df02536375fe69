"""Instance ``task_state`` values (``OS-EXT-STS:task_state``) under
upstream's import path; they, and how an action sets and clears them, are
defined in :mod:`nova.states`."""

from nova.states import DELETING
from nova.states import IMAGE_BACKUP
from nova.states import IMAGE_SNAPSHOT
from nova.states import POWERING_OFF
from nova.states import POWERING_ON
from nova.states import REBOOTING
from nova.states import REBOOTING_HARD
from nova.states import REBUILDING
from nova.states import RESIZE_FINISH
from nova.states import RESIZE_MIGRATED
from nova.states import RESIZE_MIGRATING
from nova.states import RESIZE_PREP
from nova.states import RESIZE_REVERTING
from nova.states import SCHEDULING
from nova.states import SHELVING
from nova.states import SHELVING_OFFLOADING
from nova.states import SPAWNING
from nova.states import UNSHELVING
from nova.states import WAITING_FOR_HOST

__all__ = ['DELETING', 'IMAGE_BACKUP', 'IMAGE_SNAPSHOT', 'POWERING_OFF',
           'POWERING_ON',
           'REBOOTING', 'REBOOTING_HARD', 'REBUILDING', 'RESIZE_FINISH',
           'RESIZE_MIGRATED', 'RESIZE_MIGRATING', 'RESIZE_PREP',
           'RESIZE_REVERTING', 'SCHEDULING', 'SHELVING',
           'SHELVING_OFFLOADING', 'SPAWNING', 'UNSHELVING',
           'WAITING_FOR_HOST']
