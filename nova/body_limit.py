"""Refuse a request body over a size limit, for every WSGI app nova serves.

nova-api and the Placement that nova-all embeds both refuse a body
larger than ``[api]max_request_body_size`` with a 413: unread when
``Content-Length`` says so, cut off once the limit is passed when the
body arrives without a length (chunked). A malformed ``Content-Length``
is a 400. Each app answers in its own fault format, so the caller passes
the function that builds the refusal.

The size limit is oslo.middleware's ``RequestBodySizeLimiter``; this
module keeps what it lacks: refusing a malformed ``Content-Length`` and
answering in the caller's fault format with nova's message. It sits in
the shared base, below the REST API (``nova.api.request_guard`` adds the
API's own checks) and the embedded Placement, which both use it.
"""

from collections.abc import Callable

from oslo_config import cfg
from oslo_middleware import sizelimit
import webob.dec
import webob.exc

from nova import exception


def too_large(limit: int, size: int | None = None) -> exception.NovaException:
    """The 413 error for a body over ``limit`` bytes; ``size`` None: a
    body without a length, cut off past the limit."""
    return exception.RequestBodyTooLarge(
        size='more than %d' % limit if size is None else size, limit=limit)


class BodyLimit:
    """WSGI middleware refusing a body over ``max_body_size`` bytes.

    ``refuse(status, message)`` makes the WSGI app answering the refusal,
    in the fault format of ``application``. A body without a length
    raises webob's HTTPRequestEntityTooLarge once the application reads
    past the limit; refused here too unless the application answers it
    itself (nova's API does, see ``wsgi_app.Request.body_object``).
    """

    def __init__(self, application, max_body_size: int,
                 refuse: Callable) -> None:
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
