"""Small PCI helpers shared by device specs, aliases and the translator:
address normalization and the Placement names derived from config."""

import re

import os_resource_classes as orc
import os_traits

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


def _custom_name(name: str) -> str:
    name = name.upper()
    if name.startswith(orc.CUSTOM_NAMESPACE):
        return name
    return orc.normalize_name(name)


def get_resource_class(resource_class: str | None,
                       vendor_id: str | None,
                       product_id: str | None) -> str:
    """Return the Placement resource class for a device spec or alias.

    An explicit class is upper-cased and kept when it is standard or already
    custom, otherwise made custom; without one the class is
    ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``.
    """
    if resource_class:
        upper = resource_class.upper()
        if upper in orc.STANDARDS:
            return upper
        return _custom_name(resource_class)
    return ('CUSTOM_PCI_%s_%s' % (vendor_id, product_id)).upper()


def get_traits(traits: str | None) -> set[str]:
    """Return the Placement trait names for a comma-separated ``traits`` tag.

    Standard os-traits names are kept, others become ``CUSTOM_`` traits.
    Items are not stripped, as in upstream Nova.
    """
    if not traits:
        return set()
    standard = set(os_traits.get_traits())
    result = set()
    for trait in traits.split(','):
        result.add(trait if trait in standard else _custom_name(trait))
    return result
