"""A small threaded WSGI HTTP server for in-process services.

nova-api and the embedded Placement need an HTTP listener without pulling
in eventlet or an external server. This wraps the standard library's
``wsgiref`` server with one daemon thread per connection, binds to a
loopback port (0 picks a free one) and routes access logs and errors to
the service log (oslo.log) instead of stderr.

Each connection carries one request and is closed after the response
(``Connection: close``). A response sent before the request body was
read (a 413 for a body over the limit, say) is followed by a lingering
close: the server half-closes, discards the rest of the body, bounded in
bytes and time, and only then closes, so a client still sending the body
reads the response instead of a connection reset.
"""

import io
import socket
import socketserver
import threading
import time
from wsgiref import simple_server

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

# Pending connections the kernel queues (capped by net.core.somaxconn).
LISTEN_BACKLOG = 1024
# Requests a server handles at once unless told otherwise.
DEFAULT_MAX_REQUESTS = 64
# Longest request line read; a longer one is answered 414.
MAX_REQUEST_LINE = 65536
# An unread request body is discarded up to this many bytes and for at
# most LINGER_TIMEOUT seconds before the connection is closed; a client
# sending more, or slower, may see a reset instead of the response.
DRAIN_LIMIT = 32 * 1024 * 1024
LINGER_TIMEOUT = 10.0
DRAIN_CHUNK = 65536


class _RequestBody(io.RawIOBase):
    """``wsgi.input``: the declared ``length`` bytes of the request body,
    and how many of them the application left unread."""

    def __init__(self, stream, length: int) -> None:
        super().__init__()
        self._stream = stream
        self.unread = length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        # Stop at the declared length: the socket itself never ends while
        # the client waits for the response.
        size = min(len(buffer), self.unread)
        if size <= 0:
            return 0
        data = self._stream.read(size)
        buffer[:len(data)] = data
        self.unread -= len(data)
        return len(data)


class _ServerHandler(simple_server.ServerHandler):
    """Runs the application for one request; the connection then ends."""

    def cleanup_headers(self) -> None:
        super().cleanup_headers()
        self.headers['Connection'] = 'close'


class _RequestHandler(simple_server.WSGIRequestHandler):
    """Serves one request per connection, logging through oslo.log.
    """

    def handle(self) -> None:
        self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE + 1)
        if len(self.raw_requestline) > MAX_REQUEST_LINE:
            self.requestline = self.request_version = self.command = ''
            self.send_error(414)
            return
        if not self.parse_request():
            return    # parse_request answered the error already
        body = _RequestBody(self.rfile, self._content_length())
        handler = _ServerHandler(body, self.wfile, self.get_stderr(),
                                 self.get_environ(), multithread=True)
        handler.request_handler = self
        handler.run(self.server.get_app())
        if body.unread:
            self._linger(body.unread)

    def _content_length(self) -> int:
        """The declared body length; 0 without a valid one (the request
        guard answers a malformed Content-Length itself)."""
        value = (self.headers.get('Content-Length') or '').strip()
        return int(value) if value.isdecimal() else 0

    def _linger(self, unread: int) -> None:
        """Discard the ``unread`` rest of the request body before the
        connection is closed (see the module docstring)."""
        if unread > DRAIN_LIMIT:
            LOG.debug('Not draining %d unread request body bytes from %s '
                      '(more than %d)', unread, self.address_string(),
                      DRAIN_LIMIT)
            return
        try:
            # The response is complete: tell the client, which may read it
            # while it is still sending.
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_TIMEOUT
            while unread > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.connection.settimeout(left)
                data = self.rfile.read1(min(unread, DRAIN_CHUNK))
                if not data:
                    break
                unread -= len(data)
        except OSError as err:
            LOG.debug('Stopped draining the request body from %s: %s',
                      self.address_string(), err)

    def log_message(self, format: str, *args) -> None:
        LOG.debug('%s - %s', self.address_string(), format % args)

    def address_string(self) -> str:
        # The stdlib default resolves the client address; skip the lookup.
        return self.client_address[0]

    def get_stderr(self):
        # wsgiref writes application tracebacks here; send them to logging.
        return _LogStream()


class _LogStream:
    """File-like sink turning wsgiref's stderr writes into log records."""

    def write(self, text: str) -> None:
        text = text.rstrip()
        if text:
            LOG.error('%s', text)

    def flush(self) -> None:
        pass


class _ThreadingWSGIServer(socketserver.ThreadingMixIn,
                           simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    # The listen backlog. The stdlib default of 5 makes the kernel refuse
    # connections of a burst (clients see resets) while the accept loop
    # is busy; connections beyond the request slots wait here too.
    request_queue_size = LISTEN_BACKLOG
    # Limits the requests handled at once; set by WSGIServer.start.
    slots: threading.BoundedSemaphore

    def process_request(self, request, client_address) -> None:
        # Stop accepting while every slot is taken: the next connections
        # wait in the backlog instead of each starting a thread that would
        # compete for the same database connections.
        self.slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS
        # lookup that can stall for seconds; the host name is enough.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = host
        self.server_port = port
        self.setup_environ()

    def handle_error(self, request, client_address) -> None:
        LOG.exception('Error while serving a request from %s',
                      client_address[0])


class _ThreadingWSGIServer6(_ThreadingWSGIServer):
    address_family = socket.AF_INET6


class WSGIServer:
    """Serve a WSGI ``app`` on ``host``:``port`` from a background thread.

    ``port=0`` binds a free port; ``url`` then reports the real one.
    At most ``max_requests`` requests are handled at once (one thread
    each); further connections wait in the listen backlog.
    """

    def __init__(self, app, host: str = '127.0.0.1', port: int = 0,
                 max_requests: int = DEFAULT_MAX_REQUESTS) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.max_requests = max_requests
        self._server: _ThreadingWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL of the running server, e.g. ``http://127.0.0.1:4242``."""
        if self._server is None:
            raise RuntimeError('WSGIServer is not started')
        host = self.host
        if ':' in host:
            host = '[%s]' % host
        return 'http://%s:%d' % (host, self._server.server_port)

    def start(self) -> None:
        """Bind the socket and start serving in a daemon thread."""
        if self._server is not None:
            raise RuntimeError('WSGIServer is already started')
        server_class = (_ThreadingWSGIServer6 if ':' in self.host
                        else _ThreadingWSGIServer)
        server = server_class((self.host, self.port), _RequestHandler)
        server.set_app(self.app)
        server.slots = threading.BoundedSemaphore(self.max_requests)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name='wsgi-%d' % server.server_port,
            daemon=True)
        self._thread.start()
        LOG.debug('WSGI server listening on %s', self.url)

    def stop(self, timeout: float | None = 0) -> bool:
        """Stop accepting connections and close the socket, then wait up
        to ``timeout`` seconds (None: as long as it takes) for the
        requests in progress to finish. True when none is left running.
        Safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return True
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        # A request holds its slot until its connection is closed: all
        # slots free means nothing is in progress.
        deadline = None if timeout is None else time.monotonic() + timeout
        for _ in range(self.max_requests):
            left = None if deadline is None else \
                max(0.0, deadline - time.monotonic())
            if not server.slots.acquire(timeout=left):
                return False
        return True
