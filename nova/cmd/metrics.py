"""nova-metrics: the fleet's PCI devices and free groups for Prometheus.

An exporter process, like nova-manage a reader of the database only: at
each scrape of ``GET /metrics`` on ``[metrics]listen``:``listen_port`` it
reads the compute nodes and their tracked devices (two queries whatever
the fleet's size, see ``nova.fleet.metrics``). The scheduler's and the
computes' metrics are served by those processes themselves (see
doc/source/admin/metrics.rst).
"""

import sys

from nova import cmd
from nova import exception
from nova import metrics_endpoint
from nova.fleet import metrics as fleet_metrics


def main(argv: list[str] | None = None) -> int:
    return cmd.run_service('nova-metrics', _serve, argv,
                           runs_control_plane=False)


def _serve(conf) -> int:
    if not conf.metrics.listen_port:
        raise exception.InvalidConfiguration(reason=(
            'nova-metrics needs [metrics]listen_port, the port it serves '
            'the metrics on (1-65535, e.g. 9180); it is 0'))
    server = metrics_endpoint.serve(conf, [fleet_metrics.FleetCollector()])
    try:
        cmd.wait_for_signal(conf.graceful_shutdown_timeout)
    finally:
        server.stop(timeout=None)
    return 0


if __name__ == '__main__':
    sys.exit(main())
