"""nova-api with ``[api]auth_strategy = keystone`` against a real Keystone.

Keystone (the ``keystone`` package, fernet tokens, SQLite) runs in a
subprocess; keystonemiddleware's auth_token in nova-api's pipeline
validates the tokens it issues to keystoneauth1 sessions. The rest of the
services are nova-all's, in-process.
"""

import base64
import time

from keystoneauth1 import loading as ks_loading
from keystonemiddleware import auth_token
import requests

from nova.tests.fixtures import keystone
from nova.tests.functional import test_boot_gpu_groups as boot

# Lifetime of the token that is let expire: long enough for one request
# on a loaded machine.
SHORT_LIFETIME = 10


class KeystoneAuthTestCase(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.keystone = self.useFixture(keystone.KeystoneFixture())
        self.alpha = self.keystone.add_user('alice', 'alice-pw', 'alpha')
        self.keystone.add_user('bob', 'bob-pw', 'beta')
        self.keystone.add_user('carol', 'carol-pw', 'alpha', 'reader')
        # nova-api's own user, as the deployment guide configures it.
        self.keystone.add_user('nova', 'nova-pw', 'service', 'service')
        self.admin = self.keystone.admin
        self.alice = self.keystone.session('alice', 'alice-pw', 'alpha')
        self.bob = self.keystone.session('bob', 'bob-pw', 'beta')
        self.carol = self.keystone.session('carol', 'carol-pw', 'alpha')
        self.use_keystone()
        self.enable_h200_groups()
        self.start_services()

    def use_keystone(self) -> None:
        """nova.conf as a deployment with Keystone has it."""
        for group, opts in auth_token.list_opts():
            self.conf.register_opts(opts, group=group)
        self.conf.register_opts(
            ks_loading.get_auth_plugin_conf_options('password'),
            group='keystone_authtoken')
        url = self.keystone.url
        self.flags('keystone_authtoken', www_authenticate_uri=url,
                   interface='public', auth_type='password',
                   auth_url=url, username='nova', password='nova-pw',
                   project_name='service', user_domain_id='default',
                   project_domain_id='default')
        self.flags('api', auth_strategy='keystone')

    def call(self, session, method: str, path: str, body=None,
             expect=(200, 202, 204)):
        """One request with the session's (fresh) Keystone token."""
        resp = session.request(self.allinone.api_url + path, method,
                               json=body, raise_exc=False)
        self.assertIn(resp.status_code, expect, resp.text)
        return resp.json() if resp.content else {}

    def raw(self, token: str | None, method: str = 'GET',
            path: str = '/servers', body=None, headers=None) -> int:
        """Status of a request sent with exactly ``token`` (no re-auth)
        and ``headers``."""
        headers = dict(headers or {})
        if token is not None:
            headers['X-Auth-Token'] = token
        return requests.request(method, self.allinone.api_url + path,
                                headers=headers, json=body,
                                timeout=30).status_code


class TestKeystoneAuth(KeystoneAuthTestCase):

    def test_admin_and_member_tokens_act_as_their_roles(self):
        flavor = self.call(self.admin, 'POST', '/flavors', {'flavor': {
            'name': 'gpu.1x', 'vcpus': 4, 'ram': 4096, 'disk': 0}})['flavor']
        self.call(self.admin, 'POST',
                  '/flavors/%s/os-extra_specs' % flavor['id'],
                  {'extra_specs': {'pci_passthrough:alias': 'h200:1'}})

        # A member: no flavor writes, a server in its own project.
        self.call(self.alice, 'POST', '/flavors', {'flavor': {
            'name': 'mine', 'vcpus': 1, 'ram': 512, 'disk': 0}},
            expect=(403,))
        self.call(self.alice, 'POST',
                  '/flavors/%s/os-extra_specs' % flavor['id'],
                  {'extra_specs': {'hw:numa_nodes': '1'}}, expect=(403,))
        server = self.call(self.alice, 'POST', '/servers', {'server': {
            'name': 'vm1', 'flavorRef': flavor['id'],
            'imageRef': 'none'}})['server']
        deadline = time.monotonic() + boot.TIMEOUT
        shown = self.call(self.alice, 'GET', '/servers/%s' % server['id'])
        while (shown['server']['status'] == 'BUILD'
               and time.monotonic() < deadline):
            time.sleep(0.2)
            shown = self.call(self.alice, 'GET',
                              '/servers/%s' % server['id'])
        shown = shown['server']
        self.assertEqual('ACTIVE', shown['status'], shown)
        self.assertEqual(self.alpha, shown['tenant_id'])
        self.assertEqual(self.alice.get_user_id(), shown['user_id'])
        self.assertNotIn('OS-EXT-SRV-ATTR:host', shown)

        # A reader of the project sees it but neither deletes it nor
        # creates servers.
        path = '/servers/%s' % server['id']
        listed = self.call(self.carol, 'GET', '/servers')['servers']
        self.assertEqual([server['id']], [s['id'] for s in listed])
        self.call(self.carol, 'GET', path)
        self.call(self.carol, 'DELETE', path, expect=(403,))
        self.call(self.carol, 'POST', '/servers', {'server': {
            'name': 'vm2', 'flavorRef': flavor['id']}}, expect=(403,))

        # Another project's member neither sees nor deletes it.
        self.call(self.bob, 'GET', path, expect=(404,))
        self.call(self.bob, 'DELETE', path, expect=(404,))
        self.assertEqual([], self.call(self.bob, 'GET',
                                       '/servers')['servers'])
        self.call(self.bob, 'GET', '/servers?all_tenants=1', expect=(403,))

        # The admin sees the host and every project's servers.
        admin_view = self.call(self.admin, 'GET', path)['server']
        self.assertIn(admin_view['OS-EXT-SRV-ATTR:host'], self.computes)
        listed = self.call(self.admin, 'GET', '/servers?all_tenants=1')
        self.assertEqual([server['id']], [s['id'] for s in
                                          listed['servers']])
        self.call(self.alice, 'DELETE', path)
        self.call(self.alice, 'GET', path, expect=(404,))
        self.assert_nothing_held(server['id'])

    def test_missing_forged_and_expired_tokens_get_401(self):
        # A token Keystone issues with a short life: it works now and is
        # let expire while the other bad tokens are tried.
        short = self.keystone.short_lived_session(self.alice, SHORT_LIFETIME)
        expiring = short.get_token()
        expires = short.auth.auth_ref.expires.timestamp()
        self.assertLessEqual(expires, time.time() + SHORT_LIFETIME)
        self.assertEqual(200, self.raw(expiring))

        token = self.alice.get_token()
        self.assertEqual(200, self.raw(token))
        self.assertEqual(401, self.raw(None))
        self.assertEqual(401, self.raw('garbage-token'))
        # A real token with its signed payload altered: Keystone cannot
        # authenticate it.
        payload = bytearray(base64.urlsafe_b64decode(token + '=='))
        payload[20] ^= 0xff
        forged = base64.urlsafe_b64encode(bytes(payload)).decode().rstrip('=')
        self.assertNotEqual(token, forged)
        self.assertEqual(401, self.raw(forged))

        # Identity headers a client sends are not believed: without a
        # valid token they do not authenticate, with a member's token
        # they do not make an admin.
        spoofed = {'X-Identity-Status': 'Confirmed', 'X-Roles': 'admin',
                   'X-User-Id': 'someone', 'X-Project-Id': self.alpha}
        self.assertEqual(401, self.raw('garbage-token', headers=spoofed))
        self.assertEqual(401, self.raw(None, headers=spoofed))
        self.assertEqual(403, self.raw(token, 'POST', '/flavors', {
            'flavor': {'name': 'f', 'vcpus': 1, 'ram': 512, 'disk': 0}},
            headers=spoofed))

        # Expired: refused by Keystone and not honoured from
        # keystonemiddleware's cache of its earlier validation.
        time.sleep(max(expires - time.time() + 1, 0))
        self.assertEqual(401, self.raw(expiring))
        self.assertEqual(200, self.raw(token))
