"""[all_in_one] options of nova-all, which embeds Placement and runs Glance."""

from oslo_config import cfg

from nova.conf import groups

all_in_one_group = cfg.OptGroup(
    'all_in_one', title='nova-all options',
    help='Options of the all-in-one process (nova-all) only.')

all_in_one_opts = [
    cfg.PortOpt('placement_listen_port',
                default=8778,
                help='TCP port on 127.0.0.1 of the Placement that nova-all '
                     'embeds; 8778 is where a standalone Placement listens '
                     'by default. 0 picks a free port.'),
    cfg.PortOpt('glance_listen_port',
                default=9292,
                help='TCP port on 127.0.0.1 of the Glance (image service) '
                     'that nova-all runs as a child process; 9292 is where '
                     'a standalone Glance listens by default. 0 picks a '
                     'free port. Its images and database are under '
                     '$state_path/glance.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, all_in_one_group, all_in_one_opts)


def list_opts() -> dict:
    return {all_in_one_group: all_in_one_opts}
