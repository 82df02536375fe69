"""Refuse hostile requests before the API reads them.

A request whose path or query string is not valid UTF-8 once
percent-decoded is a 400 (webob would raise while decoding it, a 500), and
a body larger than ``[api]max_request_body_size`` is a 413: refused
unread when ``Content-Length`` says so, and cut off once the limit is
passed when the body arrives without a length (chunked). The body limit
alone (:class:`BodyLimit`) also guards the Placement nova hosts.

The size limit is oslo.middleware's ``RequestBodySizeLimiter``; this
module keeps what it lacks: refusing a malformed ``Content-Length`` and
answering in the caller's fault format with nova's message (the API's
JSON depth check is ``nova.api.wsgi_app.Request.body_object``).
"""

from collections.abc import Callable
from urllib import parse

from oslo_config import cfg
from oslo_middleware import sizelimit
import webob.dec
import webob.exc

from nova.api import faults
from nova import exception


def too_large(limit: int, size: int | None = None) -> exception.NovaException:
    """The 413 error for a body over ``limit`` bytes; ``size`` None: a
    body without a length, cut off past the limit."""
    return exception.RequestBodyTooLarge(
        size='more than %d' % limit if size is None else size, limit=limit)


def _undecodable(environ: dict) -> str | None:
    """Name of the first request part that is not UTF-8, or None."""
    for key, part in (('SCRIPT_NAME', 'path'), ('PATH_INFO', 'path')):
        try:
            # WSGI carries the percent-decoded bytes as latin-1 text.
            environ.get(key, '').encode('latin-1').decode('utf-8')
        except UnicodeError:
            return part
    try:
        parse.parse_qsl(environ.get('QUERY_STRING', ''),
                        keep_blank_values=True, errors='strict')
    except UnicodeError:
        return 'query string'
    return None


class BodyLimit:
    """WSGI middleware refusing a body over ``max_body_size`` bytes.

    ``refuse(status, message)`` makes the WSGI app answering the refusal,
    in the fault format of ``application`` (nova's by default). A body
    without a length raises webob's HTTPRequestEntityTooLarge once the
    application reads past the limit; refused here too unless the
    application answers it itself (nova's API does, see
    ``wsgi_app.Request.body_object``).
    """

    def __init__(self, application, max_body_size: int,
                 refuse: Callable = faults.error_response) -> None:
        self.application = application
        self.max_body_size = max_body_size
        self.refuse = refuse
        # A private configuration: the limit of one app never leaks into
        # another's (nova-all serves two) through the global cfg.CONF.
        conf = cfg.ConfigOpts()
        self._limiter = sizelimit.RequestBodySizeLimiter(application, conf)
        conf.set_override('max_request_body_size', max_body_size,
                          group='oslo_middleware')

    @webob.dec.wsgify
    def __call__(self, req: webob.Request):
        length = (req.environ.get('CONTENT_LENGTH') or '').strip()
        if length and not length.isdecimal():
            return self.refuse(400, 'Content-Length %r is not a '
                               'non-negative integer.' % length)
        try:
            # Called with the request, the limiter raises its refusal.
            return self._limiter(req)
        except webob.exc.HTTPRequestEntityTooLarge:
            return self.refuse(413, too_large(self.max_body_size,
                                              req.content_length).message)


class RequestGuard:
    """WSGI middleware applying the checks above to ``application``."""

    def __init__(self, application, max_body_size: int) -> None:
        self._limited = BodyLimit(application, max_body_size)

    def __call__(self, environ: dict, start_response):
        part = _undecodable(environ)
        if part is not None:
            return faults.error_response(
                400, 'The request %s is not valid UTF-8 after percent-'
                'decoding.' % part)(environ, start_response)
        return self._limited(environ, start_response)
