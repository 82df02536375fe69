"""Server create/list/show/delete through the API and its views."""

from nova.db import api as db
from nova import exception
from nova.tests.unit.api import fakes


class TestServers(fakes.APITestCase):

    def setUp(self):
        super().setUp()
        self.make_flavor(extra_specs={'pci_passthrough:alias': 'h200:2'})

    def boot(self, name='vm1', token=fakes.MEMBER, **extra):
        body = {'server': {'name': name, 'flavorRef': 'f1',
                           'imageRef': 'cirros', **extra}}
        response = self.request('POST', '/v2.1/servers', body, token=token)
        self.assertEqual(202, response.status_int, response.text)
        return response

    def test_server_without_image_shows_none(self):
        for ref in ('none', ''):
            uuid = self.boot(imageRef=ref).json['server']['id']
            server = self.request('GET', '/v2.1/servers/%s' % uuid,
                                  token=fakes.MEMBER).json['server']
            self.assertEqual('', server['image'])

    def test_create_refuses_an_image_path(self):
        for ref in ('../disk', 'a/b', '.'):
            response = self.request('POST', '/v2.1/servers', {'server': {
                'name': 'vm', 'flavorRef': 'f1', 'imageRef': ref}},
                token=fakes.MEMBER)
            self.assertFault(response, 400, 'badRequest', 'imageRef')

    def test_create_returns_id_links_location(self):
        response = self.boot(metadata={'k': 'v'}, networks='none')
        server = response.json['server']
        self.assertEqual(
            'http://localhost/v2.1/servers/%s' % server['id'],
            response.headers['Location'])
        self.assertEqual(response.headers['Location'],
                         server['links'][0]['href'])
        self.assertEqual([('create', 'vm1', 'f1', 'cirros', {'k': 'v'})],
                         self.compute_api.calls)

    def test_metadata_is_stored_and_changed_by_item(self):
        uuid = self.boot(metadata={'k': 'v'}).json['server']['id']
        url = '/v2.1/servers/%s/metadata' % uuid
        response = self.request('PUT', url + '/pci_defrag',
                                {'meta': {'pci_defrag': 'allow'}},
                                token=fakes.MEMBER)
        self.assertEqual(200, response.status_int, response.text)
        self.assertEqual({'meta': {'pci_defrag': 'allow'}}, response.json)
        self.assertEqual(204, self.request('DELETE', url + '/k',
                                           token=fakes.MEMBER).status_int)
        self.assertEqual({'metadata': {'pci_defrag': 'allow'}},
                         self.request('GET', url, token=fakes.MEMBER).json)
        response = self.request('POST', url, {'metadata': {'a': '1'}},
                                token=fakes.MEMBER)
        self.assertEqual({'metadata': {'pci_defrag': 'allow', 'a': '1'}},
                         response.json)
        self.request('DELETE', url + '/a', token=fakes.MEMBER)
        server = self.request('GET', '/v2.1/servers/%s' % uuid,
                              token=fakes.MEMBER).json['server']
        self.assertEqual({'pci_defrag': 'allow'}, server['metadata'])
        self.assertFault(self.request('DELETE', url + '/k',
                                      token=fakes.MEMBER),
                         404, 'itemNotFound', "'k'")
        self.assertFault(self.request('PUT', url + '/a', {'meta': {'b': 'c'}},
                                      token=fakes.MEMBER),
                         400, 'badRequest', "'a'")
        self.assertFault(self.request('PUT', url + '/a', {'meta': {'a': 'c'}},
                                      token=fakes.OTHER),
                         404, 'itemNotFound', uuid)

    def test_create_accepts_flavor_url(self):
        self.boot(flavorRef='http://localhost/flavors/f1')
        self.assertEqual('f1', self.compute_api.calls[0][2])

    def test_create_unknown_flavor_is_400(self):
        body = {'server': {'name': 'vm1', 'flavorRef': 'nope'}}
        self.assertFault(self.request('POST', '/v2.1/servers', body),
                         400, 'badRequest', "'nope'", 'flavorRef')
        self.assertEqual([], self.compute_api.calls)

    def test_create_requires_name(self):
        body = {'server': {'flavorRef': 'f1'}}
        self.assertFault(self.request('POST', '/v2.1/servers', body),
                         400, 'badRequest', 'name')

    def test_create_checks_the_server_counts(self):
        for counts, field in (({'max_count': 0}, 'max_count'),
                              ({'min_count': '0'}, 'min_count'),
                              ({'min_count': 'two'}, 'min_count'),
                              ({'max_count': 1.5}, 'max_count'),
                              ({'min_count': 3, 'max_count': 2},
                               'max_count'),
                              ({'return_reservation_id': 'maybe'},
                               'return_reservation_id')):
            body = {'server': dict(counts, name='a', flavorRef='f1')}
            self.assertFault(self.request('POST', '/v2.1/servers', body),
                             400, 'badRequest', field)
        self.assertEqual([], self.compute_api.calls)

    def test_compute_api_errors_are_mapped(self):
        def fail(*args, **kwargs):
            raise exception.PciRequestAliasNotDefined(alias='h100')
        self.compute_api.create = fail
        body = {'server': {'name': 'a', 'flavorRef': 'f1'}}
        self.assertFault(self.request('POST', '/v2.1/servers', body),
                         400, 'badRequest', 'h100')

    def test_show_member_view(self):
        uuid = self.boot().json['server']['id']
        server = self.request('GET', '/v2.1/servers/%s' % uuid,
                              token=fakes.MEMBER,
                              version='2.47').json['server']
        self.assertEqual((uuid, 'vm1', 'BUILD', 'building', 'scheduling'),
                         (server['id'], server['name'], server['status'],
                          server['OS-EXT-STS:vm_state'],
                          server['OS-EXT-STS:task_state']))
        self.assertEqual({'original_name': 'small', 'vcpus': 2,
                          'ram': 2048, 'disk': 20, 'ephemeral': 0,
                          'swap': 0,
                          'extra_specs': {'pci_passthrough:alias': 'h200:2'}},
                         server['flavor'])
        # The image as upstream shows it: its id and a bookmark link.
        self.assertEqual(({}, 'cirros', 'proj-a', 'alice'),
                         (server['addresses'], server['image']['id'],
                          server['tenant_id'], server['user_id']))
        self.assertEqual('http://localhost/images/cirros',
                         server['image']['links'][0]['href'])
        self.assertNotIn('OS-EXT-SRV-ATTR:host', server)
        self.assertNotIn('OS-EXT-SRV-ATTR:hypervisor_hostname', server)
        self.assertNotIn('fault', server)
        self.assertRegex(server['created'],
                         r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$')

    def test_flavor_link_before_2_47(self):
        uuid = self.boot().json['server']['id']
        server = self.request('GET', '/v2.1/servers/%s' % uuid,
                              token=fakes.MEMBER).json['server']
        self.assertEqual('f1', server['flavor']['id'])
        self.assertNotIn('original_name', server['flavor'])

    def test_admin_sees_host_and_error_fault(self):
        uuid = self.boot().json['server']['id']
        db.instance_update(self.admin_context, uuid, {
            'vm_state': 'error', 'task_state': None, 'host': 'cmp1',
            'node': 'cmp1.example', 'fault_message': 'No valid host',
            'fault_details': 'no free nvlink pair'})
        server = self.request('GET', '/v2.1/servers/%s' % uuid,
                              token=fakes.ADMIN).json['server']
        self.assertEqual('ERROR', server['status'])
        self.assertEqual('cmp1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('cmp1.example',
                         server['OS-EXT-SRV-ATTR:hypervisor_hostname'])
        fault = server['fault']
        self.assertEqual((500, 'No valid host', 'no free nvlink pair'),
                         (fault['code'], fault['message'], fault['details']))
        self.assertIn('created', fault)

        member = self.request('GET', '/v2.1/servers/%s' % uuid,
                              token=fakes.MEMBER).json['server']
        self.assertEqual('No valid host', member['fault']['message'])
        self.assertNotIn('details', member['fault'])
        self.assertNotIn('OS-EXT-SRV-ATTR:host', member)
        self.assertNotEqual('', member['hostId'])
        self.assertNotIn('cmp1', member['hostId'])

    def test_active_status(self):
        uuid = self.boot().json['server']['id']
        db.instance_update(self.admin_context, uuid,
                           {'vm_state': 'active', 'task_state': None})
        server = self.request('GET', '/v2.1/servers/%s' % uuid,
                              token=fakes.MEMBER).json['server']
        self.assertEqual('ACTIVE', server['status'])

    def test_list_is_scoped_to_project(self):
        mine = self.boot('mine').json['server']['id']
        theirs = self.boot('theirs', token=fakes.OTHER).json['server']['id']
        listed = self.request('GET', '/v2.1/servers',
                              token=fakes.MEMBER).json['servers']
        self.assertEqual([mine], [s['id'] for s in listed])
        self.assertEqual({'id', 'name', 'links'}, set(listed[0]))
        detail = self.request('GET', '/v2.1/servers/detail',
                              token=fakes.OTHER).json['servers']
        self.assertEqual([theirs], [s['id'] for s in detail])
        self.assertEqual('BUILD', detail[0]['status'])

    def test_all_tenants_is_admin_only(self):
        self.boot('mine')
        self.boot('theirs', token=fakes.OTHER)
        listed = self.request('GET', '/v2.1/servers?all_tenants=1',
                              token=fakes.ADMIN).json['servers']
        self.assertEqual({'mine', 'theirs'}, {s['name'] for s in listed})
        self.assertFault(self.request('GET', '/v2.1/servers?all_tenants=1',
                                      token=fakes.MEMBER),
                         403, 'forbidden')

    def test_list_filters_by_name_and_status(self):
        self.boot('alpha')
        self.boot('beta')
        names = [s['name'] for s in self.request(
            'GET', '/v2.1/servers?name=alp', token=fakes.MEMBER)
            .json['servers']]
        self.assertEqual(['alpha'], names)
        names = [s['name'] for s in self.request(
            'GET', '/v2.1/servers/detail?status=ACTIVE',
            token=fakes.MEMBER).json['servers']]
        self.assertEqual([], names)

    def test_other_project_gets_404(self):
        uuid = self.boot().json['server']['id']
        for method in ('GET', 'DELETE'):
            self.assertFault(
                self.request(method, '/v2.1/servers/%s' % uuid,
                             token=fakes.OTHER),
                404, 'itemNotFound', uuid)
        self.assertNotIn(('delete', uuid), self.compute_api.calls)

    def test_delete(self):
        uuid = self.boot().json['server']['id']
        response = self.request('DELETE', '/v2.1/servers/%s' % uuid,
                                token=fakes.MEMBER)
        self.assertEqual(204, response.status_int)
        self.assertIn(('delete', uuid), self.compute_api.calls)
        self.assertFault(self.request('GET', '/v2.1/servers/%s' % uuid),
                         404, 'itemNotFound', uuid)

    def test_missing_server_is_404(self):
        self.assertFault(self.request('GET', '/v2.1/servers/nope'),
                         404, 'itemNotFound', 'nope')

    def test_later_microversion_fields(self):
        uuid = self.boot().json['server']['id']
        server = self.request('GET', '/v2.1/servers/%s' % uuid,
                              version='2.96').json['server']
        self.assertIsNone(server['pinned_availability_zone'])
        self.assertEqual([], server['tags'])
        old = self.request('GET', '/v2.1/servers/%s' % uuid).json['server']
        self.assertNotIn('tags', old)


class TestServerListQuery(fakes.APITestCase):
    """The filters and sort keys of GET /servers, as upstream's."""

    def setUp(self):
        super().setUp()
        self.make_flavor()
        self.make_flavor('f2', 'other')
        self.ids = {}
        for name, flavor, image in (('web-1', 'f1', 'cirros'),
                                    ('web-2', 'f2', 'none'),
                                    ('db-1', 'f1', 'none')):
            self.ids[name] = self.request('POST', '/v2.1/servers', {
                'server': {'name': name, 'flavorRef': flavor,
                           'imageRef': image}},
                token=fakes.MEMBER).json['server']['id']
        db.instance_update(self.admin_context, self.ids['db-1'],
                           {'vm_state': 'active', 'task_state': None,
                            'host': 'cmp2'})

    def names(self, query, token=fakes.MEMBER, version=None):
        response = self.request('GET', '/v2.1/servers/detail?' + query,
                                token=token, version=version)
        self.assertEqual(200, response.status_int, response.text)
        return [s['name'] for s in response.json['servers']]

    def test_name_is_a_regular_expression(self):
        self.assertEqual({'web-1', 'web-2'},
                         set(self.names('name=^web-')))
        self.assertEqual(['db-1'], self.names('name=^d.-1$'))
        self.assertFault(self.request('GET', '/v2.1/servers?name=%28',
                                      token=fakes.MEMBER),
                         400, 'badRequest', 'name', "'('")

    def test_flavor_image_and_status(self):
        self.assertEqual({'web-1', 'db-1'}, set(self.names('flavor=f1')))
        self.assertEqual(['web-2'], self.names(
            'flavor=http://localhost/flavors/f2'))
        self.assertEqual(['web-1'], self.names('image=cirros'))
        self.assertEqual([], self.names('flavor=nope'))
        self.assertEqual(['db-1'], self.names('status=ACTIVE'))
        self.assertEqual({'web-1', 'web-2', 'db-1'}, set(self.names(
            'status=ACTIVE&status=BUILD')))
        # An unknown status lists nothing before 2.38, is a 400 after.
        self.assertEqual([], self.names('status=WEIRD'))
        self.assertFault(self.request(
            'GET', '/v2.1/servers?status=WEIRD', token=fakes.MEMBER,
            version='2.38'), 400, 'badRequest', "'WEIRD'", 'ACTIVE')

    def test_changes_since_and_before(self):
        self.assertEqual(3, len(self.names('changes-since=2000-01-01')))
        self.assertEqual([], self.names(
            'changes-since=2999-01-01T00:00:00Z'))
        self.assertEqual([], self.names('changes-before=2000-01-01',
                                        version='2.66'))
        self.assertFault(self.request(
            'GET', '/v2.1/servers?changes-since=yesterday',
            token=fakes.MEMBER), 400, 'badRequest', 'changes-since',
            "'yesterday'")

    def test_no_server_has_an_address(self):
        self.assertEqual([], self.names('ip=10.0.0.1'))

    def test_sort_keys(self):
        self.assertEqual(['db-1', 'web-1', 'web-2'], self.names(
            'sort_key=display_name&sort_dir=asc'))
        self.assertEqual(['web-2', 'web-1', 'db-1'], self.names(
            'sort_key=display_name'))
        self.assertFault(self.request(
            'GET', '/v2.1/servers?sort_key=colour', token=fakes.MEMBER),
            400, 'badRequest', "'colour'", 'display_name')
        self.assertFault(self.request(
            'GET', '/v2.1/servers?sort_key=uuid&sort_dir=up',
            token=fakes.MEMBER), 400, 'badRequest', "'up'")

    def test_admin_only_filters(self):
        # An admin's host filter filters; a member's is dropped, as
        # upstream.
        self.assertEqual(['db-1'], self.names('host=cmp2&all_tenants=1',
                                              token=fakes.ADMIN))
        self.assertEqual(3, len(self.names('host=cmp2')))
        self.assertEqual(['db-1'], self.names(
            'vm_state=active&all_tenants=1', token=fakes.ADMIN))
