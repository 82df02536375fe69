"""PCI NUMA affinity of allocation candidates (see nova.pci.numa).

Placement already refuses device groups that span NUMA nodes (sockets)
for ``required`` (``socket``) group requests of a one-cell guest, through
the group providers' locality traits. What one query cannot say is that
devices of different request groups share a node (or, for a guest of
several cells, sit on no more nodes than it has); this module checks that
on each candidate, from the NUMA traits Placement returns in
``provider_summaries``, before the scheduler orders and claims them.
"""

from nova import exception
from nova.pci import numa as pci_numa
from nova.pci import placement_names as names
from nova.scheduler import candidates as scheduler_candidates
from nova.scheduler import request_builder


def _placed(candidate: scheduler_candidates.Candidate, summaries: dict,
            request: request_builder.ResourceRequest
            ) -> list[pci_numa.PlacedRequest]:
    """The device localities each PCI request gets in ``candidate``."""
    placed = []
    for pci_req in request.pci_requests:
        localities = tuple(
            names.locality_from_traits(
                summaries.get(rp_uuid, {}).get('traits', ()))
            for rp_uuid in candidate.pci_providers.get(
                pci_req.request_id, []))
        placed.append(pci_numa.PlacedRequest(
            policy=pci_req.numa_policy,
            label='%s:%d' % (pci_req.alias_name, pci_req.count),
            devices=localities))
    return placed


def filter_candidates(candidates: list[scheduler_candidates.Candidate],
                      summaries: dict,
                      request: request_builder.ResourceRequest
                      ) -> tuple[list[scheduler_candidates.Candidate],
                                 list[str]]:
    """Split ``candidates`` into those whose devices meet every request's
    NUMA policy and the distinct reasons the others do not;
    ``summaries`` are the answer's provider summaries."""
    kept, reasons = [], []
    for candidate in candidates:
        try:
            pci_numa.guest_nodes(_placed(candidate, summaries, request),
                                 request.numa_cells)
        except exception.PciNumaAffinityViolation as exc:
            if exc.message not in reasons:
                reasons.append(exc.message)
            continue
        kept.append(candidate)
    return kept, reasons


def prefer_local(candidates: list[scheduler_candidates.Candidate],
                 summaries: dict,
                 request: request_builder.ResourceRequest
                 ) -> list[scheduler_candidates.Candidate]:
    """``candidates`` with those whose ``preferred`` requests have all
    their devices on one NUMA node first, each part in its given order."""
    return sorted(candidates, key=lambda candidate: not
                  pci_numa.prefers_local(_placed(candidate, summaries,
                                                 request)))
