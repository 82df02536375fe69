"""Small read-only endpoints clients call around server operations.

``/limits`` reports the project's quota limits and usage (see
nova.compute.quota); ``/os-availability-zone`` reports the single zone
every server is in.
"""

from nova.api import version_history
from nova import policies
from nova.compute import quota

AVAILABILITY_ZONE = 'nova'


# /limits ``absolute`` keys: (key, quota resource or None for a usage
# this fork has none of, the change that drops the key or None).
_ABSOLUTE = (
    ('maxTotalInstances', 'instances', None),
    ('maxTotalCores', 'cores', None),
    ('maxTotalRAMSize', 'ram', None),
    ('maxServerMeta', 'metadata_items', None),
    ('maxTotalKeypairs', 'key_pairs', None),
    ('maxServerGroups', 'server_groups', None),
    ('maxServerGroupMembers', 'server_group_members', None),
    ('maxImageMeta', 'metadata_items',
     version_history.IMAGE_META_LIMIT_GONE),
    ('maxPersonality', 'injected_files',
     version_history.QUOTA_INJECTED_FILES_GONE),
    ('maxPersonalitySize', 'injected_file_content_bytes',
     version_history.QUOTA_INJECTED_FILES_GONE),
    ('maxTotalFloatingIps', 'floating_ips',
     version_history.QUOTA_NETWORK_GONE),
    ('maxSecurityGroups', 'security_groups',
     version_history.QUOTA_NETWORK_GONE),
    ('maxSecurityGroupRules', 'security_group_rules',
     version_history.QUOTA_NETWORK_GONE),
)
_USED = (
    ('totalInstancesUsed', 'instances', None),
    ('totalCoresUsed', 'cores', None),
    ('totalRAMUsed', 'ram', None),
    ('totalServerGroupsUsed', None, None),
    ('totalFloatingIpsUsed', None, version_history.QUOTA_NETWORK_GONE),
    ('totalSecurityGroupsUsed', None, version_history.QUOTA_NETWORK_GONE),
)


def limits(req) -> tuple:
    """GET /limits[?tenant_id=]: the quota limits and usage of the
    caller's project (of another project for an admin), with the keys
    of the request's microversion."""
    req.policy.authorize(req.context, policies.LIMITS)
    project_id = req.GET.get('tenant_id') or req.context.project_id
    if project_id != req.context.project_id:
        req.policy.authorize(req.context, policies.LIMITS_OTHER_PROJECT,
                             {'project_id': project_id})
    limit = quota.project_limits(req.context, req.conf, project_id)
    used = quota.count(req.context, project_id)
    at_least = req.api_version.at_least
    absolute = {key: limit[resource] for key, resource, gone in _ABSOLUTE
                if gone is None or not at_least(gone)}
    absolute.update({key: used[resource] if resource else 0
                     for key, resource, gone in _USED
                     if gone is None or not at_least(gone)})
    return 200, {'limits': {'rate': [], 'absolute': absolute}}


def availability_zones(req) -> tuple:
    """GET /os-availability-zone: the one zone, available."""
    req.policy.authorize(req.context, policies.AZ_LIST)
    return _zones()


def availability_zones_detail(req) -> tuple:
    """GET /os-availability-zone/detail (admin): the same single zone."""
    req.policy.authorize(req.context, policies.AZ_DETAIL)
    return _zones()


def _zones() -> tuple:
    zone = {'zoneName': AVAILABILITY_ZONE,
            'zoneState': {'available': True}, 'hosts': None}
    return 200, {'availabilityZoneInfo': [zone]}


def identity_version(req) -> tuple:
    """GET /identity/v3: a discovery document only (noauth2 mode).

    python-openstackclient builds an identity v3 client for some compute
    commands (``flavor create``); pointing OS_IDENTITY_ENDPOINT_OVERRIDE
    here satisfies its version check. No identity resource is served.
    """
    return 200, {'version': {
        'id': 'v3.14', 'status': 'stable',
        'updated': '2020-04-07T00:00:00Z',
        'links': [{'rel': 'self',
                   'href': req.application_url + '/identity/v3/'}],
        'media-types': [{
            'base': 'application/json',
            'type': 'application/vnd.openstack.identity-v3+json'}],
    }}
