"""In-code default policy rules of the Compute API.

Every authenticated route checks one of these rules (the version documents
are public). Names and defaults follow upstream Nova where the route exists
there: writes to flavors and extra specs and the host attributes of
servers are admin-only; a project's servers are read by its readers and
created or deleted by its members (Keystone's implied roles make every
member a reader and every admin a member).

Operators override them in the oslo.policy file ([oslo_policy]policy_file);
``list_rules`` is also the entry point for oslopolicy-sample-generator.
"""

from oslo_policy import policy

ANY = '@'
ADMIN = 'rule:context_is_admin'
ADMIN_OR_USER = 'rule:admin_or_user'
PROJECT_MEMBER_OR_ADMIN = 'rule:project_member_or_admin'
PROJECT_READER_OR_ADMIN = 'rule:project_reader_or_admin'

FLAVORS = 'os_compute_api:flavors'
FLAVOR_CREATE = 'os_compute_api:os-flavor-manage:create'
FLAVOR_DELETE = 'os_compute_api:os-flavor-manage:delete'
EXTRA_SPECS_INDEX = 'os_compute_api:os-flavor-extra-specs:index'
EXTRA_SPECS_SHOW = 'os_compute_api:os-flavor-extra-specs:show'
EXTRA_SPECS_CREATE = 'os_compute_api:os-flavor-extra-specs:create'
EXTRA_SPECS_UPDATE = 'os_compute_api:os-flavor-extra-specs:update'
EXTRA_SPECS_DELETE = 'os_compute_api:os-flavor-extra-specs:delete'
SERVERS_INDEX = 'os_compute_api:servers:index'
SERVERS_DETAIL = 'os_compute_api:servers:detail'
SERVERS_INDEX_ALL_PROJECTS = 'os_compute_api:servers:index:get_all_tenants'
SERVERS_DETAIL_ALL_PROJECTS = 'os_compute_api:servers:detail:get_all_tenants'
SERVERS_SHOW = 'os_compute_api:servers:show'
SERVERS_CREATE = 'os_compute_api:servers:create'
SERVERS_DELETE = 'os_compute_api:servers:delete'
SERVERS_UPDATE = 'os_compute_api:servers:update'
METADATA_INDEX = 'os_compute_api:server-metadata:index'
METADATA_UPDATE = 'os_compute_api:server-metadata:update'
METADATA_DELETE = 'os_compute_api:server-metadata:delete'
SERVERS_REBOOT = 'os_compute_api:servers:reboot'
SERVERS_STOP = 'os_compute_api:servers:stop'
SERVERS_START = 'os_compute_api:servers:start'
SERVERS_REBUILD = 'os_compute_api:servers:rebuild'
SERVERS_CREATE_IMAGE = 'os_compute_api:servers:create_image'
CREATE_BACKUP = 'os_compute_api:os-create-backup'
SHELVE = 'os_compute_api:os-shelve:shelve'
SHELVE_OFFLOAD = 'os_compute_api:os-shelve:shelve_offload'
UNSHELVE = 'os_compute_api:os-shelve:unshelve'
CONSOLE_OUTPUT = 'os_compute_api:os-console-output'
INSTANCE_ACTIONS_LIST = 'os_compute_api:os-instance-actions:list'
INSTANCE_ACTIONS_SHOW = 'os_compute_api:os-instance-actions:show'
INSTANCE_ACTIONS_EVENTS = 'os_compute_api:os-instance-actions:events'
HOST_ATTRIBUTES = 'os_compute_api:os-extended-server-attributes'
LIMITS = 'os_compute_api:limits'
LIMITS_OTHER_PROJECT = 'os_compute_api:limits:other_project'
AZ_LIST = 'os_compute_api:os-availability-zone:list'
AZ_DETAIL = 'os_compute_api:os-availability-zone:detail'
IMAGES = 'os_compute_api:images'
IMAGES_UPDATE = 'os_compute_api:images:update'
SERVERS_RESIZE = 'os_compute_api:servers:resize'
SERVERS_CONFIRM_RESIZE = 'os_compute_api:servers:confirm_resize'
SERVERS_REVERT_RESIZE = 'os_compute_api:servers:revert_resize'
MIGRATE = 'os_compute_api:os-migrate-server:migrate'
MIGRATE_HOST = 'os_compute_api:os-migrate-server:migrate:host'
MIGRATIONS_INDEX = 'os_compute_api:os-migrations:index'
SERVER_MIGRATIONS = 'os_compute_api:servers:migrations:index'
EVACUATE = 'os_compute_api:os-evacuate'
LOCK = 'os_compute_api:os-lock-server:lock'
UNLOCK = 'os_compute_api:os-lock-server:unlock'
UNLOCK_OVERRIDE = 'os_compute_api:os-lock-server:unlock:unlock_override'
RESET_STATE = 'os_compute_api:os-admin-actions:reset_state'
HYPERVISORS_LIST = 'os_compute_api:os-hypervisors:list'
HYPERVISORS_LIST_DETAIL = 'os_compute_api:os-hypervisors:list-detail'
HYPERVISORS_SHOW = 'os_compute_api:os-hypervisors:show'
HYPERVISORS_STATISTICS = 'os_compute_api:os-hypervisors:statistics'
HYPERVISORS_UPTIME = 'os_compute_api:os-hypervisors:uptime'
HYPERVISORS_SEARCH = 'os_compute_api:os-hypervisors:search'
HYPERVISORS_SERVERS = 'os_compute_api:os-hypervisors:servers'
HYPERVISORS_PCI_DEVICES = 'os_compute_api:os-hypervisors:pci-devices'
KEYPAIRS_INDEX = 'os_compute_api:os-keypairs:index'
KEYPAIRS_SHOW = 'os_compute_api:os-keypairs:show'
KEYPAIRS_CREATE = 'os_compute_api:os-keypairs:create'
KEYPAIRS_DELETE = 'os_compute_api:os-keypairs:delete'
QUOTA_SETS_SHOW = 'os_compute_api:os-quota-sets:show'
QUOTA_SETS_DETAIL = 'os_compute_api:os-quota-sets:detail'
QUOTA_SETS_DEFAULTS = 'os_compute_api:os-quota-sets:defaults'
QUOTA_SETS_UPDATE = 'os_compute_api:os-quota-sets:update'
QUOTA_SETS_DELETE = 'os_compute_api:os-quota-sets:delete'
QUOTA_CLASS_SETS_SHOW = 'os_compute_api:os-quota-class-sets:show'
QUOTA_CLASS_SETS_UPDATE = 'os_compute_api:os-quota-class-sets:update'
SERVICES_LIST = 'os_compute_api:os-services:list'
SERVER_GROUPS_CREATE = 'os_compute_api:os-server-groups:create'
SERVER_GROUPS_DELETE = 'os_compute_api:os-server-groups:delete'
SERVER_GROUPS_INDEX = 'os_compute_api:os-server-groups:index'
SERVER_GROUPS_INDEX_ALL_PROJECTS = \
    'os_compute_api:os-server-groups:index:all_projects'
SERVER_GROUPS_SHOW = 'os_compute_api:os-server-groups:show'
SERVICES_UPDATE = 'os_compute_api:os-services:update'


def _rule(name: str, check: str, description: str,
          operations: list[tuple[str, str]]) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=name, check_str=check, description=description,
        operations=[{'method': m, 'path': p} for m, p in operations])


def list_rules() -> list[policy.RuleDefault]:
    """Every default rule, in documentation order."""
    flavor = '/flavors/{flavor_id}'
    specs = flavor + '/os-extra_specs'
    action = '/servers/{server_id}/action'
    instance_action = '/servers/{server_id}/os-instance-actions/{request_id}'
    quota_set = '/os-quota-sets/{tenant_id}'
    return [
        policy.RuleDefault('context_is_admin', 'role:admin',
                           'Who counts as a cloud administrator.'),
        policy.RuleDefault(
            'project_member_or_admin',
            'rule:context_is_admin or '
            '(role:member and project_id:%(project_id)s)',
            'An admin, or a member of the project that owns the target.'),
        policy.RuleDefault(
            'project_reader_or_admin',
            'rule:context_is_admin or '
            '(role:reader and project_id:%(project_id)s)',
            'An admin, or a reader of the project that owns the target.'),
        policy.RuleDefault(
            'admin_or_user',
            'rule:context_is_admin or user_id:%(user_id)s',
            'An admin, or the user who owns the target (key pairs belong '
            'to a user, not a project).'),
        _rule(FLAVORS, ANY, 'List and show flavors.',
              [('GET', '/flavors'), ('GET', '/flavors/detail'),
               ('GET', flavor)]),
        _rule(FLAVOR_CREATE, ADMIN, 'Create a flavor.',
              [('POST', '/flavors')]),
        _rule(FLAVOR_DELETE, ADMIN, 'Delete a flavor.',
              [('DELETE', flavor)]),
        _rule(EXTRA_SPECS_INDEX, PROJECT_READER_OR_ADMIN,
              'List the extra specs of a flavor; also whether flavor and '
              'server views (2.47, 2.61) show them.',
              [('GET', specs), ('GET', '/flavors/detail'),
               ('GET', flavor), ('GET', '/servers/{server_id}')]),
        _rule(EXTRA_SPECS_SHOW, PROJECT_READER_OR_ADMIN,
              'Show one extra spec of a flavor.',
              [('GET', specs + '/{key}')]),
        _rule(EXTRA_SPECS_CREATE, ADMIN, 'Set flavor extra specs.',
              [('POST', specs)]),
        _rule(EXTRA_SPECS_UPDATE, ADMIN, 'Update one flavor extra spec.',
              [('PUT', specs + '/{key}')]),
        _rule(EXTRA_SPECS_DELETE, ADMIN, 'Delete one flavor extra spec.',
              [('DELETE', specs + '/{key}')]),
        _rule(SERVERS_INDEX, PROJECT_READER_OR_ADMIN,
              "List the project's servers.", [('GET', '/servers')]),
        _rule(SERVERS_DETAIL, PROJECT_READER_OR_ADMIN,
              "List the project's servers with details.",
              [('GET', '/servers/detail')]),
        _rule(SERVERS_INDEX_ALL_PROJECTS, ADMIN,
              'List the servers of every project (all_tenants).',
              [('GET', '/servers')]),
        _rule(SERVERS_DETAIL_ALL_PROJECTS, ADMIN,
              'List the servers of every project with details '
              '(all_tenants).', [('GET', '/servers/detail')]),
        _rule(SERVERS_SHOW, PROJECT_READER_OR_ADMIN, 'Show a server.',
              [('GET', '/servers/{server_id}')]),
        _rule(SERVERS_CREATE, PROJECT_MEMBER_OR_ADMIN,
              'Create a server in the caller\'s project.',
              [('POST', '/servers')]),
        _rule(SERVERS_DELETE, PROJECT_MEMBER_OR_ADMIN, 'Delete a server.',
              [('DELETE', '/servers/{server_id}')]),
        _rule(SERVERS_UPDATE, PROJECT_MEMBER_OR_ADMIN,
              'Rename a server, change its description or access '
              'addresses.', [('PUT', '/servers/{server_id}')]),
        _rule(METADATA_INDEX, PROJECT_READER_OR_ADMIN,
              'List a server\'s metadata.',
              [('GET', '/servers/{server_id}/metadata')]),
        _rule(METADATA_UPDATE, PROJECT_MEMBER_OR_ADMIN,
              'Set metadata items of a server.',
              [('POST', '/servers/{server_id}/metadata'),
               ('PUT', '/servers/{server_id}/metadata/{key}')]),
        _rule(METADATA_DELETE, PROJECT_MEMBER_OR_ADMIN,
              'Delete one metadata item of a server.',
              [('DELETE', '/servers/{server_id}/metadata/{key}')]),
        _rule(SERVERS_REBOOT, PROJECT_MEMBER_OR_ADMIN, 'Reboot a server.',
              [('POST', action)]),
        _rule(SERVERS_STOP, PROJECT_MEMBER_OR_ADMIN, 'Stop a server.',
              [('POST', action)]),
        _rule(SERVERS_START, PROJECT_MEMBER_OR_ADMIN, 'Start a server.',
              [('POST', action)]),
        _rule(SERVERS_REBUILD, PROJECT_MEMBER_OR_ADMIN,
              'Rebuild a server.', [('POST', action)]),
        _rule(SERVERS_CREATE_IMAGE, PROJECT_MEMBER_OR_ADMIN,
              'Create an image (snapshot) of a server.',
              [('POST', action)]),
        _rule(CREATE_BACKUP, PROJECT_MEMBER_OR_ADMIN,
              'Back a server up (createBackup): a snapshot kept with the '
              'newest of its backup type.', [('POST', action)]),
        _rule(SHELVE, PROJECT_MEMBER_OR_ADMIN, 'Shelve a server.',
              [('POST', action)]),
        _rule(SHELVE_OFFLOAD, ADMIN,
              'Offload a shelved server from its host.',
              [('POST', action)]),
        _rule(UNSHELVE, PROJECT_MEMBER_OR_ADMIN,
              'Unshelve a shelved server.', [('POST', action)]),
        _rule(CONSOLE_OUTPUT, PROJECT_MEMBER_OR_ADMIN,
              "Show a server's console output.", [('POST', action)]),
        _rule(INSTANCE_ACTIONS_LIST, PROJECT_READER_OR_ADMIN,
              'List the actions of a server.',
              [('GET', '/servers/{server_id}/os-instance-actions')]),
        _rule(INSTANCE_ACTIONS_SHOW, PROJECT_READER_OR_ADMIN,
              'Show one action of a server.',
              [('GET', instance_action)]),
        _rule(INSTANCE_ACTIONS_EVENTS, ADMIN,
              'See the events of an action before microversion 2.51, and '
              'their tracebacks in every microversion.',
              [('GET', instance_action)]),
        _rule(HOST_ATTRIBUTES, ADMIN,
              'See the OS-EXT-SRV-ATTR: attributes (host, '
              'hypervisor_hostname, instance_name) of servers.',
              [('GET', '/servers/{server_id}'),
               ('GET', '/servers/detail')]),
        _rule(LIMITS, ANY, "Show the caller's project limits and usage.",
              [('GET', '/limits')]),
        _rule(LIMITS_OTHER_PROJECT, ADMIN,
              'Show the limits and usage of another project (tenant_id).',
              [('GET', '/limits')]),
        _rule(AZ_LIST, ANY, 'List availability zones.',
              [('GET', '/os-availability-zone')]),
        _rule(AZ_DETAIL, ADMIN, 'List availability zones with details.',
              [('GET', '/os-availability-zone/detail')]),
        _rule(IMAGES, ANY,
              "Show Glance's images through the deprecated image proxy "
              '(up to microversion 2.35).',
              [('GET', '/images'), ('GET', '/images/detail'),
               ('GET', '/images/{image_id}'),
               ('GET', '/images/{image_id}/metadata'),
               ('GET', '/images/{image_id}/metadata/{key}')]),
        _rule(IMAGES_UPDATE, PROJECT_MEMBER_OR_ADMIN,
              "Delete an image or edit its metadata through the image "
              "proxy: nova-api reaches Glance with its own credentials, "
              "so the image's owner project is checked here.",
              [('DELETE', '/images/{image_id}'),
               ('POST', '/images/{image_id}/metadata'),
               ('PUT', '/images/{image_id}/metadata'),
               ('PUT', '/images/{image_id}/metadata/{key}'),
               ('DELETE', '/images/{image_id}/metadata/{key}')]),
        _rule(SERVERS_RESIZE, PROJECT_MEMBER_OR_ADMIN,
              'Resize a server to another flavor.',
              [('POST', '/servers/{server_id}/action (resize)')]),
        _rule(SERVERS_CONFIRM_RESIZE, PROJECT_MEMBER_OR_ADMIN,
              'Confirm a resize or cold migration.',
              [('POST', '/servers/{server_id}/action (confirmResize)')]),
        _rule(SERVERS_REVERT_RESIZE, PROJECT_MEMBER_OR_ADMIN,
              'Revert a resize or cold migration.',
              [('POST', '/servers/{server_id}/action (revertResize)')]),
        _rule(MIGRATE, ADMIN, 'Cold-migrate a server.',
              [('POST', '/servers/{server_id}/action (migrate)')]),
        _rule(MIGRATE_HOST, ADMIN,
              'Cold-migrate a server to a named host (2.56).',
              [('POST', '/servers/{server_id}/action (migrate)')]),
        _rule(EVACUATE, ADMIN,
              'Evacuate a server from a host whose compute is down.',
              [('POST', '/servers/{server_id}/action (evacuate)')]),
        _rule(LOCK, PROJECT_MEMBER_OR_ADMIN,
              'Lock a server: actions of non-admins are refused until it '
              'is unlocked.',
              [('POST', '/servers/{server_id}/action (lock)')]),
        _rule(UNLOCK, PROJECT_MEMBER_OR_ADMIN, 'Unlock a server.',
              [('POST', '/servers/{server_id}/action (unlock)')]),
        _rule(UNLOCK_OVERRIDE, ADMIN,
              'Unlock a server an admin locked.',
              [('POST', '/servers/{server_id}/action (unlock)')]),
        _rule(RESET_STATE, ADMIN,
              "Reset a server's state to active or error.",
              [('POST', '/servers/{server_id}/action (os-resetState)')]),
        _rule(HYPERVISORS_LIST, ADMIN, 'List hypervisors.',
              [('GET', '/os-hypervisors')]),
        _rule(HYPERVISORS_LIST_DETAIL, ADMIN,
              'List hypervisors with details.',
              [('GET', '/os-hypervisors/detail')]),
        _rule(HYPERVISORS_SHOW, ADMIN, 'Show a hypervisor.',
              [('GET', '/os-hypervisors/{hypervisor_id}')]),
        _rule(HYPERVISORS_STATISTICS, ADMIN,
              'Show the sums of every hypervisor (until 2.88).',
              [('GET', '/os-hypervisors/statistics')]),
        _rule(HYPERVISORS_UPTIME, ADMIN,
              "Show a hypervisor's uptime (until 2.88).",
              [('GET', '/os-hypervisors/{hypervisor_id}/uptime')]),
        _rule(HYPERVISORS_SEARCH, ADMIN,
              'Search hypervisors by name (before 2.53).',
              [('GET', '/os-hypervisors/{pattern}/search')]),
        _rule(HYPERVISORS_SERVERS, ADMIN,
              'List the servers of hypervisors (before 2.53).',
              [('GET', '/os-hypervisors/{pattern}/servers')]),
        _rule(HYPERVISORS_PCI_DEVICES, ADMIN,
              "List a hypervisor's PCI devices, their holders, NVLink "
              'groups and health.',
              [('GET', '/os-hypervisors/{hypervisor_id}/pci-devices')]),
        _rule(KEYPAIRS_INDEX, ADMIN_OR_USER, "List a user's key pairs.",
              [('GET', '/os-keypairs')]),
        _rule(KEYPAIRS_SHOW, ADMIN_OR_USER, 'Show a key pair.',
              [('GET', '/os-keypairs/{keypair_name}')]),
        _rule(KEYPAIRS_CREATE, ADMIN_OR_USER,
              'Create or import a key pair.', [('POST', '/os-keypairs')]),
        _rule(KEYPAIRS_DELETE, ADMIN_OR_USER, 'Delete a key pair.',
              [('DELETE', '/os-keypairs/{keypair_name}')]),
        _rule(MIGRATIONS_INDEX, ADMIN, 'List migration records.',
              [('GET', '/os-migrations')]),
        _rule(SERVER_MIGRATIONS, ADMIN,
              'List and show the moves of a server in progress.',
              [('GET', '/servers/{server_id}/migrations'),
               ('GET', '/servers/{server_id}/migrations/{migration_id}')]),
        _rule(SERVER_GROUPS_CREATE, PROJECT_MEMBER_OR_ADMIN,
              'Create a server group in the caller\'s project.',
              [('POST', '/os-server-groups')]),
        _rule(SERVER_GROUPS_DELETE, PROJECT_MEMBER_OR_ADMIN,
              'Delete a server group.',
              [('DELETE', '/os-server-groups/{server_group_id}')]),
        _rule(SERVER_GROUPS_INDEX, PROJECT_READER_OR_ADMIN,
              "List the caller's project's server groups.",
              [('GET', '/os-server-groups')]),
        _rule(SERVER_GROUPS_INDEX_ALL_PROJECTS, ADMIN,
              'List the server groups of every project (all_projects).',
              [('GET', '/os-server-groups')]),
        _rule(SERVER_GROUPS_SHOW, PROJECT_READER_OR_ADMIN,
              'Show a server group.',
              [('GET', '/os-server-groups/{server_group_id}')]),
        _rule(QUOTA_SETS_SHOW, PROJECT_READER_OR_ADMIN,
              "Show a project's quota limits (and a user's in it), and "
              'its PCI alias limits.',
              [('GET', quota_set), ('GET', quota_set + '/pci-aliases')]),
        _rule(QUOTA_SETS_DETAIL, PROJECT_READER_OR_ADMIN,
              "Show a project's quota limits with their usage.",
              [('GET', quota_set + '/detail')]),
        _rule(QUOTA_SETS_DEFAULTS, ANY, 'Show the default quota limits.',
              [('GET', quota_set + '/defaults')]),
        _rule(QUOTA_SETS_UPDATE, ADMIN,
              "Set a project's (or a user's) quota limits and PCI alias "
              'limits.',
              [('PUT', quota_set), ('PUT', quota_set + '/pci-aliases')]),
        _rule(QUOTA_SETS_DELETE, ADMIN,
              "Reset a project's (or a user's) quota limits to the "
              'defaults.', [('DELETE', quota_set)]),
        _rule(QUOTA_CLASS_SETS_SHOW, ADMIN, 'Show the limits of a quota '
              'class.', [('GET', '/os-quota-class-sets/{id}')]),
        _rule(QUOTA_CLASS_SETS_UPDATE, ADMIN, 'Set the limits of a quota '
              "class (the 'default' class sets every project's "
              'defaults).', [('PUT', '/os-quota-class-sets/{id}')]),
        _rule(SERVICES_LIST, ADMIN, 'List compute services.',
              [('GET', '/os-services')]),
        _rule(SERVICES_UPDATE, ADMIN,
              'Enable or disable a compute service, force it down or up.',
              [('PUT', '/os-services/{service_id}'),
               ('PUT', '/os-services/enable'),
               ('PUT', '/os-services/disable'),
               ('PUT', '/os-services/disable-log-reason'),
               ('PUT', '/os-services/force-down')]),
    ]
