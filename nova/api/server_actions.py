"""Server actions (``POST /servers/{id}/action``): reboot, os-stop,
os-start, rebuild, shelve, shelveOffload, unshelve, resize,
confirmResize, revertResize, migrate, evacuate, os-getConsoleOutput,
lock, unlock and os-resetState, with upstream Nova's bodies, policies,
microversions and responses. A locked server refuses the others from a
non-admin (409), as upstream.

The body names one action, e.g. ``{"reboot": {"type": "HARD"}}``. The
handler validates it, checks the policy and hands it to the compute API,
which accepts it only in a state where upstream allows it (409 naming the
state otherwise) and returns at once: the server's status and task state
show the progress, ``GET /servers/{id}/os-instance-actions`` the outcome.
Moves are driven by the conductor's move workflow
(``nova.conductor.migrate``) and recorded as migrations.

``ACTIONS`` maps each body key to its handler ``handler(req, instance,
value) -> (status, body)``; other server actions register there too.
"""

import re

from nova.api import servers
from nova.api import validation
from nova.api import version_history
from nova.compute import api as compute_api
from nova.compute import vm_states
from nova.db import records
from nova import exception
from nova import policies

_NULL = {'type': 'null'}
# The value of an action that takes no argument: null, or an empty
# object (what python-novaclient and Tempest send), as upstream accepts.
_NO_ARGUMENT = {'type': ['null', 'object'], 'properties': {},
                'additionalProperties': False}

_REBOOT_SCHEMA = {
    'type': 'object',
    'properties': {
        'type': {'enum': ['HARD', 'Hard', 'hard', 'SOFT', 'Soft', 'soft']},
    },
    'required': ['type'],
    'additionalProperties': False,
}

# The image reference is a Glance image id, checked as on create (see
# nova.api.servers); the guest is redefined on the devices it has, its
# root disk made again from the image.
_REBUILD_SCHEMA = {
    'type': 'object',
    'properties': {
        'imageRef': dict(servers.IMAGE_REF_SCHEMA, minLength=1),
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                 'pattern': r'^\S(.*\S)?$'},
        'adminPass': {'type': 'string'},
        'metadata': servers.METADATA_SCHEMA,
        'preserve_ephemeral': {'type': 'boolean'},
        'OS-DCF:diskConfig': {'enum': ['AUTO', 'MANUAL']},
        'description': {'type': ['string', 'null'], 'maxLength': 255},
        'accessIPv4': {'type': ['string', 'null']},
        'accessIPv6': {'type': ['string', 'null']},
        'key_name': {'type': ['string', 'null'], 'minLength': 1,
                     'maxLength': 255},
        'user_data': {'type': ['string', 'null'], 'maxLength': 65535},
    },
    'required': ['imageRef'],
    'additionalProperties': False,
}

# 2.77 adds an availability zone; this deployment has the one zone 'nova'.
_UNSHELVE_SCHEMA = {
    'anyOf': [_NULL, {
        'type': 'object',
        'properties': {'availability_zone': {'enum': ['nova', None]}},
        'additionalProperties': False,
    }],
}


def _reboot(req, instance: records.Instance, value) -> tuple:
    req.policy.authorize(req.context, policies.SERVERS_REBOOT,
                         _target(instance))
    _check('reboot', value, _REBOOT_SCHEMA)
    req.compute_api.reboot(req.context, instance.uuid,
                           hard=value['type'].upper() == 'HARD')
    return 202, None


def _null_body_action(name: str, rule: str, method: str):
    """The handler of an action that takes no argument: check ``rule``,
    then call the compute API's ``method`` with the server's uuid."""
    def handler(req, instance: records.Instance, value) -> tuple:
        req.policy.authorize(req.context, rule, _target(instance))
        _check(name, value, _NO_ARGUMENT)
        getattr(req.compute_api, method)(req.context, instance.uuid)
        return 202, None
    return handler


def _rebuild(req, instance: records.Instance, value) -> tuple:
    req.policy.authorize(req.context, policies.SERVERS_REBUILD,
                         _target(instance))
    _check('rebuild', value, _REBUILD_SCHEMA)
    for key, change in (('key_name', version_history.REBUILD_KEY_NAME),
                        ('user_data', version_history.REBUILD_USER_DATA)):
        if key in value and not req.api_version.at_least(change):
            raise exception.APIValidationError(
                field='rebuild/%s' % key,
                reason='%s is allowed from microversion %s on' % (
                    key, change))
    values = servers.user_fields(req, value)
    if 'metadata' in value:
        values['server_metadata'] = value['metadata']
    if 'key_name' in value:
        values['key_name'] = value['key_name']
    instance = req.compute_api.rebuild(req.context, instance.uuid,
                                       value.get('name'), value['imageRef'],
                                       values)
    return 202, {'server': servers.detail_view(req, instance,
                                               servers.View.REBUILD)}


# createImage: a snapshot's name and the properties it gets besides those
# of the server's image, as upstream.
_CREATE_IMAGE_SCHEMA = {
    'type': 'object',
    'properties': {
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                 'pattern': r'^\S(.*\S)?$'},
        'metadata': {'type': 'object',
                     'additionalProperties': {'type': 'string',
                                              'maxLength': 255}},
    },
    'required': ['name'],
    'additionalProperties': False,
}


def _create_image(req, instance: records.Instance, value) -> tuple:
    """A snapshot of the server's root disk in a new image."""
    req.policy.authorize(req.context, policies.SERVERS_CREATE_IMAGE,
                         _target(instance))
    _check('createImage', value, _CREATE_IMAGE_SCHEMA)
    image_id = req.compute_api.snapshot(req.context, instance.uuid,
                                        value['name'],
                                        value.get('metadata'))
    return _image_answer(req, image_id)


_CREATE_BACKUP_SCHEMA = {
    'type': 'object',
    'properties': {
        'name': _CREATE_IMAGE_SCHEMA['properties']['name'],
        'backup_type': {'type': 'string', 'minLength': 1,
                        'maxLength': 255},
        'rotation': validation.non_negative_integer(),
        'metadata': _CREATE_IMAGE_SCHEMA['properties']['metadata'],
    },
    'required': ['name', 'backup_type', 'rotation'],
    'additionalProperties': False,
}


def _image_answer(req, image_id: str) -> tuple:
    """202 with a new image's id: in the body from 2.45 on, before that
    in the Location header (the image's URL in Glance), as upstream."""
    if req.api_version.at_least(version_history.SNAPSHOT_ID_IN_BODY):
        return 202, {'image_id': image_id}
    return 202, None, {
        'Location': req.compute_api.glance_client.image_url(image_id)}


def _create_backup(req, instance: records.Instance, value) -> tuple:
    """A snapshot kept as a backup of ``backup_type``; the compute then
    deletes the oldest backups of that type beyond ``rotation``."""
    req.policy.authorize(req.context, policies.CREATE_BACKUP,
                         _target(instance))
    _check('createBackup', value, _CREATE_BACKUP_SCHEMA)
    rotation = int(value['rotation'])
    image_id = req.compute_api.backup(
        req.context, instance.uuid, value['name'], value['backup_type'],
        rotation, value.get('metadata'))
    if rotation == 0 and not req.api_version.at_least(
            version_history.SNAPSHOT_ID_IN_BODY):
        # As upstream: with a rotation of 0 the backup is rotated out
        # at once, so there is no image to point at.
        return 202, None
    return _image_answer(req, image_id)


def _unshelve(req, instance: records.Instance, value) -> tuple:
    req.policy.authorize(req.context, policies.UNSHELVE, _target(instance))
    if value and not req.api_version.at_least(version_history.UNSHELVE_ZONE):
        raise exception.APIValidationError(
            field='unshelve', reason='an availability zone needs '
            'microversion 2.77 or later, got %r' % (value,))
    _check('unshelve', value, _UNSHELVE_SCHEMA)
    req.compute_api.unshelve(req.context, instance.uuid)
    return 202, None


# ``length``: how many lines from the end (an integer, also as a string;
# -1 or absent: all), as upstream.
_CONSOLE_OUTPUT_SCHEMA = {
    'type': 'object',
    'properties': {
        'length': {'type': ['integer', 'string', 'null'],
                   'pattern': '^-?[0-9]+$', 'minimum': -1},
    },
    'additionalProperties': False,
}
# Control characters other than tab and line feed are dropped from the
# console output, as upstream does (they would garble a terminal).
_CONSOLE_CONTROL = re.compile('[\x00-\x08\x0b-\x1f]')


def _console_output(req, instance: records.Instance, value) -> tuple:
    req.policy.authorize(req.context, policies.CONSOLE_OUTPUT,
                         _target(instance))
    _check('os-getConsoleOutput', value, _CONSOLE_OUTPUT_SCHEMA)
    length = value.get('length')
    if length is not None:
        length = int(length)
        if length < -1:
            raise exception.APIValidationError(
                field='os-getConsoleOutput/length',
                reason='%d is not allowed; -1 (all) or a number of lines '
                       'is required' % length)
    output = req.compute_api.get_console_output(
        req.context, instance, None if length == -1 else length)
    return 200, {'output': _CONSOLE_CONTROL.sub('', output)}


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


def _resize(req, instance: records.Instance, body) -> tuple:
    req.policy.authorize(req.context, policies.SERVERS_RESIZE,
                         {'project_id': instance.project_id})
    if not isinstance(body, dict):
        raise exception.APIValidationError(
            field='resize', reason='expected {"flavorRef": ...}, got %r' % (
                body,))
    validation.validate(body, _RESIZE_SCHEMA)
    req.compute_api.resize(req.context, instance,
                           validation.id_of_ref(body['flavorRef']))
    return 202, None


def _confirm(req, instance: records.Instance, body) -> tuple:
    req.policy.authorize(req.context, policies.SERVERS_CONFIRM_RESIZE,
                         {'project_id': instance.project_id})
    req.compute_api.confirm_resize(req.context, instance)
    return 204, None


def _revert(req, instance: records.Instance, body) -> tuple:
    req.policy.authorize(req.context, policies.SERVERS_REVERT_RESIZE,
                         {'project_id': instance.project_id})
    req.compute_api.revert_resize(req.context, instance)
    return 202, None


def _migrate(req, instance: records.Instance, body) -> tuple:
    req.policy.authorize(req.context, policies.MIGRATE,
                         {'project_id': instance.project_id})
    host = None
    if req.api_version.at_least(version_history.MIGRATE_TO_HOST):
        validation.validate(body, _MIGRATE_SCHEMA_2_56)
        host = (body or {}).get('host')
        if host is not None:
            req.policy.authorize(req.context, policies.MIGRATE_HOST,
                                 {'project_id': instance.project_id})
    else:
        try:
            _check('migrate', body, _NO_ARGUMENT)
        except exception.APIValidationError:
            raise exception.APIValidationError(
                field='migrate', reason='must be null or {} before '
                'microversion 2.56 (a target host needs 2.56 or later), '
                'got %r' % (body,))
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
    if not version.at_least(version_history.EVACUATE_NO_SHARED_STORAGE):
        properties['onSharedStorage'] = validation.BOOLEAN
        required.append('onSharedStorage')
    if (version.at_least(version_history.EVACUATE_FORCE)
            and not version.at_least(version_history.EVACUATE_NO_FORCE)):
        properties['force'] = {'type': 'boolean'}
    return {'type': 'object', 'properties': properties,
            'required': required, 'additionalProperties': False}


def _evacuate(req, instance: records.Instance, body) -> tuple:
    req.policy.authorize(req.context, policies.EVACUATE,
                         {'project_id': instance.project_id})
    if not isinstance(body, dict):
        raise exception.APIValidationError(
            field='evacuate', reason='expected an object, got %r' % (body,))
    validation.validate(body, _evacuate_schema(req.api_version))
    # From 2.95 an evacuated server is left stopped, as upstream.
    req.compute_api.evacuate(
        req.context, instance, body.get('host'),
        stopped=req.api_version.at_least(version_history.EVACUATE_STOPPED))
    if req.api_version.at_least(version_history.EVACUATE_NO_SHARED_STORAGE):
        return 200, None
    # This deployment sets no guest password; upstream returns the one
    # given (or generated) before 2.14.
    return 200, {'adminPass': body.get('adminPass', '')}


# 2.73 adds a reason to a lock.
_LOCK_SCHEMA_2_73 = {
    'type': ['null', 'object'],
    'properties': {'locked_reason': {'type': 'string', 'minLength': 1,
                                     'maxLength': 255}},
    'additionalProperties': False,
}


def _lock(req, instance: records.Instance, value) -> tuple:
    req.policy.authorize(req.context, policies.LOCK, _target(instance))
    _check('lock', value, _LOCK_SCHEMA_2_73
           if req.api_version.at_least(version_history.LOCKED_REASON)
           else _NO_ARGUMENT)
    req.compute_api.lock(req.context, instance,
                         (value or {}).get('locked_reason'))
    return 202, None


def _unlock(req, instance: records.Instance, value) -> tuple:
    """Unlock; a lock an admin set needs the override rule (admins)."""
    req.policy.authorize(req.context, policies.UNLOCK, _target(instance))
    _check('unlock', value, _NO_ARGUMENT)
    if instance.locked_by == 'admin':
        req.policy.authorize(req.context, policies.UNLOCK_OVERRIDE,
                             _target(instance))
    req.compute_api.unlock(req.context, instance)
    return 202, None


_RESET_STATE_SCHEMA = {
    'type': 'object',
    'properties': {'state': {'enum': [vm_states.ACTIVE, vm_states.ERROR]}},
    'required': ['state'],
    'additionalProperties': False,
}


def _reset_state(req, instance: records.Instance, value) -> tuple:
    req.policy.authorize(req.context, policies.RESET_STATE,
                         _target(instance))
    _check('os-resetState', value, _RESET_STATE_SCHEMA)
    req.compute_api.reset_state(req.context, instance, value['state'])
    return 202, None


ACTIONS = {
    'reboot': _reboot,
    'os-stop': _null_body_action('os-stop', policies.SERVERS_STOP, 'stop'),
    'os-start': _null_body_action('os-start', policies.SERVERS_START,
                                  'start'),
    'rebuild': _rebuild,
    'createImage': _create_image,
    'createBackup': _create_backup,
    'shelve': _null_body_action('shelve', policies.SHELVE, 'shelve'),
    'shelveOffload': _null_body_action(
        'shelveOffload', policies.SHELVE_OFFLOAD, 'shelve_offload'),
    'unshelve': _unshelve,
    'resize': _resize,
    'confirmResize': _confirm,
    'revertResize': _revert,
    'migrate': _migrate,
    'evacuate': _evacuate,
    'os-getConsoleOutput': _console_output,
    'lock': _lock,
    'unlock': _unlock,
    'os-resetState': _reset_state,
}
# Actions a locked server still takes from its project (upstream checks
# the lock on the others).
_UNLOCKED_ACTIONS = frozenset({'lock', 'unlock', 'os-getConsoleOutput',
                               'createImage', 'createBackup'})


def _check(name: str, value, schema: dict) -> None:
    """Validate an action's value; errors name the field from the action
    on (e.g. ``reboot/type``)."""
    validation.validate({name: value}, {
        'type': 'object', 'properties': {name: schema}, 'required': [name]})


def _target(instance: records.Instance) -> dict:
    return {'project_id': instance.project_id,
            'user_id': instance.user_id}


def action(req, server_id: str) -> tuple:
    """POST /servers/{id}/action: run the one action the body names."""
    body = req.body_object()
    names = [name for name in body if name in ACTIONS]
    if len(body) != 1 or len(names) != 1:
        raise exception.APIValidationError(
            field='body', reason='expected exactly one server action, got '
            '%s; supported: %s' % (sorted(body) or 'none',
                                   ', '.join(sorted(ACTIONS))))
    instance = servers.get_instance(req, server_id, policies.SERVERS_SHOW)
    if names[0] not in _UNLOCKED_ACTIONS:
        compute_api.check_lock(req.context, instance)
    return ACTIONS[names[0]](req, instance, body[names[0]])
