"""tools/fake_hosts.py: a fleet of generated hosts and its config files."""

import contextlib
import io
import os

import fixtures

from nova import test
from nova.tests.unit import tool


class FakeHostsTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tool = tool.load('fake_hosts')
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def run_tool(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = self.tool.main(['--dir', self.tmp, *argv])
        return code, out.getvalue(), err.getvalue()

    def test_writes_hosts_and_prints_the_command(self):
        code, out, _ = self.run_tool('a=hgx-h200', 'b=h200-nvl')
        self.assertEqual(0, code)
        self.assertEqual(
            'nova-all --config-file {0}/nova.conf --compute a={0}/a.conf '
            '--compute b={0}/b.conf'.format(self.tmp), out.strip())
        self.assertEqual(
            {'nova.conf', 'a.conf', 'a.xml', 'b.conf', 'b.xml'},
            set(os.listdir(self.tmp)))
        with open(os.path.join(self.tmp, 'nova.conf')) as shared:
            text = shared.read()
        self.assertIn('pci_in_placement = true', text)
        self.assertIn('"group_type": "nvlink"', text)
        # nova-manage --config-file nova.conf finds the same databases
        # from any directory.
        self.assertIn('state_path = %s' % os.path.join(self.tmp, 'state'),
                      text)

    def test_bad_arguments(self):
        for argv, needle in ((['a=h100'], "'a=h100' is not allowed"),
                             (['a'], 'NAME=KIND'),
                             (['a=hgx-h200', 'a=h200-nvl'],
                              'a is given twice')):
            code, _, err = self.run_tool(*argv)
            self.assertEqual(2, code)
            self.assertIn(needle, err)
