"""[placement] options: how services reach Placement through keystoneauth1."""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova.conf import ksa

placement_group = cfg.OptGroup(
    'placement', title='Placement service options',
    help='How nova authenticates to and finds the Placement service. '
         'For a Placement running with noauth2 (the all-in-one default) '
         'use auth_type = admin_token, endpoint = <placement URL> and '
         'token = admin.')

DEFAULT_SERVICE_TYPE = 'placement'

# Placement's noauth2 middleware treats this token as the admin.
NOAUTH_TOKEN = 'admin'


def register_opts(conf: cfg.ConfigOpts) -> None:
    ksa.register_opts(conf, placement_group, [], DEFAULT_SERVICE_TYPE)


def use_noauth_placement(conf: cfg.ConfigOpts, url: str) -> None:
    """Point [placement] at a noauth2 Placement at ``url`` (nova-all's
    embedded one, or one a tool starts): the admin token, no Keystone."""
    conf.register_opts(
        ks_loading.get_auth_plugin_conf_options('admin_token'),
        group='placement')
    conf.set_override('auth_type', 'admin_token', group='placement')
    conf.set_override('endpoint', url, group='placement')
    conf.set_override('token', NOAUTH_TOKEN, group='placement')


def list_opts() -> dict:
    return ksa.list_opts(placement_group, [])
