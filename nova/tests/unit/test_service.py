"""nova.service: periodic tasks run under a fresh admin context each."""

import threading

from oslo_context import context as oslo_context

from nova import service
from nova import test


class TestPeriodicTaskContext(test.TestCase):

    def test_each_run_has_a_fresh_admin_context(self):
        seen = []
        two_runs = threading.Event()

        def task():
            seen.append(oslo_context.get_current())
            if len(seen) == 2:
                two_runs.set()

        periodic = service.PeriodicTask('probe', task, 0.01)
        periodic.start()
        self.addCleanup(periodic.stop)
        self.assertTrue(two_runs.wait(30))
        periodic.stop()
        first, second = seen[:2]
        self.assertTrue(first.is_admin)
        self.assertTrue(first.request_id.startswith('req-'))
        self.assertNotEqual(first.request_id, second.request_id)
