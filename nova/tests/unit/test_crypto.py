"""Key pair fingerprints and generation."""

import base64
import datetime
import hashlib

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from nova import crypto
from nova import test


class TestFingerprints(test.TestCase):

    def test_generated_key_fingerprint_is_md5_of_its_blob(self):
        key = crypto.generate_ssh_key('Generated-by-Nova')
        kind, blob, comment = key.public_key.split()
        self.assertEqual(('ssh-rsa', 'Generated-by-Nova'), (kind, comment))
        digest = hashlib.md5(base64.b64decode(blob)).hexdigest()
        self.assertEqual(digest, key.fingerprint.replace(':', ''))
        private = serialization.load_pem_private_key(
            key.private_key.encode(), password=None)
        self.assertEqual(2048, private.key_size)

    def test_other_ssh_key_types_parse(self):
        public = ec.generate_private_key(ec.SECP256R1()).public_key()
        line = public.public_bytes(serialization.Encoding.OpenSSH,
                                   serialization.PublicFormat.OpenSSH)
        self.assertEqual(47, len(crypto.ssh_fingerprint(line.decode())))

    def test_bad_keys_are_refused(self):
        for text in ('', 'ssh-rsa', 'ssh-rsa AAAA!!!', 'not a key at all',
                     'ssh-rsa AAAAB3NzaC1yc2E='):
            self.assertRaises(crypto.InvalidKey, crypto.ssh_fingerprint,
                              text)
        self.assertRaises(crypto.InvalidKey, crypto.x509_fingerprint,
                          'ssh-rsa AAAA')

    def test_x509_fingerprint_is_sha1_of_the_certificate(self):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'me')])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name)
                .issuer_name(name).public_key(key.public_key())
                .serial_number(1).not_valid_before(now)
                .not_valid_after(now + datetime.timedelta(days=1))
                .sign(key, hashes.SHA256()))
        pem = cert.public_bytes(serialization.Encoding.PEM).decode()
        self.assertEqual(cert.fingerprint(hashes.SHA1()).hex(),
                         crypto.fingerprint('x509', pem).replace(':', ''))
