import dataclasses

from nova import exception
from nova import test
from nova.db import records
from nova.virt import guest_hardware as gh


class MachineTypeOptionTest(test.TestCase):

    def test_parse(self):
        self.assertEqual({'x86_64': 'q35', 'aarch64': 'virt'},
                         gh.parse_machine_types(['x86_64=q35',
                                                 ' aarch64 = virt']))
        self.assertEqual({}, gh.parse_machine_types([]))

    def test_bad_items(self):
        for item, text in (('q35', "'q35'"), ('x86_64=', "''"),
                           ('x86_64=Q 35', "'Q 35'")):
            exc = self.assertRaises(exception.Invalid,
                                    gh.parse_machine_types, [item])
            self.assertIn(text, str(exc))

    def test_twice(self):
        exc = self.assertRaises(exception.Invalid, gh.parse_machine_types,
                                ['x86_64=q35', 'x86_64=pc'])
        self.assertIn('x86_64 twice', str(exc))


class ExtraSpecTest(test.TestCase):

    def test_good(self):
        gh.check_extra_specs({'hw:machine_type': 'pc-q35-7.2',
                              'hw:firmware_type': 'uefi',
                              'hw:numa_nodes': '2'})

    def test_bad_values_named(self):
        for key, value, allowed in (
                ('hw:firmware_type', 'efi', 'bios, uefi'),
                ('hw:machine_type', 'q35;rm', 'machine type name'),
                ('hw:numa_nodes', '0', 'from 1 to 8'),
                ('hw:numa_nodes', 'two', 'from 1 to 8'),
                ('hw:numa_nodes', '9', 'from 1 to 8')):
            exc = self.assertRaises(exception.FlavorExtraSpecInvalid,
                                    gh.check_extra_specs, {key: value})
            self.assertIn('%s=%r' % (key, value), str(exc))
            self.assertIn(allowed, str(exc))

    def test_uneven_split_refused(self):
        flavor = records.FlavorSnapshot.of_flavor(
            {'vcpus': 6, 'memory_mb': 4096,
             'extra_specs': {'hw:numa_nodes': '4'}})
        exc = self.assertRaises(exception.FlavorExtraSpecInvalid,
                                gh.check_flavor, flavor)
        self.assertIn('6 vCPUs and 4096 MiB', str(exc))
        gh.check_flavor(dataclasses.replace(flavor, vcpus=8))


class ResolveTest(test.TestCase):

    def test_flavor_overrides_option(self):
        hw = gh.resolve({'x86_64': 'q35'}, 'x86_64',
                        {'hw:machine_type': 'pc', 'hw:numa_nodes': '2',
                         'hw:firmware_type': 'bios'})
        self.assertEqual(gh.GuestHardware('pc', 'bios', 2), hw)
        self.assertFalse(hw.is_q35)

    def test_option_then_hypervisor_default(self):
        self.assertEqual(gh.GuestHardware('q35'),
                         gh.resolve({'x86_64': 'q35'}, 'x86_64', None))
        self.assertEqual(gh.GuestHardware(),
                         gh.resolve({'x86_64': 'q35'}, 'aarch64', {}))

    def test_image_properties_after_the_flavor(self):
        image = {'hw_machine_type': 'pc', 'hw_firmware_type': 'uefi'}
        self.assertEqual(gh.GuestHardware('pc', 'uefi'),
                         gh.resolve({'x86_64': 'q35'}, 'x86_64', {}, image))
        self.assertEqual(
            gh.GuestHardware('q35', 'bios'),
            gh.resolve({}, 'x86_64', {'hw:machine_type': 'q35',
                                      'hw:firmware_type': 'bios'}, image))

    def test_bad_image_properties_named(self):
        for props, named in (({'hw_machine_type': 'a b'}, 'hw_machine_type'),
                             ({'hw_firmware_type': 'efi'}, "'efi'")):
            err = self.assertRaises(exception.Invalid, gh.resolve, {},
                                    'x86_64', {}, props)
            self.assertIn(named, str(err))

    def test_split(self):
        self.assertEqual([4, 4], gh.split_evenly(8, 2))
        self.assertRaises(exception.Invalid, gh.split_evenly, 7, 2)
