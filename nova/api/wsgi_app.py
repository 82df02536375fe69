"""The Compute API WSGI application: routing, JSON, errors, microversions.

``make_app(conf, compute_api)`` returns a WSGI callable serving the version
documents at ``/`` and ``/v2.1`` and the v2.1 resources below it. Handlers
are plain functions ``handler(req, **path_vars)`` returning
``(status, body)`` or ``(status, body, headers)``; everything around them
(request ids, authentication, microversion negotiation, nova exception
to HTTP error mapping, JSON encoding) lives here so handlers stay small.

Every response carries the request's own id, ``req-<uuid>``, in
``x-openstack-request-id`` and ``x-compute-request-id``. A caller's valid
``X-OpenStack-Request-ID: req-<uuid>`` becomes the request's global id,
which travels with the context over RPC to the services and Placement;
any other value is ignored.
"""

import datetime
import json

from oslo_log import log as logging
from oslo_middleware import request_id
import routes
import webob
import webob.dec
import webob.exc

from nova.api import auth
from nova.api import faults
from nova.api import flavors
from nova.api import hypervisors
from nova.api import images
from nova.api import instance_actions
from nova.api import keypairs
from nova.api import microversion
from nova.api import migrations
from nova.api import misc
from nova.api import policy
from nova.api import quota_classes
from nova.api import quota_sets
from nova.api import request_guard
from nova.api import server_actions
from nova.api import server_groups
from nova.api import servers
from nova.api import services
from nova.api import versions
from nova import body_limit
from nova import exception

LOG = logging.getLogger(__name__)

PREFIX = '/v2.1'
VERSION_KEY = 'nova.api_version'
# Deepest JSON body accepted. Compute API bodies are a few levels deep;
# the limit keeps the parser and schema validation (both recursive) far
# from Python's recursion limit.
MAX_BODY_DEPTH = 32
# The Compute API's own name for the response header of the request id.
COMPUTE_REQUEST_ID_HEADER = 'x-compute-request-id'


class _RequestId(request_id.RequestId):
    """oslo.middleware's request ids, answered in both headers."""

    compat_headers = [COMPUTE_REQUEST_ID_HEADER]


def _too_deep(value: object, limit: int) -> bool:
    """True if ``value`` nests lists/dicts more than ``limit`` levels."""
    level = [value]
    for _depth in range(limit + 1):
        level = [child for item in level
                 for child in (item.values() if isinstance(item, dict)
                               else item if isinstance(item, list) else ())]
        if not level:
            return False
    return True


class Request(webob.Request):
    """A request plus the API state handlers need."""

    # Set by the application before a handler runs: the oslo.config
    # object, the boot-path compute_api and the policy Enforcer.
    conf = None
    compute_api = None
    policy = None

    @property
    def api_version(self) -> microversion.APIVersion:
        """The microversion this request runs at."""
        return self.environ.get(VERSION_KEY, microversion.MIN)

    @property
    def context(self):
        """The caller's nova RequestContext (set by the auth middleware)."""
        return self.environ[auth.CONTEXT_KEY]

    def body_object(self, root: str | None = None) -> dict:
        """The JSON body as a dict; with ``root``, the dict under that key.

        Raises APIValidationError (400) for a missing or malformed body.
        """
        too_deep = exception.APIValidationError(
            field='body', reason='JSON nested more than %d levels deep' %
            MAX_BODY_DEPTH)
        try:
            raw = self.body
        except webob.exc.HTTPRequestEntityTooLarge:
            # oslo.middleware's limit on a body without a length (see
            # nova.body_limit), answered as nova answers it.
            raise body_limit.too_large(
                self.conf.api.max_request_body_size) from None
        try:
            body = json.loads(raw or b'null')
        except ValueError as exc:
            raise exception.APIValidationError(
                field='body', reason='malformed JSON: %s' % exc)
        except RecursionError:
            raise too_deep from None
        if _too_deep(body, MAX_BODY_DEPTH):
            raise too_deep
        if not isinstance(body, dict):
            raise exception.APIValidationError(
                field='body', reason='expected a JSON object, got %r' % (
                    body,))
        if root is None:
            return body
        inner = body.get(root)
        if not isinstance(inner, dict):
            raise exception.APIValidationError(
                field=root, reason="the body must be {%r: {...}}" % root)
        return inner

    def link(self, *parts: str, versioned: bool = True) -> str:
        """Absolute URL of a resource: versioned (self) or bookmark."""
        base = self.application_url + (PREFIX if versioned else '')
        return '/'.join([base] + [str(p) for p in parts])


def _json_default(value):
    if isinstance(value, datetime.datetime):
        return value.strftime('%Y-%m-%dT%H:%M:%SZ')
    raise TypeError('%r is not JSON serializable' % (value,))


def _respond(result) -> webob.Response:
    status, body = result[0], result[1]
    headers = result[2] if len(result) > 2 else {}
    response = webob.Response(status=status)
    if body is not None:
        response.content_type = 'application/json'
        response.charset = 'utf-8'
        response.body = json.dumps(body, default=_json_default).encode()
    else:
        # webob defaults to text/html with an empty body; say nothing.
        response.content_type = None
    response.headers.update(headers)
    return response


class _Router(object):
    """Maps (path, method) to handlers; 404 and 405 as JSON faults."""

    def __init__(self):
        self._mapper = routes.Mapper()
        self._handlers: dict[str, dict] = {}

    def add(self, path: str, **handlers) -> None:
        """Route ``path`` with handlers keyed by HTTP method (GET=...)."""
        name = 'r%d' % len(self._handlers)
        self._handlers[name] = handlers
        self._mapper.connect(name, path)

    def match(self, path: str):
        """(handlers by method, path variables) or None."""
        found = self._mapper.routematch(path)
        if found is None:
            return None
        path_vars, route = found
        return self._handlers[route.name], dict(path_vars)

    def routes(self) -> list[tuple[str, str, object]]:
        """Every (path template, method, handler), in routing order."""
        return [(route.routepath, method, handler)
                for route in self._mapper.matchlist
                for method, handler in self._handlers[route.name].items()]


def _build_router() -> _Router:
    router = _Router()
    router.add('/', GET=versions.index)
    router.add(PREFIX, GET=versions.show)
    router.add(PREFIX + '/', GET=versions.show)
    router.add('/v2', GET=versions.show_v2_0)
    router.add('/v2/', GET=versions.show_v2_0)
    p = PREFIX
    router.add(p + '/flavors', GET=flavors.index, POST=flavors.create)
    router.add(p + '/flavors/detail', GET=flavors.detail)
    router.add(p + '/flavors/{flavor_id}', GET=flavors.show,
               DELETE=flavors.delete)
    router.add(p + '/flavors/{flavor_id}/os-extra_specs',
               GET=flavors.specs_index, POST=flavors.specs_create)
    router.add(p + '/flavors/{flavor_id}/os-extra_specs/{key}',
               GET=flavors.specs_show, PUT=flavors.specs_update,
               DELETE=flavors.specs_delete)
    router.add(p + '/servers', GET=servers.index, POST=servers.create)
    router.add(p + '/servers/detail', GET=servers.detail)
    router.add(p + '/servers/{server_id}', GET=servers.show,
               PUT=servers.update, DELETE=servers.delete)
    router.add(p + '/servers/{server_id}/action', POST=server_actions.action)
    router.add(p + '/servers/{server_id}/metadata',
               GET=servers.metadata_index, POST=servers.metadata_update,
               PUT=servers.metadata_replace)
    router.add(p + '/servers/{server_id}/metadata/{key}',
               GET=servers.metadata_show, PUT=servers.metadata_update_item,
               DELETE=servers.metadata_delete_item)
    router.add(p + '/servers/{server_id}/os-instance-actions',
               GET=instance_actions.index)
    router.add(p + '/servers/{server_id}/os-instance-actions/{request_id}',
               GET=instance_actions.show)
    router.add(p + '/servers/{server_id}/migrations',
               GET=migrations.server_index)
    router.add(p + '/servers/{server_id}/migrations/{migration_id}',
               GET=migrations.server_show)
    router.add(p + '/os-migrations', GET=migrations.index)
    router.add(p + '/os-hypervisors', GET=hypervisors.index)
    router.add(p + '/os-hypervisors/detail', GET=hypervisors.detail)
    router.add(p + '/os-hypervisors/statistics', GET=hypervisors.statistics)
    router.add(p + '/os-hypervisors/{hypervisor_id}', GET=hypervisors.show)
    router.add(p + '/os-hypervisors/{hypervisor_id}/uptime',
               GET=hypervisors.uptime)
    router.add(p + '/os-hypervisors/{hypervisor_id}/pci-devices',
               GET=hypervisors.pci_devices)
    router.add(p + '/os-hypervisors/{pattern}/search',
               GET=hypervisors.search)
    router.add(p + '/os-hypervisors/{pattern}/servers',
               GET=hypervisors.servers)
    router.add(p + '/os-keypairs', GET=keypairs.index, POST=keypairs.create)
    router.add(p + '/os-keypairs/{keypair_name}', GET=keypairs.show,
               DELETE=keypairs.delete)
    router.add(p + '/os-server-groups', GET=server_groups.index,
               POST=server_groups.create)
    router.add(p + '/os-server-groups/{group_id}', GET=server_groups.show,
               DELETE=server_groups.delete)
    router.add(p + '/os-services', GET=services.index)
    router.add(p + '/os-services/{service_id}', PUT=services.update)
    router.add(p + '/os-quota-sets/{project_id}', GET=quota_sets.show,
               PUT=quota_sets.update, DELETE=quota_sets.delete)
    router.add(p + '/os-quota-sets/{project_id}/defaults',
               GET=quota_sets.defaults)
    router.add(p + '/os-quota-sets/{project_id}/detail',
               GET=quota_sets.detail)
    router.add(p + '/os-quota-sets/{project_id}/pci-aliases',
               GET=quota_sets.pci_show, PUT=quota_sets.pci_update)
    router.add(p + '/os-quota-class-sets/{class_name}',
               GET=quota_classes.show, PUT=quota_classes.update)
    router.add(p + '/limits', GET=misc.limits)
    router.add(p + '/os-availability-zone', GET=misc.availability_zones)
    router.add(p + '/os-availability-zone/detail',
               GET=misc.availability_zones_detail)
    router.add(p + '/images', GET=images.index)
    router.add(p + '/images/detail', GET=images.detail)
    router.add(p + '/images/{image_id}', GET=images.show,
               DELETE=images.delete)
    router.add(p + '/images/{image_id}/metadata',
               GET=images.metadata_index, POST=images.metadata_update,
               PUT=images.metadata_replace)
    router.add(p + '/images/{image_id}/metadata/{key}',
               GET=images.metadata_show, PUT=images.metadata_update_item,
               DELETE=images.metadata_delete_item)
    return router


# Paths answered without authentication (version discovery).
_PUBLIC = frozenset((versions.index, versions.show, versions.show_v2_0,
                     misc.identity_version))


class ComputeAPI(object):
    """The routed application behind the authentication middleware."""

    def __init__(self, conf, compute_api):
        self.conf = conf
        self.compute_api = compute_api
        self.policy = policy.Enforcer(conf)
        self.router = _build_router()
        if conf.api.auth_strategy == 'noauth2':
            # Without Keystone there is no identity endpoint to discover.
            self.router.add('/identity/v3', GET=misc.identity_version)
        self.authenticated = auth.pipeline(self._dispatch, conf)
        # Hostile-request checks run before anything decodes the request;
        # even their refusals carry a request id.
        self._guarded = _RequestId(request_guard.RequestGuard(
            self._serve, conf.api.max_request_body_size))

    def _lookup(self, req: Request):
        """(handler or None, methods the path allows, path variables)."""
        path = req.path_info
        if len(path) > 1 and path.endswith('/') and path != PREFIX + '/':
            path = path.rstrip('/')
        found = self.router.match(path)
        if found is None:
            return None, [], {}
        handlers, path_vars = found
        handler = handlers.get(req.method)
        if handler is None and req.method == 'HEAD':
            handler = handlers.get('GET')
        return handler, sorted(handlers), path_vars

    def _strip_project(self, req: Request) -> None:
        """Accept ``/v2.1/<project_id>/...`` URLs (older catalogs)."""
        parts = req.path_info.split('/')
        if (len(parts) > 3 and parts[1] == PREFIX.strip('/')
                and parts[2] == req.context.project_id):
            req.path_info = '/'.join(parts[:2] + parts[3:])

    def __call__(self, environ: dict, start_response):
        return self._guarded(environ, start_response)

    @webob.dec.wsgify(RequestClass=Request)
    def _serve(self, req: Request):
        versioned = req.path_info.startswith(PREFIX)
        try:
            req.environ[VERSION_KEY] = microversion.from_headers(
                req.headers)
        except exception.NovaException as exc:
            return faults.from_exception(exc)
        handler, _methods, _vars = self._lookup(req)
        if handler in _PUBLIC:
            response = req.get_response(self._dispatch)
        else:
            response = req.get_response(self.authenticated)
        if versioned:
            response.headers.update(
                microversion.response_headers(req.api_version))
        return response

    @webob.dec.wsgify(RequestClass=Request)
    def _dispatch(self, req: Request):
        if auth.CONTEXT_KEY in req.environ:
            self._strip_project(req)
        handler, methods, path_vars = self._lookup(req)
        # ``DELETE /images/``: a blank last segment names an item with an
        # empty id, which no resource has (upstream answers 404 too).
        blank_item = handler is None and len(req.path_info) > 1 and \
            req.path_info.endswith('/')
        if not methods or blank_item:
            return faults.error_response(
                404, 'No resource at %s %s.' % (req.method, req.path))
        if handler is None:
            return faults.error_response(
                405, 'Method %s is not allowed on %s; allowed: %s.' % (
                    req.method, req.path, ', '.join(methods)))
        req.conf = self.conf
        req.compute_api = self.compute_api
        req.policy = self.policy
        try:
            response = _respond(handler(req, **path_vars))
        except exception.NovaException as exc:
            LOG.info('%s %s failed: %s', req.method, req.path, exc.message)
            return faults.from_exception(exc)
        except Exception:
            LOG.exception('Unexpected error in %s %s', req.method, req.path)
            return faults.error_response(
                500, 'Unexpected API error; see the nova-api log.')
        return response


def make_app(conf, compute_api):
    """Build the Compute API WSGI application.

    ``compute_api`` creates, reads and deletes servers (see
    nova.api.servers); flavors go straight to nova.db.api. ``conf`` needs
    the [api], [pci] and [filter_scheduler] options.
    """
    return ComputeAPI(conf, compute_api)
