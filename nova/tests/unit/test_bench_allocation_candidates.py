"""Pure helpers of tools/bench_allocation_candidates.py (not the run)."""

from nova.pci import groups as pci_groups
from nova import test
from nova.tests.unit import tool
from nova.virt.fake import host as fakehost

bench = tool.load('bench_allocation_candidates')
GPU = fakehost.H200_GPU_ADDRESSES
# A declared pair and two GPUs of different pairs, by the board's map.
PAIR = [GPU[n - 1] for n in fakehost.H200_NVLINK_PAIRS['pair-a1']]
SPLIT = [PAIR[0]] + [GPU[fakehost.H200_NVLINK_PAIRS['pair-a2'][0] - 1]]


def _tree() -> pci_groups.GroupTree:
    return pci_groups.GroupTree.from_config(
        fakehost.h200_pci_config()['device_group'])


class TestValidity(test.TestCase):

    def test_valid_sets_by_size(self):
        self.assertEqual(8, len(bench.valid_device_sets(_tree(), 1, GPU)))
        pairs = bench.valid_device_sets(_tree(), 2, GPU)
        self.assertEqual(4, len(pairs))
        self.assertIn(frozenset(PAIR), pairs)
        self.assertNotIn(frozenset(SPLIT), pairs)
        self.assertEqual({frozenset(GPU)},
                         bench.valid_device_sets(_tree(), 8, GPU))

    def test_is_valid(self):
        pairs = bench.valid_device_sets(_tree(), 2, GPU)
        self.assertTrue(bench.is_valid(
            [('h1', PAIR[0]), ('h1', PAIR[1])], 2, pairs))
        # Not a declared pair, two hosts, one device twice, wrong count.
        self.assertFalse(bench.is_valid(
            [('h1', SPLIT[0]), ('h1', SPLIT[1])], 2, pairs))
        self.assertFalse(bench.is_valid(
            [('h1', PAIR[0]), ('h2', PAIR[1])], 2, pairs))
        self.assertFalse(bench.is_valid(
            [('h1', PAIR[0]), ('h1', PAIR[0])], 2, pairs))
        self.assertFalse(bench.is_valid([('h1', PAIR[0])], 2, pairs))

    def test_candidate_devices_skips_root(self):
        index = {'rp-a': ('h1', GPU[0]), 'rp-b': ('h1', GPU[2])}
        request = {'allocations': {
            'root': {'resources': {'VCPU': 4}},
            'rp-a': {'resources': {'PGPU': 1}},
            'rp-b': {'resources': {'PGPU': 1}}}}
        self.assertEqual(sorted(index.values()),
                         sorted(bench.candidate_devices(request, index)))


class TestFormatting(test.TestCase):

    def test_table(self):
        rows = [
            {'model': 'flat', 'size': 4, 'candidates': 84000,
             'valid': 2520, 'distinct_valid': 100, 'expected': 100,
             'seconds': 16.0, 'error': None},
            {'model': 'flat', 'size': 8, 'candidates': None, 'valid': None,
             'distinct_valid': None, 'expected': 50, 'seconds': None,
             'error': None},
        ]
        lines = bench.format_table(rows, 60).splitlines()
        self.assertEqual('| flat | 4 | 84,000 | 3% | 100 / 100 | 16.000 s |',
                         lines[2])
        self.assertEqual('| flat | 8 | - | - | - | > 60 s |', lines[3])

    def test_parse_args_defaults(self):
        args = bench.parse_args([])
        self.assertEqual((10, [1, 2, 4, 8], ['flat', 'nested', 'member'],
                          3, 60, -1),
                         (args.hosts, args.sizes, args.models, args.repeat,
                          args.timeout, args.max_candidates))
