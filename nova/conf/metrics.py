"""[metrics] options: where a process serves its Prometheus metrics."""

from oslo_config import cfg

from nova.conf import groups

metrics_group = cfg.OptGroup(
    'metrics', title='Prometheus metrics',
    help='Where a nova process serves its Prometheus metrics (GET '
         '/metrics, no authentication: bind it to an address only the '
         'Prometheus server reaches). nova-metrics serves the fleet\'s PCI '
         'devices and free groups from the database; nova-scheduler its '
         'decisions, refusals and claim conflicts; nova-compute its '
         'Fabric Manager partitions; nova-all all of them on one port. See '
         'doc/source/admin/metrics.rst.')

metrics_opts = [
    cfg.HostAddressOpt('listen',
                       default='127.0.0.1',
                       help='Address the metrics endpoint binds to.'),
    cfg.PortOpt('listen_port',
                default=0,
                help='TCP port of the metrics endpoint; 0 serves none '
                     '(nova-metrics, whose only job it is, needs one: '
                     '9180 in the documentation\'s examples).'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, metrics_group, metrics_opts)


def list_opts() -> dict:
    return {metrics_group: metrics_opts}
