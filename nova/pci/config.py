"""The ``[pci]`` option group parsed and cross-checked as a whole.

Every service loads it when it starts (see nova.cmd), so a bad value stops
any of them with a message naming the option and the value, not only the
service that happens to use that option first.
"""

import dataclasses

from oslo_config import cfg

from nova import exception
from nova.pci import devspec
from nova.pci import groups
from nova.pci import request


@dataclasses.dataclass(frozen=True)
class PciConfig:
    """Parsed ``device_spec``, ``device_group`` and ``alias`` values."""

    whitelist: devspec.Whitelist
    group_tree: groups.GroupTree
    aliases: dict[str, request.PciAlias]

    @property
    def resource_classes(self) -> frozenset[str]:
        """Placement classes of the configured PCI devices."""
        return request.pci_resource_classes(self.aliases, self.whitelist)


def _option(conf: cfg.ConfigOpts, group: str, name: str):
    """``conf.<group>.<name>``; a value of the wrong type is reported as
    ``[group]name: <problem>`` instead of oslo.config's message, which
    names neither the group nor the file in a readable way."""
    try:
        return getattr(getattr(conf, group), name)
    except cfg.ConfigFileValueError as err:
        problem = str(err).rpartition(' is not valid: ')[2]
        raise exception.InvalidConfiguration(
            reason='[%s]%s: %s' % (group, name, problem)) from err


def _check_aliases_schedulable(conf: cfg.ConfigOpts, aliases: list[str],
                               for_compute: bool) -> None:
    """Refuse aliases this service could never serve.

    Flavor PCI requests (plain or group-aware) are scheduled only through
    Placement here: the scheduler has no device filter of its own and the
    compute claims exactly the devices Placement allocated. Without
    Placement PCI scheduling (API side) or reporting (compute side) every
    build with an alias would fail after all retries, so say which option
    to set instead.
    """
    if not aliases:
        return
    group, name = (('pci', 'report_in_placement') if for_compute else
                   ('filter_scheduler', 'pci_in_placement'))
    if _option(conf, group, name):
        return
    raise exception.InvalidConfiguration(reason=(
        '[pci]alias is set but [%s]%s is False; PCI devices are only '
        'scheduled through Placement here, so set [%s]%s = True (with '
        '[pci]report_in_placement = True on the computes and '
        '[filter_scheduler]pci_in_placement = True on the API, scheduler '
        'and conductor), or remove [pci]alias' % (group, name, group, name)))


def _check_group_source(conf: cfg.ConfigOpts, group_tree: groups.GroupTree,
                        report: bool) -> None:
    """Groups discovered from Fabric Manager need FM mode and Placement,
    and leave nothing to declare."""
    if _option(conf, 'pci', 'device_group_source') != 'fabric_manager':
        return
    if group_tree.groups():
        raise exception.InvalidConfiguration(reason=(
            '[pci]device_group is set but [pci]device_group_source is '
            'fabric_manager, which discovers the groups; remove '
            'device_group or set device_group_source = config'))
    mode = _option(conf, 'libvirt', 'nvlink_partitions')
    if mode != 'fabric_manager':
        raise exception.InvalidConfiguration(reason=(
            '[pci]device_group_source = fabric_manager needs '
            '[libvirt]nvlink_partitions = fabric_manager, got %s' % mode))
    if not report:
        raise exception.InvalidConfiguration(reason=(
            '[pci]device_group_source = fabric_manager but '
            '[pci]report_in_placement is False; device groups are '
            'scheduled through Placement, so enable report_in_placement'))


def check_aliases(aliases: dict[str, request.PciAlias],
                  tree: groups.GroupTree,
                  statics: list[groups.StaticGroup]) -> list[str]:
    """Warn about aliases whose ``group_type`` no group of this host has
    (``tree``: its device groups, ``statics``: its static groups).

    Aliases are shared by every host while groups are per host, so this is
    a warning for the compute log, not an error.
    """
    declared = ({g.type for g in tree.groups()} |
                {s.type for s in statics})
    warnings = []
    for name in sorted(aliases):
        group_type = aliases[name].group_type
        if group_type and group_type not in declared:
            warnings.append(
                'PCI alias %s requests group_type %s, but no device group '
                'of that type is declared on this host; declared group '
                'types: %s' % (name, group_type,
                               ', '.join(sorted(declared)) or 'none'))
    return warnings


def load(conf: cfg.ConfigOpts, for_compute: bool = False) -> PciConfig:
    """Parse ``conf.pci``; raise an Invalid subclass naming the bad value.

    ``for_compute`` applies a compute's rules: aliases are checked as for
    Placement scheduling (the only mode in which a compute gets devices
    to claim) and need ``[pci]report_in_placement``; otherwise aliases
    need ``[filter_scheduler]pci_in_placement``.
    """
    report = _option(conf, 'pci', 'report_in_placement')
    whitelist = devspec.Whitelist.from_config(
        _option(conf, 'pci', 'device_spec'), report)
    group_tree = groups.GroupTree.from_config(
        _option(conf, 'pci', 'device_group'))
    if group_tree.groups() and not report:
        raise exception.InvalidConfiguration(reason=(
            '[pci]device_group is set but [pci]report_in_placement is '
            'False; device groups are scheduled through Placement, so '
            'enable report_in_placement'))
    _check_group_source(conf, group_tree, report)
    # Aliases are parsed with the rules of Placement scheduling, the only
    # mode that can serve them, so a bad value is named either way.
    aliases = request.get_alias_from_config(_option(conf, 'pci', 'alias'))
    _check_aliases_schedulable(conf, list(aliases), for_compute)
    return PciConfig(whitelist, group_tree, aliases)
