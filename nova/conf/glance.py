"""[glance] options: how services reach the image service (Glance)
through keystoneauth1, as upstream names them."""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova.conf import groups

glance_group = cfg.OptGroup(
    'glance', title='Glance (image service) options',
    help='How nova authenticates to and finds Glance: the service catalog '
         '(service_type image) or an endpoint override. For a Glance '
         'without authentication (the all-in-one default) use '
         'auth_type = none and endpoint_override = <Glance URL>.')

DEFAULT_SERVICE_TYPE = 'image'

glance_opts = [
    cfg.ListOpt('api_servers',
                default=[],
                help='Glance endpoints (e.g. http://glance:9292) to use '
                     'instead of the service catalog, as upstream; the '
                     'first is used. Prefer endpoint_override.'),
    cfg.IntOpt('num_retries',
               default=3, min=0,
               help='How many times a request that could not reach Glance '
                    'is retried before the operation fails. A download '
                    'cut short is not retried: the build fails with a '
                    'fault.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, glance_group, glance_opts)
    ks_loading.register_session_conf_options(conf, glance_group.name)
    ks_loading.register_auth_conf_options(conf, glance_group.name)
    ks_loading.register_adapter_conf_options(
        conf, glance_group.name, include_deprecated=False)
    conf.set_default('service_type', DEFAULT_SERVICE_TYPE,
                     group=glance_group.name)
    conf.set_default('valid_interfaces', ['internal', 'public'],
                     group=glance_group.name)


def list_opts() -> dict:
    opts = (glance_opts + ks_loading.get_session_conf_options() +
            ks_loading.get_auth_common_conf_options() +
            ks_loading.get_auth_plugin_conf_options('password') +
            ks_loading.get_adapter_conf_options(include_deprecated=False))
    unique = {opt.dest: opt for opt in opts}
    return {glance_group: list(unique.values())}
