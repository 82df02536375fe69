"""A small threaded WSGI HTTP server for in-process services.

nova-api and the embedded Placement need an HTTP listener without pulling
in eventlet or an external server. This wraps the standard library's
``wsgiref`` server with one daemon thread per connection, binds to a
loopback port (0 picks a free one) and routes access logs and errors to
python logging instead of stderr.
"""

import logging
import socket
import socketserver
import threading
from wsgiref import simple_server

LOG = logging.getLogger(__name__)

# Pending connections the kernel queues (capped by net.core.somaxconn).
LISTEN_BACKLOG = 1024
# Requests a server handles at once unless told otherwise.
DEFAULT_MAX_REQUESTS = 64


class _RequestHandler(simple_server.WSGIRequestHandler):
    """Request handler that logs through python logging, quietly."""

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

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
