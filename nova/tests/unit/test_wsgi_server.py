"""Tests for the in-process WSGI server (cheroot with nova's limits)."""

from concurrent import futures
import socket
import subprocess
import sys
import threading

import fixtures
import requests

from nova import test
from nova import wsgi_server


class ServerTestCase(test.TestCase):

    def start(self, app, **kwargs) -> wsgi_server.WSGIServer:
        server = wsgi_server.WSGIServer(app, **kwargs)
        server.start()
        self.addCleanup(server.stop)
        return server


class WSGIServerTestCase(ServerTestCase):

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

    def test_restarts_on_the_port_it_was_given_after_serving(self):
        # A server on a free port, stopped after serving (its connection
        # lingers in TIME_WAIT), comes back on that same port.
        def app(environ, start_response):
            start_response('200 OK', [])
            return [b'ok']

        server = wsgi_server.WSGIServer(app)
        server.start()
        port = int(server.url.rsplit(':', 1)[1])
        self.assertEqual(200, requests.get(server.url, timeout=10)
                         .status_code)
        server.stop()
        again = self.start(app, port=port)
        self.assertEqual('ok', requests.get(again.url, timeout=10).text)

    def test_one_request_per_connection(self):
        # Keep-alive is off (see KEEPALIVE_LIMIT): the answer says the
        # connection ends, and it does (_raw_request reads until then).
        server = self.start(_ok)
        answer = _raw_request(server.url, b'GET / HTTP/1.1\r\nHost: x\r\n'
                              b'\r\n')
        head = answer.split(b'\r\n\r\n', 1)[0]
        self.assertIn(b'\r\nConnection: close', head)

    def test_overlong_request_line_is_414(self):
        server = self.start(_ok)
        path = b'/' + b'a' * wsgi_server.MAX_REQUEST_HEADER_SIZE
        answer = _raw_request(server.url, b'GET ' + path +
                              b' HTTP/1.1\r\nHost: x\r\n\r\n')
        self.assertIn(b' 414 ', answer.split(b'\r\n', 1)[0])

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


def _ok(environ, start_response):
    start_response('200 OK', [])
    return [b'ok']


def _raw_request(url: str, head: bytes, body: bytes = b'') -> bytes:
    """Send ``head`` and ``body`` whole, as a simple client does, then
    read the answer until the server closes the connection."""
    host, port = url.rsplit('/', 1)[1].rsplit(':', 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head + body)
        answer = b''
        while True:
            data = sock.recv(65536)
            if not data:
                return answer
            answer += data


def _refuse_unread(environ, start_response):
    """An app answering a POST 413 without reading the body."""
    if environ['REQUEST_METHOD'] != 'POST':
        start_response('200 OK', [])
        return [b'ok']
    start_response('413 Request Entity Too Large',
                   [('Content-Type', 'text/plain')])
    return [b'too large']


def _post_head(length: int) -> bytes:
    return (b'POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n'
            b'Content-Length: %d\r\n\r\n' % length)


class UnreadBodyTestCase(ServerTestCase):

    def test_clients_sending_big_bodies_read_the_answer(self):
        # Each client sends its 8 MB body whole before it reads: had the
        # server closed with the body unread, they would see a reset.
        server = self.start(_refuse_unread)
        body = b'x' * (8 * 1024 * 1024)
        with futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(
                lambda _: _raw_request(server.url, _post_head(len(body)),
                                       body), range(6)))
        for answer in answers:
            head, _, text = answer.partition(b'\r\n\r\n')
            self.assertTrue(head.startswith(b'HTTP/1.1 413 '), head)
            self.assertEqual(b'too large', text)
        self.assertEqual(200, requests.get(server.url, timeout=10)
                         .status_code)

    def test_body_over_the_drain_limit_is_not_waited_for(self):
        # The client declares far more than DRAIN_LIMIT and sends none of
        # it: the connection ends right after the answer (a server waiting
        # for the body would keep it open until the client gives up).
        self.useFixture(fixtures.MonkeyPatch(
            'nova.wsgi_server.DRAIN_LIMIT', 1024))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.wsgi_server.LINGER_TIMEOUT', 600))
        server = self.start(_refuse_unread)
        answer = _raw_request(server.url, _post_head(10 ** 9))
        self.assertIn(b' 413 ', answer.split(b'\r\n', 1)[0])

    def test_draining_stops_after_the_linger_timeout(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.wsgi_server.LINGER_TIMEOUT', 0.5))
        server = self.start(_refuse_unread)
        answer = _raw_request(server.url, _post_head(1024 * 1024), b'x')
        self.assertIn(b' 413 ', answer.split(b'\r\n', 1)[0])

    def test_app_reads_no_more_than_the_declared_length(self):
        received = []

        def app(environ, start_response):
            received.append(environ['wsgi.input'].read())
            start_response('200 OK', [])
            return [b'ok']

        server = self.start(app)
        answer = _raw_request(server.url, _post_head(3), b'abc')
        self.assertIn(b' 200 ', answer.split(b'\r\n', 1)[0])
        self.assertEqual([b'abc'], received)


class GracefulStopTestCase(ServerTestCase):

    def _blocked_request(self, release: threading.Event):
        """A started server and a request that stays in its app until
        ``release``."""
        entered = threading.Event()
        answers = []

        def app(environ, start_response):
            if environ['PATH_INFO'] == '/block':
                entered.set()
                release.wait(30)
            start_response('200 OK', [])
            return [b'finished']

        server = self.start(app)
        client = threading.Thread(target=lambda: answers.append(
            requests.get(server.url + '/block', timeout=30).text))
        client.start()
        self.addCleanup(client.join)
        self.assertTrue(entered.wait(30))
        return server, client, answers

    def test_stop_lets_requests_in_progress_finish(self):
        release = threading.Event()
        server, client, answers = self._blocked_request(release)
        url = server.url
        stopped = []
        stopper = threading.Thread(target=lambda: stopped.append(
            server.stop(timeout=None)))
        stopper.start()
        # No new connections while the one in progress runs on (one that
        # arrives while the stop begins may still be served).
        for _ in range(100):
            try:
                requests.get(url, timeout=5)
            except requests.ConnectionError:
                break
            release.wait(0.05)
        else:
            self.fail('the server still accepts connections')
        self.assertEqual([], stopped)
        release.set()
        stopper.join(30)
        client.join(30)
        self.assertEqual([True], stopped)
        self.assertEqual(['finished'], answers)

    def test_stop_gives_up_after_its_timeout(self):
        release = threading.Event()
        server = self._blocked_request(release)[0]
        self.addCleanup(release.set)
        self.assertFalse(server.stop(timeout=0.1))


class ChildTestCase(test.TestCase):
    """``python -m nova.wsgi_server``: an app in a process of its own."""

    def child(self, *args: str) -> subprocess.Popen:
        process = subprocess.Popen(
            [sys.executable, '-m', 'nova.wsgi_server'] + list(args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.addCleanup(process.kill)
        self.addCleanup(process.stderr.close)
        self.addCleanup(process.stdout.close)
        return process

    def test_serves_until_its_stdin_closes(self):
        process = self.child('wsgiref.simple_server:demo_app', '127.0.0.1',
                             '0', 'Demo')
        url = process.stdout.readline().strip()
        self.assertRegex(url, r'^http://127\.0\.0\.1:[1-9]\d*$')
        resp = requests.get(url, timeout=10)
        self.assertEqual((200, 'Hello world!'),
                         (resp.status_code, resp.text.splitlines()[0]))
        process.stdin.close()
        self.assertEqual(0, process.wait(timeout=30))

    def test_ends_with_its_error_as_the_last_line(self):
        # The parent reports the last line of stderr: the error itself.
        with socket.socket() as busy:
            busy.bind(('127.0.0.1', 0))
            busy.listen()
            port = busy.getsockname()[1]
            process = self.child('wsgiref.simple_server:demo_app',
                                 '127.0.0.1', str(port), 'Demo')
            self.assertEqual(1, process.wait(timeout=30))
        self.assertEqual('', process.stdout.read())
        last = process.stderr.read().splitlines()[-1]
        self.assertTrue(last.startswith(
            'Demo cannot listen on 127.0.0.1:%d' % port), last)
        process = self.child('nosuch.module:app', '127.0.0.1', '0', 'Demo')
        self.assertEqual(1, process.wait(timeout=30))
        self.assertEqual("ModuleNotFoundError: No module named 'nosuch'",
                         process.stderr.read().splitlines()[-1])
