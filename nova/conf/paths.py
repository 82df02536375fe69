"""[DEFAULT] options naming this host and where services keep state."""

import os
import socket

from oslo_config import cfg

path_opts = [
    cfg.StrOpt('host',
               default=socket.gethostname(),
               sample_default='<current_hostname>',
               help='Name of this node. Used as the service host name, the '
                    'compute node (hypervisor) name and the root resource '
                    'provider name in Placement, so it must be unique '
                    'within a deployment.'),
    cfg.StrOpt('state_path',
               default=os.path.join(os.getcwd(), 'state'),
               sample_default='$pybasedir/state',
               help='Top-level directory for service state: the default '
                    'SQLite databases, generated hypervisor XML and logs.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(path_opts)


def list_opts() -> dict:
    return {'DEFAULT': path_opts}


def state_path_def(*parts: str) -> str:
    """Return a path under ``$state_path`` for use in option defaults."""
    return os.path.join('$state_path', *parts)
