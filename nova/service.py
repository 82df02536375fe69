"""Running a nova service: its manager, periodic tasks and RPC server.

Services use plain threads. A periodic task runs in its own daemon thread
and never overlaps itself; a failing run is logged and retried at the next
interval, so one bad run does not stop a compute from reporting. Each run
has a fresh admin context, with its own request id, as its thread's
current context: its log lines and Placement requests carry that id.

A service whose manager names its ``binary`` registers in the services
table and reports that it is up every ``[DEFAULT]report_interval`` seconds
(``nova.servicegroup.api``), so others can tell a live service from one
that is gone.
"""

import threading
from collections.abc import Callable

from oslo_log import log as logging

from nova import context as nova_context
from nova.servicegroup import api as servicegroup

LOG = logging.getLogger(__name__)


class PeriodicTask:
    """Call ``func`` now and then every ``interval`` seconds until stopped."""

    def __init__(self, name: str, func: Callable[[], None],
                 interval: float) -> None:
        self.name = name
        self._func = func
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name,
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            nova_context.get_admin_context().update_store()
            try:
                self._func()
            except Exception:
                LOG.exception('Periodic task %s failed; retrying in %ss',
                              self.name, self._interval)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive() and \
                self._thread is not threading.current_thread():
            self._thread.join()


class Service:
    """A manager plus its periodic tasks and optional RPC server.

    ``manager`` provides ``init_host()``, ``periodic_tasks()`` returning
    ``[(name, func, interval)]``, ``conf`` and, to report liveness,
    ``binary`` and ``topic`` (see ``nova.manager.Manager``); for RPC
    services it is the endpoint of ``rpc_server_factory(manager)``.
    ``host`` defaults to the manager's ``host``, else ``[DEFAULT]host``.
    """

    def __init__(self, manager, rpc_server_factory=None,
                 host: str | None = None) -> None:
        self.manager = manager
        self.host = host or getattr(manager, 'host', None) or \
            manager.conf.host
        self._rpc_server_factory = rpc_server_factory
        self._rpc_server = None
        self._tasks: list[PeriodicTask] = []

    def report_state(self) -> None:
        """Heartbeat: record in the services row that this service is up.
        """
        servicegroup.report_state(nova_context.get_admin_context(),
                                  self.host, self.manager.binary,
                                  self.manager.topic)

    def start(self) -> None:
        """Report up, prepare the host, serve RPC, start periodic tasks.

        The first report comes before ``init_host``: from then on the API
        hands deletes to this service instead of deleting locally, and
        whatever was deleted locally before is cleaned up by init_host.
        """
        tasks = list(self.manager.periodic_tasks())
        if self.manager.binary:
            conf = self.manager.conf
            if conf.service_down_time <= conf.report_interval:
                LOG.warning('[DEFAULT]service_down_time (%ss) is not longer '
                            'than [DEFAULT]report_interval (%ss): services '
                            'will be seen as down between reports',
                            conf.service_down_time, conf.report_interval)
            self.report_state()
            tasks.append(('report_state', self.report_state,
                          conf.report_interval))
        self.manager.init_host()
        if self._rpc_server_factory is not None:
            self._rpc_server = self._rpc_server_factory(self.manager)
            self._rpc_server.start()
        for name, func, interval in tasks:
            if interval and interval > 0:
                task = PeriodicTask(name, func, interval)
                task.start()
                self._tasks.append(task)

    def stop(self) -> None:
        """Stop taking RPC messages, then let the handlers and periodic
        tasks running finish, then clean up the host."""
        if self._rpc_server is not None:
            self._rpc_server.stop()
        for task in self._tasks:
            task.stop()
        self._tasks = []
        if self._rpc_server is not None:
            self._rpc_server.wait()
            self._rpc_server = None
        cleanup = getattr(self.manager, 'cleanup_host', None)
        if cleanup is not None:
            cleanup()
