"""Tests for PCI alias config parsing and flavor PCI requests."""

import json
import uuid


from nova import test
from nova import exception
from nova.conf import pci as pci_conf
from nova.pci import devspec
from nova.pci import request

H200 = {"name": "h200", "resource_class": "PGPU", "group_type": "nvlink"}


def _alias(**fields) -> str:
    fields.setdefault('name', 'gpu')
    return json.dumps(fields)


class TestAliasAccepted(test.TestCase):

    def test_hgx_group_alias_in_placement(self):
        aliases = request.get_alias_from_config([json.dumps(H200)])
        alias = aliases['h200']
        self.assertEqual(['h200'], list(aliases))
        self.assertEqual(({'resource_class': 'PGPU'},), alias.specs)
        self.assertEqual('nvlink', alias.group_type)
        self.assertEqual('legacy', alias.numa_policy)
        self.assertIsNone(alias.device_type)
        self.assertEqual('PGPU', alias.resource_class)
        self.assertEqual(set(), alias.traits)

    def test_group_type_lower_cased(self):
        alias = request.get_alias_from_config(
            [_alias(resource_class='PGPU', group_type='PCIe-Switch')])['gpu']
        self.assertEqual('pcie-switch', alias.group_type)

    def test_every_key(self):
        value = _alias(name='  nic  ', vendor_id='8086', product_id='154D',
                       device_type='type-VF', numa_policy='socket',
                       traits='purple,blue', live_migratable='yes',
                       capability_type='pci')
        alias = request.get_alias_from_config([value])['nic']
        self.assertEqual('nic', alias.name)
        # Case of the ids is kept; capability_type is not part of the spec.
        self.assertEqual(({'vendor_id': '8086', 'product_id': '154D',
                           'dev_type': 'type-VF',
                           'traits': 'purple,blue',
                           'live_migratable': 'true'},), alias.specs)
        self.assertEqual('type-VF', alias.device_type)
        self.assertEqual('socket', alias.numa_policy)
        self.assertIsNone(alias.group_type)
        self.assertEqual('CUSTOM_PCI_8086_154D', alias.resource_class)
        self.assertEqual({'CUSTOM_PURPLE', 'CUSTOM_BLUE'}, alias.traits)

    def test_ids_give_default_resource_class(self):
        alias = request.get_alias_from_config(
            [_alias(vendor_id='10de', product_id='2335')])['gpu']
        self.assertEqual('CUSTOM_PCI_10DE_2335', alias.resource_class)

    def test_every_device_type_and_numa_policy(self):
        for dev_type in ('type-PCI', 'type-PF', 'type-VF'):
            alias = request.get_alias_from_config(
                [_alias(resource_class='X', device_type=dev_type)])['gpu']
            self.assertEqual(dev_type, alias.specs[0]['dev_type'])
        for policy in ('legacy', 'preferred', 'required', 'socket'):
            alias = request.get_alias_from_config(
                [_alias(resource_class='X', numa_policy=policy)])['gpu']
            self.assertEqual(policy, alias.numa_policy)
            self.assertNotIn('numa_policy', alias.specs[0])

    def test_live_migratable_normalized(self):
        for raw, expected in (('True', 'true'), ('1', 'true'),
                              ('off', 'false'), ('false', 'false')):
            alias = request.get_alias_from_config(
                [_alias(resource_class='X', live_migratable=raw)])['gpu']
            self.assertEqual(expected, alias.specs[0]['live_migratable'])

    def test_placement_accepts_ids_without_resource_class(self):
        alias = request.get_alias_from_config(
            [_alias(vendor_id='10de', product_id='2335',
                    group_type='nvlink')])['gpu']
        self.assertEqual('CUSTOM_PCI_10DE_2335', alias.resource_class)

    def test_name_of_256_characters(self):
        name = 'n' * 256
        aliases = request.get_alias_from_config(
            [_alias(name=name, resource_class='X')])
        self.assertEqual([name], list(aliases))

    def test_several_aliases(self):
        aliases = request.get_alias_from_config(
            [json.dumps(H200), _alias(name='nic', resource_class='NIC')])
        self.assertEqual(['h200', 'nic'], list(aliases))

    def test_no_values(self):
        self.assertEqual({}, request.get_alias_from_config([]))


class TestAliasMerge(test.TestCase):

    def test_numa_policy_mismatch(self):
        exc = self.assertRaises(
            exception.PciInvalidAlias, request.get_alias_from_config,
            [_alias(vendor_id='10de', product_id='2335'),
             _alias(vendor_id='10de', product_id='2330',
                    numa_policy='required')])
        self.assertIn("NUMA policy mismatch for alias 'gpu'", str(exc))
        self.assertIn("'legacy'", str(exc))
        self.assertIn("'required'", str(exc))

    def test_device_type_mismatch_with_absent(self):
        exc = self.assertRaises(
            exception.PciInvalidAlias, request.get_alias_from_config,
            [_alias(vendor_id='10de', product_id='2335'),
             _alias(vendor_id='10de', product_id='2330',
                    device_type='type-PF')])
        self.assertIn("device_type mismatch for alias 'gpu'", str(exc))
        self.assertIn('unset', str(exc))
        self.assertIn("'type-PF'", str(exc))

    def test_device_type_mismatch(self):
        exc = self.assertRaises(
            exception.PciInvalidAlias, request.get_alias_from_config,
            [_alias(vendor_id='10de', product_id='2335',
                    device_type='type-VF'),
             _alias(vendor_id='10de', product_id='2330',
                    device_type='type-PF')])
        self.assertIn("'type-VF'", str(exc))
        self.assertIn("'type-PF'", str(exc))

    def test_group_type_mismatch(self):
        # Rejected before the one-spec-per-alias rule of Placement applies.
        exc = self.assertRaises(
            exception.PciInvalidAlias, request.get_alias_from_config,
            [json.dumps(H200),
             json.dumps(dict(H200, group_type='pcie-switch'))])
        self.assertIn("group_type mismatch for alias 'h200'", str(exc))
        self.assertIn("'nvlink'", str(exc))
        self.assertIn("'pcie-switch'", str(exc))

    def test_merge_by_stripped_name(self):
        exc = self.assertRaises(
            exception.PciInvalidAlias, request.get_alias_from_config,
            [_alias(name='gpu', vendor_id='10de', product_id='2335'),
             _alias(name=' gpu ', vendor_id='10de', product_id='2330',
                    numa_policy='preferred')])
        self.assertIn("alias 'gpu'", str(exc))


class TestAliasRejected(test.TestCase):

    def _reject(self, value, *expected):
        exc = self.assertRaises(exception.PciInvalidAlias,
                                request.get_alias_from_config, [value])
        message = str(exc)
        self.assertIn('Invalid PCI alias definition', message)
        for text in expected:
            self.assertIn(text, message)
        return message

    def test_not_json(self):
        self._reject('{name: gpu}', '{name: gpu}',
                     'not a valid JSON object')

    def test_not_an_object(self):
        value = json.dumps([H200])
        self._reject(value, value, "is not of type 'object'")

    def test_duplicate_key(self):
        value = ('{"name": "gpu", "resource_class": "X", '
                 '"numa_policy": "legacy", "numa_policy": "required"}')
        self._reject(value, value, "'numa_policy' is given more")

    def test_unknown_key(self):
        value = _alias(resource_class='X', devname='eth0')
        self._reject(value, value, "'devname' was unexpected",
                     'allowed keys are', 'group_type')

    def test_name_missing(self):
        value = json.dumps({'resource_class': 'X'})
        self._reject(value, value, "'name' is a required property")

    def test_bad_names(self):
        for name, problem in (('', "'name' ''"), ('   ', 'must not be blank'),
                              ('n' * 257, 'is too long'),
                              (5, "'name' 5 is not of type 'string'")):
            value = _alias(name=name, resource_class='X')
            self._reject(value, value, problem)

    def test_bad_ids(self):
        for key in ('vendor_id', 'product_id'):
            for bad in ('10d', '10dex', '10dg', '0x10', ' 10de'):
                value = _alias(resource_class='X', **{key: bad})
                self._reject(value, value, "'%s' %r" % (key, bad),
                             'not 4 hexadecimal digits')
            value = _alias(resource_class='X', **{key: 0x10de})
            self._reject(value, value, "'%s' 4318 is not of type" % key)

    def test_non_string_placement_names(self):
        for key, bad in (('resource_class', 5), ('traits', ['CUSTOM_A']),
                         ('resource_class', None)):
            value = _alias(vendor_id='10de', product_id='2335',
                           **{key: bad})
            self._reject(value, value,
                         "'%s' %r is not of type 'string'" % (key, bad))

    def test_bad_device_type(self):
        for bad in ('vdpa', 'type-pci', 'PCI'):
            value = _alias(resource_class='X', device_type=bad)
            self._reject(
                value, value,
                "'device_type' %r is not one of ['type-PCI', 'type-PF', "
                "'type-VF']" % bad)

    def test_bad_numa_policy(self):
        value = _alias(resource_class='X', numa_policy='strict')
        self._reject(value, value,
                     "'numa_policy' 'strict' is not one of ['legacy', "
                     "'preferred', 'required', 'socket']")

    def test_bad_capability_type(self):
        value = _alias(resource_class='X', capability_type='net')
        self._reject(value, value,
                     "'capability_type' 'net' is not one of ['pci']")

    def test_non_string_fields(self):
        for key, bad in (('resource_class', 1), ('traits', ['A', 'B']),
                         ('live_migratable', True), ('group_type', 2)):
            value = _alias(vendor_id='10de', product_id='2335', **{key: bad})
            self._reject(value, value, "'%s'" % key,
                         "is not of type 'string'")

    def test_bad_live_migratable(self):
        value = _alias(resource_class='X', live_migratable='maybe')
        self._reject(value, value, "'live_migratable'", "'maybe'",
                     "'true'", "'false'")

    def test_bad_group_type(self):
        for bad in ('nv1', 'nv_link', '-nvlink', 'nvlink-', ''):
            value = _alias(resource_class='X', group_type=bad)
            self._reject(value, value, 'group type %r' % bad,
                         'letters with optional inner dashes')

    def test_several_errors_reported_together(self):
        value = _alias(vendor_id='zz', device_type='vdpa')
        self._reject(value, "'vendor_id' 'zz'", "'device_type' 'vdpa'")

    def test_placement_needs_ids_or_resource_class(self):
        for fields in ({'vendor_id': '10de'}, {'product_id': '2335'},
                       {'traits': 'A'}, {'resource_class': ''}, {}):
            self._reject(_alias(**fields), "alias 'gpu'",
                         'vendor_id and product_id, or resource_class')

    def test_placement_refuses_ids_ignored_for_resource_class(self):
        # An "h200" alias naming a class shared with H100 NVL GPUs would
        # hand out H100s: Placement picks by class only.
        self._reject(
            _alias(name='h200', vendor_id='10de', product_id='2335',
                   resource_class='PGPU', group_type='nvlink'),
            "alias 'h200' sets resource_class 'PGPU' and vendor_id '10de' "
            "and product_id '2335'", 'vendor_id/product_id would be ignored',
            'drop resource_class', 'own resource_class in [pci]device_spec')
        self._reject(_alias(product_id='2335', resource_class='PGPU'),
                     "product_id '2335'", 'product_id would be ignored')

    def test_placement_one_spec_per_alias(self):
        self._reject_values(
            [_alias(resource_class='A'), _alias(resource_class='B')],
            "alias 'gpu' has 2 specs", 'one spec per alias',
            'same resource_class to several [pci]device_spec')

    def test_help_says_same_name_entries_are_refused(self):
        # The option's help said such entries form one alias matching any
        # of them, while they are refused here (as upstream with
        # pci_in_placement, the only mode aliases have here).
        [alias_opt] = [opt for opt in pci_conf.pci_opts
                       if opt.name == 'alias']
        help_text = ' '.join(alias_opt.help.split())
        self.assertNotIn('matching any of them', help_text)
        self.assertIn('Several values with the same name are read as one '
                      'alias with several specs, which is refused',
                      help_text)
        self.assertIn('same ``resource_class`` in several '
                      '``[pci]device_spec`` entries', help_text)
        self._reject_values(
            [_alias(vendor_id='10de', product_id='2335'),
             _alias(vendor_id='10de', product_id='2330')],
            "alias 'gpu' has 2 specs",
            'same resource_class to several [pci]device_spec entries')

    def _reject_values(self, values, *expected):
        exc = self.assertRaises(exception.PciInvalidAlias,
                                request.get_alias_from_config, values)
        for text in expected:
            self.assertIn(text, str(exc))


class TestParseExtraSpec(test.TestCase):

    def test_accepted(self):
        for value, expected in (
                ('h200:2', [('h200', 2)]),
                (' h200 : 4 , nic:1', [('h200', 4), ('nic', 1)]),
                ('h200:1,h200:1', [('h200', 1), ('h200', 1)]),
                ('my gpu:08', [('my gpu', 8)]),
                ('a-b_c.d:12\t', [('a-b_c.d', 12)])):
            self.assertEqual(expected, request.parse_alias_extra_spec(value))

    def test_rejected(self):
        for value, problem in (
                ('h200', "item 'h200' is not of the form"),
                ('h200:0', "count '0'"),
                ('h200:-1', "count '-1'"),
                ('h200:+2', "count '+2'"),
                ('h200:1.5', "count '1.5'"),
                ('h200:x', "count 'x'"),
                ('h200:', "count ''"),
                ('h200:٣', "count '٣'"),
                ('h200:2,', 'empty item'),
                (',h200:2', 'empty item'),
                ('h200:2,,nic:1', 'empty item'),
                ('', 'empty item'),
                (':2', "item ':2' has no alias name"),
                ('  :2', 'has no alias name'),
                ('h200:2:3', "item 'h200:2:3' is not of the form"),
                ('h200=2', "item 'h200=2' is not of the form")):
            exc = self.assertRaises(exception.PciInvalidFlavorRequest,
                                    request.parse_alias_extra_spec, value)
            self.assertIn('extra spec %r' % value, str(exc))
            self.assertIn(problem, str(exc))
            self.assertIn('<alias name>:<count>', str(exc))

    def test_not_a_string(self):
        exc = self.assertRaises(exception.PciInvalidFlavorRequest,
                                request.parse_alias_extra_spec, 2)
        self.assertIn('not a string', str(exc))


class TestRequestsFromFlavor(test.TestCase):

    def setUp(self):
        super().setUp()
        self.aliases = request.get_alias_from_config(
            [json.dumps(H200),
             _alias(name='nic', vendor_id='8086', product_id='154d',
                    traits='fast', numa_policy='preferred')])

    def test_no_alias_extra_spec(self):
        self.assertEqual([], request.get_pci_requests_from_flavor(
            {}, self.aliases))
        self.assertEqual([], request.get_pci_requests_from_flavor(
            {'pci_passthrough:alias': None, 'hw:cpu_policy': 'dedicated'},
            self.aliases))

    def test_group_alias_request(self):
        (req,) = request.get_pci_requests_from_flavor(
            {'pci_passthrough:alias': 'h200:2'}, self.aliases)
        self.assertEqual('h200', req.alias_name)
        self.assertEqual(2, req.count)
        self.assertEqual([{'resource_class': 'PGPU'}], req.spec)
        self.assertEqual('legacy', req.numa_policy)
        self.assertEqual('nvlink', req.group_type)
        self.assertEqual('PGPU', req.resource_class)
        self.assertEqual(set(), req.traits)
        self.assertEqual(4, uuid.UUID(req.request_id).version)

    def test_several_items(self):
        reqs = request.get_pci_requests_from_flavor(
            {'pci_passthrough:alias': ' h200 : 4 , nic:1'}, self.aliases)
        self.assertEqual([('h200', 4), ('nic', 1)],
                         [(r.alias_name, r.count) for r in reqs])
        nic = reqs[1]
        self.assertEqual([{'vendor_id': '8086', 'product_id': '154d',
                           'traits': 'fast'}], nic.spec)
        self.assertEqual('preferred', nic.numa_policy)
        self.assertIsNone(nic.group_type)
        self.assertEqual('CUSTOM_PCI_8086_154D', nic.resource_class)
        self.assertEqual({'CUSTOM_FAST'}, nic.traits)

    def test_image_numa_policy_after_the_flavor(self):
        specs = {'pci_passthrough:alias': 'h200:2'}
        image = {'hw_pci_numa_affinity_policy': 'required'}
        (req,) = request.get_pci_requests_from_flavor(
            specs, self.aliases, image_properties=image)
        self.assertEqual('required', req.numa_policy)
        (req,) = request.get_pci_requests_from_flavor(
            dict(specs, **{'hw:pci_numa_affinity_policy': 'required'}),
            self.aliases, image_properties=image)
        self.assertEqual('required', req.numa_policy)

    def test_image_numa_policy_conflict_or_bad_value(self):
        specs = {'pci_passthrough:alias': 'h200:2',
                 'hw:pci_numa_affinity_policy': 'preferred'}
        err = self.assertRaises(
            exception.ImagePCINUMAPolicyForbidden,
            request.get_pci_requests_from_flavor, specs, self.aliases,
            image_properties={'hw_pci_numa_affinity_policy': 'required'})
        self.assertIn("'required'", str(err))
        self.assertIn("'preferred'", str(err))
        err = self.assertRaises(
            exception.InvalidPCINUMAAffinity,
            request.get_pci_requests_from_flavor,
            {'pci_passthrough:alias': 'h200:2'}, self.aliases,
            image_properties={'hw_pci_numa_affinity_policy': 'strict'})
        self.assertIn('image property hw_pci_numa_affinity_policy',
                      str(err))

    def test_same_alias_twice_gives_two_requests(self):
        reqs = request.get_pci_requests_from_flavor(
            {'pci_passthrough:alias': 'h200:1,h200:1'}, self.aliases)
        self.assertEqual(2, len(reqs))
        self.assertNotEqual(reqs[0].request_id, reqs[1].request_id)

    def test_fresh_request_ids(self):
        specs = {'pci_passthrough:alias': 'h200:2'}
        first = request.get_pci_requests_from_flavor(specs, self.aliases)
        second = request.get_pci_requests_from_flavor(specs, self.aliases)
        self.assertNotEqual(first[0].request_id, second[0].request_id)

    def test_spec_is_a_copy(self):
        (req,) = request.get_pci_requests_from_flavor(
            {'pci_passthrough:alias': 'h200:2'}, self.aliases)
        req.spec[0]['rp_uuids'] = 'abc'
        req.traits.add('CUSTOM_X')
        self.assertEqual(({'resource_class': 'PGPU'},),
                         self.aliases['h200'].specs)
        self.assertEqual(set(), self.aliases['h200'].traits)

    def test_flavor_numa_policy_overrides_alias(self):
        reqs = request.get_pci_requests_from_flavor(
            {'pci_passthrough:alias': 'h200:2,nic:1',
             'hw:pci_numa_affinity_policy': 'required'}, self.aliases)
        self.assertEqual(['required', 'required'],
                         [r.numa_policy for r in reqs])

    def test_bad_flavor_numa_policy(self):
        exc = self.assertRaises(
            exception.InvalidPCINUMAAffinity,
            request.get_pci_requests_from_flavor,
            {'pci_passthrough:alias': 'h200:2',
             'hw:pci_numa_affinity_policy': 'strict'}, self.aliases)
        self.assertIn("'strict'", str(exc))
        self.assertIn('legacy, preferred, required, socket', str(exc))

    def test_unknown_alias(self):
        exc = self.assertRaises(
            exception.PciRequestAliasNotDefined,
            request.get_pci_requests_from_flavor,
            {'pci_passthrough:alias': 'h200:2,a100:1'}, self.aliases)
        self.assertIn("PCI alias 'a100' is not defined", str(exc))
        self.assertIn('defined aliases: h200, nic', str(exc))
        self.assertEqual(400, exc.code)

    def test_unknown_alias_without_any_defined(self):
        exc = self.assertRaises(
            exception.PciRequestAliasNotDefined,
            request.get_pci_requests_from_flavor,
            {'pci_passthrough:alias': 'h200:2'}, {})
        self.assertIn("'h200'", str(exc))
        self.assertIn('defined aliases: none', str(exc))

    def test_bad_extra_spec_value(self):
        for value in ('h200', 'h200:0', 'h200:x', 'h200:2,', ':2', ''):
            exc = self.assertRaises(exception.PciInvalidFlavorRequest,
                                    request.get_pci_requests_from_flavor,
                                    {'pci_passthrough:alias': value},
                                    self.aliases)
            self.assertIn(repr(value), str(exc))


class TestPciResourceClasses(test.TestCase):

    def test_from_aliases_and_device_specs(self):
        aliases = request.get_alias_from_config(
            [json.dumps(H200), _alias(name='nic', vendor_id='8086',
                                      product_id='154d')])
        classes = request.pci_resource_classes(
            aliases, devspec.Whitelist.from_config([
                '{"vendor_id": "10de", "product_id": "2330"}',
                '{"vendor_id": "10de", "resource_class": "gpu"}',
                '{"address": "1b:", "group_name": "g", '
                '"group_type": "nvlink"}',
                # Wildcard ids without a class: known only per device.
                '{"vendor_id": "10de"}'], True))
        self.assertEqual({'PGPU', 'CUSTOM_PCI_8086_154D',
                          'CUSTOM_PCI_10DE_2330', 'CUSTOM_GPU',
                          'CUSTOM_PCI_GROUP_NVLINK'}, classes)
