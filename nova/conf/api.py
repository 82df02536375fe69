"""[api] options of the nova-api service (Compute API v2.1)."""

from oslo_config import cfg

from nova.conf import groups

api_group = cfg.OptGroup(
    'api', title='Compute API options',
    help='How nova-api authenticates requests and where it listens.')

# oslo.middleware sizelimit's default; also the embedded Placement's.
DEFAULT_MAX_REQUEST_BODY_SIZE = 114688

api_opts = [
    cfg.StrOpt('auth_strategy',
               default='noauth2',
               choices=[
                   ('noauth2', 'No Keystone: the X-Auth-Token header is '
                               '"<user>[:<project>]"; user "admin" gets the '
                               'admin role. For tests, demos and the '
                               'all-in-one deployment only.'),
                   ('keystone', 'Validate tokens with keystonemiddleware '
                                '(configure [keystone_authtoken]).'),
               ],
               help='How incoming Compute API requests are authenticated.'),
    cfg.HostAddressOpt('listen',
                       help='Address nova-api (and the Compute API of '
                            'nova-all) binds to. Unset: 127.0.0.1 with '
                            'auth_strategy = noauth2, where every caller '
                            'can claim to be the admin, and 0.0.0.0 (every '
                            'interface) with keystone. With noauth2 an '
                            'address that is not loopback is refused unless '
                            'allow_remote_noauth2 is true.'),
    cfg.PortOpt('listen_port',
                default=8774,
                help='TCP port nova-api (and the Compute API of nova-all) '
                     'listens on.'),
    cfg.BoolOpt('allow_remote_noauth2',
                default=False,
                help='Let nova-api and nova-all listen on an address other '
                     'hosts reach (not loopback) with auth_strategy = '
                     'noauth2. Anyone who reaches the port is then the '
                     'admin of the cloud: only for a network that is '
                     'yours alone (a lab behind a firewall). Otherwise use '
                     'auth_strategy = keystone.'),
    cfg.IntOpt('max_request_body_size',
               default=DEFAULT_MAX_REQUEST_BODY_SIZE,
               min=1,
               help='Largest request body, in bytes, nova-api (and the '
                    'Placement nova-all embeds) accepts; a larger one is '
                    'refused with 413 before it is read (the default is '
                    'oslo.middleware sizelimit\'s).'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, api_group, api_opts)


def list_opts() -> dict:
    return {api_group: api_opts}
