"""A generated key pair of type x509 came back as an SSH key.

Found by Tempest's ``test_keypairsv22_create_list_show_with_type``:
``POST /os-keypairs`` (2.2) with ``"type": "x509"`` and no public key
generated an SSH key and stored it as type ``ssh``. Upstream generates a
self-signed X.509 certificate for the user then, and the key pair lists
and shows as ``x509`` with the certificate's fingerprint.
"""

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization

from nova.tests.functional import test_server_actions

ALICE = 'alice:proj-a'


class TempestKeypairX509Test(test_server_actions.ServerActionsBase):

    def call(self, method, path, body=None, version='2.2'):
        resp = self.session.request(
            method, self.allinone.api_url + path, json=body,
            headers={'X-Auth-Token': ALICE,
                     'X-OpenStack-Nova-API-Version': version})
        self.assertLess(resp.status_code, 300, resp.text)
        return resp.json()

    def test_generated_x509_key_pair(self):
        self.start_services()
        created = self.call('POST', '/os-keypairs', {'keypair': {
            'name': 'cert', 'type': 'x509'}})['keypair']
        self.assertEqual('x509', created['type'])
        cert = x509.load_pem_x509_certificate(created['public_key'].encode())
        self.assertEqual('CN=alice', cert.subject.rfc4514_string())
        self.assertEqual(cert.subject, cert.issuer)
        fingerprint = ':'.join('%02x' % b for b in cert.fingerprint(
            hashes.SHA1()))
        self.assertEqual(fingerprint, created['fingerprint'])
        # The private key is the certificate's.
        private = serialization.load_pem_private_key(
            created['private_key'].encode(), password=None)
        self.assertEqual(
            cert.public_key().public_numbers(),
            private.public_key().public_numbers())

        shown = self.call('GET', '/os-keypairs/cert')['keypair']
        self.assertEqual(('x509', fingerprint),
                         (shown['type'], shown['fingerprint']))
        listed = self.call('GET', '/os-keypairs')['keypairs']
        self.assertEqual([('cert', 'x509')],
                         [(k['keypair']['name'], k['keypair']['type'])
                          for k in listed])
        # Without a type, still an SSH key.
        ssh = self.call('POST', '/os-keypairs', {'keypair': {
            'name': 'plain'}})['keypair']
        self.assertEqual('ssh', ssh['type'])
        self.assertTrue(ssh['public_key'].startswith('ssh-rsa '))
