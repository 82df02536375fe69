"""Key pairs: a user's public keys, imported or generated, by name.

The API layer checks the request's shape; this module fingerprints the
key (refusing one that does not parse), generates a key when none is
given and stores the record. Key pairs belong to a user, not a project,
as upstream's do.
"""

from nova import crypto
from nova.db import api as db
from nova.db import records
from nova import exception


def _record(context, user_id: str, name: str, key_type: str,
            public_key: str) -> records.KeyPair:
    try:
        fingerprint = crypto.fingerprint(key_type, public_key)
    except crypto.InvalidKey as error:
        raise exception.InvalidKeypair(
            reason='public_key of type %s: %s' % (key_type, error))
    return db.key_pair_create(context, {
        'name': name, 'user_id': user_id, 'type': key_type,
        'fingerprint': fingerprint, 'public_key': public_key})


def import_key_pair(context, user_id: str, name: str, public_key: str,
                    key_type: str = 'ssh') -> records.KeyPair:
    """Store ``public_key`` as ``user_id``'s key pair ``name``."""
    return _record(context, user_id, name, key_type, public_key)


def create_key_pair(context, user_id: str, name: str,
                    key_type: str = 'ssh') -> tuple[records.KeyPair, str]:
    """Generate a key pair of ``key_type`` for ``user_id`` (an SSH key,
    or an X.509 certificate naming the user); the record and the private
    key, which is not kept."""
    if key_type == 'x509':
        generated = crypto.generate_x509_key(user_id)
    else:
        generated = crypto.generate_ssh_key('Generated-by-Nova')
    keypair = _record(context, user_id, name, key_type,
                      generated.public_key)
    return keypair, generated.private_key
