"""Tests for the threaded WSGI server."""

import threading

import fixtures
import requests

from nova import test
from nova import wsgi_server


class WSGIServerTestCase(test.TestCase):

    def start(self, app, **kwargs) -> wsgi_server.WSGIServer:
        server = wsgi_server.WSGIServer(app, **kwargs)
        server.start()
        self.addCleanup(server.stop)
        return server

    def test_serves_app_on_free_port(self):
        def app(environ, start_response):
            start_response('200 OK', [('Content-Type', 'text/plain')])
            return [('%s %s' % (environ['REQUEST_METHOD'],
                                environ['PATH_INFO'])).encode()]

        server = self.start(app)
        self.assertRegex(server.url, r'^http://127\.0\.0\.1:[1-9]\d*$')
        resp = requests.put(server.url + '/a/b', timeout=10)
        self.assertEqual(200, resp.status_code)
        self.assertEqual('PUT /a/b', resp.text)

    def test_requests_run_concurrently(self):
        # The first request blocks until a second one arrives: this only
        # finishes if the server handles them on separate threads.
        second_arrived = threading.Event()

        def app(environ, start_response):
            if environ['PATH_INFO'] == '/first':
                if not second_arrived.wait(10):
                    start_response('500 Timeout', [])
                    return [b'']
            else:
                second_arrived.set()
            start_response('200 OK', [])
            return [b'ok']

        server = self.start(app)
        results = []
        first = threading.Thread(target=lambda: results.append(
            requests.get(server.url + '/first', timeout=20).status_code))
        first.start()
        self.assertEqual(200, requests.get(server.url + '/second',
                                           timeout=10).status_code)
        first.join()
        self.assertEqual([200], results)

    def test_app_errors_go_to_logging(self):
        logger = self.useFixture(fixtures.FakeLogger(name='nova.wsgi_server'))

        def app(environ, start_response):
            raise RuntimeError('boom in app')

        server = self.start(app)
        self.assertEqual(500, requests.get(server.url, timeout=10)
                         .status_code)
        self.assertIn('boom in app', logger.output)

    def test_stop_closes_the_socket(self):
        server = wsgi_server.WSGIServer(lambda e, s: [])
        server.start()
        url = server.url
        server.stop()
        server.stop()
        self.assertRaises(requests.ConnectionError, requests.get, url,
                          timeout=5)
        self.assertRaises(RuntimeError, getattr, server, 'url')

    def test_start_twice_is_refused(self):
        server = self.start(lambda e, s: [])
        self.assertRaises(RuntimeError, server.start)

    def test_burst_waits_for_a_slot_instead_of_being_reset(self):
        # Twice as many connections at once as the server handles at once
        # and far more than the stdlib backlog of 5: none is refused, and
        # never more than max_requests run in the app together.
        lock = threading.Lock()
        running = [0]
        peak = [0]
        release = threading.Event()

        def app(environ, start_response):
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            release.wait(10)
            with lock:
                running[0] -= 1
            start_response('200 OK', [])
            return [b'ok']

        server = self.start(app, max_requests=20)
        self.assertLess(5, wsgi_server.LISTEN_BACKLOG)
        codes = []

        def call():
            try:
                codes.append(requests.get(server.url, timeout=30)
                             .status_code)
            except requests.RequestException as error:
                codes.append(repr(error))
        clients = [threading.Thread(target=call) for _ in range(40)]
        for client in clients:
            client.start()
        # Let the first ones occupy every slot before they may finish.
        for _ in range(100):
            with lock:
                if running[0] == 20:
                    break
            release.wait(0.05)
        release.set()
        for client in clients:
            client.join(30)
        self.assertEqual([200] * 40, codes)
        self.assertEqual(20, peak[0])
