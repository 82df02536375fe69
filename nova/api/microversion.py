"""Compute API microversions: parsing the request headers and comparing.

A client asks for a microversion with ``OpenStack-API-Version: compute X.Y``
or the legacy ``X-OpenStack-Nova-API-Version: X.Y``; without either it gets
the minimum, so old clients keep the behaviour they were written for.
"""

import microversion_parse

from nova.api import version_history
from nova import exception

MIN_VERSION = '2.1'
# The newest microversion whose response shapes this API produces.
MAX_VERSION = '2.96'

NEW_HEADER = 'OpenStack-API-Version'
LEGACY_HEADER = 'X-OpenStack-Nova-API-Version'
SERVICE_TYPE = 'compute'


class APIVersion(microversion_parse.Version):
    """A microversion: microversion-parse's comparable (major, minor)."""

    @classmethod
    def parse(cls, text: str) -> 'APIVersion':
        """Parse ``"X.Y"``; InvalidAPIVersionString if malformed.

        Stricter than microversion-parse alone: a version is written
        canonically (``2.1``, not ``2.01`` or ``-2.1``).
        """
        text = text.strip()
        try:
            version = cls(*microversion_parse.parse_version_string(text))
        except TypeError:
            raise exception.InvalidAPIVersionString(version=text) from None
        if str(version) != text or version.major < 1 or version.minor < 0:
            raise exception.InvalidAPIVersionString(version=text)
        return version

    def at_least(self, change: 'version_history.Change | str') -> bool:
        """True if this version is ``change``'s (a named change of
        :mod:`nova.api.version_history`, or ``"X.Y"``) or newer."""
        return self >= APIVersion.parse(str(change))


MIN = APIVersion.parse(MIN_VERSION)
MAX = APIVersion.parse(MAX_VERSION)


def from_headers(headers) -> APIVersion:
    """The microversion a request runs at.

    The header is read by microversion-parse, as Placement reads its
    own: the ``compute`` entry of ``OpenStack-API-Version``, else the
    legacy header. ``latest`` means MAX. A malformed value is
    InvalidAPIVersionString (400); a well-formed one outside [MIN, MAX]
    is APIVersionNotSupported (406).
    """
    text = microversion_parse.get_version(
        headers, SERVICE_TYPE, legacy_headers=[LEGACY_HEADER])
    if not text:
        return MIN
    if text.strip().lower() == 'latest':
        return MAX
    version = APIVersion.parse(text)
    if not version.matches(MIN, MAX):
        raise exception.APIVersionNotSupported(
            version=text, min_version=MIN_VERSION, max_version=MAX_VERSION)
    return version


def response_headers(version: APIVersion) -> dict[str, str]:
    """Headers telling the client which microversion answered."""
    return {
        NEW_HEADER: '%s %s' % (SERVICE_TYPE, version),
        LEGACY_HEADER: str(version),
        'Vary': '%s, %s' % (NEW_HEADER, LEGACY_HEADER),
    }
