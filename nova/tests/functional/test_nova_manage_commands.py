"""Every documented nova-manage subcommand as an operator runs it.

Each command is a child process started with the ``--config-file`` of
the services it manages, from a working directory that is not theirs
(nova-manage must find their ``state_path`` and ``[database]`` through
the file, not the directory), against ``nova-all`` and against the
separate-process deployment: ``db sync``, ``pci list``, ``pci board``
(also cut short by a closed pipe), ``pci partitions``, ``pci device set``
and ``history``, ``pci defrag plan`` and ``apply`` (which moves a server
through the Compute API), ``placement audit``.
"""

import os
import subprocess
import time

import fixtures
import testtools

from nova import test
from nova.cmd import manage
from nova.tests.functional.lib import deployment
from nova.tests.functional.lib import workload
from nova.virt.fake import fabric_manager as fake_fm
from nova.virt.fake import host as fakehost

NOVA_MANAGE = os.path.join(deployment.BIN, 'nova-manage')
COMMAND_TIMEOUT = 180
SETTLE = 180
GPU = fakehost.H200_GPU_ADDRESSES[0]


class ManageCommandsBase(test.TestCase):
    """nova-manage as a child process against ``self.services`` (a
    deployment fixture) with the config files ``self.config_files``."""

    TIMEOUT = 600

    def setUp(self):
        super().setUp()
        # Not the services' state_path nor this process's directory.
        self.elsewhere = self.useFixture(fixtures.TempDir()).path

    def start(self, services) -> None:
        self.services = services
        self.addOnException(self._attach_logs)
        self.useFixture(services)
        self.client = workload.ComputeClient(services.api_url)
        self.flavors = self.client.ensure_flavors()
        self.config_files = [os.path.join(services.workdir, 'nova.conf')]

    def _attach_logs(self, exc_info) -> None:
        for name, text in self.services.logs().items():
            self.addDetail(name, testtools.content.text_content(text))

    def extra_config(self, name: str, sections: dict[str, dict]) -> str:
        """One more config file for nova-manage, as an operator adds
        one for what the services' own file does not say."""
        path = deployment.write_conf(
            os.path.join(self.services.workdir, name), sections)
        self.config_files.append(path)
        return path

    def manage(self, *argv: str, expect: int = 0,
               config_files: list[str] | None = None,
               **popen) -> tuple[str, str]:
        """Run ``nova-manage [--config-file F]... argv``; stdout, stderr
        after asserting the exit code (``popen``: e.g. another
        ``stdout``)."""
        files = self.config_files if config_files is None else config_files
        command = [NOVA_MANAGE]
        for path in files:
            command += ['--config-file', path]
        popen = dict({'stdout': subprocess.PIPE}, **popen)
        result = subprocess.run(
            command + list(argv), cwd=self.elsewhere,
            stderr=subprocess.PIPE, text=True, timeout=COMMAND_TIMEOUT,
            env=dict(os.environ, PYTHONPATH=deployment.SOURCE_ROOT), **popen)
        self.assertEqual(expect, result.returncode, '%s\n%s\n%s' % (
            ' '.join(argv), result.stdout, result.stderr))
        return result.stdout, result.stderr

    # The API, as an admin ------------------------------------------------

    def _enable(self, host: str, enabled: bool) -> None:
        self.client._ok('PUT', '/os-services/%s' % (
            'enable' if enabled else 'disable'),
            {'host': host, 'binary': 'nova-compute'})

    def boot_on(self, host: str, size: int, name: str,
                metadata: dict | None = None) -> dict:
        """An ACTIVE server of ``size`` GPUs on ``host`` (the other
        computes disabled meanwhile)."""
        others = [h for h in self.hosts if h != host]
        for other in others:
            self._enable(other, False)
        try:
            server = self.client._ok('POST', '/servers', {'server': {
                'name': name, 'flavorRef': self.flavors[size],
                'imageRef': 'none', 'metadata': metadata or {}}})['server']
            server = self.wait_for(server['id'], 'ACTIVE')
        finally:
            for other in others:
                self._enable(other, True)
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        return server

    def server(self, server_id: str) -> dict:
        return self.client._ok('GET', '/servers/%s' % server_id)['server']

    def wait_for(self, server_id: str, status: str) -> dict:
        deadline = time.monotonic() + SETTLE
        while True:
            server = self.server(server_id)
            if server['status'] == status and \
                    server['OS-EXT-STS:task_state'] is None:
                return server
            if time.monotonic() > deadline or server['status'] == 'ERROR':
                self.fail('server %s is not %s: %s' % (server_id, status,
                                                       server))
            time.sleep(0.5)

    # The commands, in the order an operator may run them ---------------

    def run_every_command(self) -> None:
        first, second = self.hosts
        out, _ = self.manage('db', 'sync')
        self.assertIn('Database schema is at revision', out)

        out, _ = self.manage('pci', 'list', '--host', first)
        self.assertEqual(8, out.count(' %s ' % first), out)
        self.assertEqual(8, out.count('| 10de '), out)

        # A server allowed to move on the first board, a pair on the
        # second: no board is wholly free until the first server moves.
        one = self.boot_on(first, 1, 'one', {'pci_defrag': 'allow'})
        self.boot_on(second, 2, 'pair')
        out, _ = self.manage('pci', 'board')
        self.assertIn('%s: 8 devices, 7 free' % first, out)
        self.assertIn('%s: 8 devices, 6 free' % second, out)

        out, _ = self.manage('pci', 'defrag', 'plan', '--size', '8')
        lines = out.splitlines()
        self.assertEqual(2, len(lines), out)
        self.assertRegex(lines[0], r'^1\. one \(1 device\): %s \S+ -> %s '
                         r'\S+$' % (first, second))
        self.assertEqual('frees %s board (8 devices) with 1 move(s), 1 '
                         'device(s) moved' % first, lines[1])
        out, _ = self.manage('pci', 'defrag', 'apply', '--size', '8',
                             '--timeout', str(SETTLE))
        self.assertIn('Moving one (1 device): %s ' % first, out)
        self.assertIn('%s board is wholly free (8 device(s)) after 1 '
                      'move(s)' % first, out)
        moved = self.server(one['id'])
        self.assertEqual(('ACTIVE', second), (
            moved['status'], moved['OS-EXT-SRV-ATTR:host']))
        out, _ = self.manage('pci', 'board', '--host', first)
        self.assertIn('%s: 8 devices, 8 free' % first, out)

        out, _ = self.manage('pci', 'device', 'set', GPU, '--host', first,
                             '--unhealthy', '--reason', 'RMA 1234')
        self.assertIn('PCI device %s of %s is unhealthy: RMA 1234' % (
            GPU, first), out)
        self.manage('pci', 'device', 'set', GPU, '--host', first,
                    '--healthy')
        out, _ = self.manage('pci', 'device', 'history', GPU, '--host',
                             first)
        self.assertIn('RMA 1234', out)
        self.assertEqual(2, out.count('| operator'), out)

        out, _ = self.manage('placement', 'audit', '--verbose')
        self.assertIn('No orphaned allocations or PCI device claims found',
                      out)
        # Nothing was written where the commands ran.
        self.assertEqual([], os.listdir(self.elsewhere))


class TestAgainstNovaAll(ManageCommandsBase):
    """nova-all in its own process, with Fabric Manager partitions."""

    hosts = ('hgx-1', 'hgx-2')

    def setUp(self):
        super().setUp()
        self.start(deployment.AllInOne(extra_conf={
            'libvirt': {'nvlink_partitions': 'fabric_manager'}}))
        # What nova-all's own file does not say: where its Placement is
        # (placement audit); on the compute host, its Fabric Manager
        # tools (pci partitions). Apply finds the noauth2 Compute API
        # through [api].
        self.extra_config('manage.conf', {'placement': {
            'auth_type': 'admin_token', 'token': deployment.TOKEN,
            'endpoint': self.services.placement_url}})

    def test_every_command(self):
        self.run_every_command()
        fm = fake_fm.FakeFabricManager(os.path.join(
            self.services.workdir, 'fabric-manager', 'hgx-2'))
        compute_conf = self.extra_config('hgx-2.conf', {'libvirt': {
            'fmpm_path': fm.fmpm_path,
            'nvidia_smi_path': fm.nvidia_smi_path}})
        out, _ = self.manage('pci', 'partitions', '--host', 'hgx-2',
                             config_files=self.config_files + [
                                 compute_conf])
        # FM's 15 partitions, two of them held by the servers.
        rows = [line for line in out.splitlines()
                if line.startswith('| ') and line[2].isdigit()]
        self.assertEqual(15, len(rows), out)
        self.assertEqual(2, len([r for r in rows if '| active ' in r]), out)

    def test_board_into_a_closed_pipe(self):
        read_end, write_end = os.pipe()
        # The reader is gone before nova-manage writes a line, as
        # `nova-manage pci board | head` once head has exited.
        os.close(read_end)
        try:
            _out, err = self.manage('pci', 'board', stdout=write_end,
                                    expect=manage.BROKEN_PIPE)
        finally:
            os.close(write_end)
        self.assertNotIn('Traceback', err)
        self.assertNotIn('BrokenPipe', err)

    def test_database_without_schema(self):
        # Run where nova-all's state is not, without its config file:
        # state_path is this directory's.
        _out, err = self.manage('pci', 'list', config_files=[], expect=1)
        database = os.path.join(self.elsewhere, 'state', 'nova.sqlite')
        self.assertIn('the nova database sqlite:///%s has no schema (the '
                      'file does not exist)' % database, err)
        self.assertIn('--config-file', err)
        self.assertIn('db sync', err)
        self.assertFalse(os.path.exists(database))
        # An empty database (created by hand, say) is named too.
        empty = self.extra_config('empty.conf', {'database': {
            'connection': 'sqlite:///%s' % os.path.join(self.elsewhere,
                                                        'empty.sqlite')}})
        open(os.path.join(self.elsewhere, 'empty.sqlite'), 'w').close()
        _out, err = self.manage('pci', 'board', config_files=[empty],
                                expect=1)
        self.assertIn('empty.sqlite has no schema (it has no tables of '
                      'nova)', err)


class TestAgainstDeployment(ManageCommandsBase):
    """Separate services on MariaDB and RabbitMQ; apply reaches the
    Compute API through [nova]'s keystoneauth options."""

    hosts = deployment.HOSTS

    def setUp(self):
        super().setUp()
        self.start(deployment.deployment_or_skip(self))
        self.extra_config('manage.conf', {'nova': {
            'auth_type': 'admin_token', 'token': deployment.TOKEN,
            'endpoint': self.services.api_url}})

    def test_every_command(self):
        self.run_every_command()
        # The generated hosts here have no Fabric Manager: said, not
        # crashed.
        _out, err = self.manage('pci', 'partitions', '--host', 'hgx-1',
                                expect=1)
        self.assertIn('nvlink_partitions is none', err)
