"""Device health: which tracked PCI devices are broken, and what that
takes out of a host's offer.

A device is ``healthy`` or ``unhealthy`` with a reason, a time and a
source (``TrackedDevice.health*``, persisted on its row, each change also
written to the audit trail). The compute observes health at every
resource update (``HealthReport``, from the virt driver: a device the
hypervisor lists with its PCIe link down, ``nvidia-smi -q`` fields that
mean a GPU is unusable, Fabric Manager's NVLink failed devices); the
operator sets it with ``nova-manage pci device set``.

The rules (``decide``):

* a finding of any source makes a device unhealthy;
* a device an observation made unhealthy is healthy again once the
  source that found the fault checks it and finds nothing, and no other
  source reports it;
* the operator's ``--unhealthy`` wins over every observation until the
  operator clears it with ``--healthy``; ``--healthy`` hands the device
  back to the observations, so one a source still reports broken goes
  unhealthy again at the next update (an operator cannot force a broken
  device into use).

What an unhealthy device takes out of the offer (``withhold``): the
device itself (its inventory reserved, as withheld devices are) and
every group that contains it, at any size; all other groups stay. An
NVSwitch that is down takes every multi-device group of the host (on
HGX boards every multi-GPU NVLink partition runs through all the
NVSwitches, so Fabric Manager activates only single GPUs), leaving the
GPUs offered alone.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from nova import exception
from nova.pci import device as pci_device
from nova.pci import groups as pci_groups
from nova.pci import partitions as pci_partitions

# What set a device's health.
SOURCE_HYPERVISOR = 'hypervisor'
SOURCE_NVIDIA_SMI = 'nvidia-smi'
SOURCE_FABRIC_MANAGER = 'fabric-manager'
SOURCE_OPERATOR = 'operator'
OBSERVED_SOURCES = (SOURCE_HYPERVISOR, SOURCE_NVIDIA_SMI,
                    SOURCE_FABRIC_MANAGER)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One source's reason for calling a device (or NVSwitch) broken."""

    reason: str
    source: str


@dataclasses.dataclass(frozen=True)
class HealthReport:
    """What the compute observed at one update.

    ``findings``: address -> Finding of each device found broken.
    ``checked``: source -> the addresses it could judge (a GPU bound to
    vfio-pci is invisible to nvidia-smi, so its silence says nothing).
    ``switches_down``: NVSwitch address -> Finding. ``switches_checked``:
    whether a source could tell which NVSwitches are down (when it could
    not, the last answer stands).
    """

    findings: Mapping[str, Finding] = dataclasses.field(
        default_factory=dict)
    checked: Mapping[str, frozenset[str]] = dataclasses.field(
        default_factory=dict)
    switches_down: Mapping[str, Finding] = dataclasses.field(
        default_factory=dict)
    switches_checked: bool = False

    def merge(self, other: 'HealthReport') -> 'HealthReport':
        """Both reports' observations (the first finding of a device
        wins)."""
        checked = dict(self.checked)
        for source, addresses in other.checked.items():
            checked[source] = checked.get(source, frozenset()) | addresses
        return HealthReport(
            findings={**other.findings, **self.findings}, checked=checked,
            switches_down={**other.switches_down, **self.switches_down},
            switches_checked=self.switches_checked or
            other.switches_checked)


@dataclasses.dataclass(frozen=True)
class HealthChange:
    """A device's health changing: its new state, why, what said so, and
    the instance holding the device at that moment (if any)."""

    address: str
    health: str
    reason: str | None
    source: str
    instance_uuid: str | None = None

    @property
    def healthy(self) -> bool:
        return self.health == pci_device.HEALTHY


def from_host_devices(devices: list[pci_device.HostDevice]
                      ) -> HealthReport:
    """What the hypervisor's device list says: each device with a
    ``health_problem`` is found broken, every listed device is checked.
    """
    return HealthReport(
        findings={dev.address: Finding(dev.health_problem, SOURCE_HYPERVISOR)
                  for dev in devices if dev.health_problem},
        checked={SOURCE_HYPERVISOR: frozenset(d.address for d in devices)})


def decide(device: pci_device.TrackedDevice, report: HealthReport
           ) -> HealthChange | None:
    """The change ``report`` makes to ``device``'s health (see the
    module docstring for the rules); None when it stays as it is."""
    if not device.healthy and device.health_source == SOURCE_OPERATOR:
        return None
    finding = report.findings.get(device.address)
    if finding is not None:
        if not device.healthy and device.health_reason == finding.reason \
                and device.health_source == finding.source:
            return None
        return HealthChange(device.address, pci_device.UNHEALTHY,
                            finding.reason, finding.source,
                            device.instance_uuid)
    if device.healthy or device.address not in report.checked.get(
            device.health_source or '', frozenset()):
        return None
    return HealthChange(device.address, pci_device.HEALTHY, None,
                        device.health_source, device.instance_uuid)


def unhealthy_after(tracked: Iterable[pci_device.TrackedDevice],
                    new: Iterable[str], report: HealthReport
                    ) -> dict[str, str]:
    """Address -> reason of each device unhealthy once ``report`` is
    applied (``decide``): of the ``tracked`` devices, and of the ``new``
    addresses, tracked from this update on (healthy but for a finding).
    The reason is the one ``PciDevTracker.unhealthy`` will give."""
    unhealthy = {}
    for device in tracked:
        change = decide(device, report)
        if change is None:
            if not device.healthy:
                unhealthy[device.address] = device.health_reason or \
                    device.health_source or ''
        elif not change.healthy:
            unhealthy[device.address] = change.reason or change.source
    for address in new:
        finding = report.findings.get(address)
        if finding is not None:
            unhealthy[address] = finding.reason or finding.source
    return unhealthy


def operator_change(device: pci_device.TrackedDevice, unhealthy: bool,
                    reason: str | None) -> HealthChange | None:
    """What ``nova-manage pci device set`` does to ``device``: mark it
    unhealthy (a non-empty ``reason`` is required) or clear an operator
    mark (``--healthy``; the observations decide again from the next
    update). None when nothing changes. Raises Invalid naming the bad
    value.
    """
    if unhealthy:
        if not reason or not reason.strip():
            raise exception.Invalid(reason=(
                'marking PCI device %s unhealthy needs a reason (--reason '
                'TEXT), e.g. "uncorrectable ECC errors, RMA 1234"' %
                device.address))
        if not device.healthy and device.health_source == SOURCE_OPERATOR \
                and device.health_reason == reason:
            return None
        return HealthChange(device.address, pci_device.UNHEALTHY,
                            reason.strip(), SOURCE_OPERATOR,
                            device.instance_uuid)
    if reason:
        raise exception.Invalid(reason=(
            '--reason %r is only allowed with --unhealthy' % reason))
    if device.healthy:
        return None
    return HealthChange(device.address, pci_device.HEALTHY,
                        'cleared by the operator', SOURCE_OPERATOR,
                        device.instance_uuid)


def withhold(withheld: pci_partitions.Withheld,
             tree: pci_groups.GroupTree,
             unhealthy: Mapping[str, str],
             switches_down: Mapping[str, Finding]
             ) -> pci_partitions.Withheld:
    """``withheld`` plus what broken hardware takes out of the offer:
    each ``unhealthy`` device (address -> reason) and every group of
    ``tree`` holding one; with any NVSwitch in ``switches_down``, every
    multi-device group, its devices offered alone only (see the module
    docstring)."""
    devices = dict(withheld.devices)
    for address, reason in unhealthy.items():
        devices.setdefault(address, 'unhealthy: %s' % reason)
    groups: dict[str, str] = {}
    in_groups: dict[str, str] = {}
    switch_reason = None
    if switches_down:
        switch_reason = '; '.join(
            'NVSwitch %s is down (%s: %s)' % (address, f.source, f.reason)
            for address, f in sorted(switches_down.items())) + \
            ', so no multi-GPU NVLink partition can be activated'
    for group in tree.groups():
        broken = [a for a in group.addresses if a in unhealthy]
        if broken:
            groups[group.name] = 'device %s unhealthy' % ', '.join(broken)
        elif switch_reason and group.size > 1:
            groups[group.name] = switch_reason
        else:
            continue
        if switch_reason:
            for address in group.addresses:
                if address not in devices:
                    in_groups[address] = switch_reason
    alone = dict(withheld.alone)
    for address in set(in_groups) & set(alone):
        # Neither alone nor in a group: not offered at all.
        devices[address] = '%s; %s' % (alone.pop(address),
                                       in_groups.pop(address))
    return pci_partitions.Withheld(
        devices=devices, alone=alone,
        groups={**withheld.groups, **groups},
        group_devices={g.name: tuple(g.addresses) for g in tree.groups()},
        in_groups=in_groups, holds=withheld.holds)
