"""Why Placement had no candidate for a request, in an operator's words.

An empty ``GET /allocation_candidates`` says nothing about the cause. For
the NoValidHost fault this module asks Placement smaller questions, one
part of the request at a time: is there a host with the flavor's VCPU,
MEMORY_MB or DISK_GB free, a compute with each required trait, enough free
devices of each PCI request (with its traits), and, for a device group
request, a wholly free group of the requested size (on one NUMA node or
socket when its NUMA affinity policy needs it). A GPU request is then
refused either for lack of free GPUs or for fragmentation: GPUs are free,
but no free partition of that size exists. Unhealthy devices (reserved,
with ``CUSTOM_PCI_UNHEALTHY``) are counted apart from the ones in use, so
a refusal says when broken hardware is what is missing. A size whose
groups all exist but are withheld (``CUSTOM_PCI_WITHHELD``, no size
trait) is refused for that, ``UNHEALTHY`` or ``WITHHELD``, naming each
group with its host and why as the database has it (``nova.fleet.board``),
never for fragmentation: moving servers frees none of them. A size no
host declares is refused as such before any count of free devices.

Each reason carries a code (``CODES``), the label the scheduler's refusal
counter uses, so dashboards count refusals by cause without reading the
text. The NoValidHost exception carries the codes too (its ``codes``
kwarg), so callers across RPC act on the cause without reading the text:
the conductor frees a group for a refusal whose only code is
``FRAGMENTATION`` (``nova.conductor.defrag``).
"""

from collections.abc import Callable, Iterable
import dataclasses

from nova.fleet import board
from nova.pci import placement_names as names
from nova.scheduler import request_builder

# Why a request found no candidate, one code per kind of reason.
NO_FLAVOR_RESOURCES = 'flavor_resources'
NO_TRAIT = 'required_trait'
NO_FREE_DEVICE = 'no_free_device'
NO_DEVICE_WITH_TRAIT = 'device_trait'
TOO_FEW_DEVICES = 'too_few_devices'
NO_GROUP_SIZE = 'no_group_of_size'
NO_LOCAL_GROUP = 'no_local_group'
FRAGMENTATION = 'fragmentation'
# Every group of the size exists but is withheld: for an unhealthy
# device in it, or by its compute for another cause (a partition active
# outside nova, a quarantined partition, an NVSwitch down).
UNHEALTHY = 'unhealthy_devices'
WITHHELD = 'withheld_groups'
SPREAD = 'spread_over_hosts'
# Refusals after Placement offered candidates (see nova.scheduler.manager).
HOSTS_UNUSABLE = 'hosts_unusable'
NUMA_POLICY = 'numa_policy'
CLAIMS_TAKEN = 'claims_taken'
CODES = (NO_FLAVOR_RESOURCES, NO_TRAIT, NO_FREE_DEVICE, NO_DEVICE_WITH_TRAIT,
         TOO_FEW_DEVICES, NO_GROUP_SIZE, NO_LOCAL_GROUP, FRAGMENTATION,
         UNHEALTHY, WITHHELD, SPREAD, HOSTS_UNUSABLE, NUMA_POLICY,
         CLAIMS_TAKEN)
# Not a reason of its own (not counted, not in CODES): a NoValidHost code
# added to the reasons when deleted servers still hold capacity in
# Placement, so the refusal may not last (see nova.scheduler.manager).
LEAKED_CAPACITY = 'leaked_capacity'


@dataclasses.dataclass(frozen=True)
class Reason:
    """One reason nothing fits: its code (one of ``CODES``) and words."""

    code: str
    text: str


def _devices(count: int, rc: str) -> str:
    return '%d %s device%s' % (count, rc, '' if count == 1 else 's')


def _flavor_reasons(reportclient,
                    group: request_builder.RequestGroup) -> list[Reason]:
    reasons = []
    for rc, amount in sorted(group.resources.items()):
        if not reportclient.count_providers(resources={rc: amount}):
            reasons.append(Reason(NO_FLAVOR_RESOURCES, 'no host has %d %s '
                                  'free' % (amount, rc)))
    for trait in sorted(group.required_traits):
        if not reportclient.count_providers(required=[trait]):
            reasons.append(Reason(NO_TRAIT, 'no compute has the required '
                                  'trait %s' % trait))
    return reasons


def _unhealthy(reportclient, traits: list[str]) -> str:
    """`` (N unhealthy device(s) not counted)`` when PCI devices with
    ``traits`` are unhealthy, else ''."""
    count = reportclient.count_providers(
        required=[names.UNHEALTHY_TRAIT] + traits)
    if not count:
        return ''
    return ' (%d unhealthy device%s not counted)' % (
        count, '' if count == 1 else 's')


@dataclasses.dataclass(frozen=True)
class WithheldGroup:
    """A device group its compute does not offer: where, and why."""

    host: str
    path: str
    why: str
    # One of its devices is unhealthy (else a partition active outside
    # nova, a quarantined partition, an NVSwitch down, ...).
    unhealthy: bool

    def describe(self) -> str:
        return '%s %s: %s' % (self.host, self.path, self.why)


def withheld_groups(boards: Iterable[board.HostBoard], resource_class: str,
                    size: int) -> list[WithheldGroup]:
    """The groups of ``size`` devices of ``resource_class`` on ``boards``
    that their computes do not offer, and why (its unhealthy devices with
    their health, else the board's reasons)."""
    found = []
    for host_board in boards:
        for path, members in host_board.group_paths():
            if len(members) != size or {board.resource_class(d)
                                        for d in members} != {resource_class}:
                continue
            broken = [d for d in members if board.unhealthy(d)]
            why = ', '.join('%s %s' % (d.address, d.describe_health())
                            for d in broken) or '; '.join(
                w.reason for w in host_board.not_offered(members))
            if why:
                found.append(WithheldGroup(host_board.host, path, why,
                                           bool(broken)))
    return found


def _withheld_reasons(pci_req, withheld: list[WithheldGroup],
                      count: int) -> list[Reason]:
    """Why ``count`` groups of the request's size are withheld: for
    unhealthy devices and for other causes apart, each group named with
    its host and why (``withheld``, as the database has them)."""
    kind = '%s group' % pci_req.group_type
    found = []
    for code, words, groups in (
            (UNHEALTHY, 'withheld for unhealthy devices',
             [g for g in withheld if g.unhealthy]),
            (WITHHELD, 'withheld by their computes',
             [g for g in withheld if not g.unhealthy])):
        if groups:
            found.append(Reason(code, '%d %s(s) of %d %s (%s)' % (
                len(groups), kind, pci_req.count, words,
                '; '.join(g.describe() for g in groups))))
    if not found:
        found.append(Reason(WITHHELD, '%d %s(s) of %d withheld by their '
                            'computes (see nova-manage pci board)' % (
                                count, kind, pci_req.count)))
    return found


def _group_reasons(reportclient, pci_req,
                   boards: Callable[[], Iterable[board.HostBoard]]
                   ) -> tuple[list[Reason], int]:
    """Why no group of the request's size can be had, whatever is in
    use: no host declares one (every declared group has a device with
    its first member-index trait), or every one is withheld (a withheld
    group has no size trait). No reason when some group is offered; and
    how many are withheld."""
    size_trait = names.group_size_trait(pci_req.group_type, pci_req.count)
    declared = reportclient.count_providers(required=[
        names.group_member_trait(pci_req.group_type, pci_req.count, 0)])
    if not declared:
        return [Reason(NO_GROUP_SIZE, (
            'no %s group of %d on any host (no host declares one, trait %s)'
            % (pci_req.group_type, pci_req.count, size_trait)))], 0
    withheld = declared - reportclient.count_providers(
        required=[size_trait])
    if withheld < declared:
        return [], withheld
    found = _withheld_reasons(pci_req, withheld_groups(
        boards(), pci_req.resource_class, pci_req.count), declared)
    first = 'no %s group of %d is offered: %s' % (
        pci_req.group_type, pci_req.count, found[0].text)
    return [dataclasses.replace(found[0], text=first)] + found[1:], withheld


def _pci_reasons(reportclient, pci_req, numa_cells: int,
                 boards: Callable[[], Iterable[board.HostBoard]]
                 ) -> list[Reason]:
    """Why one PCI request cannot be met; empty if its devices exist."""
    grouped = bool(pci_req.group_type) and pci_req.count >= 2
    withheld_count = 0
    if grouped:
        found, withheld_count = _group_reasons(reportclient, pci_req, boards)
        if found:
            return found
    rc = pci_req.resource_class
    one = {rc: 1}
    traits = sorted(pci_req.traits)
    free = reportclient.count_providers(resources=one)
    if not free:
        return [Reason(NO_FREE_DEVICE, 'no %s device is free on any host%s'
                       % (rc, _unhealthy(reportclient, traits)))]
    if traits:
        missing = [t for t in traits
                   if not reportclient.count_providers(resources=one,
                                                       required=[t])]
        if missing:
            return [Reason(NO_DEVICE_WITH_TRAIT,
                           '%s free, none with the required trait(s) %s' % (
                               _devices(free, rc), ', '.join(missing)))]
        free = reportclient.count_providers(resources=one, required=traits)
    if free < pci_req.count:
        return [Reason(TOO_FEW_DEVICES, 'only %s free, %d needed%s' % (
            _devices(free, rc), pci_req.count,
            _unhealthy(reportclient, traits)))]
    if not grouped:
        return []
    size_trait = names.group_size_trait(pci_req.group_type, pci_req.count)
    local = names.local_group_trait(pci_req.numa_policy, numa_cells)
    if local and not reportclient.count_providers(
            required=[size_trait, local[0]]):
        return [Reason(NO_LOCAL_GROUP, (
            'NUMA affinity policy %s needs a %s group of %d devices '
            'all on one %s (trait %s), and no host has one; groups '
            'spanning %ss are only used with policy preferred or '
            'legacy' % (pci_req.numa_policy, pci_req.group_type,
                        pci_req.count, local[1], local[0], local[1])))]
    # Some group of the size is offered and every offered one is partly
    # used: moving servers can free one. Withheld ones are named apart,
    # as moving servers frees none of them.
    also = ''.join('; %s' % reason.text for reason in _withheld_reasons(
        pci_req, withheld_groups(boards(), rc, pci_req.count),
        withheld_count)) if withheld_count else ''
    return [Reason(FRAGMENTATION, (
        'fragmentation: %s free, but no %s group of %d is wholly free '
        '(the free devices sit in partly used groups)%s%s' % (
            _devices(free, rc), pci_req.group_type, pci_req.count,
            _unhealthy(reportclient, traits), also)))]


def reasons(reportclient, request: request_builder.ResourceRequest,
            boards: Callable[[], Iterable[board.HostBoard]] = list
            ) -> list[Reason]:
    """What kept Placement from finding any candidate for ``request``.

    Each part of the request that no host can give is named; when every
    part exists somewhere, the parts are on different hosts. ``boards``
    reads the fleet's boards (``nova.fleet.board``), asked only to name
    the groups that are withheld and why.
    """
    found = _flavor_reasons(reportclient, request.groups[0])
    for pci_req in request.pci_requests:
        found.extend(_pci_reasons(reportclient, pci_req,
                                  request.numa_cells, boards))
    return found or [Reason(SPREAD, 'each part is free somewhere, but no '
                                    'single host has all')]


def explain(found: list[Reason]) -> str:
    """The reasons in words, for the NoValidHost fault."""
    return '; '.join(reason.text for reason in found)


def no_candidate(wanted: str, explanation: str) -> str:
    """The NoValidHost reason of a request (``wanted``, in words) that
    Placement had no candidate for, and why (``explain``)."""
    return 'no host can provide %s: %s' % (wanted, explanation)
