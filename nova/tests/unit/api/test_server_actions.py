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

    def test_empty_object_is_no_argument_as_null(self):
        # Tempest and python-novaclient send {} where the action takes
        # no argument; upstream accepts it like null.
        uuid = self.server
        for body, call in (
                ({'os-stop': {}}, ('stop', uuid)),
                ({'os-start': {}}, ('start', uuid)),
                ({'shelve': {}}, ('shelve', uuid)),
                ({'unshelve': {}}, ('unshelve', uuid))):
            response = self.act(body)
            self.assertEqual(202, response.status_int, response.text)
            self.assertEqual(call, self.compute_api.calls[-1])
        # An argument none of them takes is still refused, by name.
        self.assertFault(self.act({'shelve': {'host': 'cmp1'}}), 400,
                         'badRequest', 'shelve', "'host' was unexpected")

    def test_rebuild_answers_the_server(self):
        response = self.act({'rebuild': {'imageRef': 'cirros',
                                         'name': 'new-name'}})
        self.assertEqual(202, response.status_int, response.text)
        server = response.json['server']
        self.assertEqual(('new-name', 'BUILD'),
                         (server['name'], server['status']))
        self.assertEqual(('rebuild', self.server),
                         self.compute_api.calls[-1])

    def test_rebuild_takes_the_new_image(self):
        response = self.act({'rebuild': {'imageRef': 'debian.qcow2'}})
        self.assertEqual(202, response.status_int, response.text)
        self.assertEqual('debian.qcow2',
                         response.json['server']['image']['id'])

    def test_rebuild_refuses_an_image_path(self):
        for ref in ('../etc/passwd', '/var/lib/image', '..', ''):
            self.assertFault(self.act({'rebuild': {'imageRef': ref}}),
                             400, 'badRequest', 'imageRef')
        self.assertNotIn('rebuild', [c[0] for c in self.compute_api.calls])

    def test_console_output(self):
        response = self.act({'os-getConsoleOutput': {'length': 5}})
        self.assertEqual(200, response.status_int, response.text)
        # Control characters other than tab and newline are dropped.
        self.assertEqual({'output': 'line 1[0m\nline 2\tend\n'},
                         response.json)
        self.assertEqual(('get_console_output', self.server, 5),
                         self.compute_api.calls[-1])

    def test_console_output_length_forms(self):
        for length, sent in ((None, None), (-1, None), ('-1', None),
                             ('12', 12), (0, 0)):
            body = {} if length is None else {'length': length}
            response = self.act({'os-getConsoleOutput': body})
            self.assertEqual(200, response.status_int, response.text)
            self.assertEqual(sent, self.compute_api.calls[-1][2])

    def test_console_output_bad_length(self):
        for length in (-2, '-2', 'ten', 1.5, '1.5'):
            self.assertFault(
                self.act({'os-getConsoleOutput': {'length': length}}), 400,
                'badRequest', 'length')
        self.assertFault(
            self.act({'os-getConsoleOutput': {'lines': 3}}), 400,
            'badRequest', 'lines')
        self.assertNotIn('get_console_output',
                         [c[0] for c in self.compute_api.calls])

    def test_console_output_of_another_project_is_refused(self):
        self.assertFault(
            self.act({'os-getConsoleOutput': {}}, token=fakes.OTHER), 404,
            'itemNotFound')

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
