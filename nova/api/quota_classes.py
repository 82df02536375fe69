"""Quota class sets (``/os-quota-class-sets/{class}``), as upstream: the
``default`` class's limits are every project's defaults (overriding
``[quota]``); other class names are stored and shown but apply to no
project. Admin only.

Keys per microversion as upstream's: before 2.50 the nova-network quotas
and no server group quotas; from 2.50 the reverse; from 2.57 no injected
file quotas.
"""

from nova.api import quota_sets
from nova.api import validation
from nova.api import version_history
from nova.compute import quota
from nova.db import api as db
from nova import policies

_SERVER_GROUPS = ('server_groups', 'server_group_members')


def _shown(req) -> tuple[str, ...]:
    at_least = req.api_version.at_least
    hidden = set()
    if at_least(version_history.QUOTA_CLASS_SERVER_GROUPS):
        hidden.update(quota.NETWORK)
    else:
        hidden.update(_SERVER_GROUPS)
    if at_least(version_history.QUOTA_INJECTED_FILES_GONE):
        hidden.update(quota.INJECTED_FILES)
    return tuple(r for r in quota.RESOURCES if r not in hidden)


def _view(req, class_name: str) -> dict:
    limits = quota.class_limits(req.context, req.conf, class_name)
    return {key: limits[key] for key in _shown(req)}


def show(req, class_name: str) -> tuple:
    """GET /os-quota-class-sets/{class}: the class's limits."""
    req.policy.authorize(req.context, policies.QUOTA_CLASS_SETS_SHOW)
    return 200, {'quota_class_set': dict({'id': class_name},
                                         **_view(req, class_name))}


def update(req, class_name: str) -> tuple:
    """PUT /os-quota-class-sets/{class}: set limits of the class; its
    limits afterwards (without ``id``, as upstream)."""
    req.policy.authorize(req.context, policies.QUOTA_CLASS_SETS_UPDATE)
    body = req.body_object()
    validation.validate(body, quota_sets.update_schema(
        'quota_class_set', _shown(req), False))
    db.quota_class_set(req.context, class_name, {
        key: int(value) for key, value in body['quota_class_set'].items()})
    return 200, {'quota_class_set': _view(req, class_name)}
