"""How a service process ends on SIGTERM (nova.cmd.wait_for_signal).

Each case runs a small script in its own interpreter: it waits for the
signal, then stops quickly or hangs in its stop.
"""

import signal
import subprocess
import sys
import textwrap
import time

from nova import test

_SCRIPT = textwrap.dedent('''
    import logging, sys, time
    from nova import cmd
    logging.basicConfig(level=logging.INFO)
    cmd.wait_for_signal(float(sys.argv[1]))
    if sys.argv[2] == "hang":
        time.sleep(600)
''')
# Bound on waiting for the script to start and to end (not asserted).
WAIT = 60


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` installed."""
    with open('/proc/%d/status' % pid) as status:
        for line in status:
            if line.startswith('SigCgt:'):
                return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


class WaitForSignalTestCase(test.TestCase):

    def _terminate(self, grace: float, then: str) -> tuple[int, str]:
        """Run the script, SIGTERM it once it listens, return its exit
        status and log."""
        proc = subprocess.Popen(
            [sys.executable, '-c', _SCRIPT, str(grace), then],
            stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.kill)
        deadline = time.monotonic() + WAIT
        while not catches(proc.pid, signal.SIGTERM):
            self.assertIsNone(proc.poll(), 'the script ended early')
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, log = proc.communicate(timeout=WAIT)
        return proc.returncode, log

    def test_stop_done_in_time_exits_0(self):
        code, log = self._terminate(30, 'return')
        self.assertEqual(0, code, log)
        self.assertIn('SIGTERM received: stopping', log)
        self.assertIn('may take 30.0s to finish', log)

    def test_stop_over_the_grace_exits_1(self):
        code, log = self._terminate(0.5, 'hang')
        self.assertEqual(1, code, log)
        self.assertIn('did not finish within 0.5s '
                      '([DEFAULT]graceful_shutdown_timeout)', log)

    def test_no_grace_waits_for_the_stop(self):
        # grace 0: no watchdog; the process ends as its stop returns.
        code, log = self._terminate(0, 'return')
        self.assertEqual(0, code, log)
        self.assertIn('as long as they need', log)
