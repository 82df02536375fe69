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


def load(conf: cfg.ConfigOpts,
         aliases_for_placement: bool | None = None) -> PciConfig:
    """Parse ``conf.pci``; raise an Invalid subclass naming the bad value.

    ``aliases_for_placement`` selects the alias rules of Placement
    scheduling; None takes ``[filter_scheduler]pci_in_placement``.
    """
    if aliases_for_placement is None:
        aliases_for_placement = _option(conf, 'filter_scheduler',
                                        'pci_in_placement')
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
    aliases = request.get_alias_from_config(_option(conf, 'pci', 'alias'),
                                            aliases_for_placement)
    return PciConfig(whitelist, group_tree, aliases)
