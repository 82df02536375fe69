"""Configuration of one compute inside a multi-compute process (nova-all).

Each compute of ``nova-all --compute NAME=FILE`` reads its own file on top
of the process-wide configuration, exactly as a separate ``nova-compute``
started with ``--config-file <shared files> --config-file FILE`` would:
an option the compute file sets wins, every other option keeps the
process-wide value (files, defaults and overrides alike). Only options a
compute reads for itself may be set there; the database, messaging and
API options are one per process.

The compute's configuration parses the shared files too, not only its
own: options registered only when they are used (the credentials of the
keystoneauth plugin ``[glance]auth_type`` names) are then read from the
files that set them, as for the process-wide configuration.
"""

from oslo_config import cfg

import nova.conf
from nova import exception

# Whole groups a compute file may set, and single [DEFAULT] options.
PER_COMPUTE_GROUPS = ('pci', 'libvirt')
PER_COMPUTE_DEFAULTS = ('instances_path', 'reserved_host_disk_mb',
                        'disk_allocation_ratio', 'update_resources_interval')

# oslo.config's own command-line options, not configuration.
_CLI_ONLY = ('config_file', 'config_dir', 'config_source')


def _options(conf: cfg.ConfigOpts):
    """(group name or None, option name) of every option of ``conf``."""
    for name in conf:
        if isinstance(getattr(conf, name), cfg.ConfigOpts.GroupAttr):
            for opt in conf[name]:
                yield name, opt
        elif name not in _CLI_ONLY:
            yield None, name


def _allowed(group: str | None, name: str) -> bool:
    if group is None:
        return name in PER_COMPUTE_DEFAULTS
    return group in PER_COMPUTE_GROUPS


def _layer(conf: cfg.ConfigOpts, own: cfg.ConfigOpts,
           shared: cfg.ConfigOpts) -> list[str]:
    """Give ``conf`` the value of the compute file (parsed alone in
    ``own``) for every option it sets, and the shared value of every other
    one; return the options the file sets but may not.

    The file's own value replaces the shared one even for a multi-valued
    option (``[pci]alias``), which parsing both files would merge.
    """
    refused = []
    for group, name in _options(own):
        location = own.get_location(name, group)
        if location is not None and location.location == cfg.Locations.user:
            if not _allowed(group, name):
                refused.append('[%s]%s' % (group or 'DEFAULT', name))
            conf.set_override(name, getattr(own[group] if group else own,
                                            name), group=group)
            continue
        section = shared[group] if group else shared
        try:
            value = getattr(section, name)
        except cfg.NoSuchOptError:
            continue
        conf.set_override(name, value, group=group)
    return refused


def _parsed(args: list[str]) -> cfg.ConfigOpts:
    """nova's options, parsed from the files of ``args`` only."""
    conf = cfg.ConfigOpts()
    nova.conf.register_all(conf)
    conf(args, project='nova', default_config_files=[],
         default_config_dirs=[])
    return conf


def layered(shared: cfg.ConfigOpts, config_file: str) -> cfg.ConfigOpts:
    """A new ConfigOpts: ``config_file`` layered on ``shared``.

    Raises InvalidConfiguration naming the file and any option it sets
    that cannot differ between the computes of one process.
    """
    # The shared files first, so that the compute file wins. What the
    # compute file sets is told from a parse of it alone: oslo.config
    # does not say which of several files set a value.
    args = []
    for path in shared.config_file or []:
        args += ['--config-file', path]
    for path in shared.config_dir or []:
        args += ['--config-dir', path]
    own_args = ['--config-file', config_file]
    try:
        conf = _parsed(args + own_args)
        refused = _layer(conf, _parsed(own_args), shared)
    except cfg.Error as err:
        raise exception.InvalidConfiguration(reason=(
            'compute config file %s: %s' % (config_file, err))) from err
    if refused:
        raise exception.InvalidConfiguration(reason=(
            'compute config file %s sets %s, which every compute of the '
            'process shares; a compute file may set the [%s] sections and '
            '[DEFAULT] %s' % (config_file, ', '.join(sorted(refused)),
                              '] and ['.join(PER_COMPUTE_GROUPS),
                              ', '.join(PER_COMPUTE_DEFAULTS))))
    return conf
