"""nova-api: the Compute API (v2.1 subset) over HTTP, in one process.

A deployment with several API worker processes runs
``nova.wsgi.osapi_compute:application`` under a WSGI server instead (see
:mod:`nova.wsgi`).
"""

import sys

from oslo_log import log as logging

from nova import cmd
from nova import rpc
from nova import wsgi
from nova import wsgi_server

LOG = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    return cmd.run_service('nova-api', _serve, argv)


def _serve(conf) -> int:
    # Refused before anything starts (see cmd.api_listen_address).
    host = cmd.api_listen_address(conf)
    app = wsgi.compute_api_app(conf)
    server = wsgi_server.WSGIServer(app, host=host,
                                    port=conf.api.listen_port,
                                    service='The Compute API',
                                    options=cmd.API_LISTEN_OPTIONS)
    server.start()
    LOG.info('Compute API listening at %s/v2.1', server.url)
    try:
        cmd.wait_for_signal(conf.graceful_shutdown_timeout)
    finally:
        # Refuse new connections, finish the requests in progress.
        server.stop(timeout=None)
        rpc.cleanup()
    return 0


if __name__ == '__main__':
    sys.exit(main())
