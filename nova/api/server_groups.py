"""Server groups (``/os-server-groups``): affinity policies a boot joins
with the ``group`` scheduler hint.

Shapes per microversion as upstream's: a one-item ``policies`` list and
an empty ``metadata`` until 2.63, ``project_id``/``user_id`` from 2.13,
the soft policies from 2.15, one ``policy`` with its ``rules``
(``max_server_per_host``, anti-affinity only) from 2.64, and unknown
query parameters of the list refused from 2.75. Creating answers 200,
deleting 204; a deleted group's servers keep running outside any group.
The scheduler keeps the policies (``nova.scheduler.affinity``); quotas
on groups are not enforced.
"""

from oslo_log import log as logging
from oslo_utils import uuidutils

from nova.api import validation
from nova.api import version_history
from nova.db import api as db
from nova.db import records
from nova import exception
from nova import policies
from nova.scheduler import affinity

LOG = logging.getLogger(__name__)

_NAME = {'type': 'string', 'minLength': 1, 'maxLength': 255,
         'pattern': r'^\S(.*\S)?$'}
# The keys of the scheduler hints a boot may carry them under.
HINT_KEYS = ('os:scheduler_hints', 'OS-SCH-HNT:scheduler_hints')
_LIST_QUERY = ('all_projects', 'limit', 'offset')


def _policies(req) -> tuple[str, ...]:
    """The policies the request's microversion accepts."""
    if req.api_version.at_least(version_history.SOFT_AFFINITY):
        return affinity.POLICIES
    return affinity.HARD_POLICIES


def _create_schema(req) -> dict:
    if req.api_version.at_least(version_history.SERVER_GROUP_POLICY):
        properties = {
            'name': _NAME,
            'policy': {'type': 'string', 'enum': list(_policies(req))},
            'rules': {
                'type': 'object',
                'properties': {affinity.MAX_SERVER_PER_HOST:
                               validation.positive_integer()},
                'additionalProperties': False}}
        required = ['name', 'policy']
    else:
        properties = {
            'name': _NAME,
            'policies': {
                'type': 'array', 'minItems': 1, 'maxItems': 1,
                'items': {'type': 'string', 'enum': list(_policies(req))}}}
        required = ['name', 'policies']
    return {'type': 'object',
            'properties': {'server_group': {
                'type': 'object', 'properties': properties,
                'required': required, 'additionalProperties': False}},
            'required': ['server_group'], 'additionalProperties': False}


def _view(req, group: records.ServerGroup) -> dict:
    view = {'id': group.uuid, 'name': group.name,
            'members': [member.instance_uuid for member in group.members]}
    if req.api_version.at_least(version_history.SERVER_GROUP_POLICY):
        view['policy'] = group.policy
        view['rules'] = dict(group.rules)
    else:
        view['policies'] = [group.policy]
        view['metadata'] = {}
    if req.api_version.at_least(version_history.SERVER_GROUP_OWNER):
        view['project_id'] = group.project_id
        view['user_id'] = group.user_id
    return view


def _group(req, group_id: str, rule: str) -> records.ServerGroup:
    """The group, if ``rule`` allows the caller to act on it."""
    group = db.instance_group_get(req.context, group_id)
    req.policy.authorize(req.context, rule,
                         {'project_id': group.project_id})
    return group


def create(req) -> tuple:
    """POST /os-server-groups."""
    req.policy.authorize(req.context, policies.SERVER_GROUPS_CREATE,
                         {'project_id': req.context.project_id})
    body = req.body_object()
    validation.validate(body, _create_schema(req))
    value = body['server_group']
    policy = value['policy'] if 'policy' in value else value['policies'][0]
    rules = {key: int(number)
             for key, number in value.get('rules', {}).items()}
    if rules and policy != affinity.ANTI_AFFINITY:
        raise exception.APIValidationError(
            field='server_group/rules',
            reason='Only anti-affinity policy supports rules; policy %r '
                   'takes none, got %s' % (policy, ', '.join(sorted(rules))))
    group = db.instance_group_create(req.context, {
        'uuid': uuidutils.generate_uuid(), 'name': value['name'],
        'project_id': req.context.project_id,
        'user_id': req.context.user_id, 'policy': policy, 'rules': rules})
    return 200, {'server_group': _view(req, group)}


def index(req) -> tuple:
    """GET /os-server-groups: the caller's project's groups, or every
    project's with ``all_projects`` (admins), paged by ``offset`` and
    ``limit``."""
    req.policy.authorize(req.context, policies.SERVER_GROUPS_INDEX)
    if req.api_version.at_least(version_history.SERVER_GROUP_QUERY_CHECKED):
        unknown = sorted(set(req.GET) - set(_LIST_QUERY))
        if unknown:
            raise exception.APIValidationError(
                field=unknown[0], reason='unknown query parameter %r; '
                'allowed: %s' % (unknown[0], ', '.join(_LIST_QUERY)))
    if 'all_projects' in req.GET:
        req.policy.authorize(req.context,
                             policies.SERVER_GROUPS_INDEX_ALL_PROJECTS)
        groups = db.instance_group_get_all(req.context)
    else:
        groups = db.instance_group_get_all(req.context,
                                           req.context.project_id)
    offset = validation.query_int(req, 'offset') or 0
    limit = validation.query_int(req, 'limit')
    groups = groups[offset:] if limit is None else \
        groups[offset:offset + limit]
    return 200, {'server_groups': [_view(req, group) for group in groups]}


def show(req, group_id: str) -> tuple:
    """GET /os-server-groups/{id}."""
    return 200, {'server_group': _view(
        req, _group(req, group_id, policies.SERVER_GROUPS_SHOW))}


def delete(req, group_id: str) -> tuple:
    """DELETE /os-server-groups/{id}: its servers leave it."""
    _group(req, group_id, policies.SERVER_GROUPS_DELETE)
    db.instance_group_delete(req.context, group_id)
    return 204, None


def requested_group(req, body: dict) -> str | None:
    """The server group a boot's ``os:scheduler_hints`` name (``group``),
    checked: a UUID of a group the caller's project owns (any group for
    an admin); 400 naming the value otherwise. Other hints are accepted
    and ignored, as by upstream's scheduler without their filters, with
    a warning naming them."""
    for key in HINT_KEYS:
        hints = body.get(key)
        if hints is None:
            continue
        if not isinstance(hints, dict):
            raise exception.APIValidationError(
                field=key, reason='%r is not an object' % (hints,))
        ignored = sorted(set(hints) - {'group'})
        if ignored:
            LOG.warning('Scheduler hints %s are ignored: this scheduler '
                        "keeps only 'group' (server groups)",
                        ', '.join(ignored))
        group_id = hints.get('group')
        if group_id is None:
            return None
        if not isinstance(group_id, str) or \
                not uuidutils.is_uuid_like(group_id):
            raise exception.APIValidationError(
                field='%s/group' % key,
                reason='%r is not a server group UUID' % (group_id,))
        try:
            group = db.instance_group_get(req.context, group_id)
        except exception.InstanceGroupNotFound as exc:
            raise exception.APIValidationError(
                field='%s/group' % key, reason=exc.message) from exc
        if group.project_id != req.context.project_id and \
                not req.context.is_admin:
            raise exception.APIValidationError(
                field='%s/group' % key,
                reason=exception.InstanceGroupNotFound(
                    group_uuid=group_id).message)
        return group.uuid
    return None


def of_server(req, server_id: str) -> list[str]:
    """The UUIDs of the server groups the server is in (one at most)."""
    group = db.instance_group_get_by_instance(req.context, server_id)
    return [] if group is None else [group.uuid]
