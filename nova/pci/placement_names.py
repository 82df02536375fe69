"""The names and records of the PCI provider tree, built and parsed here.

The compute (its PCI tracker, resource tracker and translator) writes a
provider tree to Placement; the scheduler asks Placement about it and
reads the answer back; the compute then maps the providers Placement chose
to its devices. All of them agree on the formats defined in this module
and nowhere else:

* provider names: ``<host>_<ADDRESS>`` for a device (or a PF holding its
  VFs), ``<host>_<group>`` for a device group or a static spec group;
* traits: ownership (``COMPUTE_MANAGED_PCI_DEVICE``, ``OWNER_NOVA``),
  device groups (``CUSTOM_PCI_GROUP_<TYPE>[_<SIZE>[_M<i>]]``), NUMA
  locality (``CUSTOM_PCI_NUMA_NODE_<n>``, ``CUSTOM_PCI_SOCKET_<s>``,
  ``CUSTOM_PCI_NUMA_LOCAL``, ``CUSTOM_PCI_SOCKET_LOCAL``) and upstream's
  host trait ``COMPUTE_SOCKET_PCI_NUMA_AFFINITY``, the free-device
  bands of a host (``CUSTOM_PCI_FREE_<RESOURCE_CLASS>_<BAND>``), the
  sizes it can take without breaking a free group
  (``CUSTOM_PCI_FIT_<RESOURCE_CLASS>_<N>``) and its shard traits
  (``CUSTOM_PCI_SHARD_<i>_<0|1>``), all below;
* resource classes: ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` by default, a spec's
  own class, ``CUSTOM_PCI_GROUP_<TYPE>`` for a static group;
* request group suffixes: ``<request_id>-<i>`` per device,
  ``<request_id>-g`` for the group provider of a group request;
* inventory records.

It sits below nova.compute and nova.scheduler so that both import it and
neither imports the other.
"""

from collections.abc import Iterable, Mapping
import re
import zlib

import os_resource_classes as orc
import os_traits

from nova.pci import device as pci_device
from nova.pci import numa as pci_numa

# Ownership traits.
OWNER_NOVA_TRAIT = 'OWNER_NOVA'
MANAGED_PCI_TRAIT = os_traits.COMPUTE_MANAGED_PCI_DEVICE
# On every provider nova owns for PCI (devices and static groups).
MANAGED_TRAITS = frozenset({MANAGED_PCI_TRAIT, OWNER_NOVA_TRAIT})
# A device nova withholds (nova.pci.partitions.Withheld): its inventory is
# reserved by nova, which lifts that reservation again once the device
# can be used (other reservations nova never lowers).
WITHHELD_TRAIT = 'CUSTOM_PCI_WITHHELD'
# A device that can be used inside its groups but not alone (no partition
# of its own): single-device requests of a group alias forbid it.
GROUP_ONLY_TRAIT = 'CUSTOM_PCI_GROUP_ONLY'
# An unhealthy device (nova.pci.health; also withheld): the refusal
# reason counts these apart from the devices in use.
UNHEALTHY_TRAIT = 'CUSTOM_PCI_UNHEALTHY'

# Default and static-group classes of PCI devices start with this.
PCI_CLASS_PREFIX = 'CUSTOM_PCI_'
_GROUP_PREFIX = 'CUSTOM_PCI_GROUP_'
# CUSTOM_PCI_GROUP_<TYPE>_<SIZE>, where TYPE has letters and underscores
# only (nova.pci.utils.validate_group_type); member traits (_M<i>) and the
# plain type trait do not match.
_GROUP_SIZE_TRAIT_RE = re.compile(r'^CUSTOM_PCI_GROUP_[A-Z]+(?:_[A-Z]+)*_\d+$')

# NUMA locality of PCI providers (device, PF, static group): the node and
# socket of the devices behind them, when all share one.
NODE_TRAIT_PREFIX = 'CUSTOM_PCI_NUMA_NODE_'
SOCKET_TRAIT_PREFIX = 'CUSTOM_PCI_SOCKET_'
# On device group providers: all member devices sit on one NUMA node /
# one socket. Requested for required / socket group requests.
NUMA_LOCAL_TRAIT = 'CUSTOM_PCI_NUMA_LOCAL'
SOCKET_LOCAL_TRAIT = 'CUSTOM_PCI_SOCKET_LOCAL'
# The host-level trait upstream requires for the socket policy.
SOCKET_AFFINITY_TRAIT = 'COMPUTE_SOCKET_PCI_NUMA_AFFINITY'
# Group provider trait a NUMA policy needs, and what it means.
_LOCAL_GROUP_TRAITS = {
    pci_numa.REQUIRED: (NUMA_LOCAL_TRAIT, 'NUMA node'),
    pci_numa.SOCKET: (SOCKET_LOCAL_TRAIT, 'socket'),
}

# Suffix of the resourceless request group on the group provider.
_PARTITION_SUFFIX = 'g'


# Provider names ----------------------------------------------------------

def device_rp_name(nodename: str, address: str) -> str:
    """Provider name of a PCI device, upper-cased as upstream does."""
    return '%s_%s' % (nodename, address.upper())


def group_rp_name(nodename: str, group_name: str) -> str:
    """Provider name of a device group (tree or static)."""
    return '%s_%s' % (nodename, group_name)


def provider_address(dev: pci_device.HostDevice | pci_device.TrackedDevice
                     ) -> str | None:
    """Address of the device whose provider holds ``dev``: its own, or
    for a VF its parent PF's (None if the VF names no parent)."""
    if dev.dev_type in pci_device.WHOLE_DEVICE_TYPES:
        return dev.address
    return dev.parent_addr or None


# Traits ------------------------------------------------------------------

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
    return ('%s%s_%s' % (PCI_CLASS_PREFIX, vendor_id, product_id)).upper()


def is_pci_resource_class(resource_class: str) -> bool:
    """True for the classes nova derives for PCI devices and groups."""
    return resource_class.startswith(PCI_CLASS_PREFIX)


def get_traits(traits: str | None) -> set[str]:
    """Return the Placement trait names for a comma-separated ``traits`` tag.

    Standard os-traits names are kept, others become ``CUSTOM_`` traits.
    Items are not stripped, as in upstream Nova.
    """
    if not traits:
        return set()
    standard = set(os_traits.get_traits())
    return {trait if trait in standard else _custom_name(trait)
            for trait in traits.split(',')}


def group_type_trait(group_type: str) -> str:
    """Trait on every group provider of ``group_type``."""
    return _GROUP_PREFIX + group_type.upper().replace('-', '_')


def group_size_trait(group_type: str, size: int) -> str:
    """Trait on group providers of ``group_type`` holding ``size`` devices."""
    return '%s_%d' % (group_type_trait(group_type), size)


def group_member_trait(group_type: str, size: int, index: int) -> str:
    """Trait on the device at position ``index`` of a group of ``size``.

    Devices of one group are interchangeable; naming each position lets a
    request ask for positions 0..size-1 and get exactly one candidate per
    group instead of every permutation.
    """
    return '%s_M%d' % (group_size_trait(group_type, size), index)


def static_group_resource_class(group_type: str) -> str:
    """Resource class of a static (spec-tagged) group consumed whole."""
    return group_type_trait(group_type)


def is_group_size_trait(trait: str) -> bool:
    """True for the size trait of a device group provider."""
    return bool(_GROUP_SIZE_TRAIT_RE.match(trait))


def is_pci_provider(traits: Iterable[str]) -> bool:
    """True for providers with these traits that nova owns for PCI:
    devices, static groups and device groups."""
    return any(trait == MANAGED_PCI_TRAIT or trait.startswith(_GROUP_PREFIX)
               for trait in traits)


def is_nova_owned_trait(trait: str) -> bool:
    """True for the traits nova sets on its PCI providers and owns: every
    ``CUSTOM_PCI_*`` trait (device groups and their member positions, NUMA
    locality, free-device bands, fitting sizes, shard traits) and the
    ownership traits. Flavors may not name them: a flavor's traits apply
    to the compute node provider, where most of them never are, and nova
    rewrites them anyway.
    """
    return trait.startswith(PCI_CLASS_PREFIX) or trait in MANAGED_TRAITS


def locality_traits(locality: pci_numa.Locality) -> set[str]:
    """Node and socket traits of a PCI provider at ``locality``."""
    traits = set()
    if locality.node is not None:
        traits.add('%s%d' % (NODE_TRAIT_PREFIX, locality.node))
    if locality.socket is not None:
        traits.add('%s%d' % (SOCKET_TRAIT_PREFIX, locality.socket))
    return traits


def group_locality_traits(localities: Iterable[pci_numa.Locality]
                          ) -> set[str]:
    """Locality traits of a device group provider with these members."""
    common = pci_numa.common_locality(localities)
    traits = set()
    if common.node is not None:
        traits.add(NUMA_LOCAL_TRAIT)
    if common.socket is not None:
        traits.add(SOCKET_LOCAL_TRAIT)
    return traits


def locality_from_traits(traits: Iterable[str]) -> pci_numa.Locality:
    """The locality a PCI provider's traits report."""
    values = {}
    for trait in traits:
        for key, prefix in (('node', NODE_TRAIT_PREFIX),
                            ('socket', SOCKET_TRAIT_PREFIX)):
            suffix = trait[len(prefix):]
            if trait.startswith(prefix) and suffix.isdecimal():
                values[key] = int(suffix)
    return pci_numa.Locality(**values)


def local_group_trait(numa_policy: str,
                      guest_cells: int = 1) -> tuple[str, str] | None:
    """The trait a group provider needs to serve a group request with
    ``numa_policy`` for a guest of ``guest_cells`` NUMA cells, and the
    unit it speaks of (``NUMA node``, ``socket``); None when none is
    needed: the policy asks for none, or the guest has several cells, so
    a group may span nodes (nova.pci.numa checks it per candidate)."""
    if guest_cells > 1:
        return None
    return _LOCAL_GROUP_TRAITS.get(numa_policy)


# Request group suffixes ----------------------------------------------------

def device_suffix(request_id: str, index: int) -> str:
    """Suffix of the request group for device ``index`` of PCI request
    ``request_id`` (as upstream); within Placement's
    ``[a-zA-Z0-9_-]{1,64}`` for a UUID request id."""
    return '%s-%d' % (request_id, index)


def partition_suffix(request_id: str) -> str:
    """Suffix of the resourceless group that lands on the group provider
    of a group request."""
    return '%s-%s' % (request_id, _PARTITION_SUFFIX)


def chosen_providers(mappings: Mapping[str, list[str]],
                     device_counts: Mapping[str, int]
                     ) -> dict[str, list[str]]:
    """Provider UUID of each device of each PCI request in a candidate.

    ``mappings`` is an allocation candidate's request group suffix ->
    [provider UUID]; ``device_counts`` the PCI request ids scheduled
    through Placement and their device counts. The result maps each
    request id to its providers in device order; a device whose group is
    missing from ``mappings`` is left out.
    """
    return {request_id: [mappings[suffix][0]
                         for suffix in (device_suffix(request_id, index)
                                        for index in range(count))
                         if mappings.get(suffix)]
            for request_id, count in device_counts.items()}


# Inventory -----------------------------------------------------------------

def inventory_record(total: int, reserved: int = 0,
                     max_unit: int | None = None,
                     allocation_ratio: float = 1.0) -> dict:
    """One resource class's inventory as Placement takes it; ``max_unit``
    defaults to ``total``."""
    return {'total': total, 'reserved': reserved, 'min_unit': 1,
            'max_unit': total if max_unit is None else max_unit,
            'step_size': 1, 'allocation_ratio': allocation_ratio}


def pci_inventory(resource_class: str, total: int,
                  reserved: int = 0) -> dict[str, dict]:
    """Inventory of a PCI provider: ``total`` units of one class."""
    return {resource_class: inventory_record(total, reserved)}


# Free-device bands: a coarse fullness of a host, as root provider traits.
#
# Placement returns at most ``limit`` allocation candidates (1000, as the
# scheduler asks), so on a large fleet a request for one GPU sees only part
# of the hosts that could take it, and packing the fullest host first only
# works on that part. The compute therefore says how many units of each PCI
# resource class it has free, rounded down to a power of two, with one
# trait on its compute node provider::
#
#     CUSTOM_PCI_FREE_<RESOURCE_CLASS>_<BAND>
#
# ``BAND`` is 1 for one free unit, 2 for 2-3, 4 for 4-7, 8 for 8-15 and so
# on; a host with none free has no band trait for that class. The scheduler
# asks the fullest band that can hold the request first and widens only when
# it has no candidate (``nova.scheduler.fullness``). Powers of two match the
# sizes of device groups (pairs, quartets, boards), so a band also bounds
# the largest group a host can still have free.
#
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


# Fitting sizes: request sizes a host can take without breaking a free
# group (nova.pci.free_groups), one root trait each::
#
#     CUSTOM_PCI_FIT_<RESOURCE_CLASS>_<N>
#
# The scheduler asks for hosts with the trait of the request's size before
# the bands (nova.scheduler.fullness). Nova owns these traits and replaces
# them on each update of the provider tree.
FIT_TRAIT_PREFIX = 'CUSTOM_PCI_FIT_'
_FIT_TRAIT_RE = re.compile(r'^%s[A-Z0-9_]+_\d+$' % FIT_TRAIT_PREFIX)


def fit_trait(resource_class: str, size: int | str = '') -> str:
    """Root trait of a host that can take ``size`` units of
    ``resource_class`` without breaking a free group; without a size, the
    prefix of them all."""
    return '%s%s_%s' % (FIT_TRAIT_PREFIX, resource_class, size)


def fit_traits(sizes: Mapping[str, Iterable[int]]) -> set[str]:
    """Fitting-size traits of a host, from its sizes per resource
    class."""
    return {fit_trait(rc, size) for rc, rc_sizes in sizes.items()
            for size in rc_sizes}


def is_fit_trait(trait: str) -> bool:
    return bool(_FIT_TRAIT_RE.match(trait))


# Shards of the fleet: a bounded slice of the hosts for one query.
#
# Placement's cost for a PCI query grows with the fleet (see
# nova.scheduler.band_shards), so each compute also puts the low
# ``SHARD_BITS`` bits of a stable hash of its node name on its compute node
# provider and on every PCI provider, as one trait per bit saying its
# value::
#
#     CUSTOM_PCI_SHARD_<i>_<0 or 1>
#
# Shard ``s`` of level ``m`` (one of 2**m) holds the hosts whose low ``m``
# bits equal ``s``: a query requires the ``m`` traits of those bit values
# (``shard_query``), required traits only, which Placement resolves in one
# join without reading the rest of the fleet. Levels nest: shard ``s`` of
# level ``m + 1`` lies in shard ``s mod 2**m`` of level ``m``. A host that
# publishes no shard trait (not upgraded yet) is in no shard and is found
# by the scheduler's last, whole-fleet query.
#
# Nova owns every trait with this prefix and replaces them on each update
# of the provider tree.
SHARD_TRAIT_PREFIX = 'CUSTOM_PCI_SHARD_'
SHARD_BITS = 8
_SHARD_TRAIT_RE = re.compile(r'^%s\d+_[01]$' % SHARD_TRAIT_PREFIX)


def shard_trait(bit: int, value: int) -> str:
    """Trait of the hosts whose shard number has ``value`` (0 or 1) at
    ``bit``."""
    return '%s%d_%d' % (SHARD_TRAIT_PREFIX, bit, value)


# Every shard trait, which a scheduler makes sure Placement knows (it
# refuses a query naming an unknown trait, e.g. before any compute of a
# shard has reported).
SHARD_TRAITS = frozenset(shard_trait(bit, value)
                         for bit in range(SHARD_BITS) for value in (0, 1))


def shard_number(nodename: str) -> int:
    """The host's shard number at the finest level: a hash of its node
    name that every process computes alike (CRC-32, not ``hash()``)."""
    return zlib.crc32(nodename.encode('utf-8')) & ((1 << SHARD_BITS) - 1)


def shard_traits(nodename: str) -> set[str]:
    """Shard traits of every provider of host ``nodename``."""
    return shard_query(SHARD_BITS, shard_number(nodename))


def is_shard_trait(trait: str) -> bool:
    return bool(_SHARD_TRAIT_RE.match(trait))


def shard_query(level: int, index: int) -> set[str]:
    """Traits to require for shard ``index`` of ``level`` (``0 <= index <
    2**level``, ``level <= SHARD_BITS``)."""
    if not 0 <= level <= SHARD_BITS or not 0 <= index < 1 << level:
        raise ValueError('no shard %d at level %d (levels 0-%d, shards '
                         '0 to 2**level - 1)' % (index, level, SHARD_BITS))
    return {shard_trait(bit, index >> bit & 1) for bit in range(level)}
