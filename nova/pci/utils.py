"""Small PCI helpers shared by device specs, aliases and groups: address
normalization, misspelt keys and group types (the Placement names derived
from config are in nova.pci.placement_names)."""

import re

from nova import exception

_ADDRESS_RE = re.compile(
    r'^(?P<domain>[0-9a-fA-F]{1,4}):(?P<bus>[0-9a-fA-F]{1,2}):'
    r'(?P<slot>[0-9a-fA-F]{1,2})\.(?P<function>[0-7])$')


def normalize_address(address: str) -> str:
    """Return ``address`` as ``dddd:bb:ss.f`` in lower case.

    Raises PciDeviceWrongAddressFormat for anything that is not a full,
    concrete PCI address (no globs).
    """
    match = _ADDRESS_RE.match(address.strip()) if isinstance(
        address, str) else None
    if not match:
        raise exception.PciDeviceWrongAddressFormat(address=address)
    fields = match.groupdict()
    if int(fields['slot'], 16) > 0x1f:
        raise exception.PciDeviceWrongAddressFormat(address=address)
    return '%04x:%02x:%02x.%x' % (
        int(fields['domain'], 16), int(fields['bus'], 16),
        int(fields['slot'], 16), int(fields['function'], 16))


def _edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions,
    substitutions and transpositions of adjacent characters each cost 1."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if (i > 1 and j > 1 and a[i - 1] == b[j - 2]
                    and a[i - 2] == b[j - 1]):
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[len(b)]


def _squash(name: str) -> str:
    return re.sub(r'[\s_\-]', '', name.lower())


def misspelling_of(key: str, known: tuple[str, ...]) -> str | None:
    """Return the known name ``key`` looks like a misspelling of, or None.

    Keys and names are compared case-insensitively with spaces, ``_`` and
    ``-`` removed (so ``vendorid``, ``Vendor-ID`` and ``resource-class``
    hit); after that an edit distance of 1 is a misspelling for names of up
    to 9 characters and of 2 for longer ones (``adress``, ``prodcut_id``,
    ``resorce_clas``). Tighter for short names so that genuine tags such as
    ``trust`` (vs ``trusted``) or ``unmanaged`` (vs ``managed``) still
    pass. An exact known name is not a misspelling.
    """
    if key in known:
        return None
    squashed = _squash(key)
    for name in known:
        target = _squash(name)
        allowed = 1 if len(target) <= 9 else 2
        if _edit_distance(squashed, target) <= allowed:
            return name
    return None


# Device groups ------------------------------------------------------------

_GROUP_TYPE_RE = re.compile(r'^[A-Za-z]+(-[A-Za-z]+)*$')


def validate_group_type(group_type: object, where: str) -> str:
    """Return ``group_type`` in lower case, or raise Invalid naming ``where``.

    Letters and inner dashes only: digits and underscores are reserved for
    the size and member parts of the derived trait names, so two types can
    never map to the same trait.
    """
    if not isinstance(group_type, str) or not _GROUP_TYPE_RE.match(
            group_type):
        raise exception.Invalid(reason=(
            '%s: group type %r is not allowed; use letters with optional '
            'inner dashes, e.g. "nvlink" or "pcie-switch"' % (
                where, group_type)))
    return group_type.lower()
