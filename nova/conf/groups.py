"""Registering option groups without sharing state between ConfigOpts."""

from oslo_config import cfg


def register_group_opts(conf: cfg.ConfigOpts, group: cfg.OptGroup,
                        opts: list[cfg.Opt]) -> None:
    """Register ``opts`` under a private copy of ``group`` on ``conf``.

    oslo.config keeps a shallow copy of a registered OptGroup, whose
    per-option state (overrides included) is shared with every other
    ConfigOpts the same module-level group object was registered on. A
    fresh group per ConfigOpts keeps services and tests independent.
    """
    conf.register_group(cfg.OptGroup(group.name, title=group.title,
                                     help=group.help))
    conf.register_opts(opts, group=group.name)
