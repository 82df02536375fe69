"""Authentication middleware: turn a request into a nova RequestContext.

Two strategies, chosen by ``[api]auth_strategy``:

* ``noauth2`` (default): no Keystone. ``X-Auth-Token: <user>[:<project>]``
  names the caller; without a project part the project is
  ``X-Auth-Project-Id`` or the user name. User ``admin`` gets the admin
  role, everyone else the member role; like Keystone's implied roles, an
  admin is also a member and a member also a reader. A request without a
  token is refused with 401.
* ``keystone``: keystonemiddleware's auth_token validates the token and
  sets the X-User-Id / X-Project-Id / X-Roles headers this module reads.
"""

from oslo_middleware import request_id as oslo_request_id
import webob.dec

from nova.api import faults
from nova import context as nova_context

CONTEXT_KEY = 'nova.context'
ADMIN_ROLE = 'admin'
# Roles a noauth2 caller holds, as Keystone's default role implications
# (admin -> member -> reader) would expand them.
_NOAUTH_ADMIN_ROLES = [ADMIN_ROLE, 'member', 'reader']
_NOAUTH_MEMBER_ROLES = ['member', 'reader']


def _context(req: webob.Request, user_id: str, project_id: str,
             roles: list[str]) -> nova_context.RequestContext:
    """The caller's context, with the request ids the RequestId middleware
    put in the environment (see nova.api.wsgi_app).

    It becomes the current context of the thread serving the request, so
    log lines and Placement calls made for the request carry its ids.
    """
    return nova_context.RequestContext(
        user_id=user_id, project_id=project_id, roles=roles,
        is_admin=ADMIN_ROLE in roles,
        request_id=req.environ.get(oslo_request_id.ENV_REQUEST_ID),
        global_request_id=req.environ.get(oslo_request_id.GLOBAL_REQ_ID))


class NoAuth(object):
    """noauth2: trust the token as ``<user>[:<project>]``."""

    def __init__(self, application):
        self.application = application

    @webob.dec.wsgify
    def __call__(self, req: webob.Request):
        token = req.headers.get('X-Auth-Token', '').strip()
        if not token:
            return faults.error_response(
                401, 'Authentication required: send X-Auth-Token '
                     '"<user>[:<project>]" (noauth2).')
        user_id, _sep, project_id = token.partition(':')
        project_id = (project_id or req.headers.get('X-Auth-Project-Id')
                      or user_id)
        roles = list(_NOAUTH_ADMIN_ROLES if user_id == ADMIN_ROLE
                     else _NOAUTH_MEMBER_ROLES)
        req.environ[CONTEXT_KEY] = _context(req, user_id, project_id, roles)
        return self.application


class KeystoneContext(object):
    """Build the context from headers set by keystonemiddleware."""

    def __init__(self, application):
        self.application = application

    @webob.dec.wsgify
    def __call__(self, req: webob.Request):
        if req.headers.get('X-Identity-Status', 'Invalid') != 'Confirmed':
            return faults.error_response(401, 'Authentication required.')
        roles = [r.strip().lower()
                 for r in req.headers.get('X-Roles', '').split(',')
                 if r.strip()]
        req.environ[CONTEXT_KEY] = _context(
            req, req.headers.get('X-User-Id'), req.headers.get('X-Project-Id'),
            roles)
        return self.application


def pipeline(application, conf):
    """Wrap ``application`` with the configured authentication."""
    if conf.api.auth_strategy == 'keystone':
        # Imported here: keystonemiddleware is only needed with Keystone.
        from keystonemiddleware import auth_token
        return auth_token.AuthProtocol(KeystoneContext(application),
                                       {'oslo_config_config': conf})
    return NoAuth(application)
