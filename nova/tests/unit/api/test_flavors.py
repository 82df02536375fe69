"""Flavor CRUD, extra specs, pci_passthrough:alias checks, admin policy."""

from nova.tests.unit.api import fakes

FLAVOR_BODY = {'flavor': {'name': 'gpu.2', 'ram': 4096, 'vcpus': 8,
                          'disk': 40, 'id': 'gpu2'}}


class TestFlavors(fakes.APITestCase):

    def test_create_show_list_delete(self):
        response = self.request('POST', '/v2.1/flavors', FLAVOR_BODY)
        self.assertEqual(200, response.status_int, response.text)
        flavor = response.json['flavor']
        self.assertEqual(('gpu2', 'gpu.2', 4096, 8, 40),
                         (flavor['id'], flavor['name'], flavor['ram'],
                          flavor['vcpus'], flavor['disk']))
        self.assertEqual('http://localhost/v2.1/flavors/gpu2',
                         flavor['links'][0]['href'])

        shown = self.request('GET', '/v2.1/flavors/gpu2',
                             token=fakes.MEMBER).json['flavor']
        self.assertEqual(flavor, shown)
        listed = self.request('GET', '/v2.1/flavors').json['flavors']
        self.assertEqual([{'id': 'gpu2', 'name': 'gpu.2',
                           'links': flavor['links']}], listed)
        detail = self.request('GET', '/v2.1/flavors/detail').json
        self.assertEqual([flavor], detail['flavors'])

        self.assertEqual(202, self.request(
            'DELETE', '/v2.1/flavors/gpu2').status_int)
        self.assertFault(self.request('GET', '/v2.1/flavors/gpu2'),
                         404, 'itemNotFound', 'gpu2')

    def test_create_without_id_gets_uuid(self):
        body = {'flavor': dict(FLAVOR_BODY['flavor'], id=None)}
        flavor = self.request('POST', '/v2.1/flavors', body).json['flavor']
        self.assertEqual(36, len(flavor['id']))

    def test_create_with_a_number_id(self):
        # Tempest and other clients send an integer id; upstream stores
        # its decimal form.
        for index, (sent, stored) in enumerate(
                ((12345, '12345'), (7.0, '7'), (' x1 ', 'x1'))):
            body = {'flavor': dict(FLAVOR_BODY['flavor'], id=sent,
                                   name='f%d' % index)}
            response = self.request('POST', '/v2.1/flavors', body)
            self.assertEqual(200, response.status_int, response.text)
            self.assertEqual(stored, response.json['flavor']['id'])
            self.assertEqual(200, self.request(
                'GET', '/v2.1/flavors/' + stored).status_int)
        for bad in (True, [1], 'bad/id'):
            body = {'flavor': dict(FLAVOR_BODY['flavor'], id=bad)}
            self.assertFault(self.request('POST', '/v2.1/flavors', body),
                             400, 'badRequest', 'id')

    def test_is_public_spellings_as_upstream(self):
        for index, (sent, public) in enumerate(
                ((True, True), ('True', True), ('yes', True),
                 (False, False), ('False', False), ('0', False))):
            body = {'flavor': dict(
                FLAVOR_BODY['flavor'], id='p%d' % index, name='p%d' % index,
                **{'os-flavor-access:is_public': sent})}
            response = self.request('POST', '/v2.1/flavors', body)
            self.assertEqual(200, response.status_int, response.text)
            self.assertIs(public, response.json['flavor'][
                'os-flavor-access:is_public'], sent)
        body = {'flavor': dict(FLAVOR_BODY['flavor'],
                               **{'os-flavor-access:is_public': 'maybe'})}
        self.assertFault(self.request('POST', '/v2.1/flavors', body),
                         400, 'badRequest', 'is_public', 'maybe')

    def test_create_duplicate_name_is_409(self):
        self.make_flavor(name='gpu.2')
        self.assertFault(self.request('POST', '/v2.1/flavors', FLAVOR_BODY),
                         409, 'conflictingRequest', 'gpu.2')

    def test_create_rejects_bad_ram(self):
        body = {'flavor': dict(FLAVOR_BODY['flavor'], ram=0)}
        self.assertFault(self.request('POST', '/v2.1/flavors', body),
                         400, 'badRequest', 'ram')

    def test_create_sizes_beyond_database_range_are_400(self):
        cases = [('ram', 2 ** 31, 1), ('ram', '99999999999999999999', 1),
                 ('ram', 0, 1), ('vcpus', 0, 1), ('vcpus', -1, 1),
                 ('vcpus', True, 1), ('vcpus', 1.5, 1),
                 ('disk', -1, 0), ('disk', 2 ** 63, 0),
                 ('OS-FLV-EXT-DATA:ephemeral', 2 ** 40, 0)]
        for field, value, minimum in cases:
            body = {'flavor': dict(FLAVOR_BODY['flavor'], **{field: value})}
            self.assertFault(
                self.request('POST', '/v2.1/flavors', body), 400,
                'badRequest', 'field %s' % field, repr(value),
                'integer from %d to 2147483647' % minimum)
        self.assertEqual([], self.request('GET', '/v2.1/flavors')
                         .json['flavors'])

    def test_create_largest_sizes(self):
        body = {'flavor': dict(FLAVOR_BODY['flavor'], ram=2 ** 31 - 1,
                               vcpus='2147483647', disk=2 ** 31 - 1)}
        response = self.request('POST', '/v2.1/flavors', body)
        self.assertEqual(200, response.status_int, response.text)
        self.assertEqual(2 ** 31 - 1, response.json['flavor']['ram'])
        self.assertEqual(2 ** 31 - 1, response.json['flavor']['vcpus'])

    def test_create_rejects_unstored_swap(self):
        body = {'flavor': dict(FLAVOR_BODY['flavor'], swap=512)}
        self.assertFault(self.request('POST', '/v2.1/flavors', body),
                         400, 'badRequest', 'swap', '512')

    def test_member_cannot_create_or_delete(self):
        self.assertFault(self.request('POST', '/v2.1/flavors', FLAVOR_BODY,
                                      token=fakes.MEMBER),
                         403, 'forbidden', 'os-flavor-manage:create')
        self.make_flavor()
        self.assertFault(self.request('DELETE', '/v2.1/flavors/f1',
                                      token=fakes.MEMBER),
                         403, 'forbidden')
        self.assertEqual(200, self.request('GET', '/v2.1/flavors/f1')
                         .status_int)

    def test_microversion_fields(self):
        self.make_flavor(extra_specs={'hw:cpu_policy': 'dedicated'})
        old = self.request('GET', '/v2.1/flavors/f1').json['flavor']
        self.assertNotIn('extra_specs', old)
        self.assertEqual('', old['swap'])
        new = self.request('GET', '/v2.1/flavors/f1',
                           version='2.75').json['flavor']
        self.assertEqual({'hw:cpu_policy': 'dedicated'}, new['extra_specs'])
        self.assertEqual(0, new['swap'])
        self.assertIsNone(new['description'])

    def test_private_flavors_only_for_admins_asking(self):
        self.make_flavor()
        self.make_flavor('f2', 'hidden', is_public=False)
        ids = [f['id'] for f in self.request(
            'GET', '/v2.1/flavors?is_public=none').json['flavors']]
        self.assertEqual(['f1', 'f2'], ids)
        ids = [f['id'] for f in self.request(
            'GET', '/v2.1/flavors?is_public=none',
            token=fakes.MEMBER).json['flavors']]
        self.assertEqual(['f1'], ids)

    def test_min_ram_limit_and_marker(self):
        self.make_flavor('f1', 'a', memory_mb=512)
        self.make_flavor('f2', 'b', memory_mb=4096)
        self.make_flavor('f3', 'c', memory_mb=8192)
        ids = [f['id'] for f in self.request(
            'GET', '/v2.1/flavors?minRam=1024').json['flavors']]
        self.assertEqual(['f2', 'f3'], ids)
        ids = [f['id'] for f in self.request(
            'GET', '/v2.1/flavors?marker=f1&limit=1').json['flavors']]
        self.assertEqual(['f2'], ids)


class TestExtraSpecs(fakes.APITestCase):

    def setUp(self):
        super().setUp()
        self.make_flavor()
        self.url = '/v2.1/flavors/f1/os-extra_specs'

    def test_set_list_show_update_delete(self):
        response = self.request('POST', self.url, {'extra_specs': {
            'pci_passthrough:alias': 'h200:2', 'hw:numa_nodes': 1}})
        self.assertEqual(200, response.status_int, response.text)
        self.assertEqual({'pci_passthrough:alias': 'h200:2',
                          'hw:numa_nodes': '1'},
                         response.json['extra_specs'])
        self.assertEqual(
            {'pci_passthrough:alias': 'h200:2', 'hw:numa_nodes': '1'},
            self.request('GET', self.url,
                         token=fakes.MEMBER).json['extra_specs'])
        key_url = self.url + '/pci_passthrough:alias'
        self.assertEqual({'pci_passthrough:alias': 'h200:2'},
                         self.request('GET', key_url).json)
        response = self.request('PUT', key_url,
                                {'pci_passthrough:alias': 'h200:4'})
        self.assertEqual({'pci_passthrough:alias': 'h200:4'}, response.json)
        self.assertEqual(200, self.request('DELETE', key_url).status_int)
        self.assertEqual({'hw:numa_nodes': '1'},
                         self.request('GET', self.url).json['extra_specs'])
        self.assertFault(self.request('GET', key_url), 404, 'itemNotFound',
                         'pci_passthrough:alias')

    def test_unknown_alias_is_400_naming_value_and_defined(self):
        response = self.request('POST', self.url, {'extra_specs': {
            'pci_passthrough:alias': 'h100:2'}})
        self.assertFault(response, 400, 'badRequest', "'h100:2'",
                         "'h100' not defined", 'aliases defined: h200')
        self.assertEqual({}, self.request('GET', self.url)
                         .json['extra_specs'])

    def test_bad_alias_syntax_is_400(self):
        for value in ('h200', 'h200:0', 'h200:2,', 'h200:two'):
            response = self.request('PUT', self.url + '/pci_passthrough:alias',
                                    {'pci_passthrough:alias': value})
            self.assertFault(response, 400, 'badRequest', repr(value),
                             'defined in [pci]alias: h200')

    def test_no_aliases_configured(self):
        self.config.config(alias=[], group='pci')
        response = self.request('POST', self.url, {'extra_specs': {
            'pci_passthrough:alias': 'h200:1'}})
        self.assertFault(response, 400, 'badRequest', 'aliases defined: none')

    def test_unknown_pci_key_is_400(self):
        response = self.request('POST', self.url, {'extra_specs': {
            'pci_passthrough:aliases': 'h200:1'}})
        self.assertFault(response, 400, 'badRequest',
                         'pci_passthrough:aliases',
                         'supported keys: pci_passthrough:alias')

    def test_hw_key_nothing_acts_on_is_400(self):
        # Upstream's keys this fork does not implement would be stored
        # and ignored: the guest would not get what the flavor says.
        for key, value in (('hw:cpu_policy', 'dedicated'),
                           ('hw:numa_node', '2')):
            for method, url, body in (
                    ('POST', self.url, {'extra_specs': {key: value}}),
                    ('PUT', self.url + '/' + key, {key: value})):
                self.assertFault(
                    self.request(method, url, body), 400, 'badRequest', key,
                    'unsupported key in the hw: namespace',
                    'supported keys: hw:firmware_type, hw:machine_type, '
                    'hw:mem_page_size, hw:numa_nodes, '
                    'hw:pci_numa_affinity_policy')
        self.assertEqual({}, self.request('GET', self.url)
                         .json['extra_specs'])

    def test_mem_page_size_accepted_as_upstream(self):
        # The flavor has 2048 MiB: a whole number of pages of each size.
        for value in ('small', 'large', 'any', '2MB', '1GB', '1GiB', '2M',
                      '2048', '1048576', '4'):
            for method, url, body in (
                    ('POST', self.url,
                     {'extra_specs': {'hw:mem_page_size': value}}),
                    ('PUT', self.url + '/hw:mem_page_size',
                     {'hw:mem_page_size': value})):
                response = self.request(method, url, body)
                self.assertEqual(200, response.status_int, response.text)
            self.assertEqual(
                {'hw:mem_page_size': value},
                self.request('GET', self.url).json['extra_specs'])

    def test_bad_mem_page_size_is_400_naming_allowed(self):
        for value in ('huge', '3MB', '1.5GB', '0', '2048X', '-2048', ''):
            for method, url, body in (
                    ('POST', self.url,
                     {'extra_specs': {'hw:mem_page_size': value}}),
                    ('PUT', self.url + '/hw:mem_page_size',
                     {'hw:mem_page_size': value})):
                self.assertFault(
                    self.request(method, url, body), 400, 'badRequest',
                    'hw:mem_page_size=%r' % value, 'small, large, any',
                    '2MB or 1GB', '2048 or 1048576')
        self.assertEqual({}, self.request('GET', self.url)
                         .json['extra_specs'])

    def test_mem_page_size_must_divide_each_cell(self):
        # 2048 MiB in two cells of 1024 MiB: 2 GiB pages do not fit.
        response = self.request('POST', self.url, {'extra_specs': {
            'hw:mem_page_size': '2GB', 'hw:numa_nodes': '2'}})
        self.assertFault(response, 400, 'badRequest', "'2GB'",
                         '2 NUMA cell(s) has 1024 MiB',
                         'whole number of 2097152 KiB pages')
        self.assertEqual({}, self.request('GET', self.url)
                         .json['extra_specs'])

    def test_bad_numa_policy_is_400(self):
        response = self.request('POST', self.url, {'extra_specs': {
            'hw:pci_numa_affinity_policy': 'strict'}})
        self.assertFault(response, 400, 'badRequest', "'strict'", 'socket')

    def test_unworkable_placement_specs_are_400(self):
        self.config.config(
            alias=['{"name": "h200", "resource_class": "PGPU"}'],
            group='pci')
        self.config.config(pci_in_placement=True, group='filter_scheduler')
        cases = [
            ('resources:PGPU', '1', 'PCI device resource class'),
            ('resources:CUSTOM_PCI_10DE_2335', '1',
             'pci_passthrough:alias=<alias>:<count>'),
            ('resources1:PGPU', '1', 'granular request groups'),
            ('resources:VCPUS', '2', 'not a standard resource class'),
            ('resources:VCPU', 'two', 'integer from 0 to 2147483647'),
            ('resources:MEMORY_MB', '99999999999', 'integer from 0'),
            ('trait:CUSTOM_X', 'preferred', 'required, forbidden'),
            ('trait:NOT_A_TRAIT', 'required', 'not a standard trait'),
            ('group_policy', 'spread', 'allowed values are none, isolate'),
        ]
        for key, value, allowed in cases:
            for method, url, body in (
                    ('POST', self.url, {'extra_specs': {key: value}}),
                    ('PUT', self.url + '/' + key, {key: value})):
                response = self.request(method, url, body)
                self.assertFault(response, 400, 'badRequest',
                                 '%s=%r' % (key, value), allowed)
        self.assertEqual({}, self.request('GET', self.url)
                         .json['extra_specs'])

    def test_workable_placement_specs_are_stored(self):
        specs = {'resources:VCPU': '2', 'resources:CUSTOM_MAGIC': '1',
                 'trait:HW_CPU_X86_AVX2': 'required',
                 'group_policy': 'isolate'}
        response = self.request('POST', self.url, {'extra_specs': specs})
        self.assertEqual(200, response.status_int, response.text)
        self.assertEqual(specs, self.request('GET', self.url)
                         .json['extra_specs'])

    def test_put_body_must_match_url(self):
        response = self.request('PUT', self.url + '/hw:numa_nodes',
                                {'hw:cpu_policy': 'dedicated'})
        self.assertFault(response, 400, 'badRequest', 'hw:cpu_policy',
                         'hw:numa_nodes')
        response = self.request('PUT', self.url + '/hw:numa_nodes',
                                {'hw:numa_nodes': '1', 'x': '2'})
        self.assertFault(response, 400, 'badRequest', 'exactly one')

    def test_member_cannot_write(self):
        body = {'extra_specs': {'hw:numa_nodes': '1'}}
        self.assertFault(self.request('POST', self.url, body,
                                      token=fakes.MEMBER), 403, 'forbidden')
        self.assertFault(self.request('PUT', self.url + '/hw:numa_nodes',
                                      {'hw:numa_nodes': '1'},
                                      token=fakes.MEMBER), 403, 'forbidden')
        self.assertFault(self.request('DELETE', self.url + '/hw:numa_nodes',
                                      token=fakes.MEMBER), 403, 'forbidden')
        self.assertEqual({}, self.request('GET', self.url)
                         .json['extra_specs'])

    def test_missing_flavor_is_404(self):
        response = self.request('POST', '/v2.1/flavors/nope/os-extra_specs',
                                {'extra_specs': {'hw:numa_nodes': '1'}})
        self.assertFault(response, 404, 'itemNotFound', 'nope')
