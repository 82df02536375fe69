"""Ask Placement for the fullest hosts first, despite its candidate limit.

Placement answers ``GET /allocation_candidates`` with at most ``limit``
candidates, spread over the hosts it finds first. On a fleet with more
candidates than that (a 1-GPU request on hundreds of GPU hosts), the
fullest hosts may not be among them and packing (``nova.scheduler.
candidates``) only chooses among what came back. Computes publish how full
they are as a band trait on their root provider (``nova.pci.placement_names``);
the scheduler asks for the fullest band that can hold the request first,
with that trait required on the root (``root_required``), and moves to
emptier bands only when a band has no candidate. Hosts that publish no
band (or a stale one) are still found by the last query, without any
band, when every band came back empty. On a large fleet the bands are
asked in one shard of the fleet first, then in wider ones
(``nova.scheduler.band_shards``).
"""

from collections.abc import Sequence
import dataclasses
from typing import Callable

from nova.pci import placement_names
from nova.scheduler import band_shards
from nova.scheduler import request_builder

Ask = Callable[[list[tuple[str, str]]], dict]
Usable = Callable[[dict], bool]


def banded_resource(request: request_builder.ResourceRequest
                    ) -> tuple[str, int] | None:
    """The PCI resource class a request's bands are about and how many
    units it asks; None when it asks no PCI device or several classes."""
    units = request.pci_units
    if len(units) != 1:
        return None
    return units.popitem()


def allocation_candidates(
        request: request_builder.ResourceRequest, limit: int | None,
        ask: Ask, band_traits: Callable[[str], set[str]],
        usable: Usable = lambda response: bool(
            response.get('allocation_requests')),
        shards: Sequence[band_shards.Shard | None] = (None,)) -> dict:
    """Placement's candidates for ``request``, fullest band first.

    ``ask`` sends one ``GET /allocation_candidates`` with the given query
    parameters and returns the body; ``band_traits(prefix)`` lists the
    traits Placement knows starting with ``prefix`` (the bands some host
    has published); ``usable(body)`` tells whether an answer has a
    candidate the caller may use (e.g. not only on hosts already tried);
    ``shards`` are the slices of the fleet to ask in turn, every band of
    one before the next (``band_shards.widening``; None: the whole
    fleet). Returns the first usable answer, else the answer to the query
    without a band or shard.
    """
    target = banded_resource(request)
    if target is not None:
        rc, count = target
        known = band_traits(placement_names.band_trait(rc))
        bands = placement_names.eligible_bands(rc, count, known)
        for shard in shards:
            sliced = request if shard is None else in_shard(request, shard)
            for trait in bands:
                # As a root trait (``root_required``), Placement drops the
                # other hosts before it looks at any request group, so an
                # empty band (or band of a shard) costs nearly nothing.
                banded = dataclasses.replace(
                    sliced, root_required=sliced.root_required | {trait})
                response = ask(banded.to_query_params(limit))
                if usable(response):
                    return response
    return ask(request.to_query_params(limit))


def in_shard(request: request_builder.ResourceRequest,
             shard: band_shards.Shard) -> request_builder.ResourceRequest:
    """``request`` limited to the hosts of ``shard``: its traits required
    on the root and in every single-provider group (see
    ``nova.scheduler.band_shards`` for why both)."""
    traits = shard.traits()
    groups = [group if group.suffix is None else dataclasses.replace(
        group, required_traits=group.required_traits | traits)
        for group in request.groups]
    return dataclasses.replace(request, groups=groups,
                               root_required=request.root_required | traits)
