"""What each Compute API microversion changes here, in one table.

Handlers never compare a request's microversion with a bare ``'2.NN'``:
they ask ``req.api_version.at_least(version_history.X)`` with one of the
named changes below, so a reader finds every behaviour a microversion
switches by searching for its name, and this table says what it is.
Only the microversions that change something this API serves are
listed; the others change what this fork does not have (networks,
volumes, live migration, ...). A unit test fails on a bare comparison in
``nova/api`` and on an entry no handler uses.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Change:
    """What the microversion ``version`` changes, from that version on."""

    version: str
    what: str

    def __str__(self) -> str:
        return self.version


KEYPAIR_TYPE = Change(
    '2.2', "Key pairs have a 'type' (ssh or x509); creating one answers "
           '201 and deleting one 204.')
MORE_HOST_ATTRIBUTES = Change(
    '2.3', 'Admins see more OS-EXT-SRV-ATTR fields, user_data among them.')
LOCKED_SHOWN = Change('2.9', "Server views show 'locked'.")
KEYPAIRS_OF_OTHER_USERS = Change(
    '2.10', "Admins name another user's key pairs with 'user_id'.")
SERVICE_FORCED_DOWN = Change(
    '2.11', "os-services shows 'forced_down' and takes force-down.")
SERVER_GROUP_OWNER = Change(
    '2.13', "Server groups show 'project_id' and 'user_id'.")
EVACUATE_NO_SHARED_STORAGE = Change(
    '2.14', "evacuate drops 'onSharedStorage' and answers without a body.")
SOFT_AFFINITY = Change(
    '2.15', 'Server groups take the soft-affinity and soft-anti-affinity '
            'policies.')
SERVER_DESCRIPTION = Change(
    '2.19', "Server views show 'description'; rebuild accepts it.")
ACTIONS_OF_DELETED_SERVERS = Change(
    '2.21', 'os-instance-actions lists the actions of a deleted server.')
MIGRATION_TYPE = Change(
    '2.23', "Migrations show 'migration_type' (and filter by it); "
            '/servers/{id}/migrations is served.')
SERVER_TAGS = Change('2.26', "Server views show 'tags'.")
CPU_INFO_OBJECT = Change(
    '2.28', "A hypervisor's 'cpu_info' is an object, not a JSON string.")
EVACUATE_FORCE = Change('2.29', "evacuate accepts 'force'.")
HYPERVISOR_PAGING = Change(
    '2.33', 'os-hypervisors lists take marker and limit.')
KEYPAIR_PAGING = Change(
    '2.35', 'GET /os-keypairs takes marker and limit.')
QUOTA_NETWORK_GONE = Change(
    '2.36', 'Quota sets and /limits drop the nova-network quotas '
            '(fixed_ips, floating_ips, security_groups, '
            'security_group_rules).')
PROXIES_GONE = Change(
    '2.36', 'The image proxy (/images) answers 404.')
STATUS_FILTER_CHECKED = Change(
    '2.38', 'An unknown status filter of GET /servers is a 400.')
IMAGE_META_LIMIT_GONE = Change(
    '2.39', "/limits drops 'maxImageMeta'.")
SNAPSHOT_ID_IN_BODY = Change(
    '2.45', 'createImage and createBackup answer with the image id in '
            'the body, no Location header.')
FLAVOR_IN_SERVER = Change(
    '2.47', "A server's 'flavor' is the boot-time copy, not a link.")
QUOTA_CLASS_SERVER_GROUPS = Change(
    '2.50', 'Quota class sets show server_groups and server_group_members '
            'and drop the nova-network quotas.')
EVENTS_FOR_EVERYONE = Change(
    '2.51', 'Every caller who sees an action sees its events.')
UUID_IDS = Change(
    '2.53', 'Services and hypervisors are named by uuid; the hypervisor '
            "'search' and 'servers' paths become query parameters.")
REBUILD_KEY_NAME = Change(
    '2.54', "rebuild takes a 'key_name' (or null for none); its answer "
            'shows it.')
FLAVOR_DESCRIPTION = Change('2.55', "Flavor views show 'description'.")
MIGRATE_TO_HOST = Change('2.56', "migrate accepts a target 'host'.")
REBUILD_USER_DATA = Change(
    '2.57', "rebuild takes 'user_data' (or null for none); its answer "
            'shows it.')
QUOTA_INJECTED_FILES_GONE = Change(
    '2.57', 'Quota sets, quota class sets and /limits drop the injected '
            'file (personality) quotas.')
ACTION_UPDATED_AT = Change(
    '2.58', "Instance actions show 'updated_at'.")
MIGRATION_UUID = Change(
    '2.59', "Migrations show 'uuid' and take marker and limit.")
FLAVOR_EXTRA_SPECS_SHOWN = Change(
    '2.61', "Flavor views show 'extra_specs' to those allowed to read "
            'them.')
EVENT_HOST_ID = Change(
    '2.62', "Instance action events show 'hostId'.")
TRUSTED_CERTS = Change(
    '2.63', "Server views show 'trusted_image_certificates'.")
SERVER_GROUP_POLICY = Change(
    '2.64', "A server group has one 'policy' and its 'rules' "
            "(max_server_per_host), no 'policies' list or 'metadata'.")
CHANGES_BEFORE = Change(
    '2.66', "GET /servers takes 'changes-before'.")
EVACUATE_NO_FORCE = Change('2.68', "evacuate no longer accepts 'force'.")
SERVER_GROUPS_SHOWN = Change('2.71', "Server views show 'server_groups'.")
LOCKED_REASON = Change(
    '2.73', "lock takes a 'locked_reason', shown in server views; "
            "GET /servers filters by 'locked'.")
FULL_ACTION_ANSWERS = Change(
    '2.75', 'The answers to an update and a rebuild show every field a '
            'show does.')
SWAP_ZERO = Change(
    '2.75', "A flavor without swap shows 0, not ''.")
SERVER_GROUP_QUERY_CHECKED = Change(
    '2.75', 'GET /os-server-groups refuses unknown query parameters.')
UNSHELVE_ZONE = Change(
    '2.77', 'unshelve takes an availability zone.')
MIGRATION_OWNER = Change(
    '2.80', "Migrations show 'user_id' and 'project_id' and filter by "
            'them.')
HYPERVISOR_USAGE_GONE = Change(
    '2.88', 'Hypervisors lose their usage fields, /statistics and '
            '/uptime; show gains \'uptime\'.')
KEYPAIR_IMPORT_ONLY = Change(
    '2.92', "Key pairs are imported only ('public_key' required) and "
            "their names may hold '@' and '.'.")
EVACUATE_STOPPED = Change(
    '2.95', 'An evacuated server is left stopped.')
PINNED_ZONE = Change(
    '2.96', "Server views show 'pinned_availability_zone'.")

HISTORY: tuple[Change, ...] = tuple(
    value for value in list(globals().values())
    if isinstance(value, Change))
