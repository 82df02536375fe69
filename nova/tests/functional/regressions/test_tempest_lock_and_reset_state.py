"""lock, unlock and os-resetState, which were missing.

Found by Tempest's server action and admin tests: the actions were
refused as unsupported and ``locked`` was always false. A locked
server refuses its project's actions (409) until unlocked; admins act on
it, and only an admin unlocks an admin's lock. ``os-resetState`` lets an
admin take a server out of ERROR or a stuck task.
"""

from nova.tests.functional import test_server_actions

MEMBER = 'alice:proj-a'


class TempestLockAndResetStateTest(test_server_actions.ServerActionsBase):

    def as_member(self, method, path, body=None, version='2.73'):
        return self.session.request(
            method, self.allinone.api_url + path, json=body,
            headers={'X-Auth-Token': MEMBER,
                     'X-OpenStack-Nova-API-Version': version})

    def test_lock_unlock_and_reset_state(self):
        self.start_services()
        flavor = self.gpu_flavors()[2]
        resp = self.as_member('POST', '/servers', {'server': {
            'name': 'job', 'flavorRef': flavor, 'imageRef': 'none'}})
        self.assertEqual(202, resp.status_code, resp.text)
        uuid = resp.json()['server']['id']
        self.wait_status(uuid, 'ACTIVE')
        action = '/servers/%s/action' % uuid

        resp = self.as_member('POST', action, {
            'lock': {'locked_reason': 'training run'}})
        self.assertEqual(202, resp.status_code, resp.text)
        shown = self.as_member('GET', '/servers/' + uuid).json()['server']
        self.assertEqual((True, 'training run'),
                         (shown['locked'], shown['locked_reason']))
        listed = self.as_member('GET', '/servers?locked=true').json()
        self.assertEqual([uuid], [s['id'] for s in listed['servers']])
        for body in ({'os-stop': None}, {'reboot': {'type': 'HARD'}}):
            resp = self.as_member('POST', action, body)
            self.assertEqual(409, resp.status_code, resp.text)
            self.assertIn('Instance %s is locked' % uuid, resp.text)
        resp = self.as_member('DELETE', '/servers/' + uuid)
        self.assertEqual(409, resp.status_code, resp.text)
        self.assertEqual('ACTIVE', self.wait_status(uuid, 'ACTIVE')['status'])
        # An admin acts on a locked server.
        self.act(uuid, {'os-stop': None})
        self.wait_status(uuid, 'SHUTOFF')
        resp = self.as_member('POST', action, {'unlock': None})
        self.assertEqual(202, resp.status_code, resp.text)
        resp = self.as_member('POST', action, {'os-start': {}})
        self.assertEqual(202, resp.status_code, resp.text)
        self.wait_status(uuid, 'ACTIVE')

        # An admin's lock is the admin's to lift.
        self.act(uuid, {'lock': None})
        resp = self.as_member('POST', action, {'unlock': None})
        self.assertEqual(403, resp.status_code, resp.text)
        self.act(uuid, {'unlock': None})
        self.assertEqual(['unlock', 'lock', 'start', 'unlock', 'stop',
                          'lock', 'create'],
                         [a['action'] for a in
                          self.actions(uuid)['instanceActions']])

        # os-resetState: admin-only, to active or error.
        resp = self.as_member('POST', action,
                              {'os-resetState': {'state': 'error'}})
        self.assertEqual(403, resp.status_code, resp.text)
        self.act(uuid, {'os-resetState': {'state': 'error'}})
        self.assertEqual('ERROR', self.api('GET', '/servers/' + uuid)[
            'server']['status'])
        self.act(uuid, {'os-resetState': {'state': 'active'}})
        self.assertEqual('ACTIVE', self.wait_status(uuid, 'ACTIVE')['status'])
        self.assert_consistent()
