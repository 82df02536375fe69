"""nova-conductor: runs server builds (schedule, claim, build, reschedule)."""

import sys

from nova import cmd
from nova.conductor import manager
from nova.conductor import rpcapi


def main(argv: list[str] | None = None) -> int:
    return cmd.run_service('nova-conductor', _serve, argv)


def _serve(conf) -> int:
    return cmd.run_rpc_service(conf, lambda: manager.ConductorManager(conf),
                               rpcapi.TOPIC)


if __name__ == '__main__':
    sys.exit(main())
