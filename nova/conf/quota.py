"""[quota] options: the default limits of every project, as upstream's.

A project's own limits (``PUT /os-quota-sets/{project_id}``) and the
``default`` quota class (``PUT /os-quota-class-sets/default``) override
these; -1 means unlimited. ``pci_alias_limits`` is this fork's: the
default number of devices of each ``[pci]alias`` a project may hold.

Names and the other defaults are upstream's, but ``instances``, ``cores``
and ``ram`` default to unlimited here: one GPU server of this fork's
flavors (8 vCPUs per GPU pair and more) would already exceed upstream's
20 cores, and an upgrade must not stop a running cloud's projects from
booting. An operator caps projects deliberately: here, in the
``default`` quota class, or per project.
"""

from oslo_config import cfg

from nova.conf import groups

quota_group = cfg.OptGroup(
    'quota', title='Quota options',
    help='Default per-project limits of the Compute API (-1: unlimited).')

_LIMIT = {'min': -1}

quota_opts = [
    cfg.IntOpt('instances', default=-1, **_LIMIT,
               help='Servers a project may have. Upstream\'s default is '
                    '10; this fork\'s is unlimited (see the module '
                    'docstring).'),
    cfg.IntOpt('cores', default=-1, **_LIMIT,
               help='Virtual CPUs (the sum of the flavors\' vcpus) a '
                    'project\'s servers may have. Upstream\'s default is '
                    '20; this fork\'s is unlimited.'),
    cfg.IntOpt('ram', default=-1, **_LIMIT,
               help='Megabytes of RAM (the sum of the flavors\' memory_mb) '
                    'a project\'s servers may have. Upstream\'s default '
                    'is 51200; this fork\'s is unlimited.'),
    cfg.IntOpt('metadata_items', default=128, **_LIMIT,
               help='Metadata items a server may have (shown, not '
                    'enforced here).'),
    cfg.IntOpt('injected_files', default=5, **_LIMIT,
               help='Injected files (personality) of a server; shown '
                    'before microversion 2.57. This fork injects no '
                    'files.'),
    cfg.IntOpt('injected_file_content_bytes', default=10 * 1024, **_LIMIT,
               help='Bytes of one injected file; shown before 2.57.'),
    cfg.IntOpt('injected_file_path_length', default=255, **_LIMIT,
               help='Length of an injected file\'s path '
                    '(injected_file_path_bytes); shown before 2.57.'),
    cfg.IntOpt('key_pairs', default=100, **_LIMIT,
               help='Key pairs a user may have (shown, not enforced '
                    'here).'),
    cfg.IntOpt('server_groups', default=10, **_LIMIT,
               help='Server groups a project may have.'),
    cfg.IntOpt('server_group_members', default=10, **_LIMIT,
               help='Servers a server group may have.'),
    cfg.DictOpt('pci_alias_limits', default={},
                help='Default number of PCI devices of each [pci]alias a '
                     'project\'s servers may hold, e.g. "h200:16" (the '
                     'alias name, a colon and the limit; -1 or an alias '
                     'not listed: unlimited). A project\'s own limits are '
                     'set with PUT /v2.1/os-quota-sets/{project_id}/'
                     'pci-aliases; see the admin guide\'s quota page.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, quota_group, quota_opts)


def list_opts() -> dict:
    return {quota_group: quota_opts}
