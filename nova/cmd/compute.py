"""nova-compute: report one host's resources and run its instances."""

import signal
import sys
import threading

from nova import cmd
from nova import service
from nova.compute import manager as compute_manager
from nova.db import migration
from nova.scheduler.client import report
from nova.virt import driver as virt_driver


def build_manager(conf, host: str | None = None
                  ) -> compute_manager.ComputeManager:
    """A compute manager for ``host`` on the configured hypervisor."""
    return compute_manager.ComputeManager(
        conf, virt_driver.load_driver(conf),
        report.SchedulerReportClient(conf), host=host)


def main(argv: list[str] | None = None) -> int:
    conf = cmd.parse_args(argv)
    migration.db_sync()
    svc = service.Service(build_manager(conf))
    svc.start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    svc.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
