"""Key pairs' cryptography: the fingerprint of a public key (which also
proves it parses) and a freshly generated SSH key pair or X.509
certificate.

The ``cryptography`` package parses OpenSSH and PEM keys and generates
RSA keys; nova adds only the fingerprint formats upstream shows: the
MD5 of an SSH key's blob and the SHA-1 of an X.509 certificate, each as
colon-separated hex.
"""

import base64
import dataclasses
import datetime
import hashlib

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography import x509
from cryptography.x509 import oid
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization

KEY_TYPES = ('ssh', 'x509')


class InvalidKey(ValueError):
    """The text is not a public key (or certificate) of its type."""


def _colon_hex(digest: bytes) -> str:
    return ':'.join('%02x' % byte for byte in digest)


def ssh_fingerprint(public_key: str) -> str:
    """MD5 fingerprint of an OpenSSH public key line ('ssh-rsa AAAA...')."""
    text = public_key.strip()
    try:
        serialization.load_ssh_public_key(text.encode())
        blob = base64.b64decode(text.split()[1], validate=True)
    except (ValueError, IndexError, UnsupportedAlgorithm) as error:
        raise InvalidKey('not an OpenSSH public key: %s' % error) from None
    return _colon_hex(hashlib.md5(blob, usedforsecurity=False).digest())


def x509_fingerprint(certificate: str) -> str:
    """SHA-1 fingerprint of a PEM X.509 certificate."""
    try:
        cert = x509.load_pem_x509_certificate(certificate.encode())
    except ValueError as error:
        raise InvalidKey('not a PEM X.509 certificate: %s' % error) from None
    return _colon_hex(cert.fingerprint(hashes.SHA1()))


def fingerprint(key_type: str, public_key: str) -> str:
    """The fingerprint of ``public_key`` as a key of ``key_type``."""
    if key_type == 'x509':
        return x509_fingerprint(public_key)
    return ssh_fingerprint(public_key)


@dataclasses.dataclass(frozen=True)
class GeneratedKey:
    """A new key pair (SSH key or X.509 certificate): the private key is
    shown to its owner once."""

    private_key: str
    public_key: str
    fingerprint: str


def generate_ssh_key(comment: str) -> GeneratedKey:
    """A 2048-bit RSA key pair; ``comment`` ends the public key line."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()).decode()
    public = '%s %s' % (key.public_key().public_bytes(
        serialization.Encoding.OpenSSH,
        serialization.PublicFormat.OpenSSH).decode(), comment)
    return GeneratedKey(private, public, ssh_fingerprint(public))


# How long a generated certificate is valid, as upstream's: ten years.
X509_VALID_DAYS = 3650


def generate_x509_key(common_name: str) -> GeneratedKey:
    """A 2048-bit RSA key and a self-signed PEM certificate of it for
    client authentication, its subject ``CN=common_name``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME,
                                         common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=X509_VALID_DAYS))
            .add_extension(x509.ExtendedKeyUsage(
                [oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(key, hashes.SHA256()))
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()).decode()
    public = cert.public_bytes(serialization.Encoding.PEM).decode()
    return GeneratedKey(private, public, x509_fingerprint(public))
