"""Version documents, microversion negotiation, authentication, routing,
hostile requests."""

import io
import json
import re
import uuid

import webob

from nova.api import auth
from nova.tests.unit.api import fakes


class TestVersions(fakes.APITestCase):

    def test_root_lists_v20_and_v21_without_token(self):
        response = self.request('GET', '/', token=None)
        self.assertEqual(200, response.status_int)
        legacy, version = response.json['versions']
        self.assertEqual(('v2.0', 'SUPPORTED', '', ''), (
            legacy['id'], legacy['status'], legacy['version'],
            legacy['min_version']))
        self.assertEqual([{'rel': 'self', 'href': 'http://localhost/v2/'}],
                         legacy['links'])
        self.assertEqual('v2.1', version['id'])
        self.assertEqual('CURRENT', version['status'])
        self.assertEqual('2.96', version['version'])
        self.assertEqual('2.1', version['min_version'])
        self.assertIn({'rel': 'self', 'href': 'http://localhost/v2.1/'},
                      version['links'])

    def test_v21_document(self):
        for path in ('/v2.1', '/v2.1/'):
            response = self.request('GET', path, token=None)
            self.assertEqual(200, response.status_int)
            self.assertEqual('2.96', response.json['version']['version'])
            self.assertEqual('2.1', response.json['version']['min_version'])

    def test_v20_document_at_its_link(self):
        for path in ('/v2', '/v2/'):
            response = self.request('GET', path, token=None)
            self.assertEqual(200, response.status_int)
            self.assertEqual(('v2.0', 'SUPPORTED'), (
                response.json['version']['id'],
                response.json['version']['status']))


class TestMicroversions(fakes.APITestCase):

    def test_default_is_minimum(self):
        response = self.request('GET', '/v2.1/flavors')
        self.assertEqual('compute 2.1',
                         response.headers['OpenStack-API-Version'])
        self.assertEqual('2.1',
                         response.headers['X-OpenStack-Nova-API-Version'])
        self.assertIn('OpenStack-API-Version', response.headers['Vary'])

    def test_new_header(self):
        response = self.request('GET', '/v2.1/flavors', version='2.61')
        self.assertEqual('compute 2.61',
                         response.headers['OpenStack-API-Version'])

    def test_legacy_header(self):
        response = self.request(
            'GET', '/v2.1/flavors',
            headers={'X-OpenStack-Nova-API-Version': '2.47'})
        self.assertEqual('2.47',
                         response.headers['X-OpenStack-Nova-API-Version'])

    def test_latest(self):
        response = self.request('GET', '/v2.1/flavors', version='latest')
        self.assertEqual('compute 2.96',
                         response.headers['OpenStack-API-Version'])

    def test_out_of_range_is_406(self):
        response = self.request('GET', '/v2.1/flavors', version='2.200')
        self.assertFault(response, 406, 'notAcceptable', '2.200',
                         'this API serves 2.1 to 2.96')

    def test_malformed_is_400(self):
        response = self.request('GET', '/v2.1/flavors', version='two')
        self.assertFault(response, 400, 'badRequest', "'two'")


class TestAuth(fakes.APITestCase):

    def test_no_token_is_401(self):
        response = self.request('GET', '/v2.1/flavors', token=None)
        self.assertFault(response, 401, 'unauthorized', 'X-Auth-Token')

    def test_member_token_is_accepted(self):
        response = self.request('GET', '/v2.1/flavors', token=fakes.MEMBER)
        self.assertEqual(200, response.status_int)
        self.assertIn('X-Openstack-Request-Id', response.headers)

    def test_project_id_in_url_is_accepted(self):
        self.make_flavor()
        response = self.request('GET', '/v2.1/proj-a/flavors/f1',
                                token=fakes.MEMBER)
        self.assertEqual(200, response.status_int)
        self.assertEqual('f1', response.json['flavor']['id'])


class TestRouting(fakes.APITestCase):

    def test_unknown_path_is_404(self):
        response = self.request('GET', '/v2.1/nothing-here')
        self.assertFault(response, 404, 'itemNotFound', '/v2.1/nothing-here')

    def test_wrong_method_is_405(self):
        response = self.request('PUT', '/v2.1/flavors')
        self.assertFault(response, 405, 'badMethod', 'GET, POST')

    def test_malformed_json_is_400(self):
        req = webob.Request.blank('/v2.1/flavors', method='POST',
                                  headers={'X-Auth-Token': 'admin'})
        req.body = b'{not json'
        response = req.get_response(self.app)
        self.assertFault(response, 400, 'badRequest', 'malformed JSON')

    def test_availability_zone_and_limits(self):
        response = self.request('GET', '/v2.1/os-availability-zone')
        self.assertEqual(
            'nova', response.json['availabilityZoneInfo'][0]['zoneName'])
        response = self.request('GET', '/v2.1/limits')
        self.assertEqual(
            0, response.json['limits']['absolute']['totalInstancesUsed'])


class TestImagesAndIdentity(fakes.APITestCase):

    def test_image_proxy_until_2_35(self):
        shown = self.request('GET', '/v2.1/images/c1').json['image']
        self.assertEqual(('c1', 'cirros', 'ACTIVE', 100, 9),
                         (shown['id'], shown['name'], shown['status'],
                          shown['progress'], shown['OS-EXT-IMG-SIZE:size']))
        self.assertFault(self.request('GET', '/v2.1/images/cirros'), 404,
                         'itemNotFound', 'cirros')
        listed = self.request('GET', '/v2.1/images?name=cirros').json
        self.assertEqual([{'id', 'name', 'links'}],
                         [set(i) for i in listed['images']])
        self.assertEqual([], self.request('GET', '/v2.1/images?name=x')
                         .json['images'])
        self.assertEqual(['ACTIVE'], [i['status'] for i in self.request(
            'GET', '/v2.1/images/detail').json['images']])
        for path in ('', '/detail', '/c1', '/c1/metadata'):
            self.assertFault(self.request('GET', '/v2.1/images' + path,
                                          version='2.36'),
                             404, 'itemNotFound', '2.36')

    def test_identity_discovery_only_with_noauth2(self):
        response = self.request('GET', '/identity/v3', token=None)
        self.assertEqual('v3.14', response.json['version']['id'])
        self.config.config(auth_strategy='keystone', group='api')
        app = fakes.wsgi_app.make_app(self.conf, self.compute_api)
        self.assertIsNone(app.router.match('/identity/v3'))
        self.assertIsNotNone(app.router.match('/v2.1/servers'))


class TestKeystoneContext(fakes.APITestCase):

    def _seen(self, headers):
        seen = {}

        def inner(environ, start_response):
            seen['context'] = environ[auth.CONTEXT_KEY]
            start_response('204 No Content', [])
            return []
        req = webob.Request.blank('/v2.1/servers', headers=headers)
        return req.get_response(auth.KeystoneContext(inner)), seen

    def test_confirmed_identity_becomes_context(self):
        response, seen = self._seen({
            'X-Identity-Status': 'Confirmed', 'X-User-Id': 'u1',
            'X-Project-Id': 'p1', 'X-Roles': 'reader, Admin'})
        self.assertEqual(204, response.status_int)
        context = seen['context']
        self.assertEqual(('u1', 'p1', True),
                         (context.user_id, context.project_id,
                          context.is_admin))

    def test_unconfirmed_identity_is_401(self):
        response, seen = self._seen({'X-Identity-Status': 'Invalid'})
        self.assertFault(response, 401, 'unauthorized')
        self.assertEqual({}, seen)


class TestHostileRequests(fakes.APITestCase):
    """Requests built to break the API get 4xx faults, never a 500."""

    def _raw(self, path, body=b'', environ=None, app=None):
        req = webob.Request.blank('/', method='POST')
        req.environ['PATH_INFO'] = path
        req.headers['X-Auth-Token'] = fakes.ADMIN
        req.content_type = 'application/json'
        req.body = body
        req.environ.update(environ or {})
        if 'wsgi.input' in (environ or {}):
            # As a server hands it over: not seekable, length unknown.
            del req.environ['webob.is_body_seekable']
        return req.get_response(app or self.app)

    def _no_flavor_created(self):
        self.assertEqual([], self.request('GET', '/v2.1/flavors')
                         .json['flavors'])

    def test_deeply_nested_body_is_400(self):
        for body in (b'[' * 100000, b'{"flavor": ' + b'[' * 5000 +
                     b']' * 5000 + b'}',
                     json.dumps({'flavor': nested(40)}).encode()):
            response = self._raw('/v2.1/flavors', body)
            self.assertFault(response, 400, 'badRequest', 'field body',
                             'nested more than 32 levels')
        self._no_flavor_created()

    def test_body_within_depth_reaches_the_handler(self):
        response = self._raw('/v2.1/flavors', json.dumps(
            {'flavor': dict(name='f', ram=1, vcpus=1, disk=0,
                            description=nested(30))}).encode())
        # The schema, not the depth check, refuses it.
        self.assertFault(response, 400, 'badRequest', 'description')

    def test_undecodable_path_is_400(self):
        for path in ('/v2.1/flavors/\xff', '/v2.1/\xc3\x28/servers'):
            response = self.request_env('GET', path)
            self.assertFault(response, 400, 'badRequest',
                             'request path is not valid UTF-8')

    def test_undecodable_query_is_400(self):
        response = self.request('GET', '/v2.1/flavors?marker=%FF')
        self.assertFault(response, 400, 'badRequest',
                         'request query string is not valid UTF-8')

    def test_valid_utf8_path_is_routed(self):
        response = self.request('GET', '/v2.1/flavors/%C3%A9t%C3%A9')
        self.assertFault(response, 404, 'itemNotFound', '\u00e9t\u00e9')

    def request_env(self, method, path):
        req = webob.Request.blank('/', method=method)
        req.environ['PATH_INFO'] = path
        req.headers['X-Auth-Token'] = fakes.ADMIN
        return req.get_response(self.app)

    def _small_limit_app(self, limit):
        self.config.config(max_request_body_size=limit, group='api')
        return fakes.wsgi_app.make_app(self.conf, self.compute_api)

    def test_default_limit_is_oslo_middleware_default(self):
        self.assertEqual(114688, self.conf.api.max_request_body_size)
        body = b' ' * 114689
        response = self._raw('/v2.1/flavors', body)
        self.assertFault(response, 413, 'overLimit', '114689 bytes',
                         'limit of 114688 bytes',
                         '[api]max_request_body_size')

    def test_body_over_limit_is_413_unread(self):
        app = self._small_limit_app(1024)
        body = json.dumps({'flavor': dict(
            name='f', ram=1, vcpus=1, disk=0,
            description='x' * 2000)}).encode()
        response = self._raw('/v2.1/flavors', body, app=app)
        self.assertFault(response, 413, 'overLimit', 'limit of 1024 bytes')
        self._no_flavor_created()

    def test_body_at_limit_is_served(self):
        body = json.dumps({'flavor': dict(name='f', ram=1, vcpus=1,
                                          disk=0, id='f1')}).encode()
        app = self._small_limit_app(len(body))
        response = self._raw('/v2.1/flavors', body, app=app)
        self.assertEqual(200, response.status_int, response.text)

    def test_chunked_body_over_limit_is_413(self):
        app = self._small_limit_app(1024)
        body = json.dumps({'flavor': dict(
            name='f', ram=1, vcpus=1, disk=0, id='f1',
            description='x' * 2000)}).encode()
        response = self._raw('/v2.1/flavors', environ={
            'CONTENT_LENGTH': '', 'wsgi.input': io.BytesIO(body),
            'wsgi.input_terminated': True}, app=app)
        self.assertFault(response, 413, 'overLimit',
                         'more than 1024 bytes')
        self._no_flavor_created()

    def test_chunked_body_within_limit_is_served(self):
        app = self._small_limit_app(1024)
        body = json.dumps({'flavor': dict(name='f', ram=1, vcpus=1,
                                          disk=0, id='f1')}).encode()
        response = self._raw('/v2.1/flavors', environ={
            'CONTENT_LENGTH': '', 'wsgi.input': io.BytesIO(body),
            'wsgi.input_terminated': True}, app=app)
        self.assertEqual(200, response.status_int, response.text)

    def test_bad_content_length_is_400(self):
        response = self._raw('/v2.1/flavors', environ={
            'CONTENT_LENGTH': '-5'})
        self.assertFault(response, 400, 'badRequest', "'-5'")


def nested(depth):
    value = 'leaf'
    for _ in range(depth):
        value = {'k': value}
    return value


class TestRequestIds(fakes.APITestCase):
    """Every response names its request; a caller's id becomes global."""

    REQUEST_ID = re.compile(
        r'^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')

    def _list_servers(self, headers=None):
        """GET /servers; returns the response and the handler's context."""
        seen = []
        get_all = self.compute_api.get_all

        def recording(context, detail):
            seen.append(context)
            return get_all(context, detail)

        self.compute_api.get_all = recording
        response = self.request('GET', '/v2.1/servers', headers=headers)
        self.assertEqual(200, response.status_int, response.text)
        self.assertEqual(1, len(seen))
        return response, seen[0]

    def test_each_response_carries_its_own_request_id(self):
        first, context = self._list_servers()
        second, _context = self._list_servers()
        request_id = first.headers['x-openstack-request-id']
        self.assertRegex(request_id, self.REQUEST_ID)
        self.assertEqual(request_id, first.headers['x-compute-request-id'])
        self.assertEqual(request_id, context.request_id)
        self.assertIsNone(context.global_request_id)
        self.assertNotEqual(request_id,
                            second.headers['x-openstack-request-id'])

    def test_refused_requests_carry_a_request_id(self):
        response = self.request('GET', '/v2.1/flavors', token=None)
        self.assertEqual(401, response.status_int)
        self.assertRegex(response.headers['x-openstack-request-id'],
                         self.REQUEST_ID)

    def test_valid_incoming_id_becomes_the_global_request_id(self):
        global_id = 'req-%s' % uuid.uuid4()
        response, context = self._list_servers(
            {'X-OpenStack-Request-ID': global_id})
        self.assertEqual(global_id, context.global_request_id)
        # The request still has an id of its own.
        self.assertNotEqual(global_id, context.request_id)
        self.assertEqual(context.request_id,
                         response.headers['x-openstack-request-id'])

    def test_invalid_incoming_ids_are_ignored(self):
        for value in ('my-request', 'req-not-a-uuid',
                      str(uuid.uuid4()), 'req-%s' % uuid.uuid4().hex):
            _response, context = self._list_servers(
                {'X-OpenStack-Request-ID': value})
            self.assertIsNone(context.global_request_id, value)
            self.assertNotEqual(value, context.request_id)
