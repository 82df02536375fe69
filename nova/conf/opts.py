"""Entry points for oslo-config-generator.

``list_opts`` returns every nova option group so the sample configuration
stays complete as modules add options.
"""

from importlib import metadata

from oslo_config import cfg

import nova.conf

# nova's defaults for oslo.log options: without a log file, services log
# to stderr (stdout carries what commands print).
LOG_DEFAULTS = {'use_stderr': True}


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
    # oslo.log's options as its generator entry point lists them, so the
    # sample shows the defaults nova.cmd sets.
    for entry_point in metadata.entry_points(group='oslo.config.opts',
                                             name='oslo.log'):
        for _group, opts in entry_point.load()():
            cfg.set_defaults(opts, **LOG_DEFAULTS)
