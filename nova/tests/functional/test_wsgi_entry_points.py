"""The WSGI applications under gunicorn with several worker processes,
started by the commands of doc/source/admin/deployment.rst as written
there (only the paths and the port differ): the Compute API
(``nova.wsgi.osapi_compute:application``) and Placement's own
(``placement.wsgi.api:application``) with nova's Placement settings, each
on a SQLite database and in-process messaging."""

import os
import re
import shlex
import subprocess

import fixtures
import requests

from nova import embedded_placement
from nova import test
from nova.tests.functional.lib import deployment
from nova.tests.functional.lib import doc_commands

HEADERS = {'X-Auth-Token': deployment.TOKEN}
SECTION = 'Under a WSGI server'


def documented(app: str, paths: dict[str, str], port: int
               ) -> tuple[list[str], dict[str, str]]:
    """The guide's command serving ``app``: its argv (gunicorn of this
    environment, bound to a loopback ``port``) and environment, with
    ``paths`` replaced."""
    [command] = [c for c in doc_commands.commands(
        doc_commands.DEPLOYMENT_GUIDE, SECTION) if c.endswith(' ' + app)]
    for old, new in paths.items():
        command = command.replace(old, new)
    command = re.sub(r'--bind \S+', '--bind 127.0.0.1:%d' % port, command)
    words = shlex.split(command)
    env = {}
    while '=' in words[0]:
        name, value = words.pop(0).split('=', 1)
        env[name] = value
    if words[0] != 'gunicorn':
        raise AssertionError('not a gunicorn command: %s' % command)
    return [os.path.join(deployment.BIN, 'gunicorn')] + words[1:], env


def _workers(pid: int) -> list[int]:
    """Process ids of the children of ``pid``."""
    with open('/proc/%d/task/%d/children' % (pid, pid)) as children:
        return [int(child) for child in children.read().split()]


class WSGIEntryPointsTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.workdir = self.useFixture(fixtures.TempDir()).path

    def serve(self, name: str, app: str, paths: dict[str, str]
              ) -> tuple[str, object]:
        """Start ``app`` by the guide's command; its URL and process."""
        port = deployment.free_port()
        url = 'http://127.0.0.1:%d' % port
        argv, env = documented(app, paths, port)
        # The deployment fixture serves it with the same workers.
        fixture_argv = deployment.gunicorn_argv(app, port)
        for option in ('--workers', '--threads'):
            self.assertEqual(
                fixture_argv[fixture_argv.index(option) + 1],
                argv[argv.index(option) + 1], option)
        proc = deployment.ServiceProcess(
            name, argv, os.path.join(self.workdir, name + '.log'),
            deployment.http_ready(url), env)
        proc.start()
        self.addCleanup(proc.kill)
        proc.wait_ready()
        return url, proc

    def assertStopsGracefully(self, proc) -> None:
        proc.terminate()
        self.assertEqual(0, proc.popen.wait(deployment.STOP_TIMEOUT),
                         proc.log())

    def test_compute_api(self):
        conf = deployment.write_conf(
            os.path.join(self.workdir, 'nova.conf'),
            {'DEFAULT': {'state_path': self.workdir}})
        subprocess.run([os.path.join(deployment.BIN, 'nova-manage'),
                        '--config-file', conf, 'db', 'sync'],
                       check=True, capture_output=True, timeout=120)
        url, proc = self.serve('nova-api', deployment.COMPUTE_API_APP,
                               {'/etc/nova/nova.conf': conf})
        self.assertEqual(deployment.WSGI_WORKERS,
                         len(_workers(proc.popen.pid)))
        # Enough requests that both workers answer some; each reads the
        # configured database.
        for _ in range(10):
            resp = requests.get(url + '/v2.1/flavors', headers=HEADERS,
                                timeout=30)
            self.assertEqual((200, {'flavors': []}),
                             (resp.status_code, resp.json()))
        self.assertEqual('compute 2.96', requests.get(
            url + '/v2.1/flavors', headers=dict(
                HEADERS, **{'OpenStack-API-Version': 'compute latest'}),
            timeout=30).headers['OpenStack-API-Version'])
        self.assertStopsGracefully(proc)

    def test_placement_with_nova_settings(self):
        conf_dir = os.path.join(self.workdir, 'placement')
        os.makedirs(conf_dir)
        conf = os.path.join(conf_dir, 'placement.conf')
        with open(conf, 'w') as f:
            f.write(embedded_placement.config_file(
                embedded_placement.default_connection(self.workdir)))
        paths = {'/etc/placement': conf_dir}
        [sync] = [c for c in doc_commands.commands(
            doc_commands.DEPLOYMENT_GUIDE, SECTION)
            if c.startswith('placement-manage ')]
        for old, new in paths.items():
            sync = sync.replace(old, new)
        subprocess.run([os.path.join(deployment.BIN, 'placement-manage')] +
                       shlex.split(sync)[1:], check=True,
                       capture_output=True, timeout=120)
        url, proc = self.serve('placement', deployment.PLACEMENT_APP, paths)
        self.assertEqual(deployment.WSGI_WORKERS,
                         len(_workers(proc.popen.pid)))
        # noauth2, as nova's Placement: the admin token is enough.
        for _ in range(10):
            resp = requests.get(url + '/resource_providers',
                                headers=HEADERS, timeout=30)
            self.assertEqual((200, {'resource_providers': []}),
                             (resp.status_code, resp.json()))
        self.assertStopsGracefully(proc)
