"""[DEFAULT] options of the nova-compute service."""

from oslo_config import cfg

compute_opts = [
    cfg.IntOpt('update_resources_interval',
               default=60,
               min=0,
               help='Seconds between runs of the periodic task that '
                    'refreshes host resources (including PCI devices) and '
                    'reports them to Placement. 0 disables the periodic '
                    'run; resources are still reported at start.'),
    cfg.IntOpt('allocation_audit_interval',
               default=600,
               min=0,
               help='Seconds between runs of the periodic allocation audit '
                    'of a compute: it removes Placement allocations on the '
                    'host\'s providers held by consumers that are no '
                    'building or running instance (deleted, never created, '
                    'or in ERROR, e.g. left by a free that failed while '
                    'Placement was down), and destroys the guests and frees '
                    'the PCI devices of instances that are no longer on '
                    'this host. Allocations of instances being built are '
                    'never touched. ``nova-manage placement audit`` runs '
                    'the same checks on demand. 0 disables the periodic '
                    'run; guests and devices are still cleaned at start.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(compute_opts)


def list_opts() -> dict:
    return {'DEFAULT': compute_opts}
