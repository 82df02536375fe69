"""os-keypairs, which was missing, and servers booted with a key pair.

Found by Tempest's keypair tests (every /os-keypairs path a 404) and its
server tests that boot with ``key_name`` (refused as an unknown field
would have been, the body never reached a key pair). Key pairs belong
to a user: another user of the same project does not see them, an
admin names them with ``user_id`` from 2.10.
"""

from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives import serialization

from nova.tests.functional import test_server_actions

ALICE = 'alice:proj-a'
BOB = 'bob:proj-a'


def _public_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.public_key().public_bytes(
        serialization.Encoding.OpenSSH,
        serialization.PublicFormat.OpenSSH).decode() + ' alice@laptop'


class TempestKeypairsTest(test_server_actions.ServerActionsBase):

    def call(self, method, path, body=None, token=ALICE, version='2.2'):
        return self.session.request(
            method, self.allinone.api_url + path, json=body,
            headers={'X-Auth-Token': token,
                     'X-OpenStack-Nova-API-Version': version})

    def test_keypairs_through_the_microversions(self):
        self.start_services()
        # Generated (before 2.92): the private key is shown once.
        resp = self.call('POST', '/os-keypairs', {'keypair': {'name': 'gen'}},
                         version='2.1')
        self.assertEqual(200, resp.status_code, resp.text)
        generated = resp.json()['keypair']
        self.assertIn('BEGIN RSA PRIVATE KEY', generated['private_key'])
        self.assertNotIn('type', generated)
        self.assertEqual('alice', generated['user_id'])

        public_key = _public_key()
        resp = self.call('POST', '/os-keypairs', {'keypair': {
            'name': 'laptop', 'public_key': public_key}})
        self.assertEqual(201, resp.status_code, resp.text)
        imported = resp.json()['keypair']
        self.assertEqual(('ssh', 47), (imported['type'],
                                       len(imported['fingerprint'])))
        self.assertNotIn('private_key', imported)

        # A duplicate name, a key that does not parse, a bad name.
        resp = self.call('POST', '/os-keypairs', {'keypair': {
            'name': 'laptop', 'public_key': public_key}})
        self.assertEqual(409, resp.status_code, resp.text)
        self.assertIn("Key pair 'laptop' already exists", resp.text)
        resp = self.call('POST', '/os-keypairs', {'keypair': {
            'name': 'bad', 'public_key': 'ssh-rsa AAAAnot-a-key'}})
        self.assertEqual(400, resp.status_code, resp.text)
        self.assertIn('Keypair data is invalid', resp.text)
        resp = self.call('POST', '/os-keypairs', {'keypair': {
            'name': 'me@laptop', 'public_key': public_key}})
        self.assertEqual(400, resp.status_code, resp.text)
        resp = self.call('POST', '/os-keypairs', {'keypair': {
            'name': 'me@laptop', 'public_key': public_key}},
            version='2.92')
        self.assertEqual(201, resp.status_code, resp.text)
        # From 2.92 keys are only imported.
        resp = self.call('POST', '/os-keypairs', {'keypair': {
            'name': 'gen2'}}, version='2.92')
        self.assertEqual(400, resp.status_code, resp.text)
        self.assertIn('public_key', resp.text)

        listed = self.call('GET', '/os-keypairs').json()['keypairs']
        self.assertEqual(['gen', 'laptop', 'me@laptop'],
                         [k['keypair']['name'] for k in listed])
        page = self.call('GET', '/os-keypairs?limit=1&marker=gen',
                         version='2.35').json()['keypairs']
        self.assertEqual(['laptop'], [k['keypair']['name'] for k in page])
        shown = self.call('GET', '/os-keypairs/laptop').json()['keypair']
        self.assertEqual((public_key, False, 'alice'), (
            shown['public_key'], shown['deleted'], shown['user_id']))

        # Bob, of the same project, has none of Alice's key pairs.
        self.assertEqual([], self.call('GET', '/os-keypairs',
                                       token=BOB).json()['keypairs'])
        self.assertEqual(404, self.call('GET', '/os-keypairs/laptop',
                                        token=BOB).status_code)
        resp = self.call('GET', '/os-keypairs?user_id=alice', token=BOB,
                         version='2.10')
        self.assertEqual(403, resp.status_code, resp.text)
        # An admin names Alice's.
        resp = self.call('GET', '/os-keypairs?user_id=alice', token='admin',
                         version='2.10')
        self.assertEqual(3, len(resp.json()['keypairs']), resp.text)

        # A server booted with a key pair keeps and shows its name.
        flavor = self.gpu_flavors()[1]
        resp = self.call('POST', '/servers', {'server': {
            'name': 'vm', 'flavorRef': flavor, 'imageRef': 'none',
            'key_name': 'nope'}})
        self.assertEqual(400, resp.status_code, resp.text)
        self.assertIn('Invalid key_name provided', resp.text)
        resp = self.call('POST', '/servers', {'server': {
            'name': 'vm', 'flavorRef': flavor, 'imageRef': 'none',
            'key_name': 'laptop'}})
        self.assertEqual(202, resp.status_code, resp.text)
        uuid = resp.json()['server']['id']
        self.wait_status(uuid, 'ACTIVE')
        server = self.call('GET', '/servers/' + uuid).json()['server']
        self.assertEqual('laptop', server['key_name'])

        resp = self.call('DELETE', '/os-keypairs/laptop')
        self.assertEqual(204, resp.status_code, resp.text)
        self.assertEqual(404, self.call('DELETE',
                                        '/os-keypairs/laptop').status_code)
        resp = self.call('DELETE', '/os-keypairs/gen', version='2.1')
        self.assertEqual(202, resp.status_code, resp.text)
        # The server keeps the key it booted with.
        server = self.call('GET', '/servers/' + uuid).json()['server']
        self.assertEqual('laptop', server['key_name'])
        self.assert_consistent()
