"""Tests for [pci]device_spec parsing and device matching."""

import dataclasses
import json
import os

import fixtures

from nova import test
from nova import exception
from nova.pci import device as pci_device
from nova.pci import devspec

H200_ADDRESSES = ('0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0',
                  '0000:5d:00.0', '0000:9a:00.0', '0000:ab:00.0',
                  '0000:ba:00.0', '0000:db:00.0')


def _dev(address='0000:1b:00.0', vendor_id='10de', product_id='2335',
         dev_type='type-PCI', parent_addr=None):
    return pci_device.HostDevice(
        address=address, vendor_id=vendor_id, product_id=product_id,
        dev_type=dev_type, parent_addr=parent_addr, numa_node=0)


class _Base(test.TestCase):

    def setUp(self):
        super().setUp()
        # Never look at the real host's sysfs.
        self.sysfs = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MonkeyPatch(
            'nova.pci.devspec.SYSFS_ROOT', self.sysfs))

    def assertRejected(self, exc_type, spec, *fragments, placement=False):
        """Assert ``spec`` is refused with ``exc_type`` and a message that
        contains every fragment."""
        err = self.assertRaises(exc_type, devspec.PciDeviceSpec, spec,
                                report_in_placement=placement)
        for fragment in fragments:
            self.assertIn(fragment, str(err))
        return err


class TestIds(_Base):

    def test_normalized(self):
        spec = devspec.PciDeviceSpec({'vendor_id': ' 10DE ',
                                      'product_id': 'a'})
        self.assertEqual('10de', spec.vendor_id)
        self.assertEqual('000a', spec.product_id)

    def test_absent_and_star_mean_any(self):
        spec = devspec.PciDeviceSpec({})
        self.assertEqual(('*', '*'), (spec.vendor_id, spec.product_id))
        spec = devspec.PciDeviceSpec({'vendor_id': '*', 'product_id': ' * '})
        self.assertEqual(('*', '*'), (spec.vendor_id, spec.product_id))
        self.assertTrue(spec.match(_dev(vendor_id='144d',
                                        product_id='a80a')))

    def test_match_case_insensitive(self):
        spec = devspec.PciDeviceSpec({'vendor_id': '10DE',
                                      'product_id': '2335'})
        self.assertTrue(spec.match(_dev(vendor_id='10DE')))
        self.assertFalse(spec.match(_dev(product_id='2336')))
        self.assertFalse(spec.match(_dev(vendor_id='10df')))
        self.assertFalse(spec.match(_dev(vendor_id='', product_id='')))

    def test_not_hex(self):
        for key in ('vendor_id', 'product_id'):
            for bad in ('zz', '1*', '', '-1'):
                self.assertRejected(exception.PciConfigInvalidSpec,
                                    {key: bad}, key, repr(bad),
                                    'hex number')

    def test_too_big(self):
        for key in ('vendor_id', 'product_id'):
            self.assertRejected(exception.PciConfigInvalidSpec,
                                {key: '10000'}, key, "'10000'", 'FFFF')

    def test_not_a_string(self):
        for key in ('vendor_id', 'product_id'):
            for bad in (4318, None, True, ['10de']):
                self.assertRejected(exception.PciConfigInvalidSpec,
                                    {key: bad}, key, repr(bad),
                                    'must be a string')


class TestGlobAddress(_Base):

    def test_forms_matching_1b_00_0(self):
        for glob in ('*:1b:00.*', ':1b:00.', '1b:00.0', '1b:', '00.0',
                     '0000:1b:00', '', '::.', '*:*:*.*', '0:1B:0.0',
                     ' 1b : 00 . 0 '):
            spec = devspec.PciDeviceSpec({'address': glob})
            self.assertTrue(spec.match(_dev()), glob)

    def test_default_address_is_any(self):
        spec = devspec.PciDeviceSpec({'vendor_id': '10de'})
        for address in H200_ADDRESSES + ('ffff:ff:1f.7',):
            self.assertTrue(spec.match(_dev(address=address)))

    def test_fields_are_right_aligned(self):
        # One field is the slot, two are bus:slot.
        spec = devspec.PciDeviceSpec({'address': '1b'})
        self.assertTrue(spec.match(_dev(address='0000:00:1b.0')))
        self.assertFalse(spec.match(_dev(address='0000:1b:00.0')))
        spec = devspec.PciDeviceSpec({'address': '1b:02'})
        self.assertTrue(spec.match(_dev(address='0001:1b:02.3')))
        self.assertFalse(spec.match(_dev(address='0000:02:1b.0')))

    def test_fields_compared(self):
        spec = devspec.PciDeviceSpec({'address': '0001:1b:00.1'})
        self.assertTrue(spec.match(_dev(address='0001:1b:00.1')))
        for other in ('0000:1b:00.1', '0001:1c:00.1', '0001:1b:01.1',
                      '0001:1b:00.0'):
            self.assertFalse(spec.match(_dev(address=other)), other)

    def test_unparsable_device_address_never_matches(self):
        spec = devspec.PciDeviceSpec({})
        for address in ('10000:1b:00.0', 'nonsense', None):
            self.assertFalse(spec.match(
                dataclasses.replace(_dev(), address=address)))

    def test_too_many_fields(self):
        for bad in ('0:0:1b:00.0', ':::'):
            self.assertRejected(exception.PciDeviceWrongAddressFormat,
                                {'address': bad}, bad)

    def test_field_limits(self):
        for bad, field, limit in (('10000:1b:00.0', 'domain', 'FFFF'),
                                  ('100:00.0', 'bus', 'FF'),
                                  ('1b:20.0', 'slot', '1F'),
                                  ('1b:00.8', 'function', '7')):
            self.assertRejected(exception.PciConfigInvalidSpec,
                                {'address': bad}, field, limit,
                                'greater than the maximum')

    def test_partial_globs_and_junk_rejected(self):
        for bad, value in (('1*:00.0', '1*'), ('1b:0*.0', '0*'),
                           ('1b:00.*1', '*1'), ('1b:00.0.1', '0.1'),
                           ('zz:00.0', 'zz')):
            self.assertRejected(exception.PciConfigInvalidSpec,
                                {'address': bad}, repr(value),
                                'does not parse as a hex number')

    def test_wrong_type(self):
        for bad in (27, ['0000:1b:00.0'], True):
            self.assertRejected(exception.PciDeviceWrongAddressFormat,
                                {'address': bad}, repr(bad), 'glob string')


class TestRegexAddress(_Base):

    def test_prefix_match(self):
        self.assertTrue(devspec.PciDeviceSpec(
            {'address': {'bus': '1'}}).match(_dev()))
        self.assertFalse(devspec.PciDeviceSpec(
            {'address': {'bus': '1$'}}).match(_dev()))

    def test_missing_keys_match_anything(self):
        spec = devspec.PciDeviceSpec({'address': {}})
        for address in H200_ADDRESSES:
            self.assertTrue(spec.match(_dev(address=address)))

    def test_all_fields_lower_case_normalized(self):
        spec = devspec.PciDeviceSpec({'address': {
            'domain': '0000', 'bus': '[1-2][ab]$', 'slot': '00',
            'function': '[0-3]'}})
        self.assertTrue(spec.match(_dev(address='0:1B:0.2')))
        self.assertTrue(spec.match(_dev(address='0000:2a:00.0')))
        self.assertFalse(spec.match(_dev(address='0000:3a:00.0')))
        self.assertFalse(spec.match(_dev(address='0000:1b:00.4')))
        self.assertFalse(spec.match(_dev(address='0001:1b:00.0')))

    def test_h200_even_gpus_by_regex(self):
        spec = devspec.PciDeviceSpec({'address': {'bus': '(2a|5d|ab|db)$'}})
        matched = [a for a in H200_ADDRESSES if spec.match(_dev(address=a))]
        self.assertEqual(['0000:2a:00.0', '0000:5d:00.0', '0000:ab:00.0',
                          '0000:db:00.0'], matched)

    def test_bad_regex(self):
        self.assertRejected(exception.PciDeviceWrongAddressFormat,
                            {'address': {'bus': '(1'}}, "'(1'", 'bus',
                            'regular expression')

    def test_non_string_regex(self):
        self.assertRejected(exception.PciDeviceWrongAddressFormat,
                            {'address': {'slot': 0}}, 'slot', '0',
                            'regular expression string')

    def test_unknown_key(self):
        self.assertRejected(exception.PciDeviceWrongAddressFormat,
                            {'address': {'func': '0'}}, 'func',
                            'domain, bus, slot, function')


class _SysfsMixin:

    def make_pf(self, address, total_vfs='4'):
        path = os.path.join(self.sysfs, 'bus', 'pci', 'devices', address)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, 'sriov_totalvfs'), 'w') as f:
            f.write(total_vfs + '\n')

    def make_netdev(self, name, address):
        net = os.path.join(self.sysfs, 'class', 'net', name)
        os.makedirs(net)
        os.symlink('../../../' + address, os.path.join(net, 'device'))


class TestSysfs(_SysfsMixin, _Base):

    def test_is_sriov_pf(self):
        self.make_pf('0000:81:00.0')
        self.make_pf('0000:82:00.0', total_vfs='0')
        self.make_pf('0000:83:00.0', total_vfs='junk')
        self.assertTrue(devspec.is_sriov_pf('0000:81:00.0'))
        self.assertFalse(devspec.is_sriov_pf('0000:82:00.0'))
        self.assertFalse(devspec.is_sriov_pf('0000:83:00.0'))
        self.assertFalse(devspec.is_sriov_pf('0000:84:00.0'))

    def test_netdev_pci_address(self):
        self.make_netdev('ens1f0', '0000:81:00.0')
        self.make_netdev('lo0', 'virtual')
        self.assertEqual('0000:81:00.0',
                         devspec.netdev_pci_address('ens1f0'))
        self.assertIsNone(devspec.netdev_pci_address('lo0'))
        self.assertIsNone(devspec.netdev_pci_address('missing'))


class TestPfAddress(_SysfsMixin, _Base):

    PF = '0000:81:00.0'

    def _vf(self, address='0000:82:10.0', parent=PF, product='154c'):
        return _dev(address=address, vendor_id='8086', product_id=product,
                    dev_type='type-VF', parent_addr=parent)

    def test_pf_address_selects_vfs(self):
        self.make_pf(self.PF)
        spec = devspec.PciDeviceSpec({'address': self.PF})
        self.assertTrue(spec.match(_dev(address=self.PF,
                                        dev_type='type-PF')))
        self.assertTrue(spec.match(self._vf()))
        self.assertFalse(spec.match(self._vf(parent='0000:83:00.0')))
        self.assertFalse(spec.match(self._vf(parent=None)))

    def test_product_picks_pf_or_vfs(self):
        self.make_pf(self.PF)
        vfs = devspec.PciDeviceSpec({'address': self.PF,
                                     'product_id': '154c'})
        pf = _dev(address=self.PF, vendor_id='8086', product_id='1572',
                  dev_type='type-PF')
        self.assertTrue(vfs.match(self._vf()))
        self.assertFalse(vfs.match(pf))

    def test_not_a_pf_matches_only_itself(self):
        spec = devspec.PciDeviceSpec({'address': self.PF})
        self.assertFalse(spec.match(self._vf()))
        self.assertTrue(spec.match(_dev(address=self.PF)))

    def test_exact_regex_dict_pf_address_selects_vfs(self):
        self.make_pf(self.PF)
        spec = devspec.PciDeviceSpec({'address': {
            'domain': '0', 'bus': '81', 'slot': '00', 'function': '0'}})
        self.assertTrue(spec.match(_dev(address=self.PF,
                                        dev_type='type-PF')))
        self.assertTrue(spec.match(self._vf()))
        self.assertFalse(spec.match(self._vf(parent='0000:83:00.0')))
        # A pattern that is not an exact address stays a plain regex.
        for inexact in ({'bus': '81'}, {'domain': '0000', 'bus': '81$',
                                        'slot': '00', 'function': '0'}):
            spec = devspec.PciDeviceSpec({'address': inexact})
            self.assertFalse(spec.match(self._vf()), inexact)

    def test_exact_regex_dict_of_a_non_pf_matches_only_itself(self):
        spec = devspec.PciDeviceSpec({'address': {
            'domain': '0000', 'bus': '81', 'slot': '00', 'function': '0'}})
        self.assertTrue(spec.match(_dev(address=self.PF)))
        self.assertFalse(spec.match(self._vf()))

    def test_only_fully_specified_globs_are_checked(self):
        self.make_pf(self.PF)
        for address in ('81:00.0', '0000:81:00.*', {'bus': '81'}):
            spec = devspec.PciDeviceSpec({'address': address})
            self.assertFalse(spec.match(self._vf()), address)

    def test_patchable_check(self):
        self.useFixture(fixtures.MockPatch(
            'nova.pci.devspec.is_sriov_pf', return_value=True))
        spec = devspec.PciDeviceSpec({'address': '0:81:0.0'})
        self.assertTrue(spec.match(self._vf()))


class TestDevname(_SysfsMixin, _Base):

    def test_resolved(self):
        self.make_netdev('ens1f0', '0000:81:00.1')
        spec = devspec.PciDeviceSpec({'devname': 'ens1f0'})
        self.assertTrue(spec.match(_dev(address='0000:81:00.1')))
        self.assertFalse(spec.match(_dev(address='0000:81:00.0')))
        self.assertNotIn('devname', spec.tags)

    def test_resolved_pf_selects_vfs(self):
        self.make_netdev('ens1f0', '0000:81:00.0')
        self.make_pf('0000:81:00.0')
        spec = devspec.PciDeviceSpec({'devname': 'ens1f0'})
        self.assertTrue(spec.match(_dev(address='0000:81:10.0',
                                        parent_addr='0000:81:00.0')))

    def test_patchable_lookup(self):
        self.useFixture(fixtures.MockPatch(
            'nova.pci.devspec.netdev_pci_address',
            return_value='0000:1b:00.0'))
        spec = devspec.PciDeviceSpec({'devname': 'eth9'})
        self.assertTrue(spec.match(_dev()))

    def test_missing_netdev_matches_nothing(self):
        spec = devspec.PciDeviceSpec({'devname': 'nope0'})
        for address in H200_ADDRESSES:
            self.assertFalse(spec.match(_dev(address=address)))

    def test_with_address(self):
        self.assertRejected(exception.PciDeviceInvalidDeviceName,
                            {'devname': 'eth0', 'address': '1b:00.0'},
                            'devname or address')

    def test_rejected_with_placement(self):
        self.assertRejected(exception.PciConfigInvalidSpec,
                            {'devname': 'eth0', 'vendor_id': '8086'},
                            '"devname": "eth0"', 'report_in_placement',
                            'address', placement=True)

    def test_bad_value(self):
        for bad in ('', 5, None):
            self.assertRejected(exception.PciConfigInvalidSpec,
                                {'devname': bad}, 'devname', repr(bad))


class TestRemoteManaged(_SysfsMixin, _Base):
    """remote_managed=true: VFs with a VPD card serial number only."""

    PF = '0000:3b:00.0'

    def _vf(self, serial=None, address='0000:3b:00.4'):
        return dataclasses.replace(
            _dev(address=address, vendor_id='15b3', product_id='101e',
                 dev_type='type-VF', parent_addr=self.PF),
            card_serial_number=serial)

    def make_pf_ids(self, vendor='0x15b3', device='0xa2d6', vf='101e'):
        self.make_pf(self.PF)
        path = os.path.join(self.sysfs, 'bus', 'pci', 'devices', self.PF)
        for name, value in (('vendor', vendor), ('device', device),
                            ('sriov_vf_device', vf)):
            with open(os.path.join(path, name), 'w') as f:
                f.write(value + '\n')

    def test_vf_needs_a_serial_number(self):
        spec = devspec.PciDeviceSpec({'vendor_id': '15b3',
                                      'product_id': '101e',
                                      'remote_managed': 'true'})
        self.assertTrue(spec.remote_managed)
        self.assertTrue(spec.match(self._vf('MT2113X00417')))
        self.assertFalse(spec.match(self._vf()))
        self.assertFalse(spec.match(self._vf('')))
        # Without the tag the serial number does not matter.
        plain = devspec.PciDeviceSpec({'vendor_id': '15b3'})
        self.assertFalse(plain.remote_managed)
        self.assertTrue(plain.match(self._vf()))

    def test_whitelist_falls_through_to_the_next_spec(self):
        whitelist = devspec.Whitelist.from_config([
            '{"product_id": "101e", "remote_managed": true}',
            '{"product_id": "101e", "physical_network": "net1"}'])
        self.assertIs(whitelist.specs[0],
                      whitelist.device_assignable(self._vf('SN1')))
        self.assertIs(whitelist.specs[1],
                      whitelist.device_assignable(self._vf()))

    def test_missing_devname_is_refused(self):
        err = self.assertRejected(
            exception.PciConfigInvalidSpec,
            {'devname': 'enp59s0f0', 'remote_managed': True},
            'remote_managed=true', "network interface 'enp59s0f0' does not "
            'exist')
        self.assertIn('[pci]device_spec is not valid', str(err))
        # Without remote_managed a missing devname only matches nothing.
        devspec.PciDeviceSpec({'devname': 'enp59s0f0',
                               'remote_managed': 'no'})

    def test_pf_address_is_refused(self):
        self.make_pf_ids()
        for address in (self.PF, {'domain': '0000', 'bus': '3b',
                                  'slot': '00', 'function': '0'}):
            for product in ({}, {'product_id': 'a2d6'}):
                self.assertRejected(
                    exception.PciConfigInvalidSpec,
                    dict(product, address=address, remote_managed='yes'),
                    'not supported for PFs', '%s is an SR-IOV PF' % self.PF,
                    'VF product id 101e')

    def test_pf_devname_is_refused(self):
        self.make_pf_ids()
        self.make_netdev('p0', self.PF)
        self.assertRejected(exception.PciConfigInvalidSpec,
                            {'devname': 'p0', 'remote_managed': 'true'},
                            'not supported for PFs')

    def test_pf_address_with_vf_product_selects_its_vfs(self):
        self.make_pf_ids()
        spec = devspec.PciDeviceSpec({'address': self.PF,
                                      'product_id': '101e',
                                      'remote_managed': 'true'})
        self.assertTrue(spec.match(self._vf('SN7')))
        self.assertFalse(spec.match(self._vf()))

    def test_pf_address_with_foreign_ids_is_refused(self):
        self.make_pf_ids()
        self.assertRejected(exception.PciConfigInvalidSpec,
                            {'address': self.PF, 'vendor_id': '8086',
                             'product_id': '101e', 'remote_managed': 'on'},
                            'vendor_id 8086 and product_id 101e do not '
                            'match the VFs of PF %s' % self.PF,
                            'vendor 15b3, VF product 101e')

    def test_non_pf_address_is_accepted(self):
        # The address of a VF (or a device that is no PF) is fine.
        spec = devspec.PciDeviceSpec({'address': '0000:3b:00.4',
                                      'remote_managed': 'true'})
        self.assertTrue(spec.match(self._vf('SN1')))


class TestTags(_Base):

    def test_other_keys_are_string_tags(self):
        spec = devspec.PciDeviceSpec({
            'vendor_id': '10de', 'address': '1b:', 'physical_network':
            'physnet1', 'dev_type': 'type-PF', 'numa': 1, 'ratio': 1.5,
            'flag': True, 'trusted': 'true', 'unset': None})
        self.assertEqual({'physical_network': 'physnet1',
                          'dev_type': 'type-PF', 'numa': '1',
                          'ratio': '1.5', 'flag': 'true',
                          'trusted': 'true'}, spec.tags)

    def test_placement_names_must_be_strings(self):
        for key, bad in (('resource_class', 5), ('resource_class', True),
                         ('traits', ['CUSTOM_A']), ('traits', 1.5)):
            self.assertRejected(exception.PciConfigInvalidSpec,
                                {'vendor_id': '10de', key: bad},
                                '%s (%r) must be a string' % (key, bad),
                                placement=True)

    def test_structured_tag_rejected(self):
        for bad in ({'a': 1}, ['x']):
            self.assertRejected(exception.PciConfigInvalidSpec,
                                {'colour': bad}, "'colour'", repr(bad))

    def test_strict_bools_normalized(self):
        for tag in ('managed', 'live_migratable', 'one_time_use'):
            for value, want in (('yes', 'true'), ('No', 'false'),
                                (True, 'true'), (False, 'false'),
                                ('1', 'true'), ('off', 'false'),
                                (0, 'false')):
                spec = devspec.PciDeviceSpec({tag: value},
                                             report_in_placement=True)
                self.assertEqual(want, spec.tags[tag], (tag, value))

    def test_strict_bools_rejected(self):
        for tag in ('managed', 'live_migratable', 'one_time_use'):
            for bad in ('maybe', '', 2, 1.0, ['true']):
                self.assertRejected(exception.PciConfigInvalidSpec,
                                    {tag: bad}, repr(tag), repr(bad),
                                    'acceptable values', 'yes',
                                    placement=True)

    def test_remote_managed_lenient(self):
        spec = devspec.PciDeviceSpec({'remote_managed': 'maybe'})
        self.assertEqual('false', spec.tags['remote_managed'])
        spec = devspec.PciDeviceSpec({'remote_managed': 'True'})
        self.assertEqual('true', spec.tags['remote_managed'])

    def test_one_time_use_requires_placement(self):
        self.assertRejected(exception.PciConfigInvalidSpec,
                            {'vendor_id': '10de', 'one_time_use': True},
                            'one_time_use=true', 'report_in_placement',
                            '"vendor_id": "10de"')
        spec = devspec.PciDeviceSpec({'one_time_use': 'no'})
        self.assertEqual('false', spec.tags['one_time_use'])

    def test_resource_class(self):
        spec = devspec.PciDeviceSpec({'vendor_id': '10de',
                                      'product_id': '2335'})
        self.assertEqual('CUSTOM_PCI_10DE_2335', spec.resource_class)
        spec = devspec.PciDeviceSpec({'resource_class': 'my-gpu'})
        self.assertEqual('CUSTOM_MY_GPU', spec.resource_class)
        self.assertEqual('CUSTOM_MY_GPU', spec.resource_class_for(_dev()))
        spec = devspec.PciDeviceSpec({'resource_class': 'pgpu'})
        self.assertEqual('PGPU', spec.resource_class)

    def test_resource_class_wildcard_needs_device(self):
        spec = devspec.PciDeviceSpec({'vendor_id': '10de'})
        err = self.assertRaises(exception.PlacementPciException,
                                lambda: spec.resource_class)
        self.assertIn('"vendor_id": "10de"', str(err))
        self.assertEqual('CUSTOM_PCI_10DE_2335',
                         spec.resource_class_for(_dev()))
        self.assertEqual('CUSTOM_PCI_144D_A80A', spec.resource_class_for(
            _dev(vendor_id='144d', product_id='a80a')))

    def test_traits(self):
        spec = devspec.PciDeviceSpec({'traits': 'HW_GPU_API_VULKAN,fast'})
        self.assertEqual({'HW_GPU_API_VULKAN', 'CUSTOM_FAST'}, spec.traits)
        self.assertEqual(set(), devspec.PciDeviceSpec({}).traits)

    def test_spec_must_be_dict(self):
        err = self.assertRaises(exception.PciConfigInvalidSpec,
                                devspec.PciDeviceSpec, ['x'])
        self.assertIn("['x']", str(err))

    def test_input_not_modified(self):
        raw = {'vendor_id': '10DE', 'managed': 'yes'}
        devspec.PciDeviceSpec(raw)
        self.assertEqual({'vendor_id': '10DE', 'managed': 'yes'}, raw)


class TestStaticGroups(_Base):

    GROUP = {'address': '18:00.0', 'group_name': 'pair-a',
             'group_type': 'NVLink'}

    def test_accepted(self):
        spec = devspec.PciDeviceSpec(self.GROUP, report_in_placement=True)
        self.assertEqual('pair-a', spec.group_name)
        self.assertEqual('nvlink', spec.group_type)
        self.assertEqual('nvlink', spec.tags['group_type'])
        self.assertEqual('CUSTOM_PCI_GROUP_NVLINK', spec.resource_class)
        self.assertEqual('CUSTOM_PCI_GROUP_NVLINK',
                         spec.resource_class_for(_dev()))

    def test_explicit_resource_class_wins(self):
        spec = devspec.PciDeviceSpec(self.GROUP | {'resource_class': 'x'},
                                     report_in_placement=True)
        self.assertEqual('CUSTOM_X', spec.resource_class)

    def test_no_group(self):
        spec = devspec.PciDeviceSpec({})
        self.assertIsNone(spec.group_name)
        self.assertIsNone(spec.group_type)

    def test_must_come_together(self):
        for key in ('group_name', 'group_type'):
            spec = dict(self.GROUP)
            del spec[key]
            self.assertRejected(exception.PciConfigInvalidSpec, spec,
                                'together', '"address": "18:00.0"',
                                placement=True)

    def test_require_placement(self):
        self.assertRejected(exception.PciConfigInvalidSpec, self.GROUP,
                            'report_in_placement', '"group_name": "pair-a"')

    def test_bad_group_type(self):
        for bad in ('nv_link', 'x1', '', 3):
            self.assertRejected(exception.PciConfigInvalidSpec,
                                self.GROUP | {'group_type': bad},
                                repr(bad), 'letters', '"group_name"',
                                placement=True)

    def test_bad_group_name(self):
        for bad in ('', '  ', 7):
            self.assertRejected(exception.PciConfigInvalidSpec,
                                self.GROUP | {'group_name': bad},
                                'group_name must be a non-empty string',
                                json.dumps(bad), placement=True)

    def test_no_physical_network(self):
        self.assertRejected(exception.PciConfigInvalidSpec,
                            self.GROUP | {'physical_network': 'net1'},
                            'physical_network', '"net1"', placement=True)

    def test_one_type_per_name(self):
        values = [json.dumps(self.GROUP),
                  json.dumps(self.GROUP | {'address': '2a:00.0',
                                           'group_type': 'pcie-switch'})]
        err = self.assertRaises(exception.PciConfigInvalidSpec,
                                devspec.Whitelist.from_config, values,
                                report_in_placement=True)
        self.assertIn("'pair-a'", str(err))
        self.assertIn("'pcie-switch'", str(err))


class TestWhitelist(_Base):

    def test_object_and_list_values(self):
        wl = devspec.Whitelist.from_config([
            '{"vendor_id": "10de"}',
            '[{"product_id": "a80a"}, {"address": "1b:"}]', '[]'])
        self.assertEqual(3, len(wl.specs))
        self.assertEqual('10de', wl.specs[0].vendor_id)
        self.assertEqual('a80a', wl.specs[1].product_id)

    def test_empty_config_assigns_nothing(self):
        self.assertIsNone(devspec.Whitelist.from_config([])
                          .device_assignable(_dev()))

    def test_first_match_wins(self):
        wl = devspec.Whitelist.from_config([
            '{"address": "18:00.0", "resource_class": "first"}',
            '{"vendor_id": "10de", "resource_class": "second"}',
            '{"address": "18:", "resource_class": "third"}'])
        self.assertIs(wl.specs[0], wl.device_assignable(
            _dev(address='0000:18:00.0')))
        self.assertIs(wl.specs[1], wl.device_assignable(
            _dev(address='0000:2a:00.0')))
        self.assertIs(wl.specs[2], wl.device_assignable(
            _dev(address='0000:18:00.1', vendor_id='144d')))
        self.assertIsNone(wl.device_assignable(
            _dev(address='0000:2a:00.0', vendor_id='144d')))

    def test_hgx_h200(self):
        wl = devspec.Whitelist.from_config(
            ['{"vendor_id": "10de", "product_id": "2335", '
             '"resource_class": "PGPU"}'], report_in_placement=True)
        for address in H200_ADDRESSES:
            spec = wl.device_assignable(_dev(address=address))
            self.assertIs(wl.specs[0], spec)
            self.assertEqual('PGPU', spec.resource_class)
            self.assertEqual({'resource_class': 'PGPU'}, spec.tags)
        nvme = _dev(address='0000:c1:00.0', vendor_id='144d',
                    product_id='a80a')
        self.assertIsNone(wl.device_assignable(nvme))

    def test_spec_errors_propagate(self):
        err = self.assertRaises(exception.PciConfigInvalidSpec,
                                devspec.Whitelist.from_config,
                                ['{"vendor_id": "zz"}'])
        self.assertIn("'zz'", str(err))

    def test_not_json(self):
        for bad in ('{vendor_id: 10de}', '', '{"a": 1'):
            err = self.assertRaises(exception.PciConfigInvalidSpec,
                                    devspec.Whitelist.from_config, [bad])
            self.assertIn(repr(bad), str(err))
            self.assertIn('not valid JSON', str(err))

    def test_not_object_or_list(self):
        for bad in ('"10de"', '5', 'null', 'true'):
            err = self.assertRaises(exception.PciConfigInvalidSpec,
                                    devspec.Whitelist.from_config, [bad])
            self.assertIn(repr(bad), str(err))
            self.assertIn('expecting a JSON object or a list', str(err))

    def test_list_of_non_objects(self):
        bad = '[{"vendor_id": "10de"}, "x"]'
        err = self.assertRaises(exception.PciConfigInvalidSpec,
                                devspec.Whitelist.from_config, [bad])
        self.assertIn(repr(bad), str(err))
        self.assertIn("'x' is not a JSON object", str(err))

    def test_message_prefix(self):
        err = self.assertRaises(exception.PciConfigInvalidSpec,
                                devspec.Whitelist.from_config, ['1'])
        self.assertTrue(str(err).startswith(
            '[pci]device_spec is not valid: '))


class TestMisspeltKeys(_Base):

    def test_misspellings_refused_naming_key_and_known(self):
        for key, meant in (('vendorid', 'vendor_id'),
                           ('productid', 'product_id'),
                           ('adress', 'address'),
                           ('resource-class', 'resource_class'),
                           ('Vendor_ID', 'vendor_id'),
                           ('prodcut_id', 'product_id'),
                           ('resorce_clas', 'resource_class'),
                           ('trait', 'traits'),
                           ('live-migratable', 'live_migratable'),
                           ('group name', 'group_name')):
            err = self.assertRaises(exception.PciConfigInvalidSpec,
                                    devspec.PciDeviceSpec,
                                    {'vendor_id': '10de', key: 'x'})
            self.assertIn('key %r' % key, err.message)
            self.assertIn('misspelling of %r' % meant, err.message)
            self.assertIn('known keys: ' + ', '.join(devspec.KNOWN_KEYS),
                          err.message)

    def test_unrelated_tags_still_passed_on(self):
        spec = devspec.PciDeviceSpec({
            'vendor_id': '10de', 'trust': 'x', 'unmanaged': 'y',
            'dev_type': 'type-PCI', 'vendor': 'nvidia', 'colour': 'blue',
            'physnet': 'p'})
        self.assertEqual({'trust': 'x', 'unmanaged': 'y',
                          'dev_type': 'type-PCI', 'vendor': 'nvidia',
                          'colour': 'blue', 'physnet': 'p'}, spec.tags)

    def test_known_keys_accepted(self):
        spec = devspec.PciDeviceSpec({
            'vendor_id': '10de', 'product_id': '2335', 'address': '1b:',
            'resource_class': 'PGPU', 'traits': 'A', 'managed': 'yes',
            'live_migratable': 'no', 'remote_managed': 'false',
            'trusted': 'true', 'physical_network': None})
        self.assertEqual('PGPU', spec.tags['resource_class'])

    def test_whitelist_names_the_bad_value(self):
        err = self.assertRaises(
            exception.PciConfigInvalidSpec, devspec.Whitelist.from_config,
            ['{"vendorid": "10de", "product_id": "2335"}'])
        self.assertIn('"vendorid": "10de"', err.message)
        self.assertTrue(err.message.startswith(
            '[pci]device_spec is not valid:'))
