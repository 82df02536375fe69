"""[upgrade_levels] options: RPC version caps for rolling upgrades."""

from oslo_config import cfg

from nova.conf import groups

upgrade_levels_group = cfg.OptGroup(
    'upgrade_levels', title='RPC version caps',
    help='The newest RPC API version this service sends to each other '
         'service. During a rolling upgrade, set a cap to the version '
         'the oldest service of that kind serves; a request needing a '
         'newer version is then refused with an error naming the method '
         'and both versions, instead of reaching a service that cannot '
         'handle it. Unset (the default): no cap, every service runs the '
         'same release.')

# MAJOR.MINOR, as oslo.messaging compares versions.
_VERSION = r'^\d+\.\d+$'

upgrade_levels_opts = [
    cfg.StrOpt(service, regex=_VERSION,
               help='Cap on the RPC API version of messages sent to '
                    'nova-%s, as MAJOR.MINOR (e.g. 1.1).' % service)
    for service in ('compute', 'conductor', 'scheduler')
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, upgrade_levels_group,
                               upgrade_levels_opts)


def list_opts() -> dict:
    return {upgrade_levels_group: upgrade_levels_opts}
