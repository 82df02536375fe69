"""[nova] options: how commands reach the Compute API through
keystoneauth1, in the group Cinder, Neutron and Ironic name for it.

``nova-manage pci defrag apply`` moves servers through the Compute API
(as an admin), so that it works against any deployment, nova-all
included, whose messaging it cannot join.
"""

from oslo_config import cfg

from nova.conf import ksa

nova_group = cfg.OptGroup(
    'nova', title='Compute API client options',
    help='How nova-manage authenticates to and finds the Compute API '
         '(service type compute): keystoneauth1 options, e.g. auth_type '
         '= password with auth_url, username, password, project_name, '
         'user_domain_name and project_domain_name for a Keystone '
         'deployment. Without auth_type, and with [api]auth_strategy = '
         'noauth2, the admin token of noauth2 is used against the API '
         'this configuration serves ([api]listen and listen_port); for '
         'another noauth2 API set auth_type = admin_token, endpoint = '
         '<Compute API URL ending in /v2.1> and token = admin.')

DEFAULT_SERVICE_TYPE = 'compute'


def register_opts(conf: cfg.ConfigOpts) -> None:
    ksa.register_opts(conf, nova_group, [], DEFAULT_SERVICE_TYPE)


def list_opts() -> dict:
    return ksa.list_opts(nova_group, [])
