"""Telling a refusal for fragmentation only from the others."""

from nova import test
from nova.scheduler import refusal

WANTED = '4 VCPU, 4096 MEMORY_MB and a free nvlink group of 8 x PGPU'
FRAGMENTED = ('fragmentation: 6 PGPU devices free, but no nvlink group of '
              '8 is wholly free (the free devices sit in partly used '
              'groups)')


class FragmentationOnlyTest(test.TestCase):

    def test_fragmentation_alone(self):
        self.assertTrue(refusal.fragmentation_only(
            refusal.no_candidate(WANTED, FRAGMENTED)))

    def test_other_reasons(self):
        for reason in (
                refusal.no_candidate(WANTED, 'no host has 4 VCPU free; ' +
                                     FRAGMENTED),
                refusal.no_candidate(WANTED, 'only 3 PGPU devices free, 8 '
                                     'needed'),
                refusal.no_candidate(WANTED, FRAGMENTED) + '; leaked '
                'capacity: 1 deleted or offloaded server(s)',
                'Placement refused the claims on all 2 candidate(s)',
                FRAGMENTED):
            self.assertFalse(refusal.fragmentation_only(reason), reason)
