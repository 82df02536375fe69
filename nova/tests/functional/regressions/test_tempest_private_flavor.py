"""A project booted servers of a private flavor it was never given.

Found by Tempest's ``test_create_server_with_non_public_flavor`` (admin
flavors): a member's ``POST /servers`` with a flavor created with
``os-flavor-access:is_public=false`` was accepted. Upstream answers a
project without access to a private flavor as if the flavor did not
exist (HTTP 400 on create and resize); this deployment keeps no access
lists, so only admins use private flavors.
"""

import json

from nova.tests.functional import test_boot_gpu_groups as boot

MEMBER = 'alice:proj-a'


class TempestPrivateFlavorTest(boot.BootTestBase):

    def member(self, method, path, body=None):
        return self.session.request(
            method, self.allinone.api_url + path, data=json.dumps(body),
            headers={'X-Auth-Token': MEMBER})

    def test_only_admins_use_a_private_flavor(self):
        self.start_services()
        private = self.api('POST', '/flavors', {'flavor': {
            'name': 'private', 'ram': 512, 'vcpus': 1, 'disk': 0,
            'os-flavor-access:is_public': False}})['flavor']['id']
        public = self.api('POST', '/flavors', {'flavor': {
            'name': 'public', 'ram': 512, 'vcpus': 1, 'disk': 0}}
        )['flavor']['id']

        resp = self.member('POST', '/servers', {'server': {
            'name': 'vm', 'flavorRef': private, 'imageRef': 'none'}})
        self.assertEqual(400, resp.status_code, resp.text)
        self.assertIn('flavor %r does not exist' % private, resp.text)

        # The member's server of a public flavor, resized to the private
        # one: refused the same way, and the server stays as it was.
        resp = self.member('POST', '/servers', {'server': {
            'name': 'vm', 'flavorRef': public, 'imageRef': 'none'}})
        self.assertEqual(202, resp.status_code, resp.text)
        server_id = resp.json()['server']['id']
        self.wait_for(server_id, 'ACTIVE')
        resp = self.member('POST', '/servers/%s/action' % server_id,
                           {'resize': {'flavorRef': private}})
        self.assertEqual(400, resp.status_code, resp.text)
        self.assertIn('flavor %r does not exist' % private, resp.text)
        self.assertEqual('ACTIVE', self.wait_for(server_id,
                                                 'ACTIVE')['status'])
        self.assertEqual([], self.api('GET', '/os-migrations')['migrations'])

        # An admin boots it.
        self.assertEqual('ACTIVE', self.boot(private, name='admin-vm')[
            'status'])
