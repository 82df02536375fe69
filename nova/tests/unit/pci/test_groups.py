"""Tests for PCI device groups: the device_group tree, its checks against
the host's devices and static spec groups."""

import dataclasses
import json


from nova import test
from nova import exception
from nova.pci import device as pci_device
from nova.pci import devspec
from nova.pci import groups

# HGX H200: GPU n (1..8) at these addresses, already in address order.
GPUS = ['0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0',
        '0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0']
NVME = '0000:c1:00.0'


def gpu(n: int) -> str:
    return GPUS[n - 1]


def group(name, type='nvlink', addresses=None, members=None, **extra):
    value = {'name': name, 'type': type}
    if addresses is not None:
        value['addresses'] = addresses
    if members is not None:
        value['members'] = members
    value.update(extra)
    return json.dumps(value)


# The board is declared first and the pairs last: order must not matter.
H200_CONFIG = [
    group('board', members=['quad-a', 'quad-b']),
    group('quad-a', members=['pair-a1', 'pair-a2']),
    group('quad-b', members=['pair-b1', 'pair-b2']),
    group('pair-a1', addresses=[gpu(1), gpu(3)]),
    group('pair-a2', addresses=[gpu(2), gpu(4)]),
    group('pair-b1', addresses=[gpu(5), gpu(7)]),
    group('pair-b2', addresses=[gpu(6), gpu(8)]),
]


def device(address, dev_type='type-PCI', vendor_id='10de',
           product_id='2335'):
    return pci_device.HostDevice(
        address=address, vendor_id=vendor_id, product_id=product_id,
        dev_type=dev_type, numa_node=0, driver='vfio-pci',
        pci_class='030200')


def host_devices():
    return [device(a) for a in GPUS] + [device(NVME, vendor_id='144d',
                                               product_id='a80a')]


def spec(**extra):
    """A device_spec value for the H200 GPUs plus ``extra`` keys."""
    value = {'vendor_id': '10de', 'product_id': '2335',
             'resource_class': 'PGPU'}
    value.update(extra)
    return value


def whitelist(*specs):
    return devspec.Whitelist.from_config(
        [json.dumps(s) for s in specs or [spec()]],
        report_in_placement=True)


class TestH200Tree(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = groups.GroupTree.from_config(H200_CONFIG)

    def test_sizes(self):
        self.assertEqual({2, 4, 8}, self.tree.sizes('nvlink'))
        self.assertEqual(set(), self.tree.sizes('pcie-switch'))
        self.assertEqual(8, self.tree.get('board').size)
        self.assertEqual(4, self.tree.get('quad-b').size)
        self.assertEqual(2, self.tree.get('pair-a2').size)

    def test_roots_and_pre_order(self):
        self.assertEqual(['board'], [g.name for g in self.tree.roots])
        self.assertEqual(
            ['board', 'quad-a', 'pair-a1', 'pair-a2', 'quad-b', 'pair-b1',
             'pair-b2'],
            [g.name for g in self.tree.groups()])

    def test_group_contents(self):
        board = self.tree.get('board')
        self.assertEqual(GPUS, board.addresses)
        self.assertEqual([], board.own_addresses)
        self.assertEqual(['quad-a', 'quad-b'],
                         [m.name for m in board.members])
        self.assertEqual([gpu(1), gpu(2), gpu(3), gpu(4)],
                         self.tree.get('quad-a').addresses)
        self.assertEqual([gpu(6), gpu(8)],
                         self.tree.get('pair-b2').own_addresses)

    def test_enclosing_outermost_first(self):
        self.assertEqual(['board', 'quad-a', 'pair-a1'],
                         [g.name for g in self.tree.enclosing(gpu(3))])
        self.assertEqual(['board', 'quad-b', 'pair-b2'],
                         [g.name for g in self.tree.enclosing(gpu(8))])
        self.assertEqual([], self.tree.enclosing(NVME))

    def test_member_index(self):
        self.assertEqual(2, self.tree.get('board').member_index(gpu(3)))
        self.assertEqual(1, self.tree.get('pair-a1').member_index(gpu(3)))
        self.assertEqual(0, self.tree.get('pair-a2').member_index(gpu(2)))
        e = self.assertRaises(exception.PciDeviceNotInGroup,
                              self.tree.get('pair-a1').member_index, gpu(2))
        self.assertIn(gpu(2), str(e))
        self.assertIn('pair-a1', str(e))

    def test_member_traits(self):
        self.assertEqual({'CUSTOM_PCI_GROUP_NVLINK_8_M0',
                          'CUSTOM_PCI_GROUP_NVLINK_4_M0',
                          'CUSTOM_PCI_GROUP_NVLINK_2_M0'},
                         self.tree.member_traits(gpu(1)))
        self.assertEqual({'CUSTOM_PCI_GROUP_NVLINK_8_M2',
                          'CUSTOM_PCI_GROUP_NVLINK_4_M2',
                          'CUSTOM_PCI_GROUP_NVLINK_2_M1'},
                         self.tree.member_traits(gpu(3)))
        self.assertEqual({'CUSTOM_PCI_GROUP_NVLINK_8_M5',
                          'CUSTOM_PCI_GROUP_NVLINK_4_M1',
                          'CUSTOM_PCI_GROUP_NVLINK_2_M0'},
                         self.tree.member_traits(gpu(6)))
        self.assertEqual({'CUSTOM_PCI_GROUP_NVLINK_8_M7',
                          'CUSTOM_PCI_GROUP_NVLINK_4_M3',
                          'CUSTOM_PCI_GROUP_NVLINK_2_M1'},
                         self.tree.member_traits(gpu(8)))
        self.assertEqual(set(), self.tree.member_traits(NVME))

    def test_every_position_used_once_per_group(self):
        # Member traits must name each position of a group exactly once,
        # or a request for positions 0..N-1 could miss a group.
        for g in self.tree.groups():
            indexes = sorted(g.member_index(a) for a in g.addresses)
            self.assertEqual(list(range(g.size)), indexes, g.name)

    def test_group_traits(self):
        self.assertEqual({'CUSTOM_PCI_GROUP_NVLINK',
                          'CUSTOM_PCI_GROUP_NVLINK_8'},
                         self.tree.get('board').traits)
        self.assertEqual({'CUSTOM_PCI_GROUP_NVLINK',
                          'CUSTOM_PCI_GROUP_NVLINK_4'},
                         self.tree.get('quad-a').traits)
        self.assertEqual({'CUSTOM_PCI_GROUP_NVLINK',
                          'CUSTOM_PCI_GROUP_NVLINK_2'},
                         self.tree.get('pair-b1').traits)

    def test_get_unknown(self):
        e = self.assertRaises(exception.PciDeviceGroupNotFound,
                              self.tree.get, 'quad-c')
        self.assertIn('quad-c', str(e))
        self.assertIn('quad-a', str(e))

    def test_order_does_not_matter(self):
        reversed_tree = groups.GroupTree.from_config(H200_CONFIG[::-1])
        for name in ('board', 'quad-a', 'pair-b2'):
            self.assertEqual(self.tree.get(name).addresses,
                             reversed_tree.get(name).addresses)
        for address in GPUS:
            self.assertEqual(self.tree.member_traits(address),
                             reversed_tree.member_traits(address))

    def test_addresses_normalized_and_type_lowered(self):
        tree = groups.GroupTree.from_config([
            group('p', type='NVLink', addresses=['0:3A:0.0', '0:18:0.0'])])
        p = tree.get('p')
        self.assertEqual('nvlink', p.type)
        self.assertEqual(['0000:3a:00.0', '0000:18:00.0'], p.own_addresses)
        self.assertEqual(['0000:18:00.0', '0000:3a:00.0'], p.addresses)

    def test_empty_config(self):
        tree = groups.GroupTree.from_config([])
        self.assertEqual([], tree.roots)
        self.assertEqual([], tree.groups())
        self.assertEqual([], tree.enclosing(gpu(1)))
        self.assertEqual(set(), tree.member_traits(gpu(1)))
        self.assertEqual(set(), tree.sizes('nvlink'))
        devices = host_devices()
        tree.validate_devices(devices, whitelist().classify(devices))

    def test_separate_roots_and_types(self):
        tree = groups.GroupTree.from_config([
            group('pair-x', addresses=[gpu(1), gpu(2)]),
            group('sw', type='pcie-switch',
                  addresses=[gpu(5), gpu(6), gpu(7)]),
        ])
        self.assertEqual(['pair-x', 'sw'], [g.name for g in tree.roots])
        self.assertEqual({2}, tree.sizes('nvlink'))
        self.assertEqual({3}, tree.sizes('pcie-switch'))
        self.assertEqual({'CUSTOM_PCI_GROUP_PCIE_SWITCH_3_M1'},
                         tree.member_traits(gpu(6)))

    def test_declarations_rebuild_an_independent_copy(self):
        tree = groups.GroupTree.from_config(H200_CONFIG)
        declared = tree.declarations()
        self.assertEqual(groups.Declaration(
            'pair-a1', 'nvlink', addresses=(gpu(1), gpu(3))), declared[2])
        self.assertEqual(groups.Declaration(
            'board', 'nvlink', members=('quad-a', 'quad-b')), declared[0])
        copy = groups.GroupTree.from_declarations(declared[1:])
        self.assertEqual(['quad-a', 'quad-b'], [g.name for g in copy.roots])
        self.assertIsNot(tree.get('quad-a'), copy.get('quad-a'))
        # Linking the copy left the original's groups as they were.
        self.assertEqual(['quad-a', 'quad-b'],
                         [m.name for m in tree.get('board').members])
        self.assertEqual(2, len(tree.get('quad-a').members))

    def test_declarations_pass_the_structure_checks(self):
        e = self.assertRaises(
            exception.PciGroupConfigInvalid,
            groups.GroupTree.from_declarations, [
                groups.Declaration('a', 'nvlink', members=('b', 'c')),
                groups.Declaration('b', 'nvlink', addresses=(gpu(1),)),
                groups.Declaration('c', 'nvlink', members=('a', 'b'))])
        self.assertIn('group b is a member of both group a and group c',
                      str(e))


class TestRejectedConfig(test.TestCase):

    def assertInvalid(self, values, *fragments):
        e = self.assertRaises(exception.PciGroupConfigInvalid,
                              groups.GroupTree.from_config, values)
        message = str(e)
        self.assertIn('[pci]device_group', message)
        for fragment in fragments:
            self.assertIn(fragment, message)
        return message

    def test_not_json(self):
        self.assertInvalid(['{"name": "p",'], '{"name": "p",', 'JSON')

    def test_not_object(self):
        self.assertInvalid(['["0000:18:00.0", "0000:3a:00.0"]'],
                           '0000:18:00.0', 'not a JSON object')
        self.assertInvalid(['"pair"'], "'\"pair\"'", 'not a JSON object')

    def test_missing_name(self):
        value = json.dumps({'type': 'nvlink',
                            'addresses': [gpu(1), gpu(3)]})
        self.assertInvalid([value], repr(value), 'name')

    def test_empty_name(self):
        self.assertInvalid([group('', addresses=[gpu(1), gpu(3)])],
                           '"name": ""', 'non-empty string')

    def test_non_string_name(self):
        self.assertInvalid([group(7, addresses=[gpu(1), gpu(3)])],
                           '"name": 7', 'non-empty string')

    def test_name_with_slash(self):
        self.assertInvalid([group('a/b', addresses=[gpu(1), gpu(3)])],
                           "'a/b'", 'letters, digits')

    def test_duplicate_name(self):
        self.assertInvalid([group('p', addresses=[gpu(1), gpu(3)]),
                            group('p', addresses=[gpu(2), gpu(4)])],
                           'group name p is declared twice')

    def test_unknown_key(self):
        msg = self.assertInvalid(
            [group('p', addresses=[gpu(1), gpu(3)], size=2, foo=1)],
            'group p', 'foo, size')
        self.assertIn('allowed keys: name, type, addresses, members', msg)

    def test_missing_type(self):
        value = json.dumps({'name': 'p', 'addresses': [gpu(1), gpu(3)]})
        self.assertInvalid([value], 'group p has no "type"')

    def test_bad_type(self):
        for bad in ('nv_link', 'nvlink2', '', 5):
            self.assertInvalid([group('p', type=bad,
                                      addresses=[gpu(1), gpu(3)])],
                               'group p', repr(bad))

    def test_both_addresses_and_members(self):
        self.assertInvalid(
            [group('p', addresses=[gpu(1), gpu(3)], members=['a', 'b'])],
            'group p must have exactly one of "addresses"')

    def test_neither_addresses_nor_members(self):
        self.assertInvalid([group('p')],
                           'group p must have exactly one of "addresses"')

    def test_empty_list(self):
        self.assertInvalid([group('p', addresses=[])],
                           'group p lists 0 device(s)', 'at least 2')
        self.assertInvalid([group('q', members=[])],
                           'group q lists 0 member(s)', 'at least 2')

    def test_single_device(self):
        self.assertInvalid([group('p', addresses=[gpu(1)])],
                           'group p lists 1 device(s)', gpu(1),
                           'at least 2')

    def test_single_member(self):
        self.assertInvalid([group('q', members=['p']),
                            group('p', addresses=[gpu(1), gpu(3)])],
                           'group q lists 1 member(s)', "'p'",
                           'at least 2')

    def test_not_a_list(self):
        self.assertInvalid([group('p', addresses=gpu(1))],
                           'group p', '"addresses" must be a list',
                           gpu(1))
        self.assertInvalid([group('q', members=['a', 3])],
                           'group q', '"members" must be a list', '3')

    def test_bad_address(self):
        self.assertInvalid([group('p', addresses=['18:00.0', gpu(3)])],
                           'group p', "'18:00.0'", 'dddd:bb:ss.f')

    def test_duplicate_address_in_group(self):
        self.assertInvalid(
            [group('p', addresses=[gpu(1), '0000:18:00.0'.upper()])],
            'group p lists device 0000:18:00.0 twice')

    def test_duplicate_member_in_group(self):
        self.assertInvalid([group('q', members=['p', 'p']),
                            group('p', addresses=[gpu(1), gpu(3)])],
                           'group q lists member p twice')

    def test_device_in_two_groups(self):
        self.assertInvalid([group('pair-a1', addresses=[gpu(1), gpu(3)]),
                            group('pair-x', addresses=[gpu(3), gpu(4)])],
                           'device %s' % gpu(3), 'pair-a1', 'pair-x')

    def test_member_of_two_parents(self):
        self.assertInvalid([group('pair-a1', addresses=[gpu(1), gpu(3)]),
                            group('pair-a2', addresses=[gpu(2), gpu(4)]),
                            group('pair-b1', addresses=[gpu(5), gpu(7)]),
                            group('quad-a', members=['pair-a1', 'pair-a2']),
                            group('quad-x', members=['pair-a2', 'pair-b1'])],
                           'group pair-a2 is a member of both group quad-a '
                           'and group quad-x')

    def test_unknown_member(self):
        self.assertInvalid([group('pair-a1', addresses=[gpu(1), gpu(3)]),
                            group('quad-a', members=['pair-a1', 'pair-a9'])],
                           'group quad-a has unknown member pair-a9',
                           'declared groups: pair-a1, quad-a')

    def test_member_of_other_type(self):
        self.assertInvalid(
            [group('pair-a1', addresses=[gpu(1), gpu(3)]),
             group('sw', type='pcie-switch', addresses=[gpu(2), gpu(4)]),
             group('quad-a', members=['pair-a1', 'sw'])],
            'group quad-a of type nvlink has member sw of type pcie-switch')

    def test_cycle(self):
        self.assertInvalid([group('a', members=['b', 'c']),
                            group('b', members=['a', 'd']),
                            group('c', addresses=[gpu(1), gpu(2)]),
                            group('d', addresses=[gpu(3), gpu(4)])],
                           'cycle: a -> b -> a')

    def test_longer_cycle_below_nothing(self):
        # The cycle is reported starting at the group declared first.
        self.assertInvalid([group('x', addresses=[gpu(5), gpu(6)]),
                            group('c', members=['a', 'y']),
                            group('a', members=['b', 'x']),
                            group('b', members=['c', 'z']),
                            group('y', addresses=[gpu(1), gpu(2)]),
                            group('z', addresses=[gpu(3), gpu(4)])],
                           'cycle: c -> a -> b -> c')

    def test_self_member(self):
        self.assertInvalid([group('a', members=['a', 'b']),
                            group('b', addresses=[gpu(1), gpu(2)])],
                           'cycle: a -> a')

    def test_unequal_member_sizes(self):
        self.assertInvalid(
            [group('pair', addresses=[gpu(1), gpu(2)]),
             group('triple', addresses=[gpu(3), gpu(4), gpu(5)]),
             group('quad', members=['pair', 'triple'])],
            'group quad is made of members of unequal sizes',
            'pair: 2, triple: 3')

    def test_unequal_sizes_deeper(self):
        # Every inner group is fine; the board on top is not.
        self.assertInvalid(
            [group('p1', addresses=[gpu(1), gpu(2)]),
             group('p2', addresses=[gpu(3), gpu(4)]),
             group('six', addresses=GPUS[4:] + [NVME, '0000:c2:00.0']),
             group('quad', members=['p1', 'p2']),
             group('board', members=['quad', 'six'])],
            'group board is made of members of unequal sizes',
            'quad: 4, six: 6')


class TestValidateDevices(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = groups.GroupTree.from_config(H200_CONFIG)
        self.devices = host_devices()

    def assertInvalid(self, whitelist, *fragments, devices=None,
                      tree=None):
        devices = devices or self.devices
        e = self.assertRaises(exception.PciGroupConfigInvalid,
                              (tree or self.tree).validate_devices,
                              devices, whitelist.classify(devices))
        for fragment in fragments:
            self.assertIn(fragment, str(e))

    def test_valid(self):
        self.assertIsNone(self.tree.validate_devices(
            self.devices, whitelist().classify(self.devices)))

    def test_unknown_address(self):
        tree = groups.GroupTree.from_config(
            [group('pair-a1', addresses=[gpu(1), '0000:99:00.0'])])
        self.assertInvalid(whitelist(),
                           'group pair-a1 lists 0000:99:00.0, which is not '
                           'a PCI device on this host', tree=tree)

    def test_not_matched_by_spec(self):
        self.assertInvalid(
            whitelist(*[spec(address=a) for a in GPUS[:7]]),
            'group pair-b2 lists %s, which no [pci]device_spec matches' %
            gpu(8))

    def test_vf_cannot_be_grouped(self):
        devices = host_devices()
        devices[0] = dataclasses.replace(devices[0], dev_type='type-VF')
        self.assertInvalid(whitelist(),
                           'group pair-a1 lists %s of type type-VF' % gpu(1),
                           devices=devices)

    def test_mixed_resource_classes(self):
        self.assertInvalid(
            whitelist(spec(address=gpu(8), resource_class='other'), spec()),
            'group board mixes resource classes',
            'CUSTOM_OTHER: %s' % gpu(8), 'PGPU: %s' % gpu(1))

    def test_default_resource_class_is_per_device(self):
        # Without a resource_class tag all H200s get the same default.
        self.assertIsNone(self.tree.validate_devices(
            self.devices,
            whitelist({'vendor_id': '10de'}).classify(self.devices)))

    def test_also_static_tagged(self):
        self.assertInvalid(
            whitelist(spec(address=gpu(1), group_name='island',
                           group_type='nvlink'), spec()),
            'device %s of group pair-a1' % gpu(1),
            'static group_name island')

    def test_static_name_clashes_with_device_group(self):
        tree = groups.GroupTree.from_config(
            [group('pair-a1', addresses=[gpu(1), gpu(3)])])
        static = dict(group_name='pair-a1', group_type='nvlink')
        self.assertInvalid(
            whitelist(spec(address=gpu(5), **static),
                      spec(address=gpu(7), **static), spec()),
            'name pair-a1 is both a [pci]device_group and a static '
            'group_name', tree=tree)


class TestStaticGroups(test.TestCase):

    def test_groups(self):
        island1 = dict(group_name='island-1', group_type='NVLink')
        island0 = dict(group_name='island-0', group_type='nvlink',
                       resource_class='pair')
        wl = whitelist(
            {'address': gpu(3), **island1}, {'address': gpu(1), **island1},
            {'address': gpu(2), **island0}, {'address': gpu(4), **island0},
            spec())
        self.assertEqual(
            [groups.StaticGroup('island-0', 'nvlink', [gpu(2), gpu(4)],
                                'CUSTOM_PAIR'),
             groups.StaticGroup('island-1', 'nvlink', [gpu(1), gpu(3)],
                                'CUSTOM_PCI_GROUP_NVLINK')],
            groups.static_groups(host_devices(),
                                 wl.classify(host_devices())))

    def test_no_static_groups(self):
        self.assertEqual([], groups.static_groups(
            host_devices(), whitelist().classify(host_devices())))
        self.assertEqual([], groups.static_groups([], {}))

    def assertInvalid(self, wl, *fragments, devices=None):
        devices = devices or host_devices()
        e = self.assertRaises(exception.PciConfigInvalidSpec,
                              groups.static_groups, devices,
                              wl.classify(devices))
        for fragment in fragments:
            self.assertIn(fragment, str(e))

    def test_single_device(self):
        # The second address is not on this host, so the group has one.
        static = dict(group_name='g', group_type='nvlink')
        self.assertInvalid(
            whitelist({'address': gpu(1), **static},
                      {'address': '0000:99:00.0', **static}),
            'static group g matches 1 device(s) (%s)' % gpu(1),
            'at least 2')

    def test_two_types_refused_by_whitelist(self):
        e = self.assertRaises(
            exception.PciConfigInvalidSpec, whitelist,
            {'address': gpu(1), 'group_name': 'g', 'group_type': 'x'},
            {'address': gpu(2), 'group_name': 'g', 'group_type': 'y'})
        self.assertIn("'g'", str(e))

    def test_two_resource_classes(self):
        self.assertInvalid(
            whitelist(
                {'address': gpu(1), 'group_name': 'g', 'group_type': 'x'},
                {'address': gpu(2), 'group_name': 'g', 'group_type': 'x',
                 'resource_class': 'other'}),
            'static group g', 'CUSTOM_PCI_GROUP_X and CUSTOM_OTHER')

    def test_vf(self):
        devices = host_devices()
        devices[1] = dataclasses.replace(devices[1], dev_type='type-VF')
        static = dict(group_name='g', group_type='x')
        self.assertInvalid(
            whitelist({'address': gpu(1), **static},
                      {'address': gpu(2), **static}),
            'static group g', '%s of type type-VF' % gpu(2),
            devices=devices)
