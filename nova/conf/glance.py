"""[glance] options: how services reach the image service (Glance)
through keystoneauth1, as upstream names them."""

from oslo_config import cfg

from nova.conf import ksa

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
    ksa.register_opts(conf, glance_group, glance_opts, DEFAULT_SERVICE_TYPE)


def list_opts() -> dict:
    return ksa.list_opts(glance_group, glance_opts)
