"""The compute's count of the hugepages its guests hold."""

import threading

from nova import exception
from nova import test
from nova.compute import hugepages as compute_hugepages
from nova.virt import hardware
from nova.virt import hugepages

GIB = 1048576
ONE_GIB = hugepages.PageRequest(size_kib=GIB)
TOPOLOGY = hardware.HostNUMATopology(tuple(
    hardware.NUMACell(id=node, cpus=(node,), memory_mb=8192, socket=node,
                      pages=(hardware.PagePool(GIB, 4),))
    for node in (0, 1)))


class HugepageTrackerTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tracker = compute_hugepages.HugepageTracker(threading.Lock())

    def claim(self, uuid, memory_mb=4096, cells=1, confined=(),
              request=ONE_GIB):
        return self.tracker.claim(uuid, request, memory_mb, cells,
                                  TOPOLOGY, confined)

    def test_two_guests_never_share_pages(self):
        self.assertEqual((0,), self.claim('a').numa_nodes)
        self.assertEqual((1,), self.claim('b').numa_nodes)
        err = self.assertRaises(exception.HugepagesUnavailable,
                                self.claim, 'c', 1024)
        self.assertIn('node 0: 0 of 4 free, node 1: 0 of 4 free',
                      err.message)
        self.assertIsNone(self.tracker.held('c'))
        self.assertEqual({(0, GIB): 4, (1, GIB): 4}, self.tracker.used())

    def test_free_gives_the_pages_back(self):
        self.claim('a', confined=(1,))
        self.tracker.free('a')
        self.tracker.free('a')
        self.assertEqual({}, self.tracker.used())
        self.assertEqual((1,), self.claim('b', confined=(1,)).numa_nodes)

    def test_held_pages_kept_when_they_serve(self):
        first = self.claim('a', confined=(1,))
        # A rebuild: the same claim, not a second one.
        self.assertIs(first, self.claim('a', confined=(1,)))
        self.assertEqual({(1, GIB): 4}, self.tracker.used())
        # Without device confinement the held node still serves.
        self.assertIs(first, self.claim('a'))

    def test_new_claim_replaces_held_pages_of_the_instance(self):
        # A resize on the same host: the old pages count for nothing.
        self.claim('a', 4096, confined=(0,))
        pages = self.claim('a', 2048, confined=(0,))
        self.assertEqual({(0, GIB): 2}, self.tracker.used())
        self.assertEqual((2048,), pages.cell_memory_mb)

    def test_failed_claim_keeps_held_pages(self):
        self.claim('a', 2048, confined=(0,))
        self.claim('b', 4096, confined=(1,))
        self.assertRaises(exception.HugepagesUnavailable, self.claim, 'a',
                          4096, confined=(1,))
        self.assertEqual({(0, GIB): 2, (1, GIB): 4}, self.tracker.used())

    def test_ordinary_pages_give_up_held_pages(self):
        self.claim('a')
        self.assertIsNone(self.claim('a', request=None))
        self.assertEqual({}, self.tracker.used())

    def test_load_counts_the_hypervisor_guests(self):
        self.claim('stale')
        self.tracker.load({'a': hugepages.GuestPages(GIB, (1, 0),
                                                     (2048, 2048))})
        self.assertIsNone(self.tracker.held('stale'))
        self.assertEqual({(0, GIB): 2, (1, GIB): 2}, self.tracker.used())
        # The loaded guest's pages serve it again (cell 0 on node 1).
        self.assertEqual((1, 0), self.claim('a', 4096, 2,
                                            confined=(1, 0)).numa_nodes)

    def test_concurrent_claims_do_not_double_claim(self):
        # Eight builds of 2 GiB at once on two nodes of 4 GiB: exactly
        # four fit.
        results = []
        barrier = threading.Barrier(8)

        def build(uuid):
            barrier.wait()
            try:
                results.append(self.claim(uuid, 2048))
            except exception.HugepagesUnavailable:
                results.append(None)
        threads = [threading.Thread(target=build, args=('vm%d' % i,))
                   for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(4, len([r for r in results if r is not None]))
        self.assertEqual({(0, GIB): 4, (1, GIB): 4}, self.tracker.used())
