"""POST /servers/{id}/action: bodies, microversions and policies."""

from nova.db import api as db
from nova.tests.unit.api import fakes


class ServerActionTestCase(fakes.APITestCase):
    """One member's server; ``act`` posts an action body to it."""

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


class TestServerActions(ServerActionTestCase):

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


class TestLock(ServerActionTestCase):
    """lock, unlock and os-resetState; a locked server's actions."""

    def lock_in_db(self, by='owner'):
        db.instance_update(self.admin_context, self.server,
                           {'locked': True, 'locked_by': by})

    def test_lock_bodies_by_microversion(self):
        self.assertEqual(202, self.act({'lock': None}).status_int)
        self.assertEqual(('lock', self.server, None),
                         self.compute_api.calls[-1])
        self.assertFault(self.act({'lock': {'locked_reason': 'RMA'}}), 400,
                         'badRequest', 'locked_reason')
        self.assertEqual(202, self.act({'lock': {'locked_reason': 'RMA'}},
                                       version='2.73').status_int)
        self.assertEqual(('lock', self.server, 'RMA'),
                         self.compute_api.calls[-1])

    def test_a_locked_server_refuses_a_members_actions(self):
        self.lock_in_db()
        for body in ({'os-stop': None}, {'reboot': {'type': 'SOFT'}},
                     {'shelve': None}, {'rebuild': {'imageRef': 'cirros'}}):
            self.assertFault(self.act(body), 409, 'conflictingRequest',
                             'Instance %s is locked' % self.server)
        self.assertFault(self.request(
            'DELETE', '/v2.1/servers/' + self.server, token=fakes.MEMBER),
            409, 'conflictingRequest', 'is locked')
        self.assertFault(self.request(
            'PUT', '/v2.1/servers/%s/metadata/k' % self.server,
            {'meta': {'k': 'v'}}, token=fakes.MEMBER), 409,
            'conflictingRequest', 'is locked')
        self.assertEqual([], [c for c in self.compute_api.calls
                              if c[0] != 'get'])
        # An admin acts on it; its console and unlock stay the owner's.
        self.assertEqual(202, self.act({'os-stop': None},
                                       token=fakes.ADMIN).status_int)
        self.assertEqual(200, self.act(
            {'os-getConsoleOutput': {}}).status_int)
        self.assertEqual(202, self.act({'unlock': None}).status_int)

    def test_only_an_admin_unlocks_an_admins_lock(self):
        self.lock_in_db(by='admin')
        self.assertFault(self.act({'unlock': None}), 403, 'forbidden',
                         'unlock_override')
        self.assertEqual(202, self.act({'unlock': None},
                                       token=fakes.ADMIN).status_int)

    def test_reset_state_is_admin_only(self):
        self.assertFault(self.act({'os-resetState': {'state': 'error'}}),
                         403, 'forbidden', 'reset_state')
        self.assertFault(self.act({'os-resetState': {'state': 'paused'}},
                                  token=fakes.ADMIN), 400, 'badRequest',
                         'paused')
        self.assertEqual(202, self.act({'os-resetState': {'state': 'error'}},
                                       token=fakes.ADMIN).status_int)
        self.assertEqual(('reset_state', self.server, 'error'),
                         self.compute_api.calls[-1])
