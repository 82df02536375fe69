"""nova-all stopped with SIGTERM in the middle of a burst of boots.

The one process stops taking requests, lets the requests and builds in
progress finish and exits 0; started again, it settles with the
invariants holding (nothing in BUILD, allocations equal to what servers
hold, no device twice) and deleting everything leaves nothing behind.
The separate services are stopped the same way in
``test_deployment.TestDeploymentFaults``.
"""

import threading

import testtools

from nova import test
from nova.tests.functional.lib import deployment
from nova.tests.functional import test_deployment
from nova.tests.functional.lib import workload


class TestNovaAllGracefulStop(test.TestCase):

    TIMEOUT = 420

    def setUp(self):
        super().setUp()
        self.nova_all = deployment.AllInOne(extra_conf={
            'DEFAULT': {'graceful_shutdown_timeout':
                        test_deployment.GRACE}})
        self.addOnException(self._attach_log)
        self.useFixture(self.nova_all)
        self.client = workload.ComputeClient(self.nova_all.api_url)
        self.client.ensure_flavors()

    def _attach_log(self, exc_info) -> None:
        for name, text in self.nova_all.logs().items():
            self.addDetail(name, testtools.content.text_content(text))

    def assertSound(self, fault_free: bool) -> None:
        checks = workload.check(self.client, self.nova_all.placement_url,
                                fault_free)
        self.assertEqual([], [v for found in checks.values() for v in found],
                         workload.describe(self.client.servers(),
                                           self.client))

    def test_sigterm_mid_burst_finishes_the_work_in_progress(self):
        accepted = []
        burst = threading.Thread(target=lambda: accepted.extend(
            self.client.create_servers(16)))
        burst.start()
        self.addCleanup(burst.join)
        self.assertIsNotNone(workload.wait_for_instance(
            workload.handed_to_compute, test_deployment.FAULT_WAIT))
        process = self.nova_all.processes['nova-all']
        process.terminate()
        code = process.popen.wait(timeout=test_deployment.GRACE + 30)
        burst.join()
        log = process.log(since_start=True)
        self.assertEqual(0, code, log)
        self.assertIn('SIGTERM received', log)
        self.nova_all.start('nova-all')
        # Every create in progress was answered: the servers recorded are
        # exactly those answered 202.
        self.assertEqual(sorted(accepted),
                         sorted(s['id'] for s in self.client.servers()))
        self.assertSound(fault_free=False)
        self.client = workload.ComputeClient(self.nova_all.api_url)
        self.assertEqual([], self.client.delete_all())
        self.assertSound(fault_free=True)
        self.assertEqual({host: {1: 8, 2: 4, 4: 2, 8: 1}
                          for host in ('hgx-1', 'hgx-2')},
                         workload.free_partitions())
