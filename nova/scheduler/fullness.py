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
band, when every band came back empty.
"""

import dataclasses
from typing import Callable

from nova.pci import placement_names
from nova.scheduler import request_builder


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
        ask: Callable[[list[tuple[str, str]]], dict],
        band_traits: Callable[[str], set[str]],
        usable: Callable[[dict], bool] = lambda response: bool(
            response.get('allocation_requests'))) -> dict:
    """Placement's candidates for ``request``, fullest band first.

    ``ask`` sends one ``GET /allocation_candidates`` with the given query
    parameters and returns the body; ``band_traits(prefix)`` lists the
    traits Placement knows starting with ``prefix`` (the bands some host
    has published); ``usable(body)`` tells whether an answer has a
    candidate the caller may use (e.g. not only on hosts already tried).
    Returns the first usable band's answer, else the answer to the query
    without a band.
    """
    target = banded_resource(request)
    if target is not None:
        rc, count = target
        known = band_traits(placement_names.band_trait(rc))
        for trait in placement_names.eligible_bands(rc, count, known):
            # As a root trait (``root_required``), Placement drops the
            # other hosts before it looks at any request group, so a
            # band query costs what its band holds, not the fleet.
            banded = dataclasses.replace(
                request, root_required=request.root_required | {trait})
            response = ask(banded.to_query_params(limit))
            if usable(response):
                return response
    return ask(request.to_query_params(limit))
