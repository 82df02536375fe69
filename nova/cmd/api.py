"""nova-api: the Compute API (v2.1 subset) over HTTP."""

import sys

from oslo_log import log as logging

from nova import cmd
from nova import rpc
from nova import wsgi_server
from nova.api import wsgi_app
from nova.compute import api as compute_api

LOG = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    return cmd.run_service('nova-api', _serve, argv)


def _serve(conf) -> int:
    rpc.init(conf)
    app = wsgi_app.make_app(conf, compute_api.API(conf))
    server = wsgi_server.WSGIServer(app, host=conf.api.listen,
                                    port=conf.api.listen_port)
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
