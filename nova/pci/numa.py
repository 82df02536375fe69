"""PCI NUMA affinity: which devices may serve a guest, and where it runs.

This fork has no NUMA providers in Placement, so the guest's NUMA
placement is derived from its PCI devices and the flavor's
``hw:numa_nodes`` (N, the guest's NUMA cells; 1 without it):

* if any PCI request has policy ``required`` or ``socket``, the guest is
  confined to at most N host NUMA nodes (its vCPUs to their CPUs, its
  memory strictly to them). They are the nodes of the ``required``
  devices, which must therefore sit on N nodes at most (so an 8-GPU board
  spanning two nodes needs ``hw:numa_nodes=2``); without ``required``
  requests they are the N nodes holding most ``socket`` devices (lowest
  id on a tie). Every ``socket`` device must sit on a socket of those
  nodes. A device without NUMA information cannot satisfy either policy.
  Guest cell i is bound to the i-th of these nodes (cycling when there
  are fewer nodes than cells), and a device sits behind a PCIe expander
  bus of the cell of its node (see nova.virt.libvirt.config).
* otherwise, with a ``preferred`` request, the guest follows its devices:
  confined to their nodes when they sit on at most N nodes, unconfined
  when they span more or report none; the scheduler tries candidates
  whose ``preferred`` devices share one node first.
* with ``legacy`` requests only (the default), nothing changes: as
  upstream for a guest without a NUMA topology, devices are not
  restricted and the guest is not confined.

The same rules run twice: in the scheduler on the NUMA traits (see
nova.pci.placement_names) of the device providers of each allocation
candidate (so an invalid candidate is never claimed) and on the compute
on the claimed devices themselves (which then writes the placement into
the guest XML).
"""

import collections
import dataclasses
from collections.abc import Iterable

from nova import exception

REQUIRED = 'required'
PREFERRED = 'preferred'
LEGACY = 'legacy'
SOCKET = 'socket'
_STRICT = (REQUIRED, SOCKET)


@dataclasses.dataclass(frozen=True)
class Locality:
    """Where a device (or a set of devices) sits; None when unknown."""

    node: int | None = None
    socket: int | None = None


@dataclasses.dataclass(frozen=True)
class PlacedRequest:
    """The devices one PCI request got, with its policy, for the checks.
    ``label`` names the request in messages (e.g. the alias)."""

    policy: str
    label: str
    devices: tuple[Locality, ...]


def common_locality(localities: Iterable[Locality]) -> Locality:
    """The node (socket) all ``localities`` share, else None for it."""
    localities = list(localities)
    nodes = {loc.node for loc in localities}
    sockets = {loc.socket for loc in localities}
    return Locality(node=nodes.pop() if len(nodes) == 1 else None,
                    socket=sockets.pop() if len(sockets) == 1 else None)


def _describe(localities: Iterable[Locality], what: str) -> str:
    values = sorted({getattr(loc, what) for loc in localities},
                    key=lambda v: (v is None, v))
    return ', '.join('unknown' if v is None else str(v) for v in values)


def _violation(request: PlacedRequest, reason: str
               ) -> exception.PciNumaAffinityViolation:
    return exception.PciNumaAffinityViolation(
        label=request.label, policy=request.policy, reason=reason)


def guest_nodes(requests: list[PlacedRequest],
                cells: int = 1) -> tuple[int, ...]:
    """The host NUMA node(s) the guest is confined to (see the module
    docstring), at most ``cells`` (its ``hw:numa_nodes``); empty when it
    is not confined.

    Raises PciNumaAffinityViolation naming the request, its policy and
    the nodes its devices sit on when the devices break a policy.
    """
    # A request without devices (not placed through Placement) has
    # nothing to check.
    strict = [r for r in requests if r.policy in _STRICT and r.devices]
    if not strict:
        if not any(r.policy == PREFERRED for r in requests):
            return ()
        nodes = {loc.node for r in requests for loc in r.devices}
        if None in nodes or len(nodes) > cells:
            return ()
        return tuple(sorted(nodes))
    for request in strict:
        if any(loc.node is None for loc in request.devices):
            raise _violation(request, 'a device reports no NUMA node')
    required = [r for r in strict if r.policy == REQUIRED]
    if required:
        nodes = {loc.node for r in required for loc in r.devices}
        if len(nodes) > cells:
            request = required[0]
            raise _violation(request, (
                'its devices sit on NUMA nodes %s but the guest runs on %s'
                % (_describe([loc for r in required for loc in r.devices],
                             'node'),
                   'a single NUMA node' if cells == 1 else
                   '%d NUMA nodes (hw:numa_nodes)' % cells)))
        anchors = tuple(sorted(nodes))
        anchor_sockets = {loc.socket for r in required for loc in r.devices}
    else:
        counts = collections.Counter(loc.node for r in strict
                                     for loc in r.devices)
        anchors = tuple(sorted(sorted(
            counts, key=lambda node: (-counts[node], node))[:cells]))
        anchor_sockets = {loc.socket for r in strict for loc in r.devices
                          if loc.node in anchors}
    for request in strict:
        if request.policy != SOCKET:
            continue
        if None in anchor_sockets or any(
                loc.socket not in anchor_sockets
                for loc in request.devices):
            raise _violation(request, (
                'its devices sit on sockets %s but the guest runs on NUMA '
                'node %s of socket %s' % (
                    _describe(request.devices, 'socket'),
                    ', '.join(str(node) for node in anchors),
                    ', '.join('unknown' if s is None else str(s)
                              for s in sorted(anchor_sockets,
                                              key=lambda v: (v is None,
                                                             v or 0))))))
    return anchors


def prefers_local(requests: list[PlacedRequest]) -> bool:
    """True unless a ``preferred`` request's devices span NUMA nodes (or
    report none): what the scheduler tries first."""
    return all(common_locality(r.devices).node is not None
               for r in requests if r.policy == PREFERRED)
