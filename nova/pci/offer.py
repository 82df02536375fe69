"""What a host offers, decided once per observation.

The resource update is a pipeline: observe the host (the virt driver's
``observe_host``), compute the offer (``offer``, here: pure), track it (the
PCI device rows), translate it (the Placement provider tree) and report
it. ``offer`` answers "why is this device not offered?" in one place, in
three layers:

1. the partitions (``partitions.effective_offer``): devices of foreign,
   quarantined or unmappable partitions, and the group tree itself;
2. the NVSwitches that are down (``health.withhold`` with no unhealthy
   device): the ``rows`` view, kept in each device row's ``withheld``
   reason (a device's own health has columns of its own);
3. the unhealthy devices on top (``health.withhold`` with them): the
   ``placement`` view, what Placement and the claims go by.
"""

from collections.abc import Mapping
import dataclasses
from typing import Protocol

from nova.pci import groups as pci_groups
from nova.pci import health as pci_health
from nova.pci import partitions as pci_partitions


@dataclasses.dataclass(frozen=True)
class Declared:
    """What the configuration declares: the ``[pci]device_group`` tree,
    ``[pci]device_group_source`` and ``[libvirt]nvlink_partitions``."""

    tree: pci_groups.GroupTree
    source: str
    mode: str


class Observation(Protocol):
    """The part of one observation of the host the offer depends on
    (``virt.driver.HostObservation`` is one)."""

    @property
    def fabric(self) -> pci_partitions.FabricView: ...

    @property
    def health(self) -> pci_health.HealthReport: ...


@dataclasses.dataclass(frozen=True)
class Offer:
    """What a host offers after one observation.

    ``tree``: the device groups. ``partitions``: what the partitions
    alone withhold. ``switches_down``: the NVSwitches known to be down.
    ``rows``: why each device is withheld, as its row keeps it
    (partitions and NVSwitches). ``placement``: ``rows`` plus the
    unhealthy devices, what Placement is told. ``warnings``: the group
    warnings for the operator. ``fabric_error``: why Fabric Manager could
    not be read (the tree, the partitions' part and the warnings are then
    the previous offer's).
    """

    tree: pci_groups.GroupTree
    partitions: pci_partitions.Withheld
    switches_down: Mapping[str, pci_health.Finding]
    rows: pci_partitions.Withheld
    placement: pci_partitions.Withheld
    warnings: tuple[str, ...] = ()
    fabric_error: str | None = None

    def shape(self) -> list[tuple]:
        """What of the group tree Placement sees: names, devices,
        members."""
        return [(g.name, tuple(g.addresses),
                 tuple(m.name for m in g.members))
                for g in self.tree.groups()]


def initial(declared: Declared) -> Offer:
    """The offer before any observation: the declared groups, nothing
    withheld."""
    nothing = pci_partitions.Withheld()
    return Offer(declared.tree, nothing, {}, nothing, nothing)


def offer(declared: Declared, observation: Observation,
          tracked_health: Mapping[str, str], previous: Offer) -> Offer:
    """The host's offer from ``declared``, ``observation`` and the
    unhealthy devices (``tracked_health``: address -> reason, as the
    device rows hold it once this observation is applied).

    What the observation could not tell stays as in ``previous``: the
    groups and what the partitions withhold when Fabric Manager could
    not be read, the NVSwitches down when no source checked them.
    Raises PciGroupConfigInvalid for a declared group that is no
    partition of Fabric Manager's.
    """
    fabric = observation.fabric
    if fabric.error is not None:
        tree, partitions = previous.tree, previous.partitions
        warnings = previous.warnings
    else:
        found = pci_partitions.effective_offer(
            declared.tree, declared.source, fabric.fabric,
            known=fabric.known, mode=declared.mode)
        tree, partitions = found.tree, found.withheld
        warnings = tuple(found.warnings)
    health = observation.health
    switches_down = dict(health.switches_down) if health.switches_checked \
        else dict(previous.switches_down)
    return Offer(
        tree=tree, partitions=partitions, switches_down=switches_down,
        rows=pci_health.withhold(partitions, tree, {}, switches_down),
        placement=pci_health.withhold(partitions, tree, tracked_health,
                                      switches_down),
        warnings=warnings, fabric_error=fabric.error)
