"""Quota sets (``/os-quota-sets/{project_id}``): a project's limits, a
user's in it (``?user_id=``), their usage (``/detail``) and the defaults
(``/defaults``), as upstream serves them.

The keys shown follow upstream's microversions exactly (clients and
Tempest compare them): the nova-network quotas go at 2.36, the injected
file quotas at 2.57. Limits are -1 (unlimited) or a non-negative integer
(or a string of one); a limit below the current usage is refused unless
``force`` is true.

This fork's GPU quota, the devices of each ``[pci]alias`` a project may
hold, is served beside them at ``/os-quota-sets/{project_id}/pci-aliases``
(same shapes, one key per alias), so upstream's key sets stay exact.
"""

from nova.api import validation
from nova.api import version_history
from nova.compute import quota
from nova.db import api as db
from nova import exception
from nova import policies


def shown(req) -> tuple[str, ...]:
    """The upstream resources a quota set shows at the request's
    microversion."""
    at_least = req.api_version.at_least
    hidden = set()
    if at_least(version_history.QUOTA_NETWORK_GONE):
        hidden.update(quota.NETWORK)
    if at_least(version_history.QUOTA_INJECTED_FILES_GONE):
        hidden.update(quota.INJECTED_FILES)
    return tuple(r for r in quota.RESOURCES if r not in hidden)


def update_schema(root: str, keys, force: bool) -> dict:
    """The body of a PUT: ``{root: {key: limit, ...}}`` with only
    ``keys`` (and ``force`` if allowed)."""
    properties = {key: validation.quota_limit() for key in keys}
    if force:
        properties['force'] = validation.BOOLEAN
    return {'type': 'object',
            'properties': {root: {'type': 'object',
                                  'properties': properties,
                                  'additionalProperties': False}},
            'required': [root], 'additionalProperties': False}


def _user_id(req) -> str | None:
    return req.GET.get('user_id') or None


def _limits(req, project_id: str, aliases=()) -> dict[str, int]:
    user_id = _user_id(req)
    conf = req.conf
    if user_id is None:
        return quota.project_limits(req.context, conf, project_id, aliases)
    return quota.user_limits(req.context, conf, project_id, user_id,
                             aliases)


def _usage(req, project_id: str) -> dict[str, int]:
    """Usage of the project (the user's, with ``user_id``); key pairs
    are a user's (the caller's unless ``user_id``), as upstream."""
    user_id = _user_id(req)
    usage = quota.count(req.context, project_id, user_id)
    usage['key_pairs'] = len(db.key_pair_get_all_by_user(
        req.context, user_id or req.context.user_id))
    return usage


def _detail_view(limits: dict[str, int], usage: dict[str, int],
                 keys) -> dict:
    return {key: {'limit': limits[key], 'in_use': usage.get(key, 0),
                  'reserved': 0} for key in keys}


def _authorize(req, rule: str, project_id: str) -> None:
    req.policy.authorize(req.context, rule, {'project_id': project_id})


def _check_settable(req, project_id: str, limits: dict[str, int]) -> None:
    """Refuse (400, upstream's words) a limit below the usage, or a
    user's limit above the project's."""
    usage = quota.count(req.context, project_id, _user_id(req))
    project = (quota.project_limits(req.context, req.conf, project_id,
                                    _aliases(limits))
               if _user_id(req) else {})
    for resource, limit in sorted(limits.items()):
        used = usage.get(resource, 0)
        if limit != quota.UNLIMITED and limit < used:
            raise exception.QuotaLimitOutOfRange(
                limit=limit, resource=resource,
                bound='greater than or equal to already used and '
                      'reserved %d' % used)
        maximum = project.get(resource, quota.UNLIMITED)
        if maximum != quota.UNLIMITED and (
                limit == quota.UNLIMITED or limit > maximum):
            raise exception.QuotaLimitOutOfRange(
                limit=limit, resource=resource,
                bound='less than or equal to %d' % maximum)


def _aliases(resources) -> list[str]:
    return [r[len(quota.PCI_ALIAS_PREFIX):] for r in resources
            if r.startswith(quota.PCI_ALIAS_PREFIX)]


def _store(req, project_id: str, values: dict) -> None:
    """Validate and store the limits of a PUT body's values (resource
    -> limit, plus ``force``)."""
    values = dict(values)
    force = validation.as_bool(values.pop('force', False))
    limits = {resource: int(limit) for resource, limit in values.items()}
    if not force:
        _check_settable(req, project_id, limits)
    db.quota_set(req.context, project_id, limits, _user_id(req))


def show(req, project_id: str) -> tuple:
    """GET /os-quota-sets/{project_id}[?user_id=]: the limits."""
    _authorize(req, policies.QUOTA_SETS_SHOW, project_id)
    limits = _limits(req, project_id)
    return 200, {'quota_set': dict(
        {'id': project_id}, **{key: limits[key] for key in shown(req)})}


def detail(req, project_id: str) -> tuple:
    """GET /os-quota-sets/{project_id}/detail: limits with usage."""
    _authorize(req, policies.QUOTA_SETS_DETAIL, project_id)
    view = _detail_view(_limits(req, project_id),
                        _usage(req, project_id), shown(req))
    return 200, {'quota_set': dict({'id': project_id}, **view)}


def defaults(req, project_id: str) -> tuple:
    """GET /os-quota-sets/{project_id}/defaults: the limits a project
    without limits of its own has."""
    _authorize(req, policies.QUOTA_SETS_DEFAULTS, project_id)
    limits = quota.class_limits(req.context, req.conf, quota.DEFAULT_CLASS)
    return 200, {'quota_set': dict(
        {'id': project_id}, **{key: limits[key] for key in shown(req)})}


def update(req, project_id: str) -> tuple:
    """PUT /os-quota-sets/{project_id}[?user_id=]: set limits; the
    limits afterwards (without ``id``, as upstream)."""
    _authorize(req, policies.QUOTA_SETS_UPDATE, project_id)
    body = req.body_object()
    validation.validate(body, update_schema('quota_set', shown(req), True))
    _store(req, project_id, body['quota_set'])
    limits = _limits(req, project_id)
    return 200, {'quota_set': {key: limits[key] for key in shown(req)}}


def delete(req, project_id: str) -> tuple:
    """DELETE /os-quota-sets/{project_id}[?user_id=]: back to the
    defaults (202, as upstream)."""
    _authorize(req, policies.QUOTA_SETS_DELETE, project_id)
    db.quota_destroy_all(req.context, project_id, _user_id(req))
    return 202, None


# This fork's PCI alias (GPU) limits --------------------------------------

def _alias_names(req) -> list[str]:
    return sorted(req.compute_api.aliases)


def pci_show(req, project_id: str) -> tuple:
    """GET /os-quota-sets/{project_id}/pci-aliases[?user_id=]: the limit
    and usage of the devices of every [pci]alias."""
    _authorize(req, policies.QUOTA_SETS_SHOW, project_id)
    names = _alias_names(req)
    resources = [quota.pci_alias_resource(name) for name in names]
    view = _detail_view(_limits(req, project_id, names),
                        _usage(req, project_id), resources)
    return 200, {'quota_set': dict(
        {'id': project_id},
        **{name: view[resource] for name, resource in zip(names,
                                                          resources)})}


def pci_update(req, project_id: str) -> tuple:
    """PUT /os-quota-sets/{project_id}/pci-aliases[?user_id=]: set the
    limits of aliases (``{"quota_set": {"h200": 16}}``); the limits."""
    _authorize(req, policies.QUOTA_SETS_UPDATE, project_id)
    body = req.body_object()
    names = _alias_names(req)
    values = body.get('quota_set')
    for key in values if isinstance(values, dict) else ():
        if key != 'force' and key not in names:
            raise exception.APIValidationError(
                field='quota_set/%s' % key,
                reason='no [pci]alias is named %r; the aliases are: %s' % (
                    key, ', '.join(names) or 'none'))
    validation.validate(body, update_schema('quota_set', names, True))
    values = {('force' if key == 'force' else
               quota.pci_alias_resource(key)): value
              for key, value in body['quota_set'].items()}
    _store(req, project_id, values)
    limits = _limits(req, project_id, names)
    return 200, {'quota_set': {
        name: limits[quota.pci_alias_resource(name)] for name in names}}
