"""Version documents at ``/`` and ``/v2.1``, read by keystoneauth discovery.

``version`` is the newest microversion served and ``min_version`` the
oldest; clients negotiate within that range.
"""

from nova.api import microversion

# When the v2.1 API (with microversions) first appeared upstream; clients
# only display it.
_UPDATED = '2013-07-23T11:33:21Z'


def _document(req) -> dict:
    return {
        'id': 'v2.1',
        'status': 'CURRENT',
        'version': microversion.MAX_VERSION,
        'min_version': microversion.MIN_VERSION,
        'updated': _UPDATED,
        'links': [
            {'rel': 'self', 'href': req.link('')},
            {'rel': 'describedby', 'type': 'text/html',
             'href': 'https://docs.openstack.org/'},
        ],
        'media-types': [
            {'base': 'application/json',
             'type': 'application/vnd.openstack.compute+json;version=2.1'},
        ],
    }


def index(req) -> tuple:
    """GET /: every major version (only v2.1 here)."""
    return 200, {'versions': [_document(req)]}


def show(req) -> tuple:
    """GET /v2.1: the v2.1 version document."""
    return 200, {'version': _document(req)}
