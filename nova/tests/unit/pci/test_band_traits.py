"""Free-device band traits (nova.pci.placement_names)."""

from nova.pci import placement_names as names
from nova import test


class TestBands(test.TestCase):

    def test_band_is_the_power_of_two_below(self):
        self.assertEqual([0, 1, 2, 2, 4, 4, 4, 4, 8, 8, 16],
                         [names.band(n) for n in
                          (0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 16)])

    def test_traits_per_class_with_free_units(self):
        self.assertEqual(
            {'CUSTOM_PCI_FREE_PGPU_4',
             'CUSTOM_PCI_FREE_CUSTOM_PCI_15B3_1021_2'},
            names.band_traits({'PGPU': 6, 'CUSTOM_PCI_15B3_1021': 3,
                               'CUSTOM_NIC': 0}))
        self.assertTrue(names.is_band_trait('CUSTOM_PCI_FREE_PGPU_8'))
        self.assertFalse(names.is_band_trait('CUSTOM_PCI_GROUP_NVLINK_8'))
        self.assertEqual('CUSTOM_PCI_FREE_PGPU_', names.band_trait('PGPU'))

    def test_eligible_bands_fullest_first(self):
        known = {'CUSTOM_PCI_FREE_PGPU_%d' % b for b in (8, 1, 4, 2)} | {
            'CUSTOM_PCI_FREE_CUSTOM_PGPU_1', 'CUSTOM_RACK_1'}
        self.assertEqual(
            ['CUSTOM_PCI_FREE_PGPU_1', 'CUSTOM_PCI_FREE_PGPU_2',
             'CUSTOM_PCI_FREE_PGPU_4', 'CUSTOM_PCI_FREE_PGPU_8'],
            names.eligible_bands('PGPU', 1, known))
        # 2-3 free may hold 3; 1 free may not hold 2.
        self.assertEqual(
            ['CUSTOM_PCI_FREE_PGPU_2', 'CUSTOM_PCI_FREE_PGPU_4',
             'CUSTOM_PCI_FREE_PGPU_8'],
            names.eligible_bands('PGPU', 3, known))
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_8'],
                         names.eligible_bands('PGPU', 8, known))
        # Band 8 holds hosts with up to 15 free.
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_8'],
                         names.eligible_bands('PGPU', 15, known))
        self.assertEqual([], names.eligible_bands('PGPU', 16, known))


class TestShards(test.TestCase):

    def test_traits_of_the_name_hash(self):
        # CRC-32 of the node name, low 8 bits (78 = 0b01001110): the same
        # in every process (Python's hash() of a str is not).
        self.assertEqual(78, names.shard_number('cmp1'))
        self.assertEqual({'CUSTOM_PCI_SHARD_%d_%d' % (bit, value)
                          for bit, value in enumerate(
                              (0, 1, 1, 1, 0, 0, 1, 0))},
                         names.shard_traits('cmp1'))
        self.assertTrue(names.is_shard_trait('CUSTOM_PCI_SHARD_7_1'))
        self.assertFalse(names.is_shard_trait('CUSTOM_PCI_SHARD_7_2'))
        self.assertFalse(names.is_shard_trait('CUSTOM_PCI_FREE_PGPU_8'))
        self.assertTrue(names.is_nova_owned_trait('CUSTOM_PCI_SHARD_0_0'))
        self.assertEqual(2 * names.SHARD_BITS, len(names.SHARD_TRAITS))
        self.assertLessEqual(names.shard_traits('cmp1'), names.SHARD_TRAITS)

    def test_names_spread_over_the_shards(self):
        counts = [0] * (1 << names.SHARD_BITS)
        for number in range(1, 4097):
            counts[names.shard_number('hgx-%d' % number)] += 1
        # 16 per shard on average; none empty or holding three times that.
        self.assertLess(max(counts), 48)
        self.assertGreater(min(counts), 0)

    def test_a_host_is_in_the_shard_its_low_bits_name(self):
        host = names.shard_traits('cmp1')
        for level in range(names.SHARD_BITS + 1):
            for index in range(1 << level):
                required = names.shard_query(level, index)
                self.assertEqual(level, len(required))
                self.assertEqual(index == 78 % (1 << level),
                                 required <= host, (level, index))

    def test_levels_nest(self):
        self.assertLessEqual(names.shard_query(3, 5),      # 0b101
                             names.shard_query(4, 13))     # 0b1101
        self.assertEqual(set(), names.shard_query(0, 0))

    def test_no_such_shard(self):
        for level, index in ((9, 0), (-1, 0), (2, 4), (2, -1)):
            self.assertRaisesRegex(ValueError, 'no shard %d at level %d' % (
                index, level), names.shard_query, level, index)
