"""Placement's allocation candidates as the scheduler uses them, and
their order: pack GPU hosts.

Each candidate is read once into a :class:`Candidate` (its host and the
device providers it gives each PCI request); the usable-host and NUMA
checks, the weighing below and the claim loop all use that one answer.

Device groups (NVLink partitions) make big requests fragile: an 8-GPU
request needs a host whose whole board is free, a 4-GPU request a free
quartet. Spreading instances over hosts (Nova's usual weighing) breaks a
little of every host; so GPU requests are placed like a buddy allocator
places blocks, best fit first (measured with ``tools/bench_fleet.py``, see
doc/source/admin/scheduling.rst):

1. Best fit over the whole fleet: the candidate whose largest broken free
   group is smallest. A group is broken when it is wholly free now and
   the candidate takes some, but not all, of its devices. One GPU goes
   next to a busy partner (breaks nothing) before it breaks a free pair,
   a pair before a quartet, a quartet before a wholly free board; two
   GPUs go into an already broken quartet before a free one.
2. Then hosts fullest first: fewest free devices of the requested PCI
   resource classes, counted over the host's provider tree. Ties: lowest
   root provider UUID.
3. Inside the host, fewest broken free groups; then the candidate whose
   device provider UUIDs sort lowest, then Placement's order.

Requests without PCI devices in Placement all tie on both keys and are
ordered by host UUID; weighing those is left to the generic weighers.

Input is the JSON body of ``GET /allocation_candidates`` at microversion
1.39, whose ``provider_summaries`` cover every provider of each candidate
host's tree (with ``parent_provider_uuid``, ``root_provider_uuid``,
``traits`` and ``resources`` ``{RC: {capacity, used}}``), also the group
providers that have no inventory.
"""

import collections
import typing

from nova.pci import placement_names as names
from nova.scheduler import request_builder


class Candidate(typing.NamedTuple):
    """One allocation candidate, ready to check and claim."""

    host: str                 # root provider UUID of the host
    allocation_request: dict  # as returned: ``allocations``, ``mappings``
    # PCI request id -> device provider UUIDs chosen, in device order.
    pci_providers: dict[str, list[str]]


class HostView:
    """Free devices and free groups of one host, from provider summaries."""

    def __init__(self, root: str, tree: dict, pci_rcs: set[str]):
        """``tree``: the provider summaries of the host's tree."""
        self.root = root
        children = collections.defaultdict(list)
        for uuid, summary in tree.items():
            parent = summary.get('parent_provider_uuid')
            if parent:
                children[parent].append(uuid)

        def is_free(uuid: str) -> bool:
            return all(res.get('used', 0) == 0
                       for res in tree[uuid].get('resources', {}).values())

        self.free_pci = sum(
            max(res.get('capacity', 0) - res.get('used', 0), 0)
            for summary in tree.values()
            for rc, res in summary.get('resources', {}).items()
            if rc in pci_rcs)
        # Wholly free groups, as the set of device providers below each.
        self.free_groups: list[frozenset[str]] = []
        for uuid, summary in tree.items():
            if not any(names.is_group_size_trait(trait)
                       for trait in summary.get('traits', [])):
                continue
            devices = set()
            pending = list(children[uuid])
            while pending:
                child = pending.pop()
                pending.extend(children[child])
                if tree[child].get('resources'):
                    devices.add(child)
            if devices and all(is_free(dev) for dev in devices):
                self.free_groups.append(frozenset(devices))

    def damage(self, taken: set[str]) -> tuple[int, int]:
        """Size of the largest wholly free group ``taken`` would leave
        half used (0 if none), and how many it would."""
        broken = [len(devices) for devices in self.free_groups
                  if devices & taken and not devices <= taken]
        return max(broken, default=0), len(broken)


def host_root(candidate: dict, summaries: dict) -> str:
    """Root provider (compute node UUID) of the host a candidate lands on.

    The unsuffixed group's providers (VCPU, MEMORY_MB) tell the host; a
    sharing provider would be a root of its own. Without an unsuffixed
    group, the lowest root among the allocated providers. The scheduler
    manager (which hosts are usable) and the weighing use this one answer.
    """
    mapped = candidate.get('mappings', {}).get('', [])
    uuids = mapped or sorted(candidate['allocations'])
    roots = [summaries[uuid]['root_provider_uuid'] for uuid in uuids]
    return roots[0] if mapped else min(roots)


def taken_providers(chosen: dict[str, list[str]]) -> set[str]:
    """The PCI providers a candidate takes, from ``pci_providers``."""
    return {uuid for uuids in chosen.values() for uuid in uuids}


def from_response(candidates_response: dict,
                  request: request_builder.ResourceRequest
                  ) -> list[Candidate]:
    """Every allocation candidate of a ``GET /allocation_candidates``
    answer for ``request``, with its host and chosen providers, in
    Placement's order."""
    summaries = candidates_response.get('provider_summaries', {})
    return [Candidate(host=host_root(candidate, summaries),
                      allocation_request=candidate,
                      pci_providers=request.pci_providers(candidate))
            for candidate in candidates_response.get(
                'allocation_requests', [])]


def select_candidates(candidates_response: dict,
                      request: request_builder.ResourceRequest
                      ) -> list[Candidate]:
    """Every allocation candidate of the answer, best first (``order``)."""
    return order(from_response(candidates_response, request),
                 candidates_response.get('provider_summaries', {}), request)


def order(candidates: list[Candidate], summaries: dict,
          request: request_builder.ResourceRequest) -> list[Candidate]:
    """``candidates`` best first (see module docstring); ``summaries``
    are the answer's provider summaries.

    Every candidate is returned once; the caller claims the first and
    falls back to the next ones when a claim fails.
    """
    pci_rcs = request.pci_resource_classes
    hosts: dict[str, HostView] = {}
    # Summaries by host once, not once per host: a large fleet's response
    # has thousands of them.
    trees: dict[str, dict] = collections.defaultdict(dict)
    for uuid, summary in summaries.items():
        trees[summary.get('root_provider_uuid')][uuid] = summary
    keyed = []
    for position, candidate in enumerate(candidates):
        root = candidate.host
        if root not in hosts:
            hosts[root] = HostView(root, trees[root], pci_rcs)
        host = hosts[root]
        taken = taken_providers(candidate.pci_providers)
        largest, count = host.damage(taken)
        key = (largest, host.free_pci, root, count, sorted(taken),
               position)
        keyed.append((key, candidate))
    keyed.sort(key=lambda item: item[0])
    return [candidate for _key, candidate in keyed]
