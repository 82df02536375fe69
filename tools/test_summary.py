"""Print the last stestr run as one 'N passed, N failed' line.

CI reads that plain line; stestr's own totals are a multi-line block.
"""

import io
import subprocess
import sys

import subunit
import testtools


def main() -> int:
    stream = subprocess.run(
        [sys.executable, '-m', 'stestr', 'last', '--subunit'],
        check=True, capture_output=True).stdout
    summary = testtools.StreamSummary()
    case = subunit.ByteStreamToStreamResult(
        io.BytesIO(stream), non_subunit_name='stdout')
    summary.startTestRun()
    case.run(summary)
    summary.stopTestRun()
    failed = len(summary.errors) + len(summary.failures)
    skipped = len(summary.skipped)
    passed = summary.testsRun - failed - skipped
    print('tests: %d passed, %d failed, %d skipped' % (
        passed, failed, skipped))
    return 0 if failed == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
