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
