"""Server actions (``POST /servers/{id}/action``): resize, confirmResize,
revertResize, migrate and evacuate, with upstream's bodies, codes and
microversions.

The body names one action, e.g. ``{"resize": {"flavorRef": "3"}}``;
the work is done by ``compute_api`` (``nova.compute.api.API``) and the
conductor's move workflow (``nova.conductor.migrate``).
"""

from nova.api import servers
from nova.api import validation
from nova import exception
from nova import policies

_RESIZE_SCHEMA = {
    'type': 'object',
    'properties': {
        'flavorRef': {'type': ['string', 'integer'], 'minLength': 1},
        'OS-DCF:diskConfig': {'enum': ['AUTO', 'MANUAL']},
    },
    'required': ['flavorRef'],
    'additionalProperties': False,
}

# Since 2.56 an admin may name the target host of a cold migration.
_MIGRATE_SCHEMA_2_56 = {
    'type': ['object', 'null'],
    'properties': {
        'host': {'type': ['string', 'null'], 'minLength': 1,
                 'maxLength': 255},
    },
    'additionalProperties': False,
}


def _resize(req, instance: dict, body) -> tuple:
    req.policy.authorize(req.context, policies.SERVERS_RESIZE,
                         {'project_id': instance.get('project_id')})
    if not isinstance(body, dict):
        raise exception.APIValidationError(
            field='resize', reason='expected {"flavorRef": ...}, got %r' % (
                body,))
    validation.validate(body, _RESIZE_SCHEMA)
    req.compute_api.resize(req.context, instance,
                           servers.flavor_id(body['flavorRef']))
    return 202, None


def _confirm(req, instance: dict, body) -> tuple:
    req.policy.authorize(req.context, policies.SERVERS_CONFIRM_RESIZE,
                         {'project_id': instance.get('project_id')})
    req.compute_api.confirm_resize(req.context, instance)
    return 204, None


def _revert(req, instance: dict, body) -> tuple:
    req.policy.authorize(req.context, policies.SERVERS_REVERT_RESIZE,
                         {'project_id': instance.get('project_id')})
    req.compute_api.revert_resize(req.context, instance)
    return 202, None


def _migrate(req, instance: dict, body) -> tuple:
    req.policy.authorize(req.context, policies.MIGRATE,
                         {'project_id': instance.get('project_id')})
    host = None
    if req.api_version.at_least('2.56'):
        validation.validate(body, _MIGRATE_SCHEMA_2_56)
        host = (body or {}).get('host')
        if host is not None:
            req.policy.authorize(req.context, policies.MIGRATE_HOST,
                                 {'project_id': instance.get('project_id')})
    elif body is not None:
        raise exception.APIValidationError(
            field='migrate', reason='must be null before microversion 2.56 '
            '(a target host needs 2.56 or later), got %r' % (body,))
    req.compute_api.migrate(req.context, instance, host)
    return 202, None


def _evacuate_schema(version) -> dict:
    """The body of ``evacuate`` at a microversion, as upstream: before
    2.14 ``onSharedStorage`` is required, from 2.14 it is gone; ``force``
    exists from 2.29 to 2.67."""
    properties = {
        'host': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'adminPass': {'type': 'string', 'maxLength': 255},
    }
    required = []
    if not version.at_least('2.14'):
        properties['onSharedStorage'] = {
            'type': ['boolean', 'string'],
            'enum': [True, False, 'True', 'False', 'true', 'false']}
        required.append('onSharedStorage')
    if version.at_least('2.29') and not version.at_least('2.68'):
        properties['force'] = {'type': 'boolean'}
    return {'type': 'object', 'properties': properties,
            'required': required, 'additionalProperties': False}


def _evacuate(req, instance: dict, body) -> tuple:
    req.policy.authorize(req.context, policies.EVACUATE,
                         {'project_id': instance.get('project_id')})
    if not isinstance(body, dict):
        raise exception.APIValidationError(
            field='evacuate', reason='expected an object, got %r' % (body,))
    validation.validate(body, _evacuate_schema(req.api_version))
    req.compute_api.evacuate(req.context, instance, body.get('host'))
    if req.api_version.at_least('2.14'):
        return 200, None
    # This deployment sets no guest password; upstream returns the one
    # given (or generated) before 2.14.
    return 200, {'adminPass': body.get('adminPass', '')}


ACTIONS = {
    'evacuate': _evacuate,
    'resize': _resize,
    'confirmResize': _confirm,
    'revertResize': _revert,
    'migrate': _migrate,
}


def action(req, server_id: str) -> tuple:
    """POST /servers/{id}/action: run the one action the body names."""
    body = req.body_object()
    names = sorted(body)
    if len(names) != 1 or names[0] not in ACTIONS:
        raise exception.APIValidationError(
            field='action', reason='the body must name exactly one action '
            'of %s, got %s' % (', '.join(sorted(ACTIONS)),
                               ', '.join(names) or 'none'))
    # 404 for a server the caller cannot see; each action checks its own
    # rule.
    instance = servers.get_server(req, server_id, policies.SERVERS_SHOW)
    return ACTIONS[names[0]](req, instance, body[names[0]])
