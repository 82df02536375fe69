"""Serve a process's Prometheus metrics over HTTP (``GET /metrics``).

Each nova process serves what it holds (see ``nova.conf.metrics``): the
collectors and registries it is given are gathered in one registry,
rendered by prometheus_client's WSGI app and served by nova's HTTP server
(``nova.wsgi_server``, cheroot) on ``[metrics]listen``:``listen_port``.
There is no authentication, as for any Prometheus exporter: the metrics
name hosts and counts, never servers or projects, and the port is bound
where only the Prometheus server reaches it.
"""

from collections.abc import Iterable

from oslo_config import cfg
from oslo_log import log as logging
import prometheus_client
from prometheus_client import registry as prometheus_registry

from nova import wsgi_server

LOG = logging.getLogger(__name__)

# Prometheus scrapes one request at a time per target.
_MAX_REQUESTS = 4


def make_server(collectors: Iterable[prometheus_registry.Collector],
                host: str, port: int,
                options: str = '') -> wsgi_server.WSGIServer:
    """An HTTP server (not started) rendering ``collectors`` (collectors
    or whole registries) at each request; ``port`` 0 binds a free one.
    ``options`` name where ``host`` and ``port`` are set."""
    registry = prometheus_client.CollectorRegistry(auto_describe=True)
    for collector in collectors:
        registry.register(collector)
    return wsgi_server.WSGIServer(prometheus_client.make_wsgi_app(registry),
                                  host=host, port=port,
                                  max_requests=_MAX_REQUESTS,
                                  service='The metrics endpoint',
                                  options=options)


def serve(conf: cfg.ConfigOpts,
          collectors: Iterable[prometheus_registry.Collector]
          ) -> wsgi_server.WSGIServer | None:
    """Start serving ``collectors`` at ``[metrics]listen``:``listen_port``
    (None, and nothing served, when the port is 0)."""
    if not conf.metrics.listen_port:
        return None
    server = make_server(collectors, conf.metrics.listen,
                         conf.metrics.listen_port,
                         options='[metrics]listen, [metrics]listen_port')
    server.start()
    LOG.info('Prometheus metrics at %s/metrics', server.url)
    return server
