"""Key pairs (``/os-keypairs``): a user's public keys by name.

Shapes per microversion as upstream's: the key type and 201/204 from
2.2, another user's key pairs for admins (``user_id``) from 2.10,
``marker``/``limit`` from 2.35, and from 2.92 only imported keys, with
``@`` and ``.`` allowed in names. The key a server boots with is kept
with the server (``key_name``); this fork serves no metadata service or
config drive to hand it to the guest (see the server-actions docs).
"""

from nova.api import validation
from nova.api import version_history
from nova.compute import keypairs
from nova.db import api as db
from nova.db import records
from nova import policies

_NAME = {'type': 'string', 'minLength': 1, 'maxLength': 255,
         'pattern': r'^[a-zA-Z0-9 _-]+$'}
_NAME_2_92 = dict(_NAME, pattern=r'^[a-zA-Z0-9 @._-]+$')


def _create_schema(req) -> dict:
    at_least = req.api_version.at_least
    properties = {'name': (_NAME_2_92
                           if at_least(version_history.KEYPAIR_IMPORT_ONLY)
                           else _NAME),
                  'public_key': {'type': 'string'}}
    required = ['name']
    if at_least(version_history.KEYPAIR_TYPE):
        properties['type'] = {'type': 'string', 'enum': ['ssh', 'x509']}
    if at_least(version_history.KEYPAIRS_OF_OTHER_USERS):
        properties['user_id'] = {'type': 'string', 'minLength': 1,
                                 'maxLength': 255}
    if at_least(version_history.KEYPAIR_IMPORT_ONLY):
        required.append('public_key')
    return {'type': 'object',
            'properties': {'keypair': {
                'type': 'object', 'properties': properties,
                'required': required, 'additionalProperties': False}},
            'required': ['keypair'], 'additionalProperties': False}


def _user(req, rule: str, user_id: str | None = None) -> str:
    """The user whose key pairs the request is about, once ``rule``
    allows the caller to act on them: the caller, or from 2.10 the
    ``user_id`` given (admins only by default)."""
    if user_id is None and req.api_version.at_least(
            version_history.KEYPAIRS_OF_OTHER_USERS):
        user_id = req.GET.get('user_id')
    user_id = user_id or req.context.user_id
    req.policy.authorize(req.context, rule, {'user_id': user_id})
    return user_id


def _view(req, keypair: records.KeyPair) -> dict:
    view = {'name': keypair.name, 'public_key': keypair.public_key,
            'fingerprint': keypair.fingerprint}
    if req.api_version.at_least(version_history.KEYPAIR_TYPE):
        view['type'] = keypair.type
    return view


def index(req) -> tuple:
    """GET /os-keypairs: the user's key pairs."""
    user_id = _user(req, policies.KEYPAIRS_INDEX)
    views = [_view(req, k) for k in db.key_pair_get_all_by_user(
        req.context, user_id)]
    if req.api_version.at_least(version_history.KEYPAIR_PAGING):
        views = validation.paginate(req, views, lambda view: view['name'])
    return 200, {'keypairs': [{'keypair': view} for view in views]}


def show(req, keypair_name: str) -> tuple:
    """GET /os-keypairs/{name}."""
    user_id = _user(req, policies.KEYPAIRS_SHOW)
    keypair = db.key_pair_get(req.context, user_id, keypair_name)
    view = _view(req, keypair)
    view.update({'user_id': keypair.user_id, 'id': keypair.id,
                 'created_at': keypair.created_at, 'updated_at': None,
                 'deleted': False, 'deleted_at': None})
    return 200, {'keypair': view}


def create(req) -> tuple:
    """POST /os-keypairs: import ``public_key``, or (before 2.92)
    generate a key pair and show its private key this once."""
    body = req.body_object()
    validation.validate(body, _create_schema(req))
    value = body['keypair']
    user_id = _user(req, policies.KEYPAIRS_CREATE, value.get('user_id'))
    private_key = None
    if 'public_key' in value:
        keypair = keypairs.import_key_pair(
            req.context, user_id, value['name'], value['public_key'],
            value.get('type', 'ssh'))
    else:
        keypair, private_key = keypairs.create_key_pair(
            req.context, user_id, value['name'], value.get('type', 'ssh'))
    view = dict(_view(req, keypair), user_id=keypair.user_id)
    if private_key is not None:
        view['private_key'] = private_key
    status = (201 if req.api_version.at_least(version_history.KEYPAIR_TYPE)
              else 200)
    return status, {'keypair': view}


def delete(req, keypair_name: str) -> tuple:
    """DELETE /os-keypairs/{name}."""
    user_id = _user(req, policies.KEYPAIRS_DELETE)
    db.key_pair_destroy(req.context, user_id, keypair_name)
    return (204 if req.api_version.at_least(version_history.KEYPAIR_TYPE)
            else 202), None
