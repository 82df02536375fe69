"""Instance actions (``/servers/{id}/os-instance-actions``): what was
asked of a server and how each step went, as upstream Nova shows them.

Events (the steps) are shown from microversion 2.51 on, and before that
to callers the ``events`` policy allows; their tracebacks only to those.
2.21 shows the actions of deleted servers too, 2.58 adds ``updated_at``
and 2.62 the event's ``host`` (admins) and ``hostId``.
"""

import hashlib

from nova.api import servers
from nova.api import version_history
from nova.db import api as db
from nova.db import records
from nova import policies

_TIME_FORMAT = '%Y-%m-%dT%H:%M:%S.%f'


def _time(value) -> str | None:
    return value.strftime(_TIME_FORMAT) if value is not None else None


def _instance(req, server_id: str, rule: str) -> records.Instance:
    """The server (deleted ones from 2.21), if the caller may see its
    actions; servers of other projects do not exist for non-admins."""
    instance = db.instance_get_by_uuid(
        req.context, server_id,
        read_deleted=req.api_version.at_least(
            version_history.ACTIONS_OF_DELETED_SERVERS))
    return servers.check_access(req, instance, rule)


def _action_view(req, action: dict) -> dict:
    view = {key: action[key] for key in (
        'action', 'instance_uuid', 'message', 'project_id', 'request_id',
        'user_id')}
    view['start_time'] = _time(action['start_time'])
    if req.api_version.at_least(version_history.ACTION_UPDATED_AT):
        view['updated_at'] = _time(action['updated_at']
                                   or action['created_at'])
    return view


def _event_view(req, event: dict, project_id: str,
                may_see_traceback: bool) -> dict:
    view = {'event': event['event'], 'result': event['result'],
            'start_time': _time(event['start_time']),
            'finish_time': _time(event['finish_time'])}
    if may_see_traceback:
        view['traceback'] = event['traceback']
    if req.api_version.at_least(version_history.EVENT_HOST_ID):
        host = event['host'] or ''
        view['hostId'] = hashlib.sha224(
            (project_id + host).encode()).hexdigest() if host else ''
        if req.policy.allowed(req.context, policies.HOST_ATTRIBUTES):
            view['host'] = host
    return view


def index(req, server_id: str) -> tuple:
    """GET /servers/{id}/os-instance-actions: newest first."""
    instance = _instance(req, server_id, policies.INSTANCE_ACTIONS_LIST)
    return 200, {'instanceActions': [
        _action_view(req, action)
        for action in db.actions_get(req.context, instance.uuid)]}


def show(req, server_id: str, request_id: str) -> tuple:
    """GET /servers/{id}/os-instance-actions/{request_id}."""
    instance = _instance(req, server_id, policies.INSTANCE_ACTIONS_SHOW)
    action = db.action_get_by_request_id(req.context, instance.uuid,
                                         request_id)
    view = _action_view(req, action)
    may_see_events = req.policy.allowed(
        req.context, policies.INSTANCE_ACTIONS_EVENTS,
        {'project_id': instance.project_id})
    if may_see_events or req.api_version.at_least(
            version_history.EVENTS_FOR_EVERYONE):
        view['events'] = [
            _event_view(req, event, instance.project_id or '',
                        may_see_events)
            for event in db.action_events_get(req.context, action['id'])]
    return 200, {'instanceAction': view}
