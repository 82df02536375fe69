"""[placement] options: how services reach Placement through keystoneauth1."""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova.conf import groups

placement_group = cfg.OptGroup(
    'placement', title='Placement service options',
    help='How nova authenticates to and finds the Placement service. '
         'For a Placement running with noauth2 (the all-in-one default) '
         'use auth_type = admin_token, endpoint = <placement URL> and '
         'token = admin.')

DEFAULT_SERVICE_TYPE = 'placement'


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, placement_group, [])
    ks_loading.register_session_conf_options(conf, placement_group.name)
    ks_loading.register_auth_conf_options(conf, placement_group.name)
    ks_loading.register_adapter_conf_options(
        conf, placement_group.name, include_deprecated=False)
    conf.set_default('service_type', DEFAULT_SERVICE_TYPE,
                     group=placement_group.name)
    conf.set_default('valid_interfaces', ['internal', 'public'],
                     group=placement_group.name)


def list_opts() -> dict:
    opts = (ks_loading.get_session_conf_options() +
            ks_loading.get_auth_common_conf_options() +
            ks_loading.get_auth_plugin_conf_options('password') +
            ks_loading.get_adapter_conf_options(include_deprecated=False))
    # Deduplicate by name: plugin options overlap the common ones.
    unique = {opt.dest: opt for opt in opts}
    return {placement_group: list(unique.values())}
