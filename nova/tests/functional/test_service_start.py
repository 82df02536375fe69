"""Services started from their console scripts with a bad configuration
exit non-zero with one line on stderr naming the option and the value."""

from concurrent import futures
import os
import socket
import subprocess
import sys

import fixtures

import nova
from nova import test
from nova.tests.functional.lib import deployment

BIN = os.path.dirname(sys.executable)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(nova.__file__)))
SERVICES = ('nova-api', 'nova-compute', 'nova-scheduler', 'nova-conductor',
            'nova-all')
H200_SPEC = ('{"vendor_id": "10de", "product_id": "2335", '
             '"resource_class": "PGPU"}')
GROUP_ALIAS = '{"name": "h200", "resource_class": "PGPU", ' \
              '"group_type": "nvlink"}'


class ServiceStartTestCase(test.TestCase):
    """Start console scripts as child processes on a config of the
    test's."""

    def setUp(self):
        super().setUp()
        if not os.path.exists(os.path.join(BIN, 'nova-all')):
            self.skipTest('console scripts are not installed in %s' % BIN)
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def _config(self, name: str, pci: dict, placement: bool = True,
                debug: bool = False,
                extra: dict[str, dict] | None = None) -> str:
        sections = {
            'DEFAULT': {'state_path': os.path.join(self.tmp, name),
                        'debug': debug, 'transport_url': 'fake:/'},
            'api': {'listen': '127.0.0.1', 'listen_port': 0},
            # Not the fixed 8778 and 9292: runs side by side never clash.
            'all_in_one': {'placement_listen_port': deployment.free_port(),
                           'glance_listen_port': deployment.free_port()},
            'filter_scheduler': {'pci_in_placement': placement},
            'pci': pci}
        # A None in ``extra`` leaves the option unset.
        for section, options in (extra or {}).items():
            merged = sections.setdefault(section, {})
            merged.update(options)
            for option, value in options.items():
                if value is None:
                    del merged[option]
        return deployment.write_conf(
            os.path.join(self.tmp, name + '.conf'), sections)

    def _start(self, binary: str, config: str):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
                   os.environ.get('PYTHONPATH', ''))
        proc = subprocess.run(
            [os.path.join(BIN, binary), '--config-file', config],
            capture_output=True, text=True, timeout=90, env=env,
            stdin=subprocess.DEVNULL)
        return binary, proc.returncode, proc.stderr

    def _start_all(self, binaries, config):
        # A few at once: each run is mostly interpreter start-up.
        with futures.ThreadPoolExecutor(3) as pool:
            return list(pool.map(lambda b: self._start(b, config),
                                 binaries))

    def assertOneLine(self, results, *fragments):
        for binary, code, stderr in results:
            lines = stderr.splitlines()
            self.assertEqual(1, code, stderr)
            self.assertEqual(1, len(lines), stderr)
            self.assertTrue(lines[0].startswith(binary + ': '), lines[0])
            for fragment in fragments:
                self.assertIn(fragment, lines[0])


class TestBadConfigAtStart(ServiceStartTestCase):

    def test_misspelt_device_spec_key(self):
        config = self._config('spec', {'device_spec': [
            H200_SPEC, '{"vendorid": "10de", "product_id": "2335"}']})
        self.assertOneLine(self._start_all(SERVICES, config),
                           '[pci]device_spec is not valid',
                           '"vendorid": "10de"', "key 'vendorid'")

    def test_alias_whose_ids_would_be_ignored(self):
        config = self._config('alias', {'alias': (
            '{"name": "h200", "vendor_id": "10de", "product_id": "2335", '
            '"resource_class": "PGPU"}')})
        self.assertOneLine(
            self._start_all(('nova-api', 'nova-compute'), config),
            '[pci]alias', "alias 'h200'", "product_id '2335'")

    def test_alias_without_placement_scheduling(self):
        # Group-aware or plain: no alias can be served without Placement.
        for name, alias, binaries in (
                ('group', GROUP_ALIAS, ('nova-api', 'nova-all')),
                ('plain', '{"name": "gpu", "vendor_id": "10de", '
                          '"product_id": "2335"}', ('nova-scheduler',))):
            config = self._config('off-' + name, {
                'report_in_placement': 'true', 'device_spec': H200_SPEC,
                'alias': alias}, placement=False)
            self.assertOneLine(
                self._start_all(binaries, config),
                '[pci]alias is set but [filter_scheduler]pci_in_placement '
                'is False', 'set [filter_scheduler]pci_in_placement = True')

    def test_alias_on_a_compute_without_reporting(self):
        config = self._config('report-off', {
            'device_spec': H200_SPEC, 'alias': GROUP_ALIAS})
        self.assertOneLine(
            self._start_all(('nova-compute',), config),
            '[pci]alias is set but [pci]report_in_placement is False',
            'set [pci]report_in_placement = True')

    def test_value_of_the_wrong_type(self):
        config = self._config('type', {'report_in_placement': 'maybe'})
        self.assertOneLine(
            self._start_all(('nova-conductor',), config),
            "[pci]report_in_placement: Unexpected boolean value 'maybe'")

    def test_device_group_not_json(self):
        config = self._config('group', {
            'report_in_placement': 'true', 'device_spec': H200_SPEC,
            'alias': GROUP_ALIAS, 'device_group': '{"name": "p1",'})
        self.assertOneLine(
            self._start_all(('nova-compute',), config),
            'Invalid [pci]device_group config', '{"name": "p1",')

    def test_traceback_goes_to_the_debug_log(self):
        config = self._config('debug', {'device_spec': '{"adress": "1b:"}'},
                              debug=True)
        binary, code, stderr = self._start('nova-scheduler', config)
        self.assertEqual(1, code)
        # The log (stderr by default, oslo.log's format: no request, so
        # "[-]") has the traceback at DEBUG; the console line is still
        # the last one.
        self.assertIn('DEBUG nova.cmd [-] nova-scheduler stopped by a '
                      'configuration error', stderr)
        self.assertIn('Traceback', stderr)
        self.assertTrue(stderr.splitlines()[-1].startswith(
            "nova-scheduler: [pci]device_spec is not valid"))

    def test_nova_all_stops_whole_when_a_compute_cannot_start(self):
        # Only the host can tell that the group's addresses do not exist,
        # so this surfaces when the first compute starts: nova-all stops
        # everything it had started and names the compute.
        config = self._config('host', {
            'report_in_placement': 'true', 'device_spec': H200_SPEC,
            'alias': GROUP_ALIAS, 'device_group': (
                '{"name": "p1", "type": "nvlink", "addresses": '
                '["0000:99:00.0", "0000:98:00.0"]}')})
        binary, code, stderr = self._start('nova-all', config)
        self.assertEqual(1, code, stderr)
        self.assertNotIn('Traceback', stderr)
        last = stderr.splitlines()[-1]
        self.assertTrue(last.startswith('nova-all: Invalid configuration: '
                                        'compute '), last)
        self.assertIn('0000:99:00.0, which is not a PCI device on this '
                      'host', last)


def _occupied_port() -> socket.socket:
    """A listening socket on a free loopback port, as another program's."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    sock.listen()
    return sock


class TestListenAtStart(ServiceStartTestCase):
    """Where the services listen: a port in use names the service, its
    option and the system's error; an unauthenticated API stays on this
    host unless the operator says otherwise."""

    def _busy(self, name: str, binary: str, group: str, option: str,
              service: str) -> None:
        with _occupied_port() as sock:
            port = sock.getsockname()[1]
            config = self._config(name, {}, extra={group: {option: port}})
            binary, code, stderr = self._start(binary, config)
        self.assertEqual(1, code, stderr)
        self.assertNotIn('Traceback', stderr)
        self.assertNotIn('AttributeError', stderr)
        last = stderr.splitlines()[-1]
        self.assertTrue(last.startswith('%s: ' % binary), last)
        self.assertIn('%s cannot listen on 127.0.0.1:%d' % (service, port),
                      last)
        self.assertIn('[%s]%s' % (group, option), last)
        self.assertIn('Address already in use', last)

    def test_nova_all_api_port_in_use(self):
        self._busy('api-busy', 'nova-all', 'api', 'listen_port',
                   'The Compute API')

    def test_nova_api_port_in_use(self):
        self._busy('nova-api-busy', 'nova-api', 'api', 'listen_port',
                   'The Compute API')

    def test_nova_all_placement_port_in_use(self):
        self._busy('placement-busy', 'nova-all', 'all_in_one',
                   'placement_listen_port', 'Placement')

    def test_nova_all_metrics_port_in_use(self):
        self._busy('metrics-busy', 'nova-all', 'metrics', 'listen_port',
                   'The metrics endpoint')

    def test_nova_all_glance_port_in_use(self):
        # Glance is a child process: its own error comes through, with
        # the option of nova-all that set its port.
        with _occupied_port() as sock:
            port = sock.getsockname()[1]
            config = self._config('glance-busy', {}, extra={
                'all_in_one': {'glance_listen_port': port}})
            binary, code, stderr = self._start('nova-all', config)
        self.assertEqual(1, code, stderr)
        self.assertNotIn('Traceback', stderr)
        last = stderr.splitlines()[-1]
        self.assertTrue(last.startswith(
            'nova-all: Invalid configuration: Glance did not start on '
            '127.0.0.1:%d, set by [all_in_one]glance_listen_port (exit 1): '
            'Glance cannot listen on 127.0.0.1:%d: ' % (port, port)), last)
        self.assertIn('Address already in use', last)
        self.assertIn(os.path.join(self.tmp, 'glance-busy', 'glance',
                                   'glance-api.stderr'), last)

    def test_unauthenticated_api_on_the_network_is_refused(self):
        for name, address in (('any-v4', '0.0.0.0'), ('any-v6', '::')):
            config = self._config(name, {}, extra={
                'api': {'listen': address}})
            for binary, code, stderr in self._start_all(
                    ('nova-api', 'nova-all'), config):
                self.assertEqual(1, code, stderr)
                last = stderr.splitlines()[-1]
                self.assertIn('[api]listen = %s is not a loopback address'
                              % address, last)
                self.assertIn('[api]auth_strategy = noauth2', last)
                self.assertIn('[api]allow_remote_noauth2 = true', last)
                self.assertNotIn('Traceback', stderr)

    def test_unauthenticated_api_listens_on_loopback_by_default(self):
        port = deployment.free_port()
        config = self._config('default-listen', {}, extra={
            'api': {'listen': None, 'listen_port': port}})
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
                   os.environ.get('PYTHONPATH', ''))
        proc = subprocess.Popen(
            [os.path.join(BIN, 'nova-api'), '--config-file', config],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=env, stdin=subprocess.DEVNULL)
        try:
            logged = []
            for line in proc.stderr:
                logged.append(line)
                if 'Compute API listening at' in line:
                    break
            self.assertIn('Compute API listening at http://127.0.0.1:%d/v2.1'
                          % port, ''.join(logged))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            proc.stderr.close()
