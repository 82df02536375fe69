"""Small read-only endpoints clients call around server operations.

``/limits`` reports no quota (-1 = unlimited) and the caller's usage;
``/os-availability-zone`` reports the single zone every server is in.
"""

from nova.api import version_history
from nova import policies

AVAILABILITY_ZONE = 'nova'


def limits(req) -> tuple:
    """GET /limits[?tenant_id=]: unlimited quotas plus the current usage
    of the caller's project (of another project for an admin), with the
    fields of the request's microversion."""
    req.policy.authorize(req.context, policies.LIMITS)
    project_id = req.GET.get('tenant_id') or req.context.project_id
    if project_id != req.context.project_id:
        req.policy.authorize(req.context, policies.LIMITS_OTHER_PROJECT,
                             {'project_id': project_id})
    instances = [i for i in req.compute_api.get_all(req.context, True)
                 if i.get('project_id') == project_id]
    flavors = [i.get('flavor') or {} for i in instances]
    absolute = {
        'maxTotalInstances': -1,
        'maxTotalCores': -1,
        'maxTotalRAMSize': -1,
        'maxServerMeta': -1,
        'maxServerGroups': -1,
        'maxServerGroupMembers': -1,
        'maxTotalKeypairs': -1,
        'maxImageMeta': -1,
        'maxPersonality': -1,
        'maxPersonalitySize': -1,
        'totalInstancesUsed': len(instances),
        'totalCoresUsed': sum(f.get('vcpus') or 0 for f in flavors),
        'totalRAMUsed': sum(f.get('memory_mb') or 0 for f in flavors),
        'totalServerGroupsUsed': 0,
    }
    version = req.api_version
    if not version.at_least(version_history.PROXIES_GONE):
        absolute.update({'maxSecurityGroups': -1,
                         'maxSecurityGroupRules': -1,
                         'maxTotalFloatingIps': -1,
                         'totalSecurityGroupsUsed': 0,
                         'totalFloatingIpsUsed': 0})
    if version.at_least(version_history.IMAGE_META_LIMIT_GONE):
        del absolute['maxImageMeta']
    if version.at_least(version_history.PERSONALITY_GONE):
        del absolute['maxPersonality'], absolute['maxPersonalitySize']
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
