"""``/os-server-groups`` through the WSGI application: shapes per
microversion, validation, scoping, and the ``group`` scheduler hint of a
boot (the scheduling itself: nova.tests.functional.test_server_groups).
"""

from oslo_utils import uuidutils

from nova.db import api as db
from nova.tests.unit.api import fakes

PATH = '/v2.1/os-server-groups'


class ServerGroupsTestCase(fakes.APITestCase):

    def create(self, body, version=None, token=fakes.MEMBER, status=200):
        response = self.request('POST', PATH, {'server_group': body},
                                token=token, version=version)
        self.assertEqual(status, response.status_int, response.text)
        return response.json.get('server_group') if status == 200 \
            else response

    def show(self, group_id, version=None, token=fakes.MEMBER):
        response = self.request('GET', '%s/%s' % (PATH, group_id),
                                token=token, version=version)
        self.assertEqual(200, response.status_int, response.text)
        return response.json['server_group']


class TestShapes(ServerGroupsTestCase):

    def test_2_1_policies_list_and_metadata(self):
        group = self.create({'name': 'g1', 'policies': ['anti-affinity']})
        self.assertEqual({'id', 'name', 'policies', 'members', 'metadata'},
                         set(group))
        self.assertEqual(['anti-affinity'], group['policies'])
        self.assertEqual({}, group['metadata'])
        self.assertEqual([], group['members'])
        self.assertEqual(group, self.show(group['id']))

    def test_2_13_shows_the_owner(self):
        group = self.create({'name': 'g1', 'policies': ['affinity']},
                            version='2.13')
        self.assertEqual('proj-a', group['project_id'])
        self.assertEqual('alice', group['user_id'])
        self.assertNotIn('project_id', self.show(group['id'],
                                                 version='2.12'))

    def test_2_15_takes_the_soft_policies(self):
        for policy in ('soft-affinity', 'soft-anti-affinity'):
            group = self.create({'name': 'g', 'policies': [policy]},
                                version='2.15')
            self.assertEqual([policy], group['policies'])

    def test_2_64_policy_and_rules(self):
        group = self.create({'name': 'g', 'policy': 'anti-affinity',
                             'rules': {'max_server_per_host': '3'}},
                            version='2.64')
        self.assertEqual({'id', 'name', 'policy', 'rules', 'members',
                          'project_id', 'user_id'}, set(group))
        self.assertEqual({'max_server_per_host': 3}, group['rules'])
        # Older microversions show the same group in their shape.
        self.assertEqual(['anti-affinity'],
                         self.show(group['id'], version='2.63')['policies'])
        plain = self.create({'name': 'p', 'policy': 'affinity'},
                            version='2.64')
        self.assertEqual({}, plain['rules'])

    def test_list_scoped_to_the_project_paged_and_all_projects(self):
        mine = [self.create({'name': 'g%d' % n,
                             'policies': ['affinity']})['id']
                for n in range(3)]
        theirs = self.create({'name': 'x', 'policies': ['affinity']},
                             token=fakes.OTHER)['id']

        def listed(query='', token=fakes.MEMBER, version=None):
            response = self.request('GET', PATH + query, token=token,
                                    version=version)
            self.assertEqual(200, response.status_int, response.text)
            return [g['id'] for g in response.json['server_groups']]

        self.assertEqual(mine, listed())
        self.assertEqual(mine[1:], listed('?offset=1'))
        self.assertEqual(mine[1:2], listed('?offset=1&limit=1'))
        self.assertEqual(mine + [theirs],
                         listed('?all_projects=True', token=fakes.ADMIN))
        response = self.request('GET', PATH + '?all_projects=True',
                                token=fakes.MEMBER)
        self.assertFault(response, 403, 'forbidden', 'all_projects')
        # Unknown parameters are ignored before 2.75 and refused after.
        self.assertEqual(mine, listed('?sort=name', version='2.74'))
        response = self.request('GET', PATH + '?sort=name', version='2.75',
                                token=fakes.MEMBER)
        self.assertFault(response, 400, 'badRequest', "'sort'")

    def test_delete_and_other_projects(self):
        group = self.create({'name': 'g', 'policies': ['affinity']})
        response = self.request('GET', '%s/%s' % (PATH, group['id']),
                                token=fakes.OTHER)
        self.assertFault(response, 403, 'forbidden')
        response = self.request('DELETE', '%s/%s' % (PATH, group['id']),
                                token=fakes.OTHER)
        self.assertFault(response, 403, 'forbidden')
        response = self.request('DELETE', '%s/%s' % (PATH, group['id']),
                                token=fakes.MEMBER)
        self.assertEqual(204, response.status_int)
        response = self.request('GET', '%s/%s' % (PATH, group['id']),
                                token=fakes.MEMBER)
        self.assertFault(response, 404, 'itemNotFound', group['id'])


class TestValidation(ServerGroupsTestCase):

    def assertRefused(self, body, version, *fragments):
        response = self.create(body, version=version, status=400)
        self.assertFault(response, 400, 'badRequest', *fragments)

    def test_bad_bodies_are_refused_naming_the_value(self):
        self.assertRefused({'name': 'g', 'policies': ['best-effort']},
                           None, "'best-effort'")
        # The soft policies need 2.15.
        self.assertRefused({'name': 'g', 'policies': ['soft-affinity']},
                           '2.14', "'soft-affinity'")
        self.assertRefused({'name': 'g', 'policies': ['affinity',
                                                      'anti-affinity']},
                           None, 'policies')
        self.assertRefused({'name': 'g', 'policies': []}, None, 'policies')
        self.assertRefused({'name': ' g', 'policies': ['affinity']}, None,
                           'name')
        self.assertRefused({'name': 'g', 'policies': ['affinity'],
                            'metadata': {}}, None, 'metadata')
        # 2.64: one policy, its rules; no policies list.
        self.assertRefused({'name': 'g', 'policies': ['affinity']}, '2.64',
                           "'policy' is a required property")
        self.assertRefused({'name': 'g', 'policy': 'affinity',
                            'rules': {'max_server_per_host': 2}}, '2.64',
                           'Only anti-affinity policy supports rules',
                           "'affinity'")
        self.assertRefused({'name': 'g', 'policy': 'anti-affinity',
                            'rules': {'max_server_per_host': 0}}, '2.64',
                           'max_server_per_host', '0')
        self.assertRefused({'name': 'g', 'policy': 'anti-affinity',
                            'rules': {'max_servers': 2}}, '2.64',
                           'max_servers')
        self.assertEqual([], db.instance_group_get_all(self.admin_context))


class TestSchedulerHint(ServerGroupsTestCase):

    def setUp(self):
        super().setUp()
        self.make_flavor()

    def boot(self, hints, token=fakes.MEMBER):
        return self.request('POST', '/v2.1/servers', {
            'server': {'name': 'vm', 'flavorRef': 'f1'},
            'os:scheduler_hints': hints}, token=token)

    def test_unknown_or_malformed_group_is_refused(self):
        missing = uuidutils.generate_uuid()
        self.assertFault(self.boot({'group': missing}), 400, 'badRequest',
                         missing)
        self.assertFault(self.boot({'group': 'not-a-uuid'}), 400,
                         'badRequest', "'not-a-uuid'")
        theirs = self.create({'name': 'x', 'policies': ['affinity']},
                             token=fakes.OTHER)['id']
        self.assertFault(self.boot({'group': theirs}), 400, 'badRequest',
                         theirs)
        self.assertEqual([], db.instance_get_all(self.admin_context))

    def test_other_hints_are_ignored_with_a_warning(self):
        with self.assertLogs('nova.api.server_groups', 'WARNING') as logs:
            response = self.boot({'same_host': uuidutils.generate_uuid(),
                                  'different_cell': 'c1'})
        self.assertEqual(202, response.status_int, response.text)
        self.assertIn('Scheduler hints different_cell, same_host are '
                      'ignored', logs.output[0])
