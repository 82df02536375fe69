"""Tempest's compute API tests, the CI subset, as the operator runs them.

The README's ``tools/tempest.sh`` command with ``--subset`` is a child
process, as in doc/source/admin/tempest.rst: it starts Keystone and nova-all on
generated hosts, runs the tests of ``tools/tempest-subset.txt`` with
Tempest and prints its totals. Every listed test must pass: a skip is a
failure too, since a skipped test proves nothing (the list holds only
tests of what this deployment serves).
"""

import os
import re
import subprocess
import sys

import fixtures
from testtools import content

from nova import test
from nova.tests.functional.lib import doc_commands

ROOT = doc_commands.ROOT
SUBSET = os.path.join(ROOT, 'tools', 'tempest-subset.txt')
TOTALS = re.compile(r'^tempest: (\d+) passed, (\d+) failed, (\d+) skipped$',
                    re.MULTILINE)


def subset_size() -> int:
    """The tests of the subset: one per line that is not a comment."""
    with open(SUBSET) as f:
        return sum(1 for line in f
                   if line.split('#')[0].strip())


class TestTempestSubset(test.TestCase):

    TIMEOUT = 1200

    def test_every_test_of_the_subset_passes(self):
        (command,) = [c for c in doc_commands.commands(doc_commands.README)
                      if 'tools/tempest.sh' in c]
        workdir = self.useFixture(fixtures.TempDir()).path
        # The virtualenv running this test, in place of the README's.
        result = subprocess.run(
            '%s --subset --workdir %s' % (command, workdir), shell=True,
            cwd=ROOT, env=dict(os.environ, PYTHON=sys.executable),
            capture_output=True, text=True, timeout=self.TIMEOUT - 60)
        self.addDetail('tempest.sh', content.text_content(
            result.stdout + result.stderr))
        run_log = os.path.join(workdir, 'tempest-run.log')
        if os.path.exists(run_log):
            with open(run_log) as f:
                self.addDetail('tempest-run.log',
                               content.text_content(f.read()[-50000:]))
        totals = TOTALS.findall(result.stdout)
        self.assertEqual([(str(subset_size()), '0', '0')], totals,
                         result.stdout + result.stderr)
        self.assertEqual(0, result.returncode)
