"""Pure parts of tools/bench_fleet.py: the trace, the replay, the limit."""

import random

from nova import test
from nova.tests.unit import tool

bench = tool.load('bench_fleet')


class TestTrace(test.TestCase):

    def test_seeded_and_shaped_as_asked(self):
        trace = bench.make_trace(512, 20000, 0.85, seed=7)
        self.assertEqual(trace, bench.make_trace(512, 20000, 0.85, seed=7))
        self.assertNotEqual(trace, bench.make_trace(512, 20000, 0.85,
                                                    seed=8))
        arrivals = [r.arrival for r in trace]
        self.assertEqual(sorted(arrivals), arrivals)
        shares = {size: sum(r.size == size for r in trace) / len(trace)
                  for size in bench.MIX}
        for size, share in bench.MIX.items():
            self.assertAlmostEqual(share, shares[size], delta=0.02)
        # Offered load: GPU-lifetimes asked per unit of time, per GPU.
        offered = sum(r.size * r.lifetime for r in trace) / (
            trace[-1].arrival * 512)
        self.assertAlmostEqual(0.85, offered, delta=0.05)


class TestNoTopology(test.TestCase):

    def test_pool_accepts_while_gpus_are_free(self):
        R = bench.Request
        trace = [R(0, 0.0, 10.0, 8), R(1, 1.0, 1.0, 4), R(2, 2.0, 1.0, 4),
                 R(3, 3.0, 1.0, 1), R(4, 11.0, 1.0, 8)]
        # 12 GPUs: 8 + 4 fill them; each later request arrives just as
        # the one before it ends (ends come first at the same time); the
        # last 8 fits once the first 8 ended.
        self.assertEqual([True, True, True, True, True],
                         bench.no_topology(trace, 12))
        self.assertEqual([True, False, False, False, True],
                         bench.no_topology(trace, 8))

    def test_replay_releases_every_accepted_request(self):
        trace = bench.make_trace(16, 500, 0.85, seed=1)
        held = set()

        def place(request):
            if random.Random(request.index).random() < 0.5:
                return None
            held.add(request.index)
            return request.index

        accepted = bench.replay(trace, place, held.remove)
        self.assertEqual(set(), held)
        self.assertIn(True, accepted)
        self.assertIn(False, accepted)


class TestSummary(test.TestCase):

    def test_acceptance_and_utilization_after_warmup(self):
        R = bench.Request
        trace = [R(0, 0.5, 1.0, 8), R(1, 1.0, 10.0, 4), R(2, 2.0, 1.0, 8),
                 R(3, 3.0, 1.0, 1)]
        result = bench.summarize(trace, [True, True, False, True], gpus=8,
                                 warmup=1.0)
        # Measured: arrivals from t=1 (requests 1, 2, 3), window [1, 3].
        self.assertEqual({1: 1.0, 4: 1.0, 8: 0.0}, result['acceptance'])
        self.assertEqual(2 / 3, result['all'])
        # 8 GPUs during [1, 1.5] + 4 during [1, 3], over 8 GPUs x 2.
        self.assertAlmostEqual((8 * 0.5 + 4 * 2) / 16,
                               result['utilization'])

    def test_warmup_longer_than_trace_is_refused(self):
        trace = bench.make_trace(8, 3, 0.85, seed=1)
        err = self.assertRaises(ValueError, bench.summarize, trace,
                                [True] * 3, 8, 1000.0)
        self.assertIn('warm-up', str(err))

    def test_unknown_host_choice_is_refused(self):
        err = self.assertRaises(ValueError, bench.order_candidates,
                                'fullest', {'allocation_requests': []},
                                None, random.Random(1))
        self.assertIn('fullest', str(err))
        self.assertIn('scheduler', str(err))
