"""Which shards of the fleet a request asks (nova.scheduler.band_shards)."""

import random

from nova.pci import placement_names as names
from nova.scheduler import band_shards
from nova import test


class TestLevelFor(test.TestCase):

    def test_smallest_level_at_or_under_the_target(self):
        self.assertEqual([0, 0, 1, 1, 2, 5, 6],
                         [band_shards.level_for(hosts, 16) for hosts in
                          (0, 16, 17, 32, 33, 500, 1000)])

    def test_capped_at_the_finest_level(self):
        self.assertEqual(names.SHARD_BITS,
                         band_shards.level_for(10 ** 6, 16))

    def test_no_shards_asked(self):
        self.assertEqual(0, band_shards.level_for(1000, 0))


class TestWidening(test.TestCase):

    def test_the_shard_then_its_parents_then_the_fleet(self):
        shards = band_shards.widening(3, 13)     # 13 % 8 = 0b101
        self.assertEqual([band_shards.Shard(3, 5), band_shards.Shard(2, 1),
                          band_shards.Shard(1, 1), None], shards)
        # Each shard lies within the next: its traits are a superset.
        for finer, wider in zip(shards, shards[1:-1]):
            self.assertLessEqual(wider.traits(), finer.traits())

    def test_level_zero_is_the_whole_fleet(self):
        self.assertEqual([None], band_shards.widening(0, 7))


class TestForRequest(test.TestCase):

    def test_random_shard_of_the_level_for_the_fleet(self):
        shards = {band_shards.for_request(1000, 16, None,
                                          random.Random(seed))[0]
                  for seed in range(50)}
        self.assertEqual({6}, {shard.level for shard in shards})
        self.assertGreater(len(shards), 20)

    def test_requested_host_in_its_own_shard(self):
        shards = band_shards.for_request(1000, 16, 'hgx-7', random.Random())
        self.assertEqual(names.shard_number('hgx-7') % 64, shards[0].index)
        self.assertLessEqual(shards[0].traits(), names.shard_traits('hgx-7'))

    def test_small_fleet_or_no_shards_ask_the_whole_fleet(self):
        self.assertEqual([None], band_shards.for_request(
            16, 16, None, random.Random()))
        self.assertEqual([None], band_shards.for_request(
            1000, 0, 'hgx-7', random.Random()))
