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
back empty. On a large fleet each band is asked in one shard of the fleet
first, then in wider ones (``nova.scheduler.band_shards``).

On a sharded fleet the hosts a request fits are not asked as a shard but
one host at a time: the scheduler lists them (``GET
/resource_providers`` with the fitting-size and band traits, a listing
of root providers only, fullest band first) and asks a few, drawn at
random, each with ``in_tree`` in every request group that has resources.
Placement narrows its listing of free providers to that one tree only
for ``in_tree``; a shard's traits leave that listing fleet-wide (see
doc/source/admin/scheduling.rst, "Below 0.2 s").
"""

from collections.abc import Sequence
import dataclasses
import random
from typing import Callable, NamedTuple

from nova.pci import placement_names
from nova.scheduler import band_shards
from nova.scheduler import request_builder


class Host(NamedTuple):
    """A compute host as Placement lists it."""

    uuid: str  # its root provider (compute node UUID)
    name: str  # its node name, which its shard traits derive from


Ask = Callable[[list[tuple[str, str]]], dict]
Usable = Callable[[dict], bool]
# The hosts whose root provider has all of a set of traits.
HostsWith = Callable[[set[str]], list[Host]]

# How many of the hosts a request fits (``nova.pci.free_groups``) are asked
# one by one before the bands (more than one since another scheduler may
# just have taken one, or it was tried).
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
        hosts_with: HostsWith | None = None, by_host: bool = True) -> dict:
    """Placement's candidates for ``request``: hosts it fits first, then
    the fullest band.

    ``ask`` sends one ``GET /allocation_candidates`` with the given query
    parameters and returns the body; ``known_traits(prefix)`` lists the
    traits Placement knows starting with ``prefix`` (the bands and
    fitting sizes some host has published); ``usable(body)`` tells
    whether an answer has a candidate the caller may use (e.g. not only
    on hosts already tried); ``shards`` are the slices of the fleet to ask
    in turn (``band_shards.widening``; None: the whole fleet);
    ``hosts_with(traits)`` lists the hosts with those root traits.

    On a fleet that is not sharded, the hosts the request fits are asked
    in one query. On a sharded one, ``hosts_with`` lists them band by
    band, fullest first, and up to ``FIT_TRIES`` of them are asked one at
    a time (``on_host``); with ``by_host`` False (the search before
    per-host queries, which ``tools/bench_fleet.py`` measures beside it)
    the first shard is asked instead, then the finest shards of up to
    ``FIT_TRIES`` fitting hosts. Then every band of the first shard,
    fullest first, then of the next shard. Returns the first usable
    answer, else the answer to the query without a band or shard.
    """
    target = banded_resource(request)
    if target is not None:
        rc, count = target
        fit = placement_names.fit_trait(rc, count)
        bands = placement_names.eligible_bands(
            rc, count, known_traits(placement_names.band_trait(rc)))
        if fit in known_traits(placement_names.fit_trait(rc)):
            if shards[0] is not None and hosts_with is not None and by_host:
                response = _ask_fitting_hosts(request, fit, bands, limit,
                                              ask, usable, hosts_with)
            else:
                response = _ask_fit(request, fit, limit, ask, usable,
                                    shards, hosts_with)
            if response is not None:
                return response
        for shard in shards:
            for band in bands:
                response = ask(_in(request, shard, band).to_query_params(
                    limit))
                if usable(response):
                    return response
    return ask(request.to_query_params(limit))


def _ask_fitting_hosts(request: request_builder.ResourceRequest, fit: str,
                       bands: list[str], limit: int | None, ask: Ask,
                       usable: Usable, hosts_with: HostsWith
                       ) -> dict | None:
    """The first usable answer of up to ``FIT_TRIES`` hosts with the
    ``fit`` trait, each asked alone: from the fullest of ``bands`` that
    has such a host, at random (concurrent decisions so spread over the
    band), then from the next band."""
    left = FIT_TRIES
    for band in bands:
        hosts = hosts_with({fit, band})
        for host in random.sample(hosts, min(left, len(hosts))):
            response = ask(on_host(request, host, fit).to_query_params(
                limit))
            if usable(response):
                return response
            left -= 1
        if not left:
            break
    return None


def on_host(request: request_builder.ResourceRequest, host: Host,
            root_trait: str) -> request_builder.ResourceRequest:
    """``request`` on ``host`` alone, if its root has ``root_trait``.

    Every group with resources gets ``in_tree``: Placement then lists the
    free providers of that tree only. It ignores ``in_tree`` in a group
    without resources (the provider of a device group), and would build
    the summary of every tree in the fleet with such a provider; the
    host's finest shard traits, which every PCI provider carries, bound
    that group to the few hosts of its shard (``in_tree`` of the other
    groups still ties the candidate to ``host``).
    """
    finest = placement_names.shard_traits(host.name)
    groups = [dataclasses.replace(group, in_tree=host.uuid)
              if group.resources else dataclasses.replace(
                  group, required_traits=group.required_traits | finest)
              for group in request.groups]
    return dataclasses.replace(
        request, groups=groups,
        root_required=request.root_required | finest | {root_trait})


def _ask_fit(request: request_builder.ResourceRequest, fit: str,
             limit: int | None, ask: Ask, usable: Usable,
             shards: Sequence[band_shards.Shard | None],
             hosts_with: HostsWith | None) -> dict | None:
    """The first usable answer for hosts with the ``fit`` trait: in the
    first shard, then (on a sharded fleet) in the finest shards of some of
    them."""
    response = ask(_in(request, shards[0], fit).to_query_params(limit))
    if usable(response):
        return response
    if shards[0] is None or hosts_with is None:
        return None
    hosts = hosts_with({fit})
    for host in random.sample(hosts, min(FIT_TRIES, len(hosts))):
        shard = band_shards.Shard(placement_names.SHARD_BITS,
                                  placement_names.shard_number(host.name))
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
