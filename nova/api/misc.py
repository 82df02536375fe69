"""Small read-only endpoints clients call around server operations.

``/limits`` reports no quota (-1 = unlimited) and the caller's usage;
``/os-availability-zone`` reports the single zone every server is in.
"""

from nova import policies
from nova.compute import utils as compute_utils
from nova.image import glance

AVAILABILITY_ZONE = 'nova'


def limits(req) -> tuple:
    """GET /limits[?tenant_id=]: unlimited quotas plus the current usage
    of the caller's project (of another project for an admin)."""
    req.policy.authorize(req.context, policies.LIMITS)
    project_id = req.GET.get('tenant_id') or req.context.project_id
    if project_id != req.context.project_id:
        req.policy.authorize(req.context, policies.LIMITS_OTHER_PROJECT,
                             {'project_id': project_id})
    instances = [i for i in req.compute_api.get_all(req.context, True)
                 if i.project_id == project_id]
    flavors = [i.flavor for i in instances if i.flavor is not None]
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
        'totalCoresUsed': sum(f.vcpus for f in flavors),
        'totalRAMUsed': sum(f.memory_mb for f in flavors),
        'totalServerGroupsUsed': 0,
    }
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


# Images ---------------------------------------------------------------------
# Upstream's image proxy (GET /images): python-openstackclient resolves
# ``--image`` through the image API, and when a client uses one endpoint
# for every service (``--os-endpoint``, no OS_IMAGE_ENDPOINT_OVERRIDE)
# those lookups arrive here. They are answered from Glance, in Glance's v2
# shape; ``none`` (a server without a disk, the GPU tests on libvirt's
# test driver) is answered as an image of its own.

def _image_body(image_id: str, name: str, status: str,
                disk_format: str | None, size: int | None) -> dict:
    return {'id': image_id, 'name': name, 'status': status,
            'visibility': 'public', 'protected': False, 'tags': [],
            'container_format': 'bare', 'disk_format': disk_format,
            'min_disk': 0, 'min_ram': 0, 'size': size,
            'self': '/v2/images/%s' % image_id,
            'schema': '/v2/schemas/image'}


def _no_image() -> dict:
    return _image_body(compute_utils.NO_IMAGE, compute_utils.NO_IMAGE,
                       'active', None, None)


def _glance_image(image: glance.ImageMeta) -> dict:
    return dict(_image_body(image.id, image.name, image.status,
                            image.disk_format, image.size),
                container_format=image.container_format,
                min_disk=image.min_disk, min_ram=image.min_ram)


def image_show(req, image_id: str) -> tuple:
    """GET /images/{id or name}: the Glance image, or ``none``."""
    req.policy.authorize(req.context, policies.IMAGES)
    if image_id == compute_utils.NO_IMAGE:
        return 200, _no_image()
    return 200, _glance_image(req.compute_api.glance_client.find(image_id))


def image_index(req) -> tuple:
    """GET /images?name=<name>: Glance's images of that name (all of
    them without a name), or ``none``."""
    req.policy.authorize(req.context, policies.IMAGES)
    name = req.GET.get('name')
    if name == compute_utils.NO_IMAGE:
        return 200, {'images': [_no_image()],
                     'schema': '/v2/schemas/images'}
    filters = {'name': name} if name else {}
    return 200, {'images': [_glance_image(image) for image in
                            req.compute_api.glance_client.list(**filters)],
                 'schema': '/v2/schemas/images'}


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
