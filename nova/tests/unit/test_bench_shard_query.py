"""Parts of tools/bench_shard_query.py without Placement: the query
shapes, the shard aggregates written in Placement's tables, the output."""

import os
import sqlite3

import fixtures

from nova.pci import placement_names as names
from nova.scheduler import band_shards
from nova.scheduler import fullness
from nova import test
from nova.tests.unit import tool

bench = tool.load('bench_shard_query')
placement_copy = tool.load('placement_copy')


class TestShapes(test.TestCase):

    SHARD = band_shards.Shard(2, 1)

    def params(self, shape, host=None):
        query = bench.shaped_query(shape, 2, self.SHARD, host)
        return {name: value for name, value in query}, query

    def test_traits_is_the_schedulers_query(self):
        params, _query = self.params('traits')
        traits = self.SHARD.traits()
        self.assertEqual(traits | {'CUSTOM_PCI_FREE_PGPU_8'},
                         set(params['root_required'].split(',')))
        device_groups = [value for name, value in params.items()
                         if name.startswith('required') and name !=
                         'required']
        self.assertEqual(3, len(device_groups))   # 2 devices, their group
        for group in device_groups:
            self.assertLessEqual(traits, set(group.split(',')))
        self.assertFalse([n for n in params if n.startswith('member_of')])

    def test_member_of_replaces_the_shard_traits_in_every_group(self):
        params, query = self.params('member_of')
        member = 'in:' + bench.shard_aggregate(2, 1)
        self.assertEqual(['member_of'] + ['member_of' + suffix for suffix in
                                          sorted(self.suffixes(query))],
                         sorted(name for name, value in query
                                if value == member))
        self.assertEqual('CUSTOM_PCI_FREE_PGPU_8', params['root_required'])
        self.assertFalse(any(names.is_shard_trait(trait)
                             for value in params.values()
                             for trait in value.split(',')))

    def test_member_of_root_only_on_the_unsuffixed_group(self):
        _params, query = self.params('member_of root')
        self.assertEqual(['member_of'], [name for name, _value in query
                                         if name.startswith('member_of')])

    def test_in_tree_is_the_schedulers_query_for_one_host(self):
        host = fullness.Host('root-1', 'hgx-1')
        params, query = self.params('in_tree', host=host)
        suffixes = self.suffixes(query)
        # in_tree in the groups with resources: the flavor's and the two
        # devices'; not in the group provider's (no resources).
        trees = sorted(name for name, value in query if value == 'root-1')
        self.assertEqual(3, len(trees))
        self.assertEqual(['in_tree'], [n for n in trees if n == 'in_tree'])
        (group,) = [s for s in suffixes if 'in_tree' + s not in params]
        finest = names.shard_traits('hgx-1')
        self.assertLessEqual(finest,
                             set(params['required' + group].split(',')))
        self.assertEqual(finest | {'CUSTOM_PCI_FREE_PGPU_8'},
                         set(params['root_required'].split(',')))

    def suffixes(self, query):
        """The suffixes of the query's groups (two devices, their
        group provider)."""
        found = {name[len('required'):] for name, _value in query
                 if name.startswith('required') and name != 'required'}
        self.assertEqual(3, len(found))
        return found

    def test_aggregates_are_stable_and_distinct(self):
        self.assertEqual(bench.shard_aggregate(3, 5),
                         bench.shard_aggregate(3, 5))
        self.assertEqual(510, len({bench.shard_aggregate(level, index)
                                   for level in range(1, 9)
                                   for index in range(1 << level)}))

    def test_shapes_chosen_always_with_traits(self):
        self.assertEqual(('traits', 'in_tree'), bench.parse_args(
            ['--shapes', 'in_tree']).shapes)
        self.useFixture(fixtures.MockPatch('sys.stderr'))
        self.assertRaises(SystemExit, bench.parse_args,
                          ['--shapes', 'in_tree,trees'])

    def test_format_gives_ratios_to_traits(self):
        results = {size: {shape: ([0.1 * size if shape == 'traits'
                                   else 0.05 * size], 3)
                          for shape in bench.COLUMNS}
                   for size in bench.SIZES}
        results[2]['in_tree'] = ([], 0)
        text = bench.format_results(results)
        self.assertIn('| 1 | 100 ms (1.00) | 50 ms (0.50) |', text)
        self.assertIn('| 2 | 200 ms (1.00) | 100 ms (0.50) | 100 ms '
                      '(0.50) | - | 100 ms (0.50) | 3/3/3/0/3 |', text)
        self.assertIn('| 8/1 | 8.0 | 8.0 | 8.0 | 8.0 | 8.0 | |', text)


class TestShardAggregates(test.TestCase):
    """The memberships written in Placement's tables (only the columns
    used): each provider is in its host's shard at every level."""

    def test_every_provider_in_its_hosts_shards(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'placement.sqlite')
        db = sqlite3.connect(path)
        with db:
            db.executescript('''
                CREATE TABLE resource_providers (id INTEGER PRIMARY KEY,
                    name TEXT, root_provider_id INTEGER);
                CREATE TABLE placement_aggregates (id INTEGER PRIMARY KEY,
                    uuid TEXT UNIQUE, created_at TEXT);
                CREATE TABLE resource_provider_aggregates (
                    resource_provider_id INTEGER, aggregate_id INTEGER,
                    created_at TEXT);
                INSERT INTO resource_providers VALUES
                    (1, 'hgx-1', 1), (2, 'hgx-1_gpu', 1), (3, 'hgx-2', 3);
            ''')
        db.close()
        self.assertEqual(24, placement_copy.add_shard_aggregates(
            path, bench.shard_aggregate))
        db = sqlite3.connect(path)
        self.addCleanup(db.close)
        for provider, host in ((1, 'hgx-1'), (2, 'hgx-1'), (3, 'hgx-2')):
            number = names.shard_number(host)
            self.assertEqual(
                {bench.shard_aggregate(level, number % (1 << level))
                 for level in range(1, 9)},
                {row[0] for row in db.execute(
                    'SELECT a.uuid FROM resource_provider_aggregates m JOIN '
                    'placement_aggregates a ON m.aggregate_id = a.id WHERE '
                    'm.resource_provider_id = ?', (provider,))})


class TestToServer(test.TestCase):
    """The copy of a built fleet into another database (a server's in a
    run; SQLite here, the same SQLAlchemy path without MariaDB's session
    settings)."""

    def test_rows_replace_what_the_target_held(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        schema = '''
            CREATE TABLE traits (id INTEGER PRIMARY KEY, name TEXT UNIQUE);
            CREATE TABLE alembic_version (version_num TEXT);
        '''
        source = sqlite3.connect(os.path.join(tmp, 'source.sqlite'))
        target = sqlite3.connect(os.path.join(tmp, 'target.sqlite'))
        with source, target:
            source.executescript(schema + '''
                INSERT INTO traits VALUES (0, 'HW_CPU_X86_AVX'),
                                          (7, 'CUSTOM_PCI_FIT_PGPU_8');
                INSERT INTO alembic_version VALUES ('source');''')
            # As Placement leaves a new database: its standard traits.
            target.executescript(schema + '''
                INSERT INTO traits VALUES (0, 'HW_CPU_X86_AVX');
                INSERT INTO alembic_version VALUES ('target');''')
        source.close()
        target.close()
        self.assertEqual({'traits': 2}, placement_copy.to_server(
            os.path.join(tmp, 'source.sqlite'),
            'sqlite:///' + os.path.join(tmp, 'target.sqlite')))
        target = sqlite3.connect(os.path.join(tmp, 'target.sqlite'))
        self.addCleanup(target.close)
        self.assertEqual(
            [(0, 'HW_CPU_X86_AVX'), (7, 'CUSTOM_PCI_FIT_PGPU_8')],
            target.execute('SELECT * FROM traits ORDER BY id').fetchall())
        self.assertEqual([('target',)], target.execute(
            'SELECT * FROM alembic_version').fetchall())
