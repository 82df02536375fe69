"""Serve a WSGI application in-process with cheroot.

nova-api, the Placement that nova-all embeds and the test fixtures need an
HTTP listener inside a nova process, without eventlet. cheroot (CherryPy's
server) is maintained, pure Python and threaded: a fixed pool of worker
threads serves requests, and its stop closes the listening socket, then
lets the requests in progress finish. This module only sets the limits
nova wants (one request per connection, see KEEPALIVE_LIMIT) and routes
cheroot's error log to oslo.log.

An application that must not share a process with nova (Glance keeps
its configuration in oslo.config's global ``CONF``) is served by a child
process running this module, see :func:`serve_child`.

Multi-process deployments do not use this: they run the applications of
:mod:`nova.wsgi` (and Placement's own) under gunicorn or uWSGI, see
doc/source/admin/deployment.rst.

A response sent before the request body was read (a 413 for a body over
the limit, say) first discards the unread rest, bounded in bytes and time,
so a client still sending the body reads the response instead of a
connection reset; past either bound the connection is closed after the
response instead.
"""

import importlib
import os
import socket
import sys
import threading
import time
import traceback

from cheroot import wsgi as cheroot_wsgi
from cheroot.workers import threadpool
from oslo_log import log as logging

from nova import exception

LOG = logging.getLogger(__name__)

# Pending connections the kernel queues (capped by net.core.somaxconn),
# and accepted connections that wait for a free worker thread.
LISTEN_BACKLOG = 1024
# Requests a server handles at once (worker threads) unless told otherwise.
DEFAULT_MAX_REQUESTS = 64
# Idle keep-alive connections kept open; past it a response closes its
# connection. 0: one request per connection, as nova served before. With
# keep-alive, tools/bench_wsgi.py measured the p99 latency of
# GET /servers/detail at 100 clients three times worse: idle connections
# wait for cheroot's one selector thread, which competes for the GIL with
# every busy worker thread.
KEEPALIVE_LIMIT = 0
# Longest request line plus headers; a longer request line is answered
# 414, longer headers 413.
MAX_REQUEST_HEADER_SIZE = 128 * 1024
# Seconds a connection may wait for the client between reads.
CONNECTION_TIMEOUT = 10
# Seconds the accept loop waits between its checks for stop (and for
# idle connections past CONNECTION_TIMEOUT); a stop takes up to this long
# to close the listening socket. cheroot's default is 0.5.
STOP_CHECK_INTERVAL = 0.1
# An unread request body is discarded up to this many bytes; a read
# waits at most until LINGER_TIMEOUT seconds after the response started.
DRAIN_LIMIT = 32 * 1024 * 1024
LINGER_TIMEOUT = 10.0
DRAIN_CHUNK = 65536


class _Gateway(cheroot_wsgi.Gateway_10):
    """cheroot's WSGI 1.0 gateway, discarding the unread request body
    (within the bounds above) once the application answers."""

    def start_response(self, status, headers, exc_info=None):
        self._discard_unread_body()
        return super().start_response(status, headers, exc_info)

    def _discard_unread_body(self) -> None:
        req = self.req
        unread = getattr(req.rfile, 'remaining', 0)
        if unread <= 0:
            return
        if unread > DRAIN_LIMIT:
            LOG.debug('Closing the connection after the response: %d '
                      'request body bytes unread (more than %d)', unread,
                      DRAIN_LIMIT)
            req.close_connection = True
            return
        sock = req.conn.socket
        deadline = time.monotonic() + LINGER_TIMEOUT
        try:
            while req.rfile.remaining > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError('linger timeout')
                sock.settimeout(left)
                if not req.rfile.read(min(req.rfile.remaining,
                                          DRAIN_CHUNK)):
                    break
        except OSError as err:
            LOG.debug('Stopped discarding the request body: %s', err)
            req.close_connection = True
        finally:
            sock.settimeout(req.server.timeout)


class _Workers(threadpool.ThreadPool):
    """cheroot's worker pool, telling when its server stops taking
    connections: cheroot closes the listening socket and the idle
    connections before it stops the pool."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.stopping = threading.Event()

    def stop(self, timeout=None) -> None:
        self.stopping.set()
        super().stop(timeout)


class _Server(cheroot_wsgi.Server):
    """cheroot with nova's limits, logging through oslo.log."""

    def __init__(self, bind_addr: tuple, app, max_requests: int) -> None:
        super().__init__(
            bind_addr, app, numthreads=max_requests,
            server_name=bind_addr[0],
            request_queue_size=LISTEN_BACKLOG,
            timeout=CONNECTION_TIMEOUT,
            # The pool's stop waits for every request in progress;
            # WSGIServer.stop bounds its own wait.
            shutdown_timeout=None,
            accepted_queue_size=LISTEN_BACKLOG)
        self.gateway = _Gateway
        self.keep_alive_conn_limit = KEEPALIVE_LIMIT
        self.max_request_header_size = MAX_REQUEST_HEADER_SIZE
        self.expiration_interval = STOP_CHECK_INTERVAL
        self.requests = _Workers(
            self, min=max_requests, max=max_requests,
            accepted_queue_size=LISTEN_BACKLOG,
            accepted_queue_timeout=CONNECTION_TIMEOUT)

    @staticmethod
    def bind_socket(socket_, bind_addr):
        """Bind with SO_REUSEADDR even on port 0 (cheroot sets it only on
        a fixed port): connections of a server that asked for a free port
        linger in TIME_WAIT, and without the flag on them a server
        started again on that port (a restart, Placement coming back in
        the tests) could not bind it."""
        socket_.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        socket_.bind(bind_addr)
        return socket_

    def error_log(self, msg: str = '', level: int = 20,
                  traceback: bool = False) -> None:
        LOG.log(level, 'WSGI server: %s', msg, exc_info=traceback)


def _address(host: str, port: int) -> str:
    """``host:port``, an IPv6 address in brackets."""
    if ':' in host:
        return '[%s]:%d' % (host, port)
    return '%s:%d' % (host, port)


class WSGIServer:
    """Serve a WSGI ``app`` on ``host``:``port`` from background threads.

    ``port=0`` binds a free port; ``url`` then reports the real one.
    At most ``max_requests`` requests are handled at once (one worker
    thread each); further connections wait in the backlog. ``service``
    and ``options`` (the options that set ``host`` and ``port``, e.g.
    ``[api]listen, [api]listen_port``) name it when it cannot listen.
    """

    def __init__(self, app, host: str = '127.0.0.1', port: int = 0,
                 max_requests: int = DEFAULT_MAX_REQUESTS,
                 service: str = 'HTTP server', options: str = '') -> None:
        self.app = app
        self.host = host
        self.port = port
        self.max_requests = max_requests
        self.service = service
        self.options = options
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL of the running server, e.g. ``http://127.0.0.1:4242``."""
        if self._server is None:
            raise RuntimeError('WSGIServer is not started')
        return 'http://' + _address(self.host, self._server.bind_addr[1])

    def start(self) -> None:
        """Bind the socket and start serving in background threads.

        Raises ListenFailed naming the service, its address and options
        and the system's reason when the socket cannot be bound (the
        port is in use, the address is not this host's).
        """
        if self._server is not None:
            raise RuntimeError('WSGIServer is already started')
        server = _Server((self.host, self.port), self.app,
                         self.max_requests)
        try:
            # Binds and listens here, so the port is known and taken on
            # return.
            server.prepare()
        except OSError as err:
            # cheroot wraps the bind's error in one naming every address
            # it tried; the bind's own says why.
            cause = err.__cause__ if isinstance(err.__cause__, OSError) \
                else err
            raise exception.ListenFailed(
                service=self.service,
                address=_address(self.host, self.port),
                options=' (%s)' % self.options if self.options else '',
                reason=cause) from err
        self._server = server
        self._thread = threading.Thread(
            target=server.serve, name='wsgi-%d' % server.bind_addr[1],
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
        stopper = threading.Thread(target=server.stop, daemon=True,
                                   name='wsgi-stop')
        stopper.start()
        # The listening socket is closed once the pool starts stopping
        # (or the stop failed before it).
        while not server.requests.stopping.wait(0.05):
            if not stopper.is_alive():
                break
        stopper.join(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        return not stopper.is_alive()


def _exit_with(error: str) -> None:
    """End the child with ``error`` as the last line of its stderr (the
    one the parent reports), without the interpreter's exit: the
    application's threads would add errors of their own after it."""
    print(error, file=sys.stderr, flush=True)
    os._exit(1)


def serve_child(application: str, host: str, port: int,
                service: str) -> None:
    """Serve ``application`` (``module:name``) on ``host:port`` as the
    child process ``python -m nova.wsgi_server APPLICATION HOST PORT
    SERVICE``: print the URL on one line of stdout, then serve until the
    parent closes stdin (it ended) or terminates the child. Exits 1 with
    its error as the last line of stderr when it cannot serve."""
    # The application parses no command line (Glance would read ours).
    del sys.argv[1:]
    try:
        module, _, name = application.partition(':')
        app = getattr(importlib.import_module(module), name)
        server = WSGIServer(app, host=host, port=port, service=service)
        server.start()
    except exception.ListenFailed as err:
        _exit_with(str(err))
    except Exception as err:
        traceback.print_exc()
        _exit_with('%s: %s' % (type(err).__name__, err))
    print(server.url, flush=True)
    sys.stdin.read()
    os._exit(0)


if __name__ == '__main__':
    serve_child(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
