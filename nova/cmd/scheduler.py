"""nova-scheduler: picks and claims allocation candidates in Placement."""

import sys

from nova import cmd
from nova.scheduler import manager
from nova.scheduler import metrics
from nova.scheduler import rpcapi


def main(argv: list[str] | None = None) -> int:
    return cmd.run_service('nova-scheduler', _serve, argv)


def _serve(conf) -> int:
    return cmd.run_rpc_service(conf, lambda: manager.SchedulerManager(conf),
                               rpcapi.TOPIC,
                               metrics=lambda _manager: [metrics.REGISTRY])


if __name__ == '__main__':
    sys.exit(main())
