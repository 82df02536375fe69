"""One scheduling decision: ask Placement, keep what may be used, order,
claim.

``choose`` is the decision nova-scheduler makes for every build and move
(``SchedulerManager._choose`` calls it with its report client and the
compute nodes of the database), and the one ``tools/bench_fleet.py``
replays a workload through, so what the benchmark measures is this code
and not a copy of it. What differs between the two callers is given to
it: the Placement calls (``Placement``) and what the decision knows of the
fleet besides Placement (``Fleet``).

The steps, each a module of its own: Placement's candidates, fullest hosts
first (``nova.scheduler.fullness``, in the shards of
``nova.scheduler.band_shards``); the candidates on usable hosts only; the
PCI NUMA affinity check and preference (``nova.scheduler.numa_affinity``);
the order (``nova.scheduler.candidates.order``: best fit, fullest host);
then the first candidate Placement still accepts is claimed. When every
candidate of an answer was taken concurrently, Placement is asked again,
up to ``rounds`` times.
"""

from collections.abc import Collection, Sequence
import dataclasses
from typing import Callable

from oslo_log import log as logging

from nova import exception
from nova.scheduler import band_shards
from nova.scheduler import candidates as scheduler_candidates
from nova.scheduler import fullness
from nova.scheduler import metrics as scheduler_metrics
from nova.scheduler import numa_affinity
from nova.scheduler import refusal
from nova.scheduler import request_builder

LOG = logging.getLogger(__name__)

Candidate = scheduler_candidates.Candidate
# Candidates of one answer (its provider summaries given) in the order to
# try them.
Order = Callable[[list[Candidate], dict, request_builder.ResourceRequest],
                 list[Candidate]]


@dataclasses.dataclass(frozen=True)
class Placement:
    """The Placement calls of a decision."""

    # One GET /allocation_candidates with these query parameters; its body.
    ask: fullness.Ask
    # The traits Placement knows whose names start with a prefix.
    known_traits: Callable[[str], set[str]]
    # The hosts with all of a set of traits on their root provider.
    hosts_with: fullness.HostsWith
    # Claim one candidate; False when Placement refused it (taken
    # concurrently).
    claim: Callable[[Candidate], bool]
    # Ask the hosts a request fits one at a time (``fullness.on_host``);
    # False: as a shard (the search before, which tools/bench_fleet.py
    # measures beside it).
    fit_by_host: bool = True


@dataclasses.dataclass(frozen=True)
class Fleet:
    """What a decision knows of the fleet besides Placement."""

    # An answer -> the root providers (compute node UUIDs) of its hosts
    # that may be used, and a description of each one dropped.
    usable: Callable[[dict], tuple[Collection[str], list[str]]]
    # Why Placement has no candidate at all, asked only then
    # (``refusal.reasons``).
    refusals: Callable[[], list[refusal.Reason]]
    # The slices of the fleet to ask in turn (``band_shards.for_request``),
    # drawn anew for each query round: a retry may try another shard.
    shards: Callable[[], Sequence[band_shards.Shard | None]] = \
        lambda: (None,)


@dataclasses.dataclass(frozen=True)
class Choice:
    """The candidate claimed and the provider summaries of the answer it
    came from."""

    candidate: Candidate
    summaries: dict


def describe_request(request: request_builder.ResourceRequest) -> str:
    """What an instance asks for, in words, for NoValidHost reasons.

    e.g. "4 VCPU, 4096 MEMORY_MB and a free nvlink group of 2 x PGPU".
    """
    parts = []
    flavor_group = request.groups[0]
    parts.extend('%d %s' % (amount, rc)
                 for rc, amount in flavor_group.resources.items())
    for pci_req in request.pci_requests:
        if pci_req.group_type and pci_req.count >= 2:
            parts.append('a free %s group of %d x %s' % (
                pci_req.group_type, pci_req.count, pci_req.resource_class))
        else:
            parts.append('%d x %s' % (pci_req.count,
                                      pci_req.resource_class))
    if not parts:
        return 'no resources'
    if len(parts) == 1:
        return parts[0]
    return '%s and %s' % (', '.join(parts[:-1]), parts[-1])


def by_fit(candidates: list[Candidate], summaries: dict,
           request: request_builder.ResourceRequest) -> list[Candidate]:
    """The scheduler's order: best fit and fullest host first
    (``candidates.order``), those meeting a ``preferred`` NUMA policy
    before the others."""
    return numa_affinity.prefer_local(
        scheduler_candidates.order(candidates, summaries, request),
        summaries, request)


def choose(request: request_builder.ResourceRequest, placement: Placement,
           fleet: Fleet, limit: int | None, rounds: int = 1,
           order: Order = by_fit, label: str = 'the request') -> Choice:
    """Claim the best candidate for ``request``; the choice made.

    ``limit`` is the ``limit`` of each Placement query (None: none);
    ``rounds`` how many answers are asked for while every candidate of
    one is taken concurrently; ``order`` the order candidates are tried
    in (``by_fit``; a benchmark gives others to compare); ``label`` names
    the request in the log. Raises NoValidHost with a reason in words and
    its ``refusal`` codes when no candidate is left or every claim was
    refused.
    """
    wanted = describe_request(request)
    refused = 0
    # Each round asks Placement afresh, fullest band first: when every
    # candidate of a round was taken by concurrent claims, the next answer
    # shows what is still free (other hosts, other bands).
    for round_number in range(1, rounds + 1):
        ordered, summaries = _ordered_candidates(request, placement, fleet,
                                                 limit, order, wanted)
        for candidate in ordered:
            if placement.claim(candidate):
                return Choice(candidate, summaries)
            scheduler_metrics.CLAIM_CONFLICTS.inc()
        refused += len(ordered)
        if round_number < rounds:
            scheduler_metrics.CLAIM_RETRIES.inc()
        LOG.info('Every candidate of query %d of %d for %s was taken '
                 'concurrently%s', round_number, rounds, label,
                 '; asking Placement again' if round_number < rounds
                 else '')
    scheduler_metrics.refused(refusal.CLAIMS_TAKEN)
    raise exception.NoValidHost(reason=(
        'Placement refused the claims on all %d candidate(s) for %s, '
        'found in %d queries ([scheduler]max_claim_rounds): taken '
        'concurrently by other instances' % (refused, wanted, rounds)),
        codes=[refusal.CLAIMS_TAKEN])


def _ordered_candidates(request: request_builder.ResourceRequest,
                        placement: Placement, fleet: Fleet,
                        limit: int | None, order: Order, wanted: str
                        ) -> tuple[list[Candidate], dict]:
    """Placement's candidates for ``request`` on usable hosts, in the
    order to claim them, and the answer's provider summaries.
    NoValidHost saying why when there is none."""
    response = fullness.allocation_candidates(
        request, limit, placement.ask, placement.known_traits,
        lambda body: bool(_on_hosts(body, fleet.usable(body)[0])),
        fleet.shards(), placement.hosts_with, placement.fit_by_host)
    offered = scheduler_candidates.from_response(response, request)
    if not offered:
        reasons = fleet.refusals()
        codes = [reason.code for reason in reasons]
        scheduler_metrics.refused(*codes)
        raise exception.NoValidHost(reason=refusal.no_candidate(
            wanted, refusal.explain(reasons)), codes=codes)

    usable, dropped = fleet.usable(response)
    kept = [candidate for candidate in offered if candidate.host in usable]
    if not kept:
        scheduler_metrics.refused(refusal.HOSTS_UNUSABLE)
        raise exception.NoValidHost(reason=(
            '%d candidate(s) for %s, all on hosts that cannot be used: '
            '%s' % (len(offered), wanted, '; '.join(dropped))),
            codes=[refusal.HOSTS_UNUSABLE])

    summaries = response.get('provider_summaries', {})
    kept, numa_reasons = numa_affinity.filter_candidates(
        kept, summaries, request)
    if not kept:
        scheduler_metrics.refused(refusal.NUMA_POLICY)
        raise exception.NoValidHost(reason=(
            'no candidate for %s meets the PCI NUMA affinity policy: %s'
            % (wanted, '; '.join(numa_reasons))),
            codes=[refusal.NUMA_POLICY])
    return order(kept, summaries, request), summaries


def _on_hosts(response: dict, usable: Collection[str]) -> list[dict]:
    """The candidates of ``response`` that land on a host in ``usable``."""
    summaries = response.get('provider_summaries', {})
    return [candidate for candidate in response.get('allocation_requests', [])
            if scheduler_candidates.host_root(candidate, summaries) in usable]
