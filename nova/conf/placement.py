"""[placement] options: how services reach Placement through keystoneauth1."""

from oslo_config import cfg

from nova.conf import ksa

placement_group = cfg.OptGroup(
    'placement', title='Placement service options',
    help='How nova authenticates to and finds the Placement service. '
         'For a Placement running with noauth2 (the all-in-one default) '
         'use auth_type = admin_token, endpoint = <placement URL> and '
         'token = admin.')

DEFAULT_SERVICE_TYPE = 'placement'


def register_opts(conf: cfg.ConfigOpts) -> None:
    ksa.register_opts(conf, placement_group, [], DEFAULT_SERVICE_TYPE)


def list_opts() -> dict:
    return ksa.list_opts(placement_group, [])
