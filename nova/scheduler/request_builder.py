"""Translate a flavor and its PCI requests into a Placement query.

The scheduler asks ``GET /allocation_candidates`` (microversion 1.39) for
hosts that can hold an instance. This module builds that query:

* one unsuffixed group with the flavor's VCPU, MEMORY_MB and DISK_GB, as
  overridden by ``resources:<RC>`` / ``trait:<T>`` extra specs;
* one suffixed group of one unit per requested PCI device, so that every
  device comes from its own device provider and can be mapped back to its
  PCI request (PCI devices are only scheduled through Placement here:
  ``nova.pci.config`` refuses to start a service with ``[pci]alias`` but
  without ``[filter_scheduler]pci_in_placement``);
* for an alias with a ``group_type`` and a count N >= 2, a position trait on
  every device group plus a resourceless group on a group provider of size
  N, all tied together by ``same_subtree``: Placement then returns exactly
  one candidate per free device group of size N (see
  doc/source/admin/pci-groups.rst, "What Placement shows"). With NUMA
  policy ``required`` (``socket``) that group provider must also say its
  devices share one NUMA node (socket);
* with policy ``socket``, the host trait COMPUTE_SOCKET_PCI_NUMA_AFFINITY
  in the unsuffixed group, as upstream.

Operators never write ``same_subtree``; only ``group_policy`` may be set in
the flavor, to ``none`` or ``isolate``.
"""

from collections.abc import Collection, Sequence
import dataclasses
import re
from urllib import parse

import os_resource_classes as orc
import os_traits

from nova.db import records
from nova import exception
from nova.pci import numa as pci_numa
from nova.pci import placement_names as names
from nova.pci import request as pci_request
from nova.virt import guest_hardware

GROUP_POLICIES = ('none', 'isolate')

_RESOURCES_KEY_RE = re.compile(r'^resources([^:]*):(.*)$')
_TRAIT_KEY_RE = re.compile(r'^trait([^:]*):(.*)$')
_NAME_RE = re.compile(r'^[A-Z0-9_]+$')
_STANDARD_TRAITS = frozenset(os_traits.get_traits())
# Placement stores amounts as 32-bit signed integers.
_MAX_AMOUNT = 2 ** 31 - 1


@dataclasses.dataclass
class RequestGroup:
    """One request group of the Placement query.

    ``suffix`` None is the unsuffixed group (resources may be spread over
    the host's tree); a suffixed group is served by a single provider.
    ``requester_id`` is the PCI request id for groups made from a PCI
    request, None for the flavor's own group.
    """

    suffix: str | None = None
    resources: dict[str, int] = dataclasses.field(default_factory=dict)
    required_traits: set[str] = dataclasses.field(default_factory=set)
    forbidden_traits: set[str] = dataclasses.field(default_factory=set)
    requester_id: str | None = None
    # Root provider UUID of the one tree the group's resources must come
    # from (Placement's ``in_tree<S>``); None: any.
    in_tree: str | None = None

    def query_params(self) -> list[tuple[str, str]]:
        """``resources<S>``, ``required<S>`` and ``in_tree<S>``
        parameters of this group."""
        suffix = self.suffix or ''
        params = []
        if self.resources:
            params.append(('resources' + suffix, ','.join(
                '%s:%d' % (rc, amount)
                for rc, amount in sorted(self.resources.items()))))
        if self.in_tree is not None:
            params.append(('in_tree' + suffix, self.in_tree))
        traits = sorted(self.required_traits) + sorted(
            '!' + trait for trait in self.forbidden_traits)
        if traits:
            params.append(('required' + suffix, ','.join(traits)))
        return params


@dataclasses.dataclass
class ResourceRequest:
    """All request groups and request-wide parameters of one query, with
    the PCI requests they were built from (the scheduler's later steps,
    NUMA affinity and refusal reasons, read them from here)."""

    groups: list[RequestGroup] = dataclasses.field(default_factory=list)
    same_subtree: list[list[str]] = dataclasses.field(default_factory=list)
    group_policy: str | None = None
    root_required: set[str] = dataclasses.field(default_factory=set)
    pci_requests: list[pci_request.InstancePCIRequest] = dataclasses.field(
        default_factory=list)
    # The guest's NUMA cells (the flavor's hw:numa_nodes, 1 without it).
    numa_cells: int = 1

    @property
    def pci_device_counts(self) -> dict[str, int]:
        """PCI request id -> number of devices (one one-device group
        each)."""
        return {pci_req.request_id: pci_req.count
                for pci_req in self.pci_requests}

    def to_query_params(self, limit: int | None) -> list[tuple[str, str]]:
        """Sorted ``(name, value)`` pairs for GET /allocation_candidates.

        Sorting makes the query deterministic, so equal requests give
        equal query strings (and tests can compare them exactly).
        """
        params = []
        for group in self.groups:
            params.extend(group.query_params())
        for suffixes in self.same_subtree:
            params.append(('same_subtree', ','.join(sorted(suffixes))))
        if self.group_policy:
            params.append(('group_policy', self.group_policy))
        if self.root_required:
            params.append(('root_required',
                           ','.join(sorted(self.root_required))))
        if limit is not None:
            params.append(('limit', str(limit)))
        return sorted(params)

    def to_querystring(self, limit: int | None) -> str:
        """The URL query string (without ``?``) of this request.

        ``,``, ``:`` and ``!`` are left unescaped: they are legal in a
        query string and keep logs readable.
        """
        return parse.urlencode(self.to_query_params(limit), safe=',:!')

    def pci_providers(self, candidate: dict) -> dict[str, list[str]]:
        """The device providers an allocation candidate gives each PCI
        request scheduled through Placement: request id -> provider UUIDs
        in device order."""
        return names.chosen_providers(candidate.get('mappings', {}),
                                      self.pci_device_counts)

    @property
    def pci_units(self) -> dict[str, int]:
        """Units of each resource class the PCI groups request."""
        units: dict[str, int] = {}
        for group in self.groups:
            if group.requester_id in self.pci_device_counts:
                for rc, amount in group.resources.items():
                    units[rc] = units.get(rc, 0) + amount
        return units

    @property
    def pci_resource_classes(self) -> set[str]:
        """Resource classes requested by the PCI groups."""
        return set(self.pci_units)


def _invalid(key: str, value: object, reason: str) -> exception.NovaException:
    return exception.FlavorExtraSpecInvalid(
        key=key, value=value, reason=reason)


def _check_name(key: str, value: object, name: str, kind: str,
                standard: frozenset | set) -> None:
    # Placement answers 400 for unknown names; failing here names the
    # flavor key instead of a bare Placement error.
    if not _NAME_RE.match(name) or not (
            name in standard or name.startswith('CUSTOM_')):
        raise _invalid(key, value, (
            '%r is not a standard %s nor a CUSTOM_ one (upper case '
            'letters, digits and underscores)' % (name, kind)))


def _check_not_pci(key: str, value: object, rc: str,
                   pci_resource_classes: Collection[str]) -> None:
    # PCI devices are only assigned for pci_passthrough:alias requests; a
    # device class in the flavor's own group would be allocated in
    # Placement and never attached by the compute.
    if rc in pci_resource_classes or names.is_pci_resource_class(rc):
        raise _invalid(key, value, (
            '%s is a PCI device resource class (configured: %s; and every '
            '%s* class); the compute only assigns devices requested with '
            'pci_passthrough:alias=<alias>:<count>, so use that instead' % (
                rc, ', '.join(sorted(pci_resource_classes)) or 'none',
                names.PCI_CLASS_PREFIX)))


def _check_not_nova_owned(key: str, value: object, trait: str) -> None:
    # Group, locality and band traits sit on nova's PCI providers (or are
    # rewritten by nova on the root), so as a flavor trait they either
    # match no host or mean nothing; a device group is asked by alias.
    if names.is_nova_owned_trait(trait):
        raise _invalid(key, value, (
            '%s is a trait nova sets on its PCI providers (every %s* trait, '
            '%s); flavor traits apply to the compute node, not to device '
            'groups or devices. To ask for a device group use '
            'pci_passthrough:alias=<alias>:<count> with an alias that has '
            'a group_type' % (trait, names.PCI_CLASS_PREFIX,
                              ', '.join(sorted(names.MANAGED_TRAITS)))))


def _ungranular(key: str, value: object, match: re.Match, kind: str,
                use: str) -> str:
    """The name in a ``resources:<RC>`` / ``trait:<T>`` key (``match``
    of its regex); a granular ``<kind><N>:`` key is refused, advising
    ``use``."""
    suffix, name = match.groups()
    if suffix:
        raise _invalid(key, value, (
            'granular request groups (%s<N>:) are not supported; use %s'
            % (kind, use)))
    return name


def _apply_extra_specs(group: RequestGroup, extra_specs: dict,
                       pci_resource_classes: Collection[str]) -> None:
    """Apply ``resources:<RC>=<n>`` and ``trait:<T>=required|forbidden``."""
    for key, value in sorted(extra_specs.items()):
        match = _RESOURCES_KEY_RE.match(key)
        if match:
            rc = _ungranular(key, value, match, 'resources', (
                'resources:<RESOURCE_CLASS>, and pci_passthrough:alias '
                'for PCI devices'))
            _check_name(key, value, rc, 'resource class', orc.STANDARDS)
            text = str(value).strip()
            amount = int(text) if text.isascii() and text.isdecimal() \
                else -1
            if not 0 <= amount <= _MAX_AMOUNT:
                raise _invalid(key, value, (
                    'the amount must be an integer from 0 to %d' %
                    _MAX_AMOUNT))
            if amount:
                _check_not_pci(key, value, rc, pci_resource_classes)
                group.resources[rc] = amount
            else:
                # 0 drops a class the flavor would otherwise ask for.
                group.resources.pop(rc, None)
            continue
        match = _TRAIT_KEY_RE.match(key)
        if match:
            trait = _ungranular(key, value, match, 'trait', 'trait:<TRAIT>')
            _check_name(key, value, trait, 'trait', _STANDARD_TRAITS)
            _check_not_nova_owned(key, value, trait)
            if value == 'required':
                group.required_traits.add(trait)
                group.forbidden_traits.discard(trait)
            elif value == 'forbidden':
                group.forbidden_traits.add(trait)
                group.required_traits.discard(trait)
            else:
                raise _invalid(key, value,
                               'allowed values are required, forbidden')


def _flavor_group(flavor: records.FlavorSnapshot,
                  pci_resource_classes: Collection[str]) -> RequestGroup:
    resources = {}
    for rc, amount in ((orc.VCPU, flavor.vcpus),
                       (orc.MEMORY_MB, flavor.memory_mb),
                       (orc.DISK_GB, flavor.root_gb)):
        if amount > 0:
            resources[rc] = amount
    group = RequestGroup(resources=resources)
    _apply_extra_specs(group, flavor.extra_specs, pci_resource_classes)
    return group


def _pci_groups(pci_req: pci_request.InstancePCIRequest, numa_cells: int
                ) -> tuple[list[RequestGroup], list[str] | None]:
    """Request groups of one PCI request, and its same_subtree if any.

    Suffixes are those of nova.pci.placement_names: one per device and
    one for the group provider, stable and unique per request.
    """
    rid = pci_req.request_id
    count = pci_req.count
    partition = bool(pci_req.group_type) and count >= 2
    # One device of a group alias is a partition of one device: not a
    # device that can only be used inside its groups.
    forbidden = {names.GROUP_ONLY_TRAIT} if pci_req.group_type and \
        count == 1 else set()
    groups = []
    for index in range(count):
        traits = set(pci_req.traits)
        if partition:
            # Position i of the group: one candidate per group, not one
            # per permutation of its interchangeable devices.
            traits.add(names.group_member_trait(
                pci_req.group_type, count, index))
        groups.append(RequestGroup(
            suffix=names.device_suffix(rid, index),
            resources={pci_req.resource_class: 1},
            required_traits=traits, forbidden_traits=set(forbidden),
            requester_id=rid))
    if not partition:
        return groups, None
    group_traits = {names.group_size_trait(pci_req.group_type, count)}
    # A group whose devices span NUMA nodes (sockets) can never meet
    # required (socket) affinity, so Placement must not offer it.
    local = names.local_group_trait(pci_req.numa_policy, numa_cells)
    if local:
        group_traits.add(local[0])
    groups.append(RequestGroup(
        suffix=names.partition_suffix(rid),
        required_traits=group_traits,
        requester_id=rid))
    return groups, [group.suffix for group in groups]


def _group_policy(extra_specs: dict) -> str | None:
    value = extra_specs.get('group_policy')
    if value is None:
        return None
    if value not in GROUP_POLICIES:
        raise _invalid('group_policy', value, 'allowed values are %s' % (
            ', '.join(GROUP_POLICIES)))
    return value


def check_extra_specs(extra_specs: dict,
                      pci_resource_classes: Collection[str] = ()) -> None:
    """Refuse ``resources*:``, ``trait*:`` and ``group_policy`` extra
    specs that cannot work, as ``flavor set`` and server create both must.

    ``pci_resource_classes`` are the classes of configured PCI devices;
    they (and any ``CUSTOM_PCI_*`` class) may not be requested with
    ``resources:``. Raises FlavorExtraSpecInvalid naming the key, the value
    and what is allowed.
    """
    _apply_extra_specs(RequestGroup(), extra_specs, pci_resource_classes)
    _group_policy(extra_specs)


def build_resource_request(
        flavor: records.FlavorSnapshot,
        pci_requests: Sequence[pci_request.InstancePCIRequest],
        pci_resource_classes: Collection[str] = ()) -> ResourceRequest:
    """Build the Placement query for one instance of ``flavor``.

    Every PCI request adds its groups, and the request
    carries ``pci_requests``. ``group_policy`` defaults to ``none`` as soon
    as there is a suffixed group: several devices of one request must be
    allowed to share a parent, and Placement requires a policy with more
    than one suffixed group. Raises FlavorExtraSpecInvalid naming the bad
    key and value (see check_extra_specs).
    """
    extra_specs = flavor.extra_specs
    request = ResourceRequest(groups=[_flavor_group(
        flavor, pci_resource_classes)], pci_requests=list(pci_requests),
        numa_cells=guest_hardware.numa_cells_of(extra_specs) or 1)
    policy = _group_policy(extra_specs)
    for pci_req in pci_requests:
        groups, subtree = _pci_groups(pci_req, request.numa_cells)
        request.groups.extend(groups)
        if subtree:
            request.same_subtree.append(subtree)
        if pci_req.numa_policy == pci_numa.SOCKET:
            # As upstream: only hosts that can tell a device's socket.
            request.groups[0].required_traits.add(
                names.SOCKET_AFFINITY_TRAIT)
    if any(group.suffix for group in request.groups):
        request.group_policy = policy or 'none'
    return request
