"""Servers (``/servers``): create, list, show and delete.

The work is done by the ``compute_api`` given to ``make_app`` (the boot
path); this module validates requests, scopes them to the caller's project
and renders instance dicts (from nova.db.api) as Compute API server views.

``compute_api`` must provide::

    create(context, name, flavor_ref, image_ref, metadata) -> dict
    get(context, uuid) -> dict
    get_all(context, detail: bool) -> list[dict]
    delete(context, uuid) -> None
"""

import base64
import binascii
import enum
import hashlib
import ipaddress
import re

from nova.api import server_filters
from nova.api import server_groups
from nova.api import validation
from nova.api import version_history
from nova.compute import api as compute_api
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.db import api as db
from nova.db import records
from nova import exception
from nova import policies

# vm_state -> the status clients see.
_STATUS = {
    vm_states.BUILDING: 'BUILD',
    vm_states.ACTIVE: 'ACTIVE',
    vm_states.ERROR: 'ERROR',
    vm_states.DELETED: 'DELETED',
    vm_states.STOPPED: 'SHUTOFF',
    vm_states.PAUSED: 'PAUSED',
    vm_states.SUSPENDED: 'SUSPENDED',
    vm_states.SOFT_DELETED: 'SOFT_DELETED',
    vm_states.SHELVED: 'SHELVED',
    vm_states.SHELVED_OFFLOADED: 'SHELVED_OFFLOADED',
    vm_states.RESIZED: 'VERIFY_RESIZE',
}
_STATUS_BY_NAME = {status: vm_state for vm_state, status in _STATUS.items()}
# Task states that change the status of an ACTIVE or SHUTOFF server while
# they run, as upstream shows them (a cold migration shows RESIZE too).
_TASK_STATUS = {task_states.REBOOTING: 'REBOOT',
                task_states.REBOOTING_HARD: 'HARD_REBOOT',
                task_states.REBUILDING: 'REBUILD',
                task_states.RESIZE_PREP: 'RESIZE',
                task_states.RESIZE_MIGRATING: 'RESIZE',
                task_states.RESIZE_MIGRATED: 'RESIZE',
                task_states.RESIZE_FINISH: 'RESIZE',
                task_states.RESIZE_REVERTING: 'REVERT_RESIZE'}


def status(instance: records.Instance) -> str:
    """The status clients see for an instance (upstream's mapping)."""
    vm_state = instance.vm_state
    if vm_state in (vm_states.ACTIVE, vm_states.STOPPED):
        by_task = _TASK_STATUS.get(instance.task_state)
        if by_task:
            return by_task
    return _STATUS.get(vm_state, 'UNKNOWN')


# The image reference is a Glance image id (checked against Glance before
# scheduling, see nova.compute.api.API.image), or "none" (or empty) for a
# server without a disk (the GPU tests on libvirt's test driver). This
# deployment has no Neutron: networks are accepted and not configured.
IMAGE_REF_SCHEMA = {'type': 'string', 'maxLength': 255,
                    'pattern': r'^(?!\.\.?$)[^/]*$'}

# A server's metadata: key -> string, as create, rebuild and the
# metadata paths take it.
METADATA_SCHEMA = {
    'type': 'object',
    'propertyNames': {'minLength': 1, 'maxLength': 255},
    'additionalProperties': {'type': 'string', 'maxLength': 255},
}

# How many servers a create makes (upstream's multiple create): a
# positive integer, or its digits.
_COUNT_SCHEMA = {'anyOf': [{'type': 'integer', 'minimum': 1},
                           {'type': 'string', 'pattern': '^[1-9][0-9]*$'}]}

_CREATE_SCHEMA = {
    'type': 'object',
    'properties': {
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                 'pattern': r'^\S(.*\S)?$'},
        'flavorRef': {'type': ['string', 'integer'], 'minLength': 1},
        'imageRef': IMAGE_REF_SCHEMA,
        'metadata': METADATA_SCHEMA,
        'networks': {'anyOf': [{'enum': ['auto', 'none']},
                               {'type': 'array'}]},
        'min_count': _COUNT_SCHEMA,
        'max_count': _COUNT_SCHEMA,
        # Answer with the create's reservation id instead of the server.
        'return_reservation_id': validation.BOOLEAN,
        'key_name': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'description': {'type': ['string', 'null'], 'maxLength': 255},
        'accessIPv4': {'type': 'string'},
        'accessIPv6': {'type': 'string'},
        'user_data': {'type': 'string', 'maxLength': 65535},
    },
    'required': ['name', 'flavorRef'],
}

_NAME_SCHEMA = _CREATE_SCHEMA['properties']['name']


def user_fields(req, body: dict) -> dict:
    """The instance columns of what a create, update or rebuild body
    says of the server besides its name: ``description`` (from 2.19),
    ``accessIPv4``/``accessIPv6`` (an address of that family, or empty)
    and ``user_data`` (base64), each checked and named when bad."""
    values = {}
    if 'description' in body:
        if not req.api_version.at_least(version_history.SERVER_DESCRIPTION):
            raise exception.APIValidationError(
                field='description',
                reason='description is allowed from microversion 2.19 on')
        values['description'] = body['description']
    for key, column, family in (('accessIPv4', 'access_ip_v4', 4),
                                ('accessIPv6', 'access_ip_v6', 6)):
        if key not in body:
            continue
        address = body[key] or None
        if address is not None:
            try:
                parsed = ipaddress.ip_address(address)
            except ValueError:
                parsed = None
            if parsed is None or parsed.version != family:
                raise exception.APIValidationError(
                    field=key, reason='%r is not an IPv%d address' % (
                        address, family))
            address = str(parsed)
        values[column] = address
    if body.get('user_data') is not None:
        try:
            base64.b64decode(body['user_data'], validate=True)
        except (ValueError, binascii.Error):
            raise exception.APIValidationError(
                field='user_data', reason='user_data is not base64')
    if 'user_data' in body:
        values['user_data'] = body['user_data']
    return values


_HOST_ATTRIBUTES = ('OS-EXT-SRV-ATTR:host',
                    'OS-EXT-SRV-ATTR:hypervisor_hostname',
                    'OS-EXT-SRV-ATTR:instance_name')


def _links(req, uuid: str) -> list[dict]:
    return [{'rel': 'self', 'href': req.link('servers', uuid)},
            {'rel': 'bookmark',
             'href': req.link('servers', uuid, versioned=False)}]


def _image_view(req, instance: records.Instance) -> dict | str:
    """The server's image as upstream shows it: id and link, or '' for a
    server without one."""
    image_ref = instance.image_ref or ''
    if image_ref in ('', compute_utils.NO_IMAGE):
        return ''
    return {'id': image_ref, 'links': [{
        'rel': 'bookmark',
        'href': req.link('images', image_ref, versioned=False)}]}


def _flavor_view(req, instance: records.Instance) -> dict:
    """The server's flavor: a link before 2.47, the boot-time copy after."""
    flavor = instance.flavor
    if not req.api_version.at_least(version_history.FLAVOR_IN_SERVER):
        flavorid = flavor.flavorid if flavor else instance.flavor_id
        return {'id': flavorid,
                'links': [{'rel': 'bookmark', 'href': req.link(
                    'flavors', flavorid, versioned=False)}]}
    view = {'original_name': flavor.name if flavor else None,
            'vcpus': flavor.vcpus if flavor else None,
            'ram': flavor.memory_mb if flavor else None,
            'disk': flavor.root_gb if flavor else None,
            'ephemeral': 0,
            'swap': 0}
    # As upstream: extra specs only for callers who may list them.
    if req.policy.allowed(req.context, policies.EXTRA_SPECS_INDEX):
        view['extra_specs'] = dict(flavor.extra_specs if flavor else {})
    return view


def _fault_view(instance: records.Instance, is_admin: bool) -> dict | None:
    """The fault of an ERROR server; details (possibly a traceback) are
    for admins only."""
    if instance.vm_state != vm_states.ERROR or not (
            instance.fault_message or instance.fault_details):
        return None
    fault = {'code': 500,
             'message': instance.fault_message or '',
             'created': instance.updated_at
             or instance.created_at}
    if is_admin:
        fault['details'] = instance.fault_details or ''
    return fault


def _host_id(instance: records.Instance) -> str:
    """Opaque per-project host identifier (never the host name)."""
    if not instance.host:
        return ''
    key = '%s%s' % (instance.project_id or '', instance.host)
    return hashlib.sha224(key.encode()).hexdigest()


def _brief_view(req, instance: records.Instance) -> dict:
    return {'id': instance.uuid, 'name': instance.display_name,
            'links': _links(req, instance.uuid)}


class View(enum.Enum):
    """Where a server view is shown: upstream shows fewer fields in the
    answers to an update or a rebuild (until 2.75), a rebuild's own
    fields in its answer and the server groups (2.71) only for one
    server."""

    LIST = 'list'
    SHOW = 'show'
    ACTION = 'action'
    REBUILD = 'rebuild'


def _hostname(instance: records.Instance) -> str:
    """The guest host name a server's name gives, as upstream derives
    it: lower case, '-' for spaces and underscores, only letters, digits,
    '.' and '-', at most 63 characters."""
    name = (instance.display_name or '').lower()
    name = re.sub(r'[ _]', '-', name)
    name = re.sub(r'[^a-z0-9.-]', '', name).strip('.-')[:63]
    return name or 'server-%s' % instance.uuid


def _extended_view(req, instance: records.Instance) -> dict:
    """The fields of the extensions upstream leaves out of an update's
    and a rebuild's answer before 2.75."""
    view = {
        'OS-EXT-AZ:availability_zone': 'nova',
        'config_drive': '',
        'key_name': instance.key_name,
        'OS-SRV-USG:launched_at': None,
        'OS-SRV-USG:terminated_at': instance.deleted_at,
        'OS-EXT-STS:vm_state': instance.vm_state,
        'OS-EXT-STS:task_state': instance.task_state,
        'OS-EXT-STS:power_state': instance.power_state or 0,
        'os-extended-volumes:volumes_attached': [],
        'security_groups': [{'name': 'default'}],
    }
    if req.policy.allowed(req.context, policies.HOST_ATTRIBUTES):
        view['OS-EXT-SRV-ATTR:host'] = instance.host
        view['OS-EXT-SRV-ATTR:hypervisor_hostname'] = instance.node
        view['OS-EXT-SRV-ATTR:instance_name'] = 'instance-%s' % (
            instance.uuid)
        if req.api_version.at_least(version_history.MORE_HOST_ATTRIBUTES):
            view.update({
                'OS-EXT-SRV-ATTR:reservation_id': instance.reservation_id,
                'OS-EXT-SRV-ATTR:launch_index': 0,
                'OS-EXT-SRV-ATTR:hostname': _hostname(instance),
                'OS-EXT-SRV-ATTR:kernel_id': '',
                'OS-EXT-SRV-ATTR:ramdisk_id': '',
                'OS-EXT-SRV-ATTR:root_device_name': None,
                'OS-EXT-SRV-ATTR:user_data': instance.user_data,
            })
    return view


def _rebuild_fields(req, instance: records.Instance) -> dict:
    """What a rebuild's answer adds: the key pair (2.54) and user data
    (2.57) it may have changed."""
    fields = {}
    if req.api_version.at_least(version_history.REBUILD_KEY_NAME):
        fields['key_name'] = instance.key_name
    if req.api_version.at_least(version_history.REBUILD_USER_DATA):
        fields['user_data'] = instance.user_data
    return fields


def detail_view(req, instance: records.Instance,
                where: View = View.LIST) -> dict:
    """The server as ``where`` shows it at the request's microversion."""
    version = req.api_version
    view = _brief_view(req, instance)
    view.update({
        'status': status(instance),
        'tenant_id': instance.project_id,
        'user_id': instance.user_id,
        'metadata': instance.server_metadata or {},
        'hostId': _host_id(instance),
        'image': _image_view(req, instance),
        'flavor': _flavor_view(req, instance),
        'created': instance.created_at,
        'updated': instance.updated_at or instance.created_at,
        'addresses': {},
        'accessIPv4': instance.access_ip_v4 or '',
        'accessIPv6': instance.access_ip_v6 or '',
        'OS-DCF:diskConfig': 'MANUAL',
        'progress': 0,
    })
    if where not in (View.ACTION, View.REBUILD) or version.at_least(
            version_history.FULL_ACTION_ANSWERS):
        view.update(_extended_view(req, instance))
    if where is View.REBUILD:
        view.update(_rebuild_fields(req, instance))
        # A rebuild shows its user_data as 'user_data' (2.57), never
        # under the admin's attribute name.
        view.pop('OS-EXT-SRV-ATTR:user_data', None)
    fault = _fault_view(instance, req.context.is_admin)
    if fault is not None:
        view['fault'] = fault
    # Fields later microversions add; this deployment has no value for
    # some of them beyond the defaults.
    for since, key, value in (
            (version_history.LOCKED_SHOWN, 'locked',
             bool(instance.locked)),
            (version_history.SERVER_DESCRIPTION, 'description',
             instance.description),
            (version_history.SERVER_TAGS, 'tags', []),
            (version_history.TRUSTED_CERTS, 'trusted_image_certificates',
             None),
            (version_history.LOCKED_REASON, 'locked_reason',
             instance.locked_reason),
            (version_history.PINNED_ZONE, 'pinned_availability_zone',
             None)):
        if version.at_least(since):
            view[key] = value
    if where is not View.LIST and version.at_least(
            version_history.SERVER_GROUPS_SHOWN):
        view['server_groups'] = server_groups.of_server(
            req, instance.uuid)
    return view


def get_instance(req, server_id: str, rule: str) -> records.Instance:
    """The instance, if the caller may act on it by ``rule`` (see
    :func:`check_access`)."""
    return check_access(req, req.compute_api.get(req.context, server_id),
                        rule)


def check_access(req, instance: records.Instance,
                 rule: str) -> records.Instance:
    """``instance``, if the caller may act on it by ``rule``.

    As upstream, a server of another project does not exist for a caller
    who is not an admin (404, so ids of other projects leak nothing); in
    the caller's own project ``rule`` decides (403 when refused).
    """
    context = req.context
    if (instance.project_id != context.project_id
            and not context.is_admin):
        raise exception.InstanceNotFound(instance_id=instance.uuid)
    req.policy.authorize(context, rule,
                         {'project_id': instance.project_id})
    return instance


def _listed(req, detail: bool) -> list[dict]:
    """Servers of the caller's project (every project for an admin asking
    ``all_tenants``), filtered and sorted as the query asks (see
    nova.api.server_filters), newest first by default."""
    req.policy.authorize(req.context, policies.SERVERS_DETAIL if detail
                         else policies.SERVERS_INDEX)
    all_projects = req.GET.get('all_tenants')
    if all_projects is not None and (
            all_projects == '' or validation.boolean('all_tenants',
                                                     all_projects)):
        req.policy.authorize(req.context,
                             policies.SERVERS_DETAIL_ALL_PROJECTS if detail
                             else policies.SERVERS_INDEX_ALL_PROJECTS)
        instances = req.compute_api.get_all(req.context, detail)
    else:
        instances = [i for i in req.compute_api.get_all(req.context, detail)
                     if i.project_id == req.context.project_id]
    query = server_filters.ListQuery.from_request(
        req, _STATUS_BY_NAME, req.context.is_admin)
    instances = query.apply(instances)
    return validation.paginate(req, instances,
                               lambda instance: instance.uuid)


def index(req) -> tuple:
    """GET /servers: id, name and links."""
    return 200, {'servers': [_brief_view(req, i)
                             for i in _listed(req, detail=False)]}


def detail(req) -> tuple:
    """GET /servers/detail: full server views."""
    return 200, {'servers': [detail_view(req, i)
                             for i in _listed(req, detail=True)]}


def show(req, server_id: str) -> tuple:
    """GET /servers/{id}."""
    instance = get_instance(req, server_id, policies.SERVERS_SHOW)
    return 200, {'server': detail_view(req, instance, View.SHOW)}


_UPDATE_SCHEMA = {
    'type': 'object',
    'properties': {'server': {
        'type': 'object',
        'properties': {
            'name': _NAME_SCHEMA,
            'description': {'type': ['string', 'null'], 'maxLength': 255},
            'accessIPv4': {'type': ['string', 'null']},
            'accessIPv6': {'type': ['string', 'null']},
            # Upstream accepts and ignores these.
            'OS-DCF:diskConfig': {'enum': ['AUTO', 'MANUAL']},
        },
        'additionalProperties': False}},
    'required': ['server'], 'additionalProperties': False,
}


def update(req, server_id: str) -> tuple:
    """PUT /servers/{id}: rename, describe (2.19) or readdress a server;
    the server as an action's answer shows it."""
    instance = get_instance(req, server_id, policies.SERVERS_UPDATE)
    body = req.body_object()
    validation.validate(body, _UPDATE_SCHEMA)
    value = body['server']
    values = user_fields(req, value)
    if 'name' in value:
        values['display_name'] = value['name']
    if values:
        instance = req.compute_api.update(req.context, instance, values)
    return 200, {'server': detail_view(req, instance, View.ACTION)}


def create(req) -> tuple:
    """POST /servers: boot one server, or ``min_count`` to ``max_count``
    of them; 202 with the (first) server's id and links."""
    req.policy.authorize(req.context, policies.SERVERS_CREATE,
                         {'project_id': req.context.project_id,
                          'user_id': req.context.user_id})
    group = server_groups.requested_group(req, req.body_object())
    body = req.body_object('server')
    validation.validate(body, _CREATE_SCHEMA)
    flavor_ref = validation.id_of_ref(body['flavorRef'])
    try:
        db.flavor_get_by_flavorid(req.context, flavor_ref)
    except exception.FlavorNotFound:
        raise exception.APIValidationError(
            field='flavorRef', reason='flavor %r does not exist' % (
                body['flavorRef'],))
    # user_fields names the columns ServerFields holds.
    fields = compute_api.ServerFields(key_name=body.get('key_name'),
                                      server_group=group,
                                      **user_fields(req, body))
    min_count = int(body.get('min_count', 1))
    max_count = int(body.get('max_count', min_count))
    if max_count < min_count:
        raise exception.APIValidationError(
            field='max_count', reason='min_count %d must be less than or '
            'equal to max_count %d' % (min_count, max_count))
    instances = req.compute_api.create(
        req.context, body['name'], flavor_ref, body.get('imageRef', ''),
        body.get('metadata', {}), fields, min_count, max_count)
    if validation.as_bool(body.get('return_reservation_id', False)):
        return 202, {'reservation_id': instances[0].reservation_id}
    # The first server answers for all, as upstream's.
    uuid = instances[0].uuid
    server = {'id': uuid, 'links': _links(req, uuid),
              'OS-DCF:diskConfig': 'MANUAL',
              'security_groups': [{'name': 'default'}]}
    return 202, {'server': server}, {'Location': req.link('servers', uuid)}


_METADATA_ITEM_SCHEMA = {
    'type': 'object',
    'properties': {'meta': {
        'type': 'object', 'minProperties': 1, 'maxProperties': 1,
        'propertyNames': {'minLength': 1, 'maxLength': 255},
        'additionalProperties': {'type': 'string', 'maxLength': 255}}},
    'required': ['meta'], 'additionalProperties': False,
}


def metadata_index(req, server_id: str) -> tuple:
    """GET /servers/{id}/metadata."""
    instance = get_instance(req, server_id, policies.METADATA_INDEX)
    return 200, {'metadata': instance.server_metadata or {}}


_METADATA_SCHEMA = {
    'type': 'object',
    'properties': {'metadata': METADATA_SCHEMA},
    'required': ['metadata'], 'additionalProperties': False,
}


def metadata_update(req, server_id: str) -> tuple:
    """POST /servers/{id}/metadata with ``{"metadata": {...}}``: the
    items given are set, the others kept; the server's metadata."""
    instance = get_instance(req, server_id, policies.METADATA_UPDATE)
    compute_api.check_lock(req.context, instance)
    body = req.body_object()
    validation.validate(body, _METADATA_SCHEMA)
    metadata = dict(instance.server_metadata or {})
    metadata.update(body['metadata'])
    return 200, {'metadata': req.compute_api.set_metadata(
        req.context, instance, metadata)}


def metadata_replace(req, server_id: str) -> tuple:
    """PUT /servers/{id}/metadata with ``{"metadata": {...}}``: the items
    given become all of the server's metadata."""
    instance = get_instance(req, server_id, policies.METADATA_UPDATE)
    compute_api.check_lock(req.context, instance)
    body = req.body_object()
    validation.validate(body, _METADATA_SCHEMA)
    return 200, {'metadata': req.compute_api.set_metadata(
        req.context, instance, dict(body['metadata']))}


def metadata_show(req, server_id: str, key: str) -> tuple:
    """GET /servers/{id}/metadata/{key}."""
    instance = get_instance(req, server_id, policies.METADATA_INDEX)
    metadata = instance.server_metadata or {}
    if key not in metadata:
        raise exception.MetadataItemNotFound(key=key)
    return 200, {'meta': {key: metadata[key]}}


def metadata_item(req, key: str) -> str:
    """The value a ``{"meta": {key: value}}`` body sets for the ``key``
    of the URL (server and image metadata take the same body)."""
    body = req.body_object()
    validation.validate(body, _METADATA_ITEM_SCHEMA)
    if list(body['meta']) != [key]:
        raise exception.APIValidationError(
            field='meta', reason='the body must set the key of the URL, '
            '%r, not %s' % (key, ', '.join(map(repr, body['meta']))))
    return body['meta'][key]


def metadata_update_item(req, server_id: str, key: str) -> tuple:
    """PUT /servers/{id}/metadata/{key} with ``{"meta": {key: value}}``.
    """
    instance = get_instance(req, server_id, policies.METADATA_UPDATE)
    compute_api.check_lock(req.context, instance)
    value = metadata_item(req, key)
    req.compute_api.update_metadata_item(req.context, instance, key, value)
    return 200, {'meta': {key: value}}


def metadata_delete_item(req, server_id: str, key: str) -> tuple:
    """DELETE /servers/{id}/metadata/{key}."""
    instance = get_instance(req, server_id, policies.METADATA_DELETE)
    compute_api.check_lock(req.context, instance)
    req.compute_api.update_metadata_item(req.context, instance, key, None)
    return 204, None


def delete(req, server_id: str) -> tuple:
    """DELETE /servers/{id}."""
    compute_api.check_lock(req.context, get_instance(
        req, server_id, policies.SERVERS_DELETE))
    req.compute_api.delete(req.context, server_id)
    return 204, None
