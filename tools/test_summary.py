"""Print the last stestr run as one 'N passed, N failed' line, then one
line per skip reason with the number of tests it skipped.

CI reads that plain line; stestr's own totals are a multi-line block.
The skip reasons say what a run did not prove (e.g. the real-hypervisor
tests on a machine without /dev/kvm).
"""

import collections
import io
import subprocess
import sys

import subunit
import testtools


def skip_lines(skipped: list) -> list[str]:
    """``skipped (N): reason`` per distinct reason, most tests first."""
    reasons = collections.Counter(reason.strip() or 'no reason given'
                                  for _case, reason in skipped)
    return ['skipped (%d): %s' % (count, reason)
            for reason, count in sorted(reasons.items(),
                                        key=lambda item: (-item[1],
                                                          item[0]))]


def last_run(cwd: str | None = None) -> testtools.StreamSummary:
    """The outcomes of the last stestr run of the repository in ``cwd``
    (this directory unless given)."""
    stream = subprocess.run(
        [sys.executable, '-m', 'stestr', 'last', '--subunit'],
        check=True, capture_output=True, cwd=cwd).stdout
    summary = testtools.StreamSummary()
    case = subunit.ByteStreamToStreamResult(
        io.BytesIO(stream), non_subunit_name='stdout')
    summary.startTestRun()
    case.run(summary)
    summary.stopTestRun()
    return summary


def main() -> int:
    summary = last_run()
    failed = len(summary.errors) + len(summary.failures)
    skipped = len(summary.skipped)
    passed = summary.testsRun - failed - skipped
    print('tests: %d passed, %d failed, %d skipped' % (
        passed, failed, skipped))
    for line in skip_lines(summary.skipped):
        print(line)
    return 0 if failed == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
