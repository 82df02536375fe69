"""Refuse hostile requests before the API reads them.

A request whose path or query string is not valid UTF-8 once
percent-decoded is a 400 (webob would raise while decoding it, a 500), and
a body larger than ``[api]max_request_body_size`` is a 413: refused
unread when ``Content-Length`` says so, and cut off once the limit is
passed when the body arrives without a length (chunked). The body limit
is :mod:`nova.body_limit`, which also guards the Placement nova hosts;
this module answers its refusals in the API's fault format (the API's
JSON depth check is ``nova.api.wsgi_app.Request.body_object``).
"""

from urllib import parse

from nova.api import faults
from nova import body_limit


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


class RequestGuard:
    """WSGI middleware applying the checks above to ``application``."""

    def __init__(self, application, max_body_size: int) -> None:
        self._limited = body_limit.BodyLimit(application, max_body_size,
                                             faults.error_response)

    def __call__(self, environ: dict, start_response):
        part = _undecodable(environ)
        if part is not None:
            return faults.error_response(
                400, 'The request %s is not valid UTF-8 after percent-'
                'decoding.' % part)(environ, start_response)
        return self._limited(environ, start_response)
