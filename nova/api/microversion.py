"""Compute API microversions: parsing the request headers and comparing.

A client asks for a microversion with ``OpenStack-API-Version: compute X.Y``
or the legacy ``X-OpenStack-Nova-API-Version: X.Y``; without either it gets
the minimum, so old clients keep the behaviour they were written for.
"""

import dataclasses
import re

from nova import exception

MIN_VERSION = '2.1'
# The newest microversion whose response shapes this API produces.
MAX_VERSION = '2.96'

NEW_HEADER = 'OpenStack-API-Version'
LEGACY_HEADER = 'X-OpenStack-Nova-API-Version'
SERVICE_TYPE = 'compute'

_VERSION_RE = re.compile(r'^([1-9]\d*)\.([1-9]\d*|0)$')


@dataclasses.dataclass(frozen=True, order=True)
class APIVersion:
    """A microversion as a comparable (major, minor) pair."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> 'APIVersion':
        """Parse ``"X.Y"``; InvalidAPIVersionString if malformed."""
        match = _VERSION_RE.match(text.strip())
        if not match:
            raise exception.InvalidAPIVersionString(version=text)
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return '%d.%d' % (self.major, self.minor)

    def at_least(self, text: str) -> bool:
        """True if this version is ``text`` or newer."""
        return self >= APIVersion.parse(text)


MIN = APIVersion.parse(MIN_VERSION)
MAX = APIVersion.parse(MAX_VERSION)


def _requested(headers) -> str | None:
    """The version string the client asked for, or None."""
    value = headers.get(NEW_HEADER)
    if value:
        # The header may name several services: "compute 2.60, volume 3.5".
        for item in value.split(','):
            parts = item.strip().split(None, 1)
            if len(parts) == 2 and parts[0].lower() == SERVICE_TYPE:
                return parts[1].strip()
    return headers.get(LEGACY_HEADER) or None


def from_headers(headers) -> APIVersion:
    """The microversion a request runs at.

    ``latest`` means MAX. A malformed value is InvalidAPIVersionString
    (400); a well-formed one outside [MIN, MAX] is
    APIVersionNotSupported (406).
    """
    text = _requested(headers)
    if text is None:
        return MIN
    if text.strip().lower() == 'latest':
        return MAX
    version = APIVersion.parse(text)
    if not MIN <= version <= MAX:
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
