"""nova as service processes, started the way an operator starts them.

One module for the deployment tests and ``tools/soak.py``, so both drive
the same process set:

- :class:`Deployment`: Placement (the real Placement WSGI app, hosted as
  ``nova-all`` hosts it and with the same settings, but in its own process
  on a fixed port, so it can be stopped and started again where nova
  expects it), nova-api, nova-conductor, two nova-schedulers and one
  nova-compute per host (``hgx-1``, ``hgx-2``, each with its own generated
  HGX H200 node file), on MariaDB and a private RabbitMQ vhost;
- :class:`AllInOne`: ``nova-all`` (one process, SQLite and in-process
  messaging under a temporary ``state_path``).

Every process is a :class:`ServiceProcess`: SIGKILL it, start it again,
read its log. It dies with the process that started it, so a test run
that is killed leaves no service processes behind. Both are fixtures;
used as context managers outside tests.
"""

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import time

import fixtures
from oslo_config import cfg
from oslo_log import log as logging
import requests

from nova import cmd
from nova import embedded_placement
from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import process as process_fixture
from nova.tests.fixtures import rabbit as rabbit_fixture
from nova.virt.fake import host as fakehost

LOG = logging.getLogger(__name__)

BIN = os.path.dirname(sys.executable)
# Services import nova from the tree this module comes from.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(
    __import__('nova').__file__)))
HOSTS = ('hgx-1', 'hgx-2')
READY_TIMEOUT = 120
STOP_TIMEOUT = 20
# What every RPC service logs once it consumes its topic (nova.cmd).
RPC_READY = 'serving topic'
# The token nova-api (noauth) and Placement (noauth2) take as the admin.
TOKEN = 'admin'


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def write_conf(path: str, sections: dict[str, dict]) -> str:
    """Write an oslo.config file; a list value repeats the option."""
    lines = []
    for section, options in sections.items():
        lines.append('[%s]' % section)
        for name, value in options.items():
            for item in value if isinstance(value, list) else [value]:
                lines.append('%s = %s' % (name, item))
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return path


def h200_sections() -> dict[str, dict]:
    """The operator's config for HGX H200 hosts with NVLink groups."""
    return {'pci': {'report_in_placement': 'true',
                    **fakehost.h200_pci_config()},
            'filter_scheduler': {'pci_in_placement': 'true'}}


def _merge(*confs: dict[str, dict]) -> dict[str, dict]:
    merged: dict[str, dict] = {}
    for conf in confs:
        for section, options in conf.items():
            merged.setdefault(section, {}).update(options)
    return merged


def http_ready(url: str):
    """A readiness check: ``url`` answers without a server error."""
    def ready(_proc: 'ServiceProcess') -> bool:
        try:
            return requests.get(url, timeout=5).status_code < 500
        except requests.RequestException:
            return False
    return ready


def logged(marker: str):
    """A readiness check: the process logged ``marker`` since it started."""
    return lambda proc: marker in proc.log(since_start=True)


class ServiceProcess:
    """One service process that can be killed and started again.

    Output goes to ``log_path`` (appended across restarts). ``ready``
    tells whether a started process is serving.
    """

    def __init__(self, name: str, argv: list[str], log_path: str,
                 ready) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.ready = ready
        self.popen: subprocess.Popen | None = None
        self._start_offset = 0

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        """Start the process (it must not be running)."""
        if self.running:
            raise RuntimeError('%s is already running' % self.name)
        with open(self.log_path, 'a') as log:
            log.write('==== %s: starting %s\n' % (
                time.strftime('%X'), ' '.join(self.argv)))
            self._start_offset = log.tell()
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [SOURCE_ROOT] + [p for p in os.environ.get(
                    'PYTHONPATH', '').split(os.pathsep) if p]))
            self.popen = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env,
                preexec_fn=process_fixture.die_with_parent())

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait until ``ready``; RuntimeError if it exits or times out."""
        deadline = time.monotonic() + timeout
        while not self.ready(self):
            if not self.running:
                raise RuntimeError('%s exited with %s before it was ready:'
                                   '\n%s' % (self.name, self.popen.returncode,
                                             self.log(since_start=True)))
            if time.monotonic() > deadline:
                raise RuntimeError('%s not ready after %ss:\n%s' % (
                    self.name, timeout, self.log(since_start=True)))
            time.sleep(0.3)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, as a crash or OOM kill."""
        if self.running:
            self.popen.send_signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait()

    def terminate(self) -> None:
        """SIGTERM: ask the service to shut down (see :meth:`stop`)."""
        if self.running:
            self.popen.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        self.terminate()
        if self.popen is None:
            return
        try:
            self.popen.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()

    def log(self, since_start: bool = False) -> str:
        """The log text (all of it, or of the current run only)."""
        try:
            with open(self.log_path) as log:
                if since_start:
                    log.seek(self._start_offset)
                return log.read()
        except FileNotFoundError:
            return ''


class _Processes(fixtures.Fixture):
    """Named service processes, stopped at cleanup, with their config and
    logs in ``workdir`` (a temporary directory unless given)."""

    def __init__(self, workdir: str | None,
                 extra_conf: dict[str, dict] | None) -> None:
        super().__init__()
        self.workdir = workdir
        self.extra_conf = extra_conf or {}

    def _make_workdir(self) -> None:
        if self.workdir is None:
            self.workdir = self.useFixture(fixtures.TempDir()).path
        os.makedirs(self.workdir, exist_ok=True)

    def _setUp(self) -> None:
        self.processes: dict[str, ServiceProcess] = {}
        self.addCleanup(self._stop_all)

    def _add(self, name: str, argv: list[str], ready) -> ServiceProcess:
        proc = ServiceProcess(name, argv,
                              os.path.join(self.workdir, name + '.log'),
                              ready)
        self.processes[name] = proc
        return proc

    def _start_all(self, names) -> None:
        names = list(names)
        for name in names:
            self.processes[name].start()
        for name in names:
            self.processes[name].wait_ready()

    def _stop_all(self) -> None:
        # All at once: each takes a second or two to close its connections.
        for proc in self.processes.values():
            proc.terminate()
        for proc in self.processes.values():
            proc.stop()

    def kill(self, name: str) -> None:
        """SIGKILL one process."""
        self.processes[name].kill()

    def start(self, name: str) -> None:
        """Start one (killed or stopped) process and wait until ready."""
        self._start_all([name])

    def restart(self, name: str) -> None:
        """SIGKILL one process and start it again."""
        self.kill(name)
        self.start(name)

    def logs(self) -> dict[str, str]:
        """Process name -> its log (none before the processes exist)."""
        return {name: proc.log() for name, proc in
                getattr(self, 'processes', {}).items()}


class Deployment(_Processes):
    """The separate-process deployment (see the module docstring).

    ``database_server`` is a MariaDB/MySQL server URL: a nova database
    (migrated, and the one this process's ``nova.db.api`` reads) and a
    Placement database are created on it and dropped at cleanup. Needs
    ``rabbitmqctl`` (see :mod:`nova.tests.fixtures.rabbit`). Process
    names: ``placement``, ``nova-api``, ``nova-conductor``,
    ``nova-scheduler-<i>``, ``nova-compute-<host>``.
    """

    def __init__(self, database_server: str, hosts=HOSTS,
                 schedulers: int = 2, workdir: str | None = None,
                 extra_conf: dict[str, dict] | None = None) -> None:
        super().__init__(workdir, extra_conf)
        self.database_server = database_server
        self.hosts = tuple(hosts)
        self.schedulers = schedulers

    def _setUp(self) -> None:
        self._make_workdir()
        self.vhost = self.useFixture(rabbit_fixture.RabbitVhost())
        self.database = self.useFixture(
            db_fixture.Database(server_url=self.database_server))
        placement_db = db_fixture.create_server_database(
            self, self.database_server, 'placement_test_')
        self.api_port = free_port()
        self.placement_port = free_port()
        super()._setUp()

        self._add('placement', [
            sys.executable, '-m', __name__, 'placement',
            '--connection', placement_db, '--port',
            str(self.placement_port)], http_ready(self.placement_url))
        common = self._common_conf()
        self._add_nova('nova-conductor', 'nova-conductor', common, {})
        for index in range(1, self.schedulers + 1):
            self._add_nova('nova-scheduler-%d' % index, 'nova-scheduler',
                           common, {'DEFAULT': {
                               'host': 'scheduler-%d' % index}})
        for host in self.hosts:
            node = fakehost.write_node_xml(
                os.path.join(self.workdir, '%s.xml' % host),
                fakehost.hgx_h200_node_xml())
            self._add_nova('nova-compute-%s' % host, 'nova-compute', common,
                           {'DEFAULT': {'host': host},
                            'libvirt': {'connection_uri': node}})
        self._add_nova('nova-api', 'nova-api', common, {},
                       http_ready(self.api_root))
        self._start_all(['placement'])
        self._start_all([name for name in self.processes
                         if name != 'placement'])

    def _common_conf(self) -> str:
        return write_conf(os.path.join(self.workdir, 'nova.conf'), _merge({
            'DEFAULT': {'state_path': self.workdir,
                        'transport_url': self.vhost.url,
                        'host': 'controller'},
            'database': {'connection': self.database.url},
            'api': {'listen': '127.0.0.1', 'listen_port': self.api_port},
            'placement': {'auth_type': 'admin_token',
                          'endpoint': self.placement_url, 'token': TOKEN},
        }, h200_sections(), self.extra_conf))

    def _add_nova(self, name: str, binary: str, common: str,
                  own: dict[str, dict], ready=None) -> None:
        """A nova service reading nova.conf plus its own overrides."""
        argv = [os.path.join(BIN, binary), '--config-file', common]
        if own:
            argv += ['--config-file', write_conf(
                os.path.join(self.workdir, name + '.conf'), own)]
        self._add(name, argv, ready or logged(RPC_READY))

    @property
    def api_root(self) -> str:
        return 'http://127.0.0.1:%d' % self.api_port

    @property
    def api_url(self) -> str:
        """The Compute API endpoint (``.../v2.1``)."""
        return self.api_root + '/v2.1'

    @property
    def placement_url(self) -> str:
        return 'http://127.0.0.1:%d' % self.placement_port


class AllInOne(_Processes):
    """``nova-all`` in a subprocess with its defaults under a temporary
    ``state_path`` (SQLite, embedded Placement, in-process messaging) and
    the HGX H200 config; ``--computes`` hosts ``hgx-1``... Process name:
    ``nova-all``. This process's ``nova.db.api`` reads its database.
    """

    def __init__(self, computes: int = 2,
                 workdir: str | None = None,
                 extra_conf: dict[str, dict] | None = None) -> None:
        super().__init__(workdir, extra_conf)
        self.computes = computes

    def _setUp(self) -> None:
        self._make_workdir()
        super()._setUp()
        self.api_port = free_port()
        conf = write_conf(os.path.join(self.workdir, 'nova.conf'), _merge({
            'DEFAULT': {'state_path': self.workdir, 'host': 'hgx'},
            'api': {'listen': '127.0.0.1', 'listen_port': self.api_port},
            # Not Placement's usual 8778: runs side by side never clash.
            'all_in_one': {'placement_listen_port': free_port()},
        }, h200_sections(), self.extra_conf))
        self._add('nova-all', [
            os.path.join(BIN, 'nova-all'), '--config-file', conf,
            '--computes', str(self.computes)],
            http_ready('http://127.0.0.1:%d' % self.api_port))
        self._start_all(['nova-all'])
        # nova-all's default [database]connection (see nova.conf.database).
        self.useFixture(db_fixture.DatabaseView(
            'sqlite:///' + os.path.join(self.workdir, 'nova.sqlite')))

    @property
    def api_url(self) -> str:
        return 'http://127.0.0.1:%d/v2.1' % self.api_port

    @property
    def placement_url(self) -> str:
        """The embedded Placement's URL, as the running nova-all says."""
        found = re.findall(r'nova-all is running: .*, Placement (\S+)',
                           self.processes['nova-all'].log(since_start=True))
        if not found:
            raise RuntimeError('nova-all did not say where Placement is')
        return found[-1]


def _serve_placement(argv: list[str]) -> int:
    """Serve Placement on a fixed port until SIGTERM (the ``placement``
    process of a Deployment)."""
    parser = argparse.ArgumentParser(prog='placement')
    parser.add_argument('--connection', required=True)
    parser.add_argument('--port', type=int, required=True)
    args = parser.parse_args(argv)
    # Logged as a nova service logs (oslo.log, to stderr): each request
    # line carries the request ids Placement received.
    conf = cfg.ConfigOpts()
    logging.register_options(conf)
    conf([], project='placement', default_config_files=[],
         default_config_dirs=[])
    conf.set_default('use_stderr', True)
    logging.setup(conf, 'placement')
    placement = embedded_placement.EmbeddedPlacement(
        connection=args.connection, port=args.port)
    placement.start()
    LOG.info('Placement listening at %s', placement.url)
    try:
        cmd.wait_for_signal(STOP_TIMEOUT)
    finally:
        placement.stop(timeout=None)
    return 0


if __name__ == '__main__':
    if sys.argv[1:2] != ['placement']:
        sys.exit('usage: python -m %s placement --connection URL --port N'
                 % __spec__.name)
    sys.exit(_serve_placement(sys.argv[2:]))
