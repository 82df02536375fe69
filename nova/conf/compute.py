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
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(compute_opts)


def list_opts() -> dict:
    return {'DEFAULT': compute_opts}
