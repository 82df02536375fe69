"""Version documents at ``/``, ``/v2.1`` and ``/v2``, read by
keystoneauth discovery.

``version`` is the newest microversion served and ``min_version`` the
oldest; clients negotiate within that range. As upstream, ``/`` also
lists the legacy v2.0 API as SUPPORTED, without microversions; this
fork serves its version document at ``/v2`` and the API itself only at
``/v2.1``.
"""

from nova.api import microversion

# When the v2.1 API (with microversions) and the v2.0 API first appeared
# upstream; clients only display them.
_UPDATED = '2013-07-23T11:33:21Z'
_UPDATED_V2_0 = '2011-01-21T11:33:21Z'


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


def _document_v2_0(req) -> dict:
    return {
        'id': 'v2.0',
        'status': 'SUPPORTED',
        'version': '',
        'min_version': '',
        'updated': _UPDATED_V2_0,
        'links': [{'rel': 'self',
                   'href': req.application_url + '/v2/'}],
    }


def index(req) -> tuple:
    """GET /: every major version, the legacy v2.0 and v2.1."""
    return 200, {'versions': [_document_v2_0(req), _document(req)]}


def show_v2_0(req) -> tuple:
    """GET /v2: the legacy v2.0 version document."""
    return 200, {'version': _document_v2_0(req)}


def show(req) -> tuple:
    """GET /v2.1: the v2.1 version document."""
    return 200, {'version': _document(req)}
