"""Compute services (``/os-services``, admin): list them, enable or
disable scheduling to a compute and force it down, with upstream Nova's
bodies.

Before microversion 2.53 a service is named by ``host`` and ``binary`` in
the body of ``PUT /os-services/{action}`` (``enable``, ``disable``,
``disable-log-reason``, and ``force-down`` from 2.11) and listed with an
integer id; from 2.53 it is named by its uuid
(``PUT /os-services/{service_uuid}`` with ``status``, ``disabled_reason``
and ``forced_down``), and only nova-compute services can be updated.

A disabled compute gets no new instances (the scheduler skips it); a
forced-down one counts as down whatever its heartbeats say
(``nova.servicegroup.api``), so its instances can be evacuated at once.
"""

from oslo_utils import uuidutils

from nova.api import misc
from nova.api import validation
from nova.api import version_history
from nova.db import api as db
from nova.db import records
from nova import exception
from nova import policies
from nova.servicegroup import api as servicegroup

COMPUTE_BINARY = 'nova-compute'
# Zone upstream shows for services that are not computes.
INTERNAL_ZONE = 'internal'
_TIME_FORMAT = '%Y-%m-%dT%H:%M:%S.%f'

_NAME = {'type': 'string', 'minLength': 1, 'maxLength': 255}
_REASON = {'type': 'string', 'minLength': 1, 'maxLength': 255}
_PROPERTIES = {'disabled_reason': _REASON,
               'forced_down': validation.BOOLEAN}


def _by_host(*extra: str) -> dict:
    """Schema of the pre-2.53 bodies: host, binary and ``extra``."""
    properties = {'host': _NAME, 'binary': _NAME}
    properties.update({name: _PROPERTIES[name] for name in extra})
    return {'type': 'object', 'properties': properties,
            'required': ['host', 'binary', *extra],
            'additionalProperties': False}


_UPDATE_253 = {
    'type': 'object',
    'properties': {'status': {'type': 'string',
                              'enum': ['enabled', 'disabled']},
                   **_PROPERTIES},
    'additionalProperties': False,
}


def _time(value) -> str | None:
    return value.strftime(_TIME_FORMAT) if value is not None else None


def _view(req, service: records.Service) -> dict:
    """One service as GET /os-services shows it at this microversion."""
    view = {
        'id': (service.uuid
               if req.api_version.at_least(version_history.UUID_IDS)
               else service.id),
        'binary': service.binary,
        'host': service.host,
        'zone': (misc.AVAILABILITY_ZONE
                 if service.binary == COMPUTE_BINARY else INTERNAL_ZONE),
        'status': 'disabled' if service.disabled else 'enabled',
        'state': 'up' if servicegroup.is_up(service, req.conf) else 'down',
        'updated_at': _time(service.updated_at
                            or servicegroup.last_seen(service)),
        'disabled_reason': service.disabled_reason,
    }
    if req.api_version.at_least(version_history.SERVICE_FORCED_DOWN):
        view['forced_down'] = service.forced_down
    return view


def index(req) -> tuple:
    """GET /os-services: every service, optionally of one ``host`` and/or
    ``binary``."""
    req.policy.authorize(req.context, policies.SERVICES_LIST)
    found = db.service_get_all(req.context, binary=req.GET.get('binary'),
                               host=req.GET.get('host'))
    return 200, {'services': [_view(req, s) for s in found]}


def update(req, service_id: str) -> tuple:
    """PUT /os-services/{action} (before 2.53) or
    PUT /os-services/{service_uuid} (2.53)."""
    req.policy.authorize(req.context, policies.SERVICES_UPDATE)
    if req.api_version.at_least(version_history.UUID_IDS):
        return _update_by_uuid(req, service_id)
    return _update_by_host(req, service_id)


# Before 2.53 ----------------------------------------------------------------

def _actions(req) -> dict:
    """Pre-2.53 action -> (extra body fields, the update it makes)."""
    actions = {
        'enable': ((), lambda body: {'disabled': False,
                                     'disabled_reason': None}),
        'disable': ((), lambda body: {'disabled': True,
                                      'disabled_reason': None}),
        'disable-log-reason': (
            ('disabled_reason',),
            lambda body: {'disabled': True,
                          'disabled_reason': body['disabled_reason']}),
    }
    if req.api_version.at_least(version_history.SERVICE_FORCED_DOWN):
        actions['force-down'] = (
            ('forced_down',),
            lambda body: {'forced_down': validation.as_bool(
                body['forced_down'])})
    return actions


def _update_by_host(req, action: str) -> tuple:
    actions = _actions(req)
    if action not in actions:
        raise exception.NotFound(
            'Unknown action %r on /os-services at microversion %s; '
            'allowed: %s.' % (action, req.api_version,
                              ', '.join(sorted(actions))))
    extra, values_of = actions[action]
    body = req.body_object()
    validation.validate(body, _by_host(*extra))
    service = db.service_get_by_host_and_binary(req.context, body['host'],
                                                body['binary'])
    service = db.service_update(req.context, service.id, values_of(body))
    shown = {'host': service.host, 'binary': service.binary}
    if action == 'force-down':
        shown['forced_down'] = service.forced_down
    else:
        shown['status'] = 'disabled' if service.disabled else 'enabled'
    if action == 'disable-log-reason':
        shown['disabled_reason'] = service.disabled_reason
    return 200, {'service': shown}


# 2.53 -----------------------------------------------------------------------

def _update_by_uuid(req, service_uuid: str) -> tuple:
    if not uuidutils.is_uuid_like(service_uuid):
        raise exception.APIValidationError(
            field='service_id',
            reason='%r is not a service uuid' % service_uuid)
    body = req.body_object()
    validation.validate(body, _UPDATE_253)
    status = body.get('status')
    if 'disabled_reason' in body and status != 'disabled':
        raise exception.APIValidationError(
            field='disabled_reason', reason="allowed only with status "
            "'disabled', not with status %r" % status)
    if status is None and 'forced_down' not in body:
        raise exception.APIValidationError(
            field='body', reason="no update requested: give 'status' "
            "and/or 'forced_down'")
    service = db.service_get_by_uuid(req.context, service_uuid)
    if service.binary != COMPUTE_BINARY:
        raise exception.APIValidationError(
            field='service_id', reason='%s is a %s service; only %s '
            'services can be updated' % (service_uuid, service.binary,
                                         COMPUTE_BINARY))
    values = {}
    if status is not None:
        values['disabled'] = status == 'disabled'
        values['disabled_reason'] = body.get('disabled_reason')
    if 'forced_down' in body:
        values['forced_down'] = validation.as_bool(body['forced_down'])
    service = db.service_update(req.context, service.id, values)
    return 200, {'service': _view(req, service)}
