"""Small read-only endpoints clients call around server operations.

``/limits`` reports no quota (-1 = unlimited) and the caller's usage;
``/os-availability-zone`` reports the single zone every server is in.
"""

AVAILABILITY_ZONE = 'nova'


def limits(req) -> tuple:
    """GET /limits: unlimited quotas plus the project's current usage."""
    instances = [i for i in req.compute_api.get_all(req.context, True)
                 if i.get('project_id') == req.context.project_id]
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
    return 200, {'limits': {'rate': [], 'absolute': absolute}}


def availability_zones(req) -> tuple:
    """GET /os-availability-zone[/detail]: the one zone, available."""
    zone = {'zoneName': AVAILABILITY_ZONE,
            'zoneState': {'available': True}, 'hosts': None}
    return 200, {'availabilityZoneInfo': [zone]}
