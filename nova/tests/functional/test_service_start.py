"""Services started from their console scripts with a bad configuration
exit non-zero with one line on stderr naming the option and the value."""

from concurrent import futures
import os
import subprocess
import sys

import fixtures

import nova
from nova import test
from nova.tests.functional import deployment

BIN = os.path.dirname(sys.executable)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(nova.__file__)))
SERVICES = ('nova-api', 'nova-compute', 'nova-scheduler', 'nova-conductor',
            'nova-all')
H200_SPEC = ('{"vendor_id": "10de", "product_id": "2335", '
             '"resource_class": "PGPU"}')
GROUP_ALIAS = '{"name": "h200", "resource_class": "PGPU", ' \
              '"group_type": "nvlink"}'


class TestBadConfigAtStart(test.TestCase):

    def setUp(self):
        super().setUp()
        if not os.path.exists(os.path.join(BIN, 'nova-all')):
            self.skipTest('console scripts are not installed in %s' % BIN)
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def _config(self, name: str, pci: dict, placement: bool = True,
                debug: bool = False) -> str:
        return deployment.write_conf(os.path.join(self.tmp, name + '.conf'), {
            'DEFAULT': {'state_path': os.path.join(self.tmp, name),
                        'debug': debug, 'transport_url': 'fake:/'},
            'api': {'listen': '127.0.0.1', 'listen_port': 0},
            'filter_scheduler': {'pci_in_placement': placement},
            'pci': pci})

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
