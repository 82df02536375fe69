"""[DEFAULT] options of the nova-compute service."""

from oslo_config import cfg

from nova.conf import paths

compute_opts = [
    cfg.BoolOpt('allow_resize_to_same_host',
                default=False,
                help='Allow a resize to land on the host the server runs '
                     'on. The destination is still scheduled with the new '
                     'flavor: on the same host that is a fresh free '
                     'partition of the new size, claimed while the old '
                     'one stays held for a revert. A cold migration never '
                     'stays on its host. Read by nova-conductor (and '
                     'nova-api), as upstream.'),
    cfg.IntOpt('resize_confirm_window',
               default=0,
               min=0,
               help='Seconds after which a resize or cold migration waiting '
                    'in VERIFY_RESIZE is confirmed automatically by the '
                    'destination compute (checked at the '
                    'update_resources_interval), freeing its source. 0 '
                    'never confirms automatically, as upstream.'),
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
    cfg.BoolOpt('resume_guests_state_on_host_boot',
                default=False,
                help='What nova-compute does at start with an ACTIVE '
                     'server whose guest is not running (the hypervisor '
                     'lost it at a host reboot or restart, or it was shut '
                     'down meanwhile). True starts the guest again, '
                     'defined anew on the devices the server holds if it '
                     'is gone. False (the default, as upstream) leaves it '
                     'off: the server becomes SHUTOFF, keeping its devices, '
                     'allocation and NVLink partition, with a ``stop`` '
                     'instance action saying why; its owner starts it. A '
                     'lost guest of a SHUTOFF server is defined again, '
                     'powered off, either way.'),
    cfg.IntOpt('sync_power_state_interval',
               default=600,
               min=-1,
               help='Seconds between runs of the periodic task that '
                    'matches the servers of a compute to their guests, as '
                    'upstream\'s power state sync: an ACTIVE server whose '
                    'guest is not running (shut down, or gone from the '
                    'hypervisor) becomes SHUTOFF, with a ``stop`` instance '
                    'action saying why, and a SHUTOFF server whose guest '
                    'runs has it powered off. Servers with an action in '
                    'progress are left alone. -1 disables the task, as '
                    'upstream; 0 disables it too (upstream runs it at its '
                    'default periodic rate).'),
    cfg.StrOpt('instances_path',
               default=paths.state_path_def('instances'),
               help='Where the compute keeps instance files. The size of '
                    'the filesystem holding it is the host\'s local disk, '
                    'reported to Placement as DISK_GB inventory.'),
    cfg.IntOpt('reserved_host_disk_mb',
               default=0,
               min=0,
               help='Local disk in MB kept for the host itself and never '
                    'given to instances: the DISK_GB inventory\'s '
                    '``reserved``, rounded up to whole GB.'),
    cfg.FloatOpt('disk_allocation_ratio',
                 default=1.0,
                 min=0.01,
                 help='Allocation ratio of the DISK_GB inventory: Placement '
                      'lets instances claim (total - reserved) x ratio GB. '
                      'Above 1.0 overcommits thin-provisioned disks.'),
    cfg.IntOpt('shelved_offload_time',
               default=0,
               min=-1,
               help='Seconds a shelved server keeps its host resources '
                    '(guest, PCI devices, Placement allocation) before the '
                    'compute offloads it. 0 offloads at once when the '
                    'server is shelved; -1 never offloads (only an explicit '
                    '``shelveOffload`` does). Offloading after a delay is '
                    'done by a periodic task that runs every '
                    '``shelved_poll_interval`` seconds.'),
    cfg.IntOpt('shelved_poll_interval',
               default=3600,
               min=0,
               help='Seconds between runs of the periodic task that '
                    'offloads servers shelved for longer than '
                    '``shelved_offload_time``. 0 disables the task.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(compute_opts)


def list_opts() -> dict:
    return {'DEFAULT': compute_opts}
