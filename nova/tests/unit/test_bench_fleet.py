"""Parts of tools/bench_fleet.py without Placement: the trace, the replay,
the limit, the output; and tools/placement_copy.py, the fleet copy in
Placement's tables."""

import os
import random
import sqlite3

import fixtures

from nova import test
from nova.tests.unit import tool

bench = tool.load('bench_fleet')
placement_copy = tool.load('placement_copy')


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
        err = self.assertRaises(ValueError, bench.host_order, 'fullest',
                                random.Random(1))
        self.assertIn('fullest', str(err))
        self.assertIn('scheduler', str(err))


class TestCopyHost(test.TestCase):
    """The fleet copy in Placement's tables (only the columns it uses):
    these fail first when a Placement release changes its schema."""

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'placement.sqlite')
        db = sqlite3.connect(self.path)
        with db:
            db.executescript('''
                CREATE TABLE resource_providers (id INTEGER PRIMARY KEY,
                    uuid TEXT, name TEXT UNIQUE, generation INTEGER,
                    root_provider_id INTEGER, parent_provider_id INTEGER,
                    created_at TEXT);
                CREATE TABLE inventories (resource_provider_id INTEGER,
                    resource_class_id INTEGER, total INTEGER,
                    reserved INTEGER, min_unit INTEGER, max_unit INTEGER,
                    step_size INTEGER, allocation_ratio REAL,
                    created_at TEXT);
                CREATE TABLE resource_provider_traits (
                    resource_provider_id INTEGER, trait_id INTEGER,
                    created_at TEXT);
                CREATE TABLE allocations (resource_provider_id INTEGER,
                    consumer_id TEXT, resource_class_id INTEGER,
                    used INTEGER, created_at TEXT);
                CREATE TABLE consumers (uuid TEXT, project_id INTEGER,
                    user_id INTEGER, consumer_type_id INTEGER,
                    generation INTEGER, created_at TEXT);
                CREATE TABLE resource_classes (id INTEGER, name TEXT);
                INSERT INTO resource_classes VALUES (7, 'PGPU');
                CREATE TABLE traits (id INTEGER, name TEXT);
                INSERT INTO resource_providers VALUES
                    (1, 'r1', 'hgx-1', 3, 1, NULL, NULL),
                    (2, 'g1', 'hgx-1_gpu', 5, 1, 1, NULL);
                INSERT INTO inventories VALUES
                    (2, 7, 1, 0, 1, 1, 1, 1.0, NULL);
                INSERT INTO resource_provider_traits VALUES (1, 40, NULL);
                INSERT INTO allocations VALUES (2, 'c1', 7, 1, NULL);
                INSERT INTO consumers VALUES ('c1', 1, 1, 1, 1, NULL);
            ''')
            db.executemany('INSERT INTO traits VALUES (?, ?)', list(
                enumerate(sorted(bench.placement_names.SHARD_TRAITS),
                          start=100)))
        db.close()

    def test_tree_and_allocations_copied_under_new_names(self):
        placement_copy.copy_host(self.path, 'hgx-1', ['hgx-2', 'hgx-3'])
        db = sqlite3.connect(self.path)
        self.addCleanup(db.close)
        rows = db.execute(
            'SELECT rp.name, root.name, parent.name FROM resource_providers '
            'rp JOIN resource_providers root ON rp.root_provider_id = '
            'root.id LEFT JOIN resource_providers parent ON '
            'rp.parent_provider_id = parent.id').fetchall()
        self.assertEqual(sorted([
            ('hgx-%d' % n, 'hgx-%d' % n, None) for n in (1, 2, 3)] + [
            ('hgx-%d_gpu' % n, 'hgx-%d' % n, 'hgx-%d' % n)
            for n in (1, 2, 3)]), sorted(rows))
        uuids = [row[0] for row in db.execute(
            'SELECT uuid FROM resource_providers')]
        self.assertEqual(len(uuids), len(set(uuids)))
        self.assertEqual(3, db.execute(
            'SELECT COUNT(*) FROM inventories').fetchone()[0])
        # The root's trait on each host (shard bits are ids 100 and up).
        self.assertEqual(3, db.execute(
            'SELECT COUNT(*) FROM resource_provider_traits WHERE trait_id '
            '< 100').fetchone()[0])
        # One instance per host, each its own consumer.
        self.assertEqual(3, db.execute(
            'SELECT COUNT(DISTINCT uuid) FROM consumers').fetchone()[0])
        held = placement_copy.gpus_held(self.path)
        self.assertEqual(3, len(held))
        self.assertEqual({1}, set(held.values()))

    def test_each_copy_has_the_shard_traits_of_its_name(self):
        names = bench.placement_names
        ids = dict(zip(sorted(names.SHARD_TRAITS), range(100, 200)))
        db = sqlite3.connect(self.path)
        with db:
            # The template's own, as its compute published them.
            db.executemany(
                'INSERT INTO resource_provider_traits VALUES (?, ?, NULL)',
                [(rp, ids[trait]) for rp in (1, 2)
                 for trait in names.shard_traits('hgx-1')])
        db.close()
        placement_copy.copy_host(self.path, 'hgx-1', ['hgx-2', 'hgx-3'])
        db = sqlite3.connect(self.path)
        self.addCleanup(db.close)
        for host in ('hgx-1', 'hgx-2', 'hgx-3'):
            for provider in (host, host + '_gpu'):
                traits = {row[0] for row in db.execute(
                    'SELECT t.name FROM resource_provider_traits rpt JOIN '
                    'traits t ON rpt.trait_id = t.id JOIN '
                    'resource_providers rp ON rpt.resource_provider_id = '
                    'rp.id WHERE rp.name = ?', (provider,))}
                self.assertEqual(names.shard_traits(host), {
                    t for t in traits if names.is_shard_trait(t)}, provider)
        self.assertNotEqual(names.shard_traits('hgx-2'),
                            names.shard_traits('hgx-1'))

    def test_fleet_boards_from_the_tables(self):
        # A pair group provider over two GPUs on NUMA node 0; the first
        # held by c1 (set up above).
        db = sqlite3.connect(self.path)
        with db:
            db.executescript('''
                INSERT INTO traits VALUES (40, 'COMPUTE_NODE'),
                    (41, 'CUSTOM_PCI_GROUP_NVLINK_2'),
                    (42, '%s0');
                INSERT INTO resource_providers VALUES
                    (3, 'p1', 'hgx-1_pair', 1, 1, 1, NULL),
                    (4, 'g2', 'hgx-1_gpu2', 1, 1, 3, NULL);
                UPDATE resource_providers SET parent_provider_id = 3
                    WHERE id = 2;
                INSERT INTO inventories VALUES
                    (4, 7, 1, 0, 1, 1, 1, 1.0, NULL);
                INSERT INTO resource_provider_traits VALUES (3, 41, NULL),
                    (2, 42, NULL), (4, 42, NULL);
            ''' % bench.placement_names.NODE_TRAIT_PREFIX)
        db.close()
        boards = bench.FleetBoards.from_database(self.path)
        board, = boards.boards()
        self.assertEqual('r1', board.host)
        self.assertEqual({'hgx-1_gpu': {'g1'}, 'hgx-1_gpu2': {'g2'},
                          'hgx-1_pair': {'g1', 'g2'}},
                         {p.name: set(p.devices) for p in board.partitions})
        self.assertEqual({frozenset([0])},
                         {p.numa_nodes for p in board.partitions})
        self.assertEqual({'g1': 'c1'}, dict(board.holders))
        boards.hold('c2', 'r1', frozenset(['g2']))
        boards.release('c1')
        self.assertEqual({'g2': 'c2'}, dict(boards.boards()[0].holders))
        self.assertEqual(['c2'], list(boards.servers()))


class TestFormat(test.TestCase):

    def test_density_missing_for_the_limit_row(self):
        row = {'acceptance': {1: 1.0, 8: 0.5}, 'all': 0.9,
               'utilization': 0.7}
        table = bench.format_results([dict(row, policy='bands',
                                           density=0.95, breaking=0.25),
                                      dict(row, policy='limit')])
        self.assertIn('| bands | 1.000 | 0.500 | 0.900 | 0.700 | 0.950 | '
                      '0.250 |', table)
        self.assertIn('| limit | 1.000 | 0.500 | 0.900 | 0.700 | - | - |',
                      table)

    def test_moves_counted_for_measured_requests(self):
        R = bench.Request
        trace = [R(0, 0.5, 1.0, 8), R(1, 1.5, 1.0, 8), R(2, 2.0, 1.0, 4),
                 R(3, 2.5, 1.0, 8)]
        # Plans carried out for requests 0 (warm-up), 1 and 3.
        log = [(0.5, 8, 2, 3), (1.5, 8, 1, 1), (2.5, 8, 1, 2)]
        moves = bench._moves_by_size(trace, [True, True, True, False],
                                     log, warmup=1.0)
        self.assertEqual({1: (0, 0, 0), 2: (0, 0, 0), 4: (1, 0, 0),
                          8: (1, 2, 3)}, moves)
        table = bench.format_moves({'policy': 'defrag', 'moves': moves})
        self.assertIn('| 8 | 1 | 2 | 2.000 | 3 |', table)
        self.assertIn('| 1 | 0 | 0 | 0.000 | 0 |', table)
