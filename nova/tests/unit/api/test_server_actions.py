"""POST /servers/{id}/action: bodies, microversions and policies."""

from nova.tests.unit.api import fakes


class TestServerActions(fakes.APITestCase):

    def setUp(self):
        super().setUp()
        self.make_flavor()
        response = self.request('POST', '/v2.1/servers', {'server': {
            'name': 'vm', 'flavorRef': 'f1'}}, token=fakes.MEMBER)
        self.server = response.json['server']['id']
        self.path = '/v2.1/servers/%s/action' % self.server
        self.compute_api.calls.clear()

    def act(self, body, token=fakes.MEMBER, version=None):
        return self.request('POST', self.path, body, token=token,
                            version=version)

    def test_each_action_reaches_the_compute_api(self):
        uuid = self.server
        for body, call in (
                ({'reboot': {'type': 'SOFT'}}, ('reboot', uuid, False)),
                ({'reboot': {'type': 'hard'}}, ('reboot', uuid, True)),
                ({'os-stop': None}, ('stop', uuid)),
                ({'os-start': None}, ('start', uuid)),
                ({'shelve': None}, ('shelve', uuid)),
                ({'unshelve': None}, ('unshelve', uuid))):
            response = self.act(body)
            self.assertEqual(202, response.status_int, response.text)
            self.assertEqual(b'', response.body)
            self.assertEqual(call, self.compute_api.calls[-1])

    def test_rebuild_answers_the_server(self):
        response = self.act({'rebuild': {'imageRef': 'cirros',
                                         'name': 'new-name'}})
        self.assertEqual(202, response.status_int, response.text)
        server = response.json['server']
        self.assertEqual(('new-name', 'BUILD'),
                         (server['name'], server['status']))
        self.assertEqual(('rebuild', self.server),
                         self.compute_api.calls[-1])

    def test_bad_bodies(self):
        for body, fragments in (
                ({'reboot': {'type': 'MEDIUM'}}, ('MEDIUM',)),
                ({'reboot': {}}, ('type',)),
                ({'os-stop': {'force': True}}, ('os-stop',)),
                ({'rebuild': {'imageRef': 'x', 'flavorRef': 'f1'}},
                 ('flavorRef',)),
                ({'pause': None}, ('pause', 'supported', 'reboot')),
                ({'os-stop': None, 'os-start': None},
                 ('os-start', 'os-stop', 'exactly one'))):
            self.assertFault(self.act(body), 400, 'badRequest', *fragments)
        self.assertEqual([], [c for c in self.compute_api.calls
                              if c[0] != 'get'])

    def test_unshelve_body_by_microversion(self):
        body = {'unshelve': {'availability_zone': 'nova'}}
        self.assertFault(self.act(body, version='2.76'), 400, 'badRequest',
                         '2.77')
        self.assertEqual(202, self.act(body, version='2.77').status_int)
        self.assertFault(self.act({'unshelve': {
            'availability_zone': 'az9'}}, version='2.77'), 400,
            'badRequest', 'az9')

    def test_shelve_offload_is_admin_only(self):
        self.assertFault(self.act({'shelveOffload': None}), 403,
                         'forbidden', 'os-shelve:shelve_offload')
        self.assertEqual(202, self.act({'shelveOffload': None},
                                       token=fakes.ADMIN).status_int)
        self.assertEqual([('shelve_offload', self.server)],
                         [c for c in self.compute_api.calls
                          if c[0] != 'get'])

    def test_other_projects_server_does_not_exist(self):
        self.assertFault(self.act({'os-stop': None}, token=fakes.OTHER),
                         404, 'itemNotFound', self.server)
        self.assertEqual([], [c for c in self.compute_api.calls
                              if c[0] != 'get'])
