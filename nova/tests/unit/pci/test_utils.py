"""Tests for PCI naming helpers."""


from nova import test
from nova import exception
from nova.pci import utils


class TestNaming(test.TestCase):

    def test_normalize_address(self):
        self.assertEqual('0000:1b:00.0', utils.normalize_address('0:1B:0.0'))
        for bad in ('1b:00.0', '0000:1b:00.8', '0000:1b:20.0', 'x', 5):
            self.assertRaises(exception.PciDeviceWrongAddressFormat,
                              utils.normalize_address, bad)

    def test_group_type_validation(self):
        self.assertEqual('nvlink',
                         utils.validate_group_type('NVLink', 'alias h200'))
        for bad in ('nvlink_2', 'nv2', '-x', '', None, 'a b'):
            err = self.assertRaises(exception.Invalid,
                                    utils.validate_group_type, bad,
                                    'alias h200')
            self.assertIn(repr(bad), str(err))
            self.assertIn('alias h200', str(err))


class TestMisspellingOf(test.TestCase):

    KNOWN = ('address', 'managed', 'resource_class', 'vendor_id')

    def test_distance_rule(self):
        self.assertEqual('address', utils.misspelling_of('adress',
                                                         self.KNOWN))
        self.assertEqual('address', utils.misspelling_of('addrses',
                                                         self.KNOWN))
        # Two edits are allowed only for names longer than 9 characters.
        self.assertIsNone(utils.misspelling_of('adres', self.KNOWN))
        self.assertEqual('resource_class',
                         utils.misspelling_of('rsource_clas', self.KNOWN))
        self.assertIsNone(utils.misspelling_of('unmanaged', self.KNOWN))
        self.assertIsNone(utils.misspelling_of('managed', self.KNOWN))
        self.assertEqual('vendor_id',
                         utils.misspelling_of('VENDOR-ID', self.KNOWN))
