"""Free-device bands: a coarse fullness of a host, as root provider traits.

Placement returns at most ``limit`` allocation candidates (1000, as the
scheduler asks), so on a large fleet a request for one GPU sees only part
of the hosts that could take it, and packing the fullest host first only
works on that part. The compute therefore says how many units of each PCI
resource class it has free, rounded down to a power of two, with one
trait on its compute node provider::

    CUSTOM_PCI_FREE_<RESOURCE_CLASS>_<BAND>

``BAND`` is 1 for one free unit, 2 for 2-3, 4 for 4-7, 8 for 8-15 and so
on; a host with none free has no band trait for that class. The scheduler
asks the fullest band that can hold the request first and widens only when
it has no candidate (``nova.scheduler.fullness``). Powers of two match the
sizes of device groups (pairs, quartets, boards), so a band also bounds
the largest group a host can still have free.
"""

import re

# Nova owns every root trait with this prefix and replaces them on each
# update of the provider tree.
BAND_TRAIT_PREFIX = 'CUSTOM_PCI_FREE_'
_BAND_TRAIT_RE = re.compile(r'^%s(?P<rc>[A-Z0-9_]+)_(?P<band>\d+)$' %
                            BAND_TRAIT_PREFIX)


def band(free: int) -> int:
    """The band of ``free`` units: the largest power of two not above it
    (0 for none)."""
    return 1 << (free.bit_length() - 1) if free > 0 else 0


def band_trait(resource_class: str, free_band: int | str = '') -> str:
    """Root trait of a host with ``free_band`` (a power of two) units of
    ``resource_class`` free; without a band, the prefix of them all."""
    return '%s%s_%s' % (BAND_TRAIT_PREFIX, resource_class, free_band)


def band_traits(free: dict[str, int]) -> set[str]:
    """Band traits of a host, from its free units per resource class."""
    return {band_trait(rc, band(units)) for rc, units in free.items()
            if units > 0}


def is_band_trait(trait: str) -> bool:
    return bool(_BAND_TRAIT_RE.match(trait))


def eligible_bands(resource_class: str, count: int,
                   traits: set[str]) -> list[str]:
    """Band traits among ``traits`` whose hosts may have ``count`` units
    of ``resource_class`` free, fullest band first.

    Band B holds hosts with B to 2B-1 free units, so it can hold the
    request when 2B-1 >= count.
    """
    bands = []
    for trait in traits:
        match = _BAND_TRAIT_RE.match(trait)
        if match and match.group('rc') == resource_class and \
                2 * int(match.group('band')) - 1 >= count:
            bands.append((int(match.group('band')), trait))
    return [trait for _band, trait in sorted(bands)]
