"""[conductor] options of the nova-conductor service."""

from oslo_config import cfg

from nova.conf import groups

conductor_group = cfg.OptGroup(
    'conductor', title='Conductor options',
    help='Options of the nova-conductor service.')

conductor_opts = [
    cfg.IntOpt('build_lease_timeout',
               default=60,
               min=3,
               help='Seconds after which a build whose conductor stopped '
                    'renewing its lease (the conductor died, or nova-api '
                    'died before handing the build over) is taken over '
                    'by another conductor, which frees what the build '
                    'held and schedules it again. Conductors renew their '
                    'leases and look for expired ones every third of '
                    'this; keep it well above the time a conductor may '
                    'stall and the same on every conductor.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, conductor_group, conductor_opts)


def list_opts() -> dict:
    return {conductor_group: conductor_opts}
