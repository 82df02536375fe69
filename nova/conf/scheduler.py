"""[scheduler] and [filter_scheduler] options of the nova-scheduler."""

from oslo_config import cfg

from nova.conf import groups

scheduler_group = cfg.OptGroup(
    'scheduler', title='Scheduler options',
    help='Options of the nova-scheduler service.')

scheduler_opts = [
    cfg.IntOpt('max_placement_results',
               default=1000,
               min=1,
               help='Maximum number of allocation candidates asked from '
                    'Placement for one scheduling request.'),
    cfg.IntOpt('max_attempts',
               default=3,
               min=1,
               help='Maximum number of hosts tried for one instance before '
                    'the build fails (the first try plus reschedules).'),
    cfg.IntOpt('max_claim_rounds',
               default=10,
               min=1,
               help='Maximum number of times the scheduler asks Placement '
                    'for candidates for one scheduling request when every '
                    'candidate of the previous answer was claimed '
                    'concurrently by other instances (a claim conflict, '
                    'not a host failure: reschedules are bounded by '
                    'max_attempts). Each refused round means another '
                    'request got a partition, so N requests racing for N '
                    'or more free partitions all succeed when this is at '
                    'least N.'),
    cfg.IntOpt('defrag_max_moves',
               default=0,
               min=0,
               help='When a build of a server asking one device group is '
                    'refused for fragmentation only (devices free, no '
                    'group of its size wholly free), the conductor cold-'
                    'migrates at most this many servers that allow it '
                    '(metadata pci_defrag=allow) to free one, as '
                    '"nova-manage pci defrag apply" does, and schedules '
                    'the build again. 0 (default): never.'),
    cfg.IntOpt('band_shard_hosts',
               default=16,
               min=0,
               help='About how many compute hosts one shard of the fleet '
                    'holds. Placement\'s cost of a PCI query grows with '
                    'the fleet, so the scheduler splits the fleet into '
                    'shards of about this many hosts (by the shard traits '
                    'every compute publishes, up to 256 shards) and asks '
                    'one shard, fullest free-device band first, then '
                    'wider ones up to the whole fleet when none of its '
                    'bands has a usable candidate. 0: always ask the '
                    'whole fleet.'),
]

filter_scheduler_group = cfg.OptGroup(
    'filter_scheduler', title='Filter scheduler options',
    help='Options of the candidate filters and weighers.')

filter_scheduler_opts = [
    cfg.BoolOpt('pci_in_placement',
                default=False,
                help='Schedule flavor-requested PCI devices through '
                     'Placement (nova-api, nova-scheduler, '
                     'nova-conductor). Enable only after every compute '
                     'with PCI devices runs with '
                     '[pci]report_in_placement.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, scheduler_group, scheduler_opts)
    groups.register_group_opts(conf, filter_scheduler_group,
                               filter_scheduler_opts)


def list_opts() -> dict:
    return {scheduler_group: scheduler_opts,
            filter_scheduler_group: filter_scheduler_opts}
