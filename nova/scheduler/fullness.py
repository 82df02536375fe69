"""Ask Placement for the best-fitting hosts first, despite its limit.

Placement answers ``GET /allocation_candidates`` with at most ``limit``
candidates, spread over the hosts it finds first. On a fleet with more
candidates than that (a 1-GPU request on hundreds of GPU hosts), the
fullest hosts may not be among them and packing (``nova.scheduler.
candidates``) only chooses among what came back. Computes therefore
publish, as traits on their root provider (``nova.pci.placement_names``),
the request sizes they can take without breaking a free group and how
full they are (a band). The scheduler asks for hosts the request fits
first, then for the fullest band that can hold it, each with its trait
required on the root (``root_required``), and moves to emptier bands only
when a band has no candidate. Hosts that publish neither (or stale ones)
are still found by the last query, without any, when every band came
back empty. On a large fleet each is asked in one shard of the fleet
first, then in wider ones (``nova.scheduler.band_shards``).
"""

from collections.abc import Sequence
import dataclasses
import random
from typing import Callable

from nova.pci import placement_names
from nova.scheduler import band_shards
from nova.scheduler import request_builder

Ask = Callable[[list[tuple[str, str]]], dict]
Usable = Callable[[dict], bool]

# How many of the hosts a request fits (``nova.pci.free_groups``), listed
# when the first shard has none, are asked before the bands (more than one
# since another scheduler may just have taken one, or it was tried).
FIT_TRIES = 3


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
        ask: Ask, known_traits: Callable[[str], set[str]],
        usable: Usable = lambda response: bool(
            response.get('allocation_requests')),
        shards: Sequence[band_shards.Shard | None] = (None,),
        hosts_with: Callable[[str], list[str]] | None = None) -> dict:
    """Placement's candidates for ``request``: hosts it fits first, then
    the fullest band.

    ``ask`` sends one ``GET /allocation_candidates`` with the given query
    parameters and returns the body; ``known_traits(prefix)`` lists the
    traits Placement knows starting with ``prefix`` (the bands and
    fitting sizes some host has published); ``usable(body)`` tells
    whether an answer has a candidate the caller may use (e.g. not only
    on hosts already tried); ``shards`` are the slices of the fleet to ask
    in turn (``band_shards.widening``; None: the whole fleet);
    ``hosts_with(trait)`` lists the names of the hosts with a root trait.

    Hosts the request fits are asked in the first shard; when it has none
    and the fleet is sharded, ``hosts_with`` names them and the finest
    shard of up to ``FIT_TRIES`` of them is asked (a fitting host is often
    rare: the one host a previous request left a free quad on). Then every
    band of the first shard, fullest first, then of the next shard.
    Returns the first usable answer, else the answer to the query without
    a band or shard.
    """
    target = banded_resource(request)
    if target is not None:
        rc, count = target
        fit = placement_names.fit_trait(rc, count)
        bands = placement_names.eligible_bands(
            rc, count, known_traits(placement_names.band_trait(rc)))
        if fit in known_traits(placement_names.fit_trait(rc)):
            response = _ask_fit(request, fit, limit, ask, usable, shards,
                                hosts_with)
            if response is not None:
                return response
        for shard in shards:
            for band in bands:
                response = ask(_in(request, shard, band).to_query_params(
                    limit))
                if usable(response):
                    return response
    return ask(request.to_query_params(limit))


def _ask_fit(request: request_builder.ResourceRequest, fit: str,
             limit: int | None, ask: Ask, usable: Usable,
             shards: Sequence[band_shards.Shard | None],
             hosts_with: Callable[[str], list[str]] | None) -> dict | None:
    """The first usable answer for hosts with the ``fit`` trait: in the
    first shard, then in the finest shards of some of them."""
    response = ask(_in(request, shards[0], fit).to_query_params(limit))
    if usable(response):
        return response
    if shards[0] is None or hosts_with is None:
        return None
    names = hosts_with(fit)
    for name in random.sample(names, min(FIT_TRIES, len(names))):
        shard = band_shards.Shard(placement_names.SHARD_BITS,
                                  placement_names.shard_number(name))
        response = ask(_in(request, shard, fit).to_query_params(limit))
        if usable(response):
            return response
    return None


def _in(request: request_builder.ResourceRequest,
        shard: band_shards.Shard | None,
        root_trait: str) -> request_builder.ResourceRequest:
    """``request`` in ``shard`` (None: the whole fleet) on hosts with
    ``root_trait``. As a root trait (``root_required``), Placement drops
    the other hosts before it looks at any request group, so an empty
    band (or band of a shard) costs nearly nothing."""
    sliced = request if shard is None else in_shard(request, shard)
    return dataclasses.replace(
        sliced, root_required=sliced.root_required | {root_trait})


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
