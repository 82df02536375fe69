"""Hostile requests against nova-api's app behind the real HTTP server:
every one is answered with a 4xx fault, none with a 500."""

from concurrent import futures
import http.client
import json
import socket

from oslo_config import cfg

from nova import test
import nova.conf
from nova import wsgi_server
from nova.api import wsgi_app
from nova.tests.fixtures import database as db_fixture
from nova.tests.unit.api import fakes


class TestHostileRequestsOverHTTP(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        conf = cfg.ConfigOpts()
        nova.conf.register_all(conf)
        conf([], project='nova', default_config_files=[],
             default_config_dirs=[])
        conf.set_override('max_request_body_size', 1024, group='api')
        server = wsgi_server.WSGIServer(
            wsgi_app.make_app(conf, fakes.FakeComputeAPI()))
        server.start()
        self.addCleanup(server.stop)
        self.port = server.url.rsplit(':', 1)[1]

    def _send(self, method, path, body=None):
        conn = http.client.HTTPConnection('127.0.0.1', self.port,
                                          timeout=30)
        self.addCleanup(conn.close)
        conn.request(method, path, body=body, headers={
            'X-Auth-Token': fakes.ADMIN,
            'Content-Type': 'application/json'})
        response = conn.getresponse()
        return response.status, json.loads(response.read())

    def test_each_hostile_request_is_a_4xx(self):
        cases = [
            ('GET', '/v2.1/flavors/%FF', None, 400, 'badRequest',
             'path is not valid UTF-8'),
            ('GET', '/v2.1/flavors?limit=%C3%28', None, 400, 'badRequest',
             'query string is not valid UTF-8'),
            ('POST', '/v2.1/flavors', b'[' * 1000, 400, 'badRequest',
             'nested more than 32 levels'),
            ('POST', '/v2.1/flavors', b' ' * 1025, 413, 'overLimit',
             'limit of 1024 bytes'),
        ]
        for method, path, body, status, name, fragment in cases:
            got_status, got = self._send(method, path, body)
            self.assertEqual(status, got_status, got)
            self.assertIn(fragment, got[name]['message'])
        # The server is still healthy and nothing was created.
        self.assertEqual((200, {'flavors': []}),
                         self._send('GET', '/v2.1/flavors'))

    def test_hostile_and_valid_requests_at_once(self):
        def create(i):
            return self._send('POST', '/v2.1/flavors', json.dumps(
                {'flavor': {'name': 'f%d' % i, 'id': 'f%d' % i, 'ram': 1,
                            'vcpus': 1, 'disk': 0}}).encode())
        hostile = [
            lambda i: self._send('POST', '/v2.1/flavors', b'[' * 1000),
            lambda i: self._send('POST', '/v2.1/flavors', b' ' * 1025),
            lambda i: self._send('GET', '/v2.1/flavors/%FF'),
        ]
        calls = [(i, create, True) if i % 4 == 0
                 else (i, hostile[i % 3], False) for i in range(40)]
        with futures.ThreadPoolExecutor(10) as pool:
            results = list(pool.map(lambda c: (c[1](c[0]), c[2]), calls))
        for (status, body), valid in results:
            if valid:
                self.assertEqual(200, status, body)
            else:
                self.assertIn(status, (400, 413), body)
        status, body = self._send('GET', '/v2.1/flavors')
        self.assertEqual(10, len(body['flavors']))

    def _send_whole(self, path: str, body: bytes) -> tuple[int, dict]:
        """POST ``body`` whole over a plain socket before reading the
        answer, as a simple client does."""
        with socket.create_connection(('127.0.0.1', int(self.port)),
                                      timeout=60) as sock:
            sock.sendall(b'POST %s HTTP/1.1\r\nHost: nova\r\n'
                         b'X-Auth-Token: %s\r\n'
                         b'Content-Type: application/json\r\n'
                         b'Content-Length: %d\r\n\r\n' % (
                             path.encode(), fakes.ADMIN.encode(), len(body))
                         + body)
            answer = b''
            while data := sock.recv(65536):
                answer += data
        head, _, text = answer.partition(b'\r\n\r\n')
        return int(head.split()[1]), json.loads(text)

    def test_multi_megabyte_bodies_at_once_get_413(self):
        # 8 MB bodies from several clients at once, next to valid
        # requests: each big one is answered 413 naming the option and
        # its value (not reset), and the server keeps serving.
        big = b'{"flavor": "%s"}' % (b'x' * (8 * 1024 * 1024))

        def call(i):
            if i % 3:
                return 'big', self._send_whole('/v2.1/flavors', big)
            return 'list', self._send('GET', '/v2.1/flavors')
        with futures.ThreadPoolExecutor(9) as pool:
            results = list(pool.map(call, range(18)))
        for kind, (status, body) in results:
            if kind == 'list':
                self.assertEqual((200, {'flavors': []}), (status, body))
            else:
                self.assertEqual(413, status, body)
                self.assertIn('limit of 1024 bytes '
                              '([api]max_request_body_size)',
                              body['overLimit']['message'])
        self.assertEqual(12, sum(kind == 'big' for kind, _ in results))
