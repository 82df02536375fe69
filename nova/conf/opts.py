"""Entry points for oslo-config-generator.

``list_opts`` returns every nova option group so the sample configuration
stays complete as modules add options.
"""

from oslo_config import cfg

import nova.conf


def list_opts() -> list:
    """Return ``[(group, [opts])]`` for all nova option modules."""
    merged: dict = {}
    for module in nova.conf._MODULES:
        for group, opts in module.list_opts().items():
            key = group.name if isinstance(group, cfg.OptGroup) else group
            entry = merged.setdefault(key, (group, []))
            entry[1].extend(opts)
    return [(group, opts) for group, opts in merged.values()]


def set_defaults(conf: cfg.ConfigOpts = nova.conf.CONF) -> None:
    """Apply nova's defaults for options owned by libraries."""
    nova.conf.database.register_opts(conf)
