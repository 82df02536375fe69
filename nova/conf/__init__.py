"""Configuration options for every nova service.

Each module in this package owns one option group and exposes
``register_opts(conf)`` and ``list_opts()``; importing the package registers
them all on the global ``CONF``.
"""

from oslo_config import cfg

from nova.conf import all_in_one
from nova.conf import api
from nova.conf import compute
from nova.conf import conductor
from nova.conf import database
from nova.conf import glance
from nova.conf import image_cache
from nova.conf import libvirt
from nova.conf import metrics
from nova.conf import nova_api
from nova.conf import paths
from nova.conf import pci
from nova.conf import placement
from nova.conf import quota
from nova.conf import scheduler
from nova.conf import service
from nova.conf import upgrade_levels

CONF = cfg.CONF

_MODULES = (paths, all_in_one, api, compute, conductor, database, glance,
            image_cache, libvirt, metrics, nova_api, pci, placement,
            quota, scheduler, service, upgrade_levels)


def register_all(conf: cfg.ConfigOpts) -> None:
    """Register every nova option group on ``conf``."""
    for module in _MODULES:
        module.register_opts(conf)


register_all(CONF)
