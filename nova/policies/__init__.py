"""In-code default policy rules of the Compute API.

Operators override them in the oslo.policy file ([oslo_policy]policy_file);
``list_rules`` is also the entry point for oslopolicy-sample-generator.
"""

from oslo_policy import policy

ADMIN = 'rule:context_is_admin'
ADMIN_OR_OWNER = 'rule:context_is_admin or project_id:%(project_id)s'

FLAVOR_CREATE = 'os_compute_api:os-flavor-manage:create'
FLAVOR_DELETE = 'os_compute_api:os-flavor-manage:delete'
EXTRA_SPECS_CREATE = 'os_compute_api:os-flavor-extra-specs:create'
EXTRA_SPECS_UPDATE = 'os_compute_api:os-flavor-extra-specs:update'
EXTRA_SPECS_DELETE = 'os_compute_api:os-flavor-extra-specs:delete'
SERVERS_ALL_PROJECTS = 'os_compute_api:servers:index:get_all_tenants'
SERVERS_SHOW = 'os_compute_api:servers:show'
SERVERS_DELETE = 'os_compute_api:servers:delete'
HOST_ATTRIBUTES = 'os_compute_api:os-extended-server-attributes'


def _rule(name: str, check: str, description: str,
          operations: list[tuple[str, str]]) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=name, check_str=check, description=description,
        operations=[{'method': m, 'path': p} for m, p in operations])


def list_rules() -> list[policy.RuleDefault]:
    """Every default rule, in documentation order."""
    return [
        policy.RuleDefault('context_is_admin', 'role:admin',
                           'Who counts as a cloud administrator.'),
        _rule(FLAVOR_CREATE, ADMIN, 'Create a flavor.',
              [('POST', '/flavors')]),
        _rule(FLAVOR_DELETE, ADMIN, 'Delete a flavor.',
              [('DELETE', '/flavors/{flavor_id}')]),
        _rule(EXTRA_SPECS_CREATE, ADMIN, 'Set flavor extra specs.',
              [('POST', '/flavors/{flavor_id}/os-extra_specs')]),
        _rule(EXTRA_SPECS_UPDATE, ADMIN, 'Update one flavor extra spec.',
              [('PUT', '/flavors/{flavor_id}/os-extra_specs/{key}')]),
        _rule(EXTRA_SPECS_DELETE, ADMIN, 'Delete one flavor extra spec.',
              [('DELETE', '/flavors/{flavor_id}/os-extra_specs/{key}')]),
        _rule(SERVERS_ALL_PROJECTS, ADMIN,
              'List the servers of every project (all_tenants).',
              [('GET', '/servers'), ('GET', '/servers/detail')]),
        _rule(SERVERS_SHOW, ADMIN_OR_OWNER, 'Show a server.',
              [('GET', '/servers/{server_id}')]),
        _rule(SERVERS_DELETE, ADMIN_OR_OWNER, 'Delete a server.',
              [('DELETE', '/servers/{server_id}')]),
        _rule(HOST_ATTRIBUTES, ADMIN,
              'See the host and hypervisor_hostname of servers.',
              [('GET', '/servers/{server_id}'),
               ('GET', '/servers/detail')]),
    ]
