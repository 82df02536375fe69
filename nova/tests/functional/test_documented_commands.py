"""The README's and the deployment guide's commands, run as written.

Each test makes a directory that looks like a fresh clone after
``tools/install.sh`` (``.venv`` and ``tools`` link to this checkout's),
starts the documented ``nova-all`` command in the background and runs the
documented client commands in a second shell, in order. Only the ports
differ: nova-all gets free ports through oslo.config's environment
variables, and the client commands get them in place of 8774, 8778 and
9292.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import fixtures
import requests
import testtools

from nova import test
from nova.tests.functional.lib import doc_commands
from nova.tests.functional.lib import deployment
from nova.tests.fixtures import process as process_fixture

VENV = sys.prefix
TIMEOUT = 240
GIB = 1024 ** 3


# The defrag page's sections whose commands run on the README's fleet.
DEFRAG_SECTIONS = ('Which servers may move', 'The plan', 'Carrying it out')
# What differs between runs in the defrag page's output: which HGX board
# the scheduler put the server on, and on which pairs.
_VARYING = re.compile(r'(hgx-[12]|board/quad-[ab]/pair-[ab][12])')


def _shape(line: str) -> re.Pattern:
    """A whole line of output as the document shows it, up to the parts
    that vary between runs."""
    parts = _VARYING.split(line)
    return re.compile('^%s$' % ''.join(
        re.escape(part) if index % 2 == 0 else _VARYING.pattern
        for index, part in enumerate(parts)), re.M)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if ``proc`` does not exit in time."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _read(log) -> str:
    log.flush()
    log.seek(0)
    return log.read()


class TestDocumentedCommands(test.TestCase):

    TIMEOUT = 2 * TIMEOUT

    def setUp(self):
        super().setUp()
        if not os.path.exists(os.path.join(VENV, 'bin', 'nova-all')):
            self.skipTest('nova is not installed in %s' % VENV)
        self.clone = self.useFixture(fixtures.TempDir()).path
        os.symlink(VENV, os.path.join(self.clone, '.venv'))
        os.symlink(os.path.join(doc_commands.ROOT, 'tools'),
                   os.path.join(self.clone, 'tools'))
        self.api_port = deployment.free_port()
        self.placement_port = deployment.free_port()
        self.glance_port = deployment.free_port()
        self.env = dict(
            os.environ, PYTHONPATH=doc_commands.ROOT, TMPDIR=self.clone,
            # The deployment guide's commands run in the active virtualenv.
            PATH=os.pathsep.join([os.path.join(VENV, 'bin'),
                                  os.environ.get('PATH', '')]),
            OS_API__LISTEN='127.0.0.1',
            OS_API__LISTEN_PORT=str(self.api_port),
            OS_ALL_IN_ONE__PLACEMENT_LISTEN_PORT=str(self.placement_port),
            OS_ALL_IN_ONE__GLANCE_LISTEN_PORT=str(self.glance_port))
        if shutil.disk_usage(self.clone).total < 800 * GIB:
            # As the deployment guide says for disks smaller than the
            # operator guide's flavors.
            self.env['OS_DEFAULT__DISK_ALLOCATION_RATIO'] = '4.0'

    def _ports(self, command: str) -> str:
        return command.replace('8774', str(self.api_port)).replace(
            '8778', str(self.placement_port)).replace(
            '9292', str(self.glance_port))

    def bash(self, commands: list[str]) -> str:
        script = '\n'.join(['set -e'] + [self._ports(c) for c in commands])
        result = subprocess.run(['bash', '-c', script], cwd=self.clone,
                                env=self.env, capture_output=True,
                                text=True, timeout=TIMEOUT)
        self.assertEqual(0, result.returncode,
                         '%s\n%s\n%s' % (script, result.stdout,
                                         result.stderr))
        return result.stdout

    def start_nova_all(self, command: str) -> str:
        """Start ``command`` in the background; its start-up lines."""
        log = open(os.path.join(self.clone, 'nova-all.out'), 'w+')
        self.addCleanup(log.close)
        proc = subprocess.Popen(shlex.split(command), cwd=self.clone,
                                env=self.env, stdout=subprocess.PIPE,
                                stderr=log, text=True,
                                preexec_fn=process_fixture.die_with_parent())
        self.addCleanup(_stop, proc)
        self.nova_all = proc
        self.addOnException(lambda _exc: self.addDetail(
            'nova-all', testtools.content.text_content(
                _read(log))))
        lines = []
        # Bounded by the test's timeout; an exit ends the output.
        for line in proc.stdout:
            lines.append(line)
            if line.startswith('Glance (openstack image'):
                return ''.join(lines)
        self.fail('nova-all did not start: %s' % ''.join(lines))

    def provider(self, name: str) -> str:
        """UUID of the Placement provider ``name``."""
        return requests.get(
            'http://127.0.0.1:%d/resource_providers' % self.placement_port,
            params={'name': name}, headers={'X-Auth-Token': 'admin'},
            timeout=30).json()['resource_providers'][0]['uuid']

    def servers(self) -> list[dict]:
        return requests.get(
            'http://127.0.0.1:%d/v2.1/servers/detail' % self.api_port,
            headers={'X-Auth-Token': 'admin'}, timeout=30).json()['servers']

    def wait_status(self, status: str) -> dict:
        """The one server, once it is ``status`` (or at the timeout)."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            servers = self.servers()
            if servers and servers[0]['status'] == status or \
                    time.monotonic() > deadline:
                self.assertEqual(status, servers[0]['status'], servers)
                return servers[0]
            time.sleep(0.5)

    def test_readme_using_it(self):
        commands = doc_commands.commands(doc_commands.README, 'Using it')
        # The flavor gets its GPUs in the command that creates it: no
        # second command whose failure would leave a GPU-less flavor.
        flavors = [c for c in commands if c.startswith('openstack flavor')]
        self.assertEqual(1, len(flavors), flavors)
        self.assertRegex(flavors[0], r'^openstack flavor create .*'
                         r'--property pci_passthrough:alias=h200:2 gpu\.2x$')
        start = next(i for i, c in enumerate(commands)
                     if c.startswith('.venv/bin/nova-all'))
        self.bash(commands[:start])
        started = self.start_nova_all(commands[start])
        self.assertIn(
            'openstack --os-endpoint http://127.0.0.1:%d resource provider '
            'list' % self.placement_port, started)
        out = self.bash(commands[start + 1:])
        # The server is on an NVLink pair of some host's board ...
        self.assertRegex(out, re.compile(
            r'^\s+pair-\S+ \[\S+ vm1\s+\| \S+ vm1\s*\]$', re.M))
        self.assertIn('Free partitions by size', out)
        # ... and osc-placement listed every host's tree.
        for name in ('hgx-1_board', 'hgx-2_quad-b', 'nvl-1_pair-2'):
            self.assertIn(' %s ' % name, out)
        [server] = self.servers()
        self.assertEqual('ACTIVE', server['status'])
        # The server booted from the Glance image, and its snapshot is one.
        self.assertEqual('tiny', requests.get(
            'http://127.0.0.1:%d/v2/images/%s' % (
                self.glance_port, server['image']['id']),
            timeout=30).json()['name'])
        self.assertRegex(out, r'\| name +\| vm1-snap ')
        self.assertRegex(out, r'\| properties +\| '
                              r".*pci_passthrough:alias='h200:2'")

        # Restarted, as README's "Restarting nova-all" says: the server
        # is SHUTOFF on its test:/// host, and the command it gives starts
        # it again.
        _stop(self.nova_all)
        self.start_nova_all(commands[start])
        self.wait_status('SHUTOFF')
        restart = doc_commands.commands(doc_commands.README,
                                        'Restarting nova-all')
        self.assertEqual(['openstack server start vm1'], restart)
        self.bash([c for c in commands[start + 1:]
                   if c.startswith(('. ', 'export '))] + restart)
        self.assertEqual(server['id'], self.wait_status('ACTIVE')['id'])

    def test_defrag_guide(self):
        """The defrag page's commands, in the README's shell after its
        own: they run as written and print what the page shows (up to
        which HGX board the scheduler chose and which pairs)."""
        readme = doc_commands.commands(doc_commands.README, 'Using it')
        start = next(i for i, c in enumerate(readme)
                     if c.startswith('.venv/bin/nova-all'))
        self.bash(readme[:start])
        self.start_nova_all(readme[start])
        guide = [command for section in DEFRAG_SECTIONS
                 for command in doc_commands.commands(
                     doc_commands.DEFRAG_GUIDE, section)]
        self.assertEqual(7, len(guide), guide)
        out = self.bash(readme[start + 1:] + guide)
        samples = doc_commands.sample_output(doc_commands.DEFRAG_GUIDE)
        self.assertEqual(4, len(samples), samples)
        for line in samples:
            self.assertRegex(out, _shape(line))

    def test_deployment_guide(self):
        guide = doc_commands.commands(doc_commands.DEPLOYMENT_GUIDE)
        fake_hosts = [c for c in guide if 'tools/fake_hosts.py' in c]
        nova_all = [c for c in guide if c.startswith('nova-all --config')]
        clients = [c for c in guide if c.startswith((
            'export ', 'qemu-img ', 'openstack '))]
        self.assertEqual((1, 1, 5),
                         (len(fake_hosts), len(nova_all), len(clients)))
        self.bash(fake_hosts)
        self.start_nova_all(nova_all[0])
        # The guide's server uses the operator guide's gpu.2x flavor,
        # created once the client environment is set.
        flavors = [c for c in doc_commands.commands(
            doc_commands.PCI_GROUPS_GUIDE)
            if c.startswith('openstack flavor ')]
        out = self.bash([clients[0]] + flavors + clients[1:])
        self.assertIn(' nvl-1_pair-1 ', out)
        # The operator guide's osc-placement commands, for hgx-1 and its
        # GPU 3, which the guide says carries these member traits.
        inspect = [c.replace('<compute node uuid>', self.provider('hgx-1'))
                   .replace('<device provider uuid>',
                            self.provider('hgx-1_0000:3A:00.0'))
                   for c in doc_commands.commands(
                       doc_commands.PCI_GROUPS_GUIDE)
                   if 'resource provider' in c]
        self.assertEqual(2, len(inspect), inspect)
        out = self.bash([clients[0]] + inspect)
        self.assertIn(' hgx-1_pair-b2 ', out)
        self.assertNotIn('nvl-1', out)
        for trait in ('CUSTOM_PCI_GROUP_NVLINK_8_M2',
                      'CUSTOM_PCI_GROUP_NVLINK_4_M2',
                      'CUSTOM_PCI_GROUP_NVLINK_2_M0'):
            self.assertIn(trait, out)
        deadline = time.monotonic() + TIMEOUT
        while self.servers()[0]['status'] == 'BUILD' and (
                time.monotonic() < deadline):
            time.sleep(0.5)
        self.assertEqual('ACTIVE', self.servers()[0]['status'])

    def test_demo(self):
        commands = doc_commands.commands(doc_commands.README)
        demo = [c for c in commands if c.endswith('nova-all --demo')]
        self.assertEqual(['./tools/install.sh && .venv/bin/nova-all --demo'],
                         demo)
        # install.sh has already run for this checkout.
        out = self.bash([demo[0].split(' && ', 1)[1]])
        self.assertIn('Result: every server got exactly one valid '
                      'partition', out)
        self.assertIn('Free partitions by size', out)
