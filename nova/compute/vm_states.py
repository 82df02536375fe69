"""Instance ``vm_state`` values (``OS-EXT-STS:vm_state``) under upstream's
import path; they are defined in :mod:`nova.states`."""

from nova.states import ACTIVE
from nova.states import BUILDING
from nova.states import DELETED
from nova.states import ERROR
from nova.states import PAUSED
from nova.states import RESIZED
from nova.states import SHELVED
from nova.states import SHELVED_OFFLOADED
from nova.states import SOFT_DELETED
from nova.states import STOPPED
from nova.states import SUSPENDED

__all__ = ['ACTIVE', 'BUILDING', 'DELETED', 'ERROR', 'PAUSED', 'RESIZED',
           'SHELVED', 'SHELVED_OFFLOADED', 'SOFT_DELETED', 'STOPPED',
           'SUSPENDED']
