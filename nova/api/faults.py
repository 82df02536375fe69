"""JSON error bodies shaped like Nova's: ``{"<name>": {"code", "message"}}``.

Clients (openstacksdk, python-openstackclient) read the message from the
single top-level key, so every error the API returns goes through here.
"""

import json

import webob

from nova import exception

# HTTP status -> the top-level key Nova uses for that class of error.
_FAULT_NAMES = {
    400: 'badRequest',
    401: 'unauthorized',
    403: 'forbidden',
    404: 'itemNotFound',
    405: 'badMethod',
    406: 'notAcceptable',
    409: 'conflictingRequest',
    413: 'overLimit',
    415: 'badMediaType',
    501: 'notImplemented',
    503: 'serviceUnavailable',
}


def error_response(status: int, message: str) -> webob.Response:
    """A JSON error response with Nova's body shape."""
    name = _FAULT_NAMES.get(status, 'computeFault')
    body = {name: {'code': status, 'message': message}}
    return webob.Response(status=status,
                          content_type='application/json',
                          charset='utf-8',
                          body=json.dumps(body).encode('utf-8'))


def status_for(exc: exception.NovaException) -> int:
    """HTTP status for a nova exception: Invalid 400, NotFound 404, ..."""
    code = getattr(exc, 'code', 500)
    return code if isinstance(code, int) and 400 <= code < 600 else 500


def from_exception(exc: exception.NovaException) -> webob.Response:
    """The error response for a nova exception raised by a handler."""
    return error_response(status_for(exc), exc.message)
