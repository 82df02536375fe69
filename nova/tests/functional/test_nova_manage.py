"""nova-manage pci list against a running compute's database."""

import io
from unittest import mock

from nova.cmd import manage
from nova.tests.functional import base


class TestPciList(base.FunctionalTestCase):

    def _run(self, host=None):
        out = io.StringIO()
        err = io.StringIO()
        with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err):
            code = manage.pci_list(host)
        return code, out.getvalue(), err.getvalue()

    def test_lists_devices_with_group_path_and_instance(self):
        self.enable_h200_groups()
        compute = self.start_compute('cmp1')
        self.start_compute('cmp2')
        compute.rt.pci_tracker.claim('vm-1', 'req-1',
                                     [base.GPUS[0], base.GPUS[2]])
        code, out, _ = self._run('cmp1')
        self.assertEqual(0, code)
        rows = [line for line in out.splitlines() if 'cmp1' in line]
        self.assertEqual(8, len(rows))
        first = [c.strip() for c in rows[0].strip('|').split('|')]
        self.assertEqual(['cmp1', base.GPUS[0], '10de', '2335',
                          'board/quad-a/pair-a1', 'allocated', 'vm-1'],
                         first)
        self.assertNotIn('cmp2', out)
        code, out, _ = self._run()
        self.assertEqual(16, len([line for line in out.splitlines()
                                  if '10de' in line]))

    def test_unknown_host(self):
        self.enable_h200_groups()
        self.start_compute('cmp1')
        code, _, err = self._run('nope')
        self.assertEqual(1, code)
        self.assertIn("'nope'", err)
        self.assertIn('cmp1', err)
