"""nova as service processes, started the way an operator starts them.

One module for the deployment tests and ``tools/soak.py``, so both drive
the same process set:

- :class:`Deployment`: Placement (its own WSGI application,
  ``placement.wsgi.api:application``, configured like the Placement
  ``nova-all`` embeds) and the Compute API
  (``nova.wsgi.osapi_compute:application``), each under gunicorn with
  ``WSGI_WORKERS`` worker processes, as operators run them under a WSGI
  server; nova-conductor, two nova-schedulers and one nova-compute per
  host (``hgx-1``, ``hgx-2``, each with its own generated HGX H200 node
  file), on MariaDB and a private RabbitMQ vhost;
- :class:`AllInOne`: ``nova-all`` (one process, SQLite and in-process
  messaging under a temporary ``state_path``).

Every service is a :class:`ServiceProcess`: SIGKILL it (with its worker
processes), start it again, read its log. It dies with the process that
started it, so a test run that is killed leaves no service processes
behind. Both are fixtures; used as context managers outside tests.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import fixtures
from oslo_log import log as logging
import requests

from nova import embedded_placement
from nova import wsgi
from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import process as process_fixture
from nova.tests.fixtures import rabbit as rabbit_fixture
from nova.tests.functional.lib import compute_pack
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
# Worker processes, and threads in each, of the Compute API and Placement.
WSGI_WORKERS = 2
WSGI_THREADS = 8
# Placement's own WSGI entry point, and the environment variable naming
# the directory of its placement.conf.
PLACEMENT_APP = 'placement.wsgi.api:application'
PLACEMENT_CONFIG_DIR_ENV = 'OS_PLACEMENT_CONFIG_DIR'
COMPUTE_API_APP = 'nova.wsgi.osapi_compute:application'
# The processes that are gunicorn masters, and what one logs on SIGTERM.
WSGI_SERVICES = ('placement', 'nova-api')
WSGI_SIGTERM_LOGGED = 'Handling signal: term'


# Seconds requests in progress get after a SIGTERM, unless the
# deployment's [DEFAULT]graceful_shutdown_timeout says otherwise (the
# default of that option, and the guide's --graceful-timeout).
DEFAULT_GRACE = 60


# gunicorn's access log line (with ``access_log``): the marker, the
# request line, the status, the time taken in milliseconds and the request
# id the service answered with.
ACCESS_LOG_FORMAT = ('ACCESS "%(r)s" %(s)s %(M)sms '
                     '%({x-openstack-request-id}o)s')


def gunicorn_argv(app: str, port: int, grace: int = DEFAULT_GRACE,
                  access_log: bool = False) -> list[str]:
    """Serve the WSGI ``app`` (``module:attribute``) on a loopback
    ``port`` with gunicorn, as deployment.rst tells operators to; with
    ``access_log``, one ``ACCESS_LOG_FORMAT`` line per request in its
    log (what a benchmark times requests with)."""
    return [os.path.join(BIN, 'gunicorn'), '--workers', str(WSGI_WORKERS),
            '--threads', str(WSGI_THREADS),
            '--bind', '127.0.0.1:%d' % port,
            '--graceful-timeout', str(grace),
            *(['--access-logfile', '-', '--access-logformat',
               ACCESS_LOG_FORMAT] if access_log else []), app]


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
    tells whether a started process is serving; ``env`` adds to the
    environment it starts with.
    """

    def __init__(self, name: str, argv: list[str], log_path: str,
                 ready, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.ready = ready
        self.env = dict(env or {})
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
            env = dict(os.environ, **self.env)
            env['PYTHONPATH'] = os.pathsep.join(
                [SOURCE_ROOT] + [p for p in os.environ.get(
                    'PYTHONPATH', '').split(os.pathsep) if p])
            # Its own process group: a kill takes its workers too.
            self.popen = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, start_new_session=True,
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
        """SIGKILL to the process and its workers: no cleanup, no
        goodbye, as a crash or OOM kill of the service."""
        if self.popen is None:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass    # the whole group is gone already
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

    def _add(self, name: str, argv: list[str], ready,
             env: dict[str, str] | None = None) -> ServiceProcess:
        proc = ServiceProcess(name, argv,
                              os.path.join(self.workdir, name + '.log'),
                              ready, env)
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
    ``nova-scheduler-<i>``, ``nova-compute-<host>``. With ``metrics``,
    the schedulers and computes serve Prometheus metrics and a
    ``nova-metrics`` process runs; ``metrics_urls`` maps process names to
    their ``/metrics`` URLs. With ``access_log``, the WSGI servers log
    every request with its duration (``ACCESS_LOG_FORMAT``). The
    services start all at once, or ``start_batch`` at a time (each batch
    serving before the next starts: many computes registering at once
    can keep a small Placement busier than their start-up waits). With
    ``hosts_per_process`` above 1, the computes run that many hosts per
    process (``compute_pack``, each host as its own nova-compute would
    run it), named ``nova-computes-<first host>``: the memory of a few
    hundred hosts.
    """

    def __init__(self, database_server: str, hosts=HOSTS,
                 schedulers: int = 2, workdir: str | None = None,
                 extra_conf: dict[str, dict] | None = None,
                 metrics: bool = False, access_log: bool = False,
                 start_batch: int | None = None,
                 hosts_per_process: int = 1) -> None:
        super().__init__(workdir, extra_conf)
        if hosts_per_process < 1:
            raise ValueError('hosts_per_process must be at least 1, got '
                             '%d' % hosts_per_process)
        if metrics and hosts_per_process > 1:
            raise ValueError('metrics are served per nova-compute process; '
                             'hosts_per_process must be 1 with metrics, got '
                             '%d' % hosts_per_process)
        self.hosts_per_process = hosts_per_process
        self.start_batch = start_batch
        self.database_server = database_server
        self.hosts = tuple(hosts)
        self.schedulers = schedulers
        self.metrics = metrics
        self.access_log = access_log
        self.metrics_urls: dict[str, str] = {}

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

        self._add_placement(placement_db)
        common = self._common_conf()
        self._add_nova('nova-conductor', 'nova-conductor', common, {})
        for index in range(1, self.schedulers + 1):
            name = 'nova-scheduler-%d' % index
            self._add_nova(name, 'nova-scheduler', common, {
                'DEFAULT': {'host': 'scheduler-%d' % index},
                **self._metrics_conf(name)})
        self._add_computes(common)
        if self.metrics:
            # As the console script nova-metrics runs it.
            own = write_conf(os.path.join(self.workdir, 'nova-metrics.conf'),
                             self._metrics_conf('nova-metrics'))
            self._add('nova-metrics', [
                sys.executable, '-m', 'nova.cmd.metrics', '--config-file',
                common, '--config-file', own],
                http_ready(self.metrics_urls['nova-metrics']))
        self._add('nova-api', gunicorn_argv(COMPUTE_API_APP, self.api_port,
                                            self._grace(), self.access_log),
                  http_ready(self.api_root),
                  env={wsgi.CONFIG_FILES_ENV: common})
        self._start_all(['placement'])
        others = [name for name in self.processes if name != 'placement']
        batch = self.start_batch or len(others)
        for first in range(0, len(others), batch):
            self._start_all(others[first:first + batch])

    def _add_computes(self, common: str) -> None:
        """One nova-compute per host, or packs of ``hosts_per_process``."""
        if self.hosts_per_process == 1:
            for host in self.hosts:
                name = 'nova-compute-%s' % host
                self._add_nova(name, 'nova-compute', common, {
                    **self._host_conf(host), **self._metrics_conf(name)})
            return
        step = self.hosts_per_process
        for first in range(0, len(self.hosts), step):
            pack = self.hosts[first:first + step]
            files = ['%s=%s' % (host, write_conf(os.path.join(
                self.workdir, 'nova-compute-%s.conf' % host),
                self._host_conf(host))) for host in pack]
            self._add('nova-computes-%s' % pack[0], [
                sys.executable, '-m', compute_pack.__name__,
                '--config-file', common, *files],
                logged(compute_pack.READY))

    def _host_conf(self, host: str) -> dict[str, dict]:
        """The own configuration of ``host``'s compute, on a generated
        HGX H200 node written for it."""
        node = fakehost.write_node_xml(
            os.path.join(self.workdir, '%s.xml' % host),
            fakehost.hgx_h200_node_xml())
        return {'DEFAULT': {'host': host},
                'libvirt': {'connection_uri': node}}

    def _metrics_conf(self, name: str) -> dict[str, dict]:
        """The [metrics] section of process ``name`` (none without
        ``metrics``), on a free port."""
        if not self.metrics:
            return {}
        port = free_port()
        self.metrics_urls[name] = 'http://127.0.0.1:%d/metrics' % port
        return {'metrics': {'listen': '127.0.0.1', 'listen_port': port}}

    def _grace(self) -> int:
        """The WSGI servers' graceful timeout: the nova services'."""
        return int(self.extra_conf.get('DEFAULT', {}).get(
            'graceful_shutdown_timeout', DEFAULT_GRACE))

    def _add_placement(self, connection: str) -> None:
        """Placement's own application under gunicorn, on its database
        (schema synced here, as ``placement-manage db sync`` does)."""
        conf_dir = os.path.join(self.workdir, 'placement')
        os.makedirs(conf_dir, exist_ok=True)
        conf_file = os.path.join(conf_dir, 'placement.conf')
        with open(conf_file, 'w') as f:
            # Logged as a nova service logs (oslo.log, to stderr): each
            # request line carries the request ids Placement received.
            f.write(embedded_placement.config_file(
                connection, {'DEFAULT': {'use_stderr': True}}))
        subprocess.run([os.path.join(BIN, 'placement-manage'),
                        '--config-file', conf_file, 'db', 'sync'],
                       check=True, capture_output=True,
                       timeout=READY_TIMEOUT)
        self._add('placement', gunicorn_argv(PLACEMENT_APP,
                                             self.placement_port,
                                             self._grace(), self.access_log),
                  http_ready(self.placement_url),
                  env={PLACEMENT_CONFIG_DIR_ENV: conf_dir})

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


def deployment_or_skip(test, **kwargs) -> Deployment:
    """A :class:`Deployment` (``kwargs`` as it takes) on the MariaDB of
    this machine; ``test`` is skipped without RabbitMQ or MariaDB."""
    reason = rabbit_fixture.unavailable_reason()
    if reason is not None:
        test.skipTest(reason)
    return Deployment(db_fixture.server_url_or_skip(test, 'mysql'),
                      **kwargs)


class AllInOne(_Processes):
    """``nova-all`` in a subprocess with its defaults under a temporary
    ``state_path`` (SQLite, embedded Placement, in-process messaging) and
    the HGX H200 config; ``--computes`` hosts ``hgx-1``..., or with
    ``compute_files`` one ``--compute NAME=FILE`` per name, FILE holding
    the sections given for it. Process name: ``nova-all``. This process's
    ``nova.db.api`` reads its database.
    """

    def __init__(self, computes: int = 2,
                 workdir: str | None = None,
                 extra_conf: dict[str, dict] | None = None,
                 compute_files: dict[str, dict[str, dict]] | None = None
                 ) -> None:
        super().__init__(workdir, extra_conf)
        self.computes = computes
        self.compute_files = compute_files

    def _setUp(self) -> None:
        self._make_workdir()
        super()._setUp()
        self.api_port = free_port()
        self.glance_port = free_port()
        conf = write_conf(os.path.join(self.workdir, 'nova.conf'), _merge({
            'DEFAULT': {'state_path': self.workdir, 'host': 'hgx'},
            'api': {'listen': '127.0.0.1', 'listen_port': self.api_port},
            # Not Placement's usual 8778: runs side by side never clash.
            'all_in_one': {'placement_listen_port': free_port(),
                           'glance_listen_port': self.glance_port},
        }, h200_sections(), self.extra_conf))
        if self.compute_files is None:
            computes = ['--computes', str(self.computes)]
        else:
            computes = []
            for name, sections in self.compute_files.items():
                path = write_conf(os.path.join(
                    self.workdir, '%s.conf' % name), sections)
                computes += ['--compute', '%s=%s' % (name, path)]
        self._add('nova-all', [
            os.path.join(BIN, 'nova-all'), '--config-file', conf,
            *computes], http_ready('http://127.0.0.1:%d' % self.api_port))
        self._start_all(['nova-all'])
        # nova-all's default [database]connection (see nova.conf.database).
        self.useFixture(db_fixture.DatabaseView(
            'sqlite:///' + os.path.join(self.workdir, 'nova.sqlite')))

    @property
    def api_url(self) -> str:
        return 'http://127.0.0.1:%d/v2.1' % self.api_port

    @property
    def glance_url(self) -> str:
        """The URL of the Glance nova-all runs."""
        return 'http://127.0.0.1:%d' % self.glance_port

    @property
    def placement_url(self) -> str:
        """The embedded Placement's URL, as the running nova-all says."""
        found = re.findall(r'nova-all is running: .*, Placement ([^,\s]+)',
                           self.processes['nova-all'].log(since_start=True))
        if not found:
            raise RuntimeError('nova-all did not say where Placement is')
        return found[-1]
