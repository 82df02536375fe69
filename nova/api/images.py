"""The deprecated image proxy (``/images``), as upstream serves it.

Up to microversion 2.35 the Compute API shows Glance's images in its own
shape: a list of ids, names and links, details with a Compute-style
status (ACTIVE, SAVING, ...), ``progress``, ``minDisk``/``minRam``, the
image's properties as ``metadata`` and, for a snapshot, the ``server`` it
was taken of; images can be deleted and their metadata edited. From 2.36
on every path answers 404, as upstream's proxy APIs do. Clients that
want Glance's own shape (python-openstackclient among them) use Glance's
endpoint.
"""

from oslo_utils import timeutils

from nova.api import servers
from nova.api import validation
from nova.api import version_history
from nova import exception
from nova.image import glance
from nova import policies

# Glance status -> the status the proxy shows, and how far along an
# image's upload is, as upstream maps them; anything else is UNKNOWN, 0.
_STATUS = {'active': 'ACTIVE', 'queued': 'SAVING', 'saving': 'SAVING',
           'deleted': 'DELETED', 'pending_delete': 'DELETED',
           'killed': 'ERROR'}
_PROGRESS = {'queued': 25, 'saving': 50, 'active': 100}
# The query parameters of a list passed to Glance (same names there).
_GLANCE_FILTERS = ('name', 'limit', 'marker')
# The proxy's filters on an image's properties, and the property each
# matches (a snapshot's or backup's server and kind); Glance filters by
# property too, and the listing is checked again here.
_PROPERTY_FILTERS = {'server': 'instance_uuid', 'type': 'image_type'}


def _check_version(req) -> None:
    """404 from 2.36 on, as for a path upstream no longer has."""
    if req.api_version.at_least(version_history.PROXIES_GONE):
        raise exception.NotFound(
            'The image proxy is not served from microversion %s on; use '
            "the image service's API." % version_history.PROXIES_GONE)
    req.policy.authorize(req.context, policies.IMAGES)


def _links(req, image_id: str) -> list[dict]:
    return [{'rel': 'self', 'href': req.link('images', image_id)},
            {'rel': 'bookmark',
             'href': req.link('images', image_id, versioned=False)},
            {'rel': 'alternate', 'type': 'application/vnd.openstack.image',
             'href': req.compute_api.glance_client.image_url(image_id)}]


def _brief(req, image: glance.ImageMeta) -> dict:
    return {'id': image.id, 'name': image.name,
            'links': _links(req, image.id)}


def _detail(req, image: glance.ImageMeta) -> dict:
    view = dict(_brief(req, image), **{
        'status': _STATUS.get(image.status, 'UNKNOWN'),
        'progress': _PROGRESS.get(image.status, 0),
        'minDisk': image.min_disk,
        'minRam': image.min_ram,
        'created': image.created_at,
        'updated': image.updated_at,
        'metadata': dict(image.properties),
        'OS-EXT-IMG-SIZE:size': image.size,
    })
    server_id = image.properties.get('instance_uuid')
    if server_id:
        view['server'] = {'id': server_id, 'links': [
            {'rel': 'self', 'href': req.link('servers', server_id)},
            {'rel': 'bookmark',
             'href': req.link('servers', server_id, versioned=False)}]}
    return view


def _wanted(req) -> dict[str, str]:
    """The image properties a listing asks for: ``server`` (a server's id
    or any of its links) and ``type`` (``snapshot`` or ``backup``)."""
    wanted = {}
    for key, prop in _PROPERTY_FILTERS.items():
        value = req.GET.get(key)
        if value:
            # A server link ends with the server's id.
            wanted[prop] = validation.id_of_ref(value) \
                if key == 'server' else value
    return wanted


def _changed_since(image: glance.ImageMeta, since: str) -> bool:
    """Whether the image changed at or after the ISO 8601 time ``since``
    (400 naming it when it is no time)."""
    try:
        moment = timeutils.normalize_time(timeutils.parse_isotime(since))
    except ValueError:
        raise exception.APIValidationError(
            field='changes-since',
            reason='%r is not an ISO 8601 time' % (since,)) from None
    updated = image.updated_at or image.created_at
    return updated is not None and timeutils.normalize_time(
        timeutils.parse_isotime(updated)) >= moment


def _listed(req) -> list[glance.ImageMeta]:
    """The images of a listing, after upstream's proxy filters: name,
    server, type, status, changes-since, minRam, minDisk."""
    _check_version(req)
    filters = {key: req.GET[key] for key in _GLANCE_FILTERS
               if key in req.GET}
    wanted = _wanted(req)
    status = req.GET.get('status')
    changed_since = req.GET.get('changes-since')
    min_ram = validation.query_int(req, 'minRam')
    min_disk = validation.query_int(req, 'minDisk')
    return [image for image in req.compute_api.glance_client.list(
                **filters, **wanted)
            if all(image.properties.get(prop) == value
                   for prop, value in wanted.items())
            and (status is None or
                 _STATUS.get(image.status, 'UNKNOWN') == status.upper())
            and (changed_since is None or
                 _changed_since(image, changed_since))
            and (min_ram is None or image.min_ram >= min_ram)
            and (min_disk is None or image.min_disk >= min_disk)]


def index(req) -> tuple:
    """GET /images: ids, names and links."""
    return 200, {'images': [_brief(req, i) for i in _listed(req)]}


def detail(req) -> tuple:
    """GET /images/detail: every image in the proxy's detail shape."""
    return 200, {'images': [_detail(req, i) for i in _listed(req)]}


def _image(req, image_id: str, rule: str | None = None
           ) -> glance.ImageMeta:
    """The Glance image; with ``rule``, if the caller may change it (its
    owner project is the target)."""
    _check_version(req)
    image = req.compute_api.glance_client.show(image_id)
    if rule is not None:
        req.policy.authorize(req.context, rule,
                             {'project_id': image.owner})
    return image


def show(req, image_id: str) -> tuple:
    """GET /images/{id}."""
    return 200, {'image': _detail(req, _image(req, image_id))}


def delete(req, image_id: str) -> tuple:
    """DELETE /images/{id}: deleted in Glance (404 if it has none)."""
    _image(req, image_id, policies.IMAGES_UPDATE)
    req.compute_api.glance_client.delete(image_id)
    return 204, None


# Metadata ------------------------------------------------------------------

_METADATA_SCHEMA = {
    'type': 'object',
    'properties': {'metadata': servers.METADATA_SCHEMA},
    'required': ['metadata'], 'additionalProperties': False,
}


def metadata_index(req, image_id: str) -> tuple:
    """GET /images/{id}/metadata: the image's properties."""
    return 200, {'metadata': dict(_image(req, image_id).properties)}


def metadata_show(req, image_id: str, key: str) -> tuple:
    """GET /images/{id}/metadata/{key}."""
    properties = _image(req, image_id).properties
    if key not in properties:
        raise exception.NotFound('Image %s has no metadata item %r.' % (
            image_id, key))
    return 200, {'meta': {key: properties[key]}}


def _write(req, image: glance.ImageMeta, set_: dict, replace: bool) -> dict:
    """Set ``set_`` (and with ``replace``, drop every other property);
    the image's properties after."""
    remove = tuple(sorted(set(image.properties) - set(set_))) \
        if replace else ()
    return dict(req.compute_api.glance_client.update_properties(
        image.id, set_, remove).properties)


def _metadata_write(req, image_id: str, replace: bool) -> tuple:
    image = _image(req, image_id, policies.IMAGES_UPDATE)
    body = req.body_object()
    validation.validate(body, _METADATA_SCHEMA)
    return 200, {'metadata': _write(req, image, body['metadata'], replace)}


def metadata_update(req, image_id: str) -> tuple:
    """POST /images/{id}/metadata: set the items given, keep the rest."""
    return _metadata_write(req, image_id, replace=False)


def metadata_replace(req, image_id: str) -> tuple:
    """PUT /images/{id}/metadata: the items given become all of them."""
    return _metadata_write(req, image_id, replace=True)


def metadata_update_item(req, image_id: str, key: str) -> tuple:
    """PUT /images/{id}/metadata/{key} with ``{"meta": {key: value}}``."""
    image = _image(req, image_id, policies.IMAGES_UPDATE)
    value = servers.metadata_item(req, key)
    _write(req, image, {key: value}, replace=False)
    return 200, {'meta': {key: value}}


def metadata_delete_item(req, image_id: str, key: str) -> tuple:
    """DELETE /images/{id}/metadata/{key}."""
    if key not in _image(req, image_id, policies.IMAGES_UPDATE).properties:
        raise exception.NotFound('Image %s has no metadata item %r.' % (
            image_id, key))
    req.compute_api.glance_client.update_properties(image_id, {}, (key,))
    return 204, None
