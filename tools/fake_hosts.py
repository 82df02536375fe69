"""Write generated GPU hosts and the config files to run nova-all on them.

Each ``NAME=KIND`` argument writes ``DIR/NAME.xml`` (a libvirt test:///
node file) and ``DIR/NAME.conf`` (that compute's [libvirt] and [pci]);
``DIR/nova.conf`` gets what every service shares (the alias, PCI
scheduling through Placement, and ``state_path``: ``DIR/state`` as an
absolute path, so that nova-all and ``nova-manage --config-file
DIR/nova.conf`` use the same databases from any directory). Kinds:
``hgx-h200`` (8 GPUs: four NVLink pairs, two quartets, the board) and
``h200-nvl`` (4 GPUs: two NVLink pairs). nova-all gives every generated
host 1 GiB hugepage pools of 7/8 of each NUMA node's memory
(``nova.virt.fake.host.hugepage_pools``: the test driver reports none).
Prints the nova-all command line. Example::

    .venv/bin/python tools/fake_hosts.py --dir hosts \\
        hgx-1=hgx-h200 nvl-1=h200-nvl
"""

import argparse
import json
import os
import sys

from nova import exception
from nova.virt.fake import host as fakehost


def write_fleet(directory: str, hosts: dict[str, str]) -> list[str]:
    """Write every host of ``hosts`` (name -> kind) and the shared
    config; return the nova-all command line that runs them."""
    argv = ['nova-all', '--config-file',
            os.path.join(directory, 'nova.conf')]
    for name, kind in hosts.items():
        path = fakehost.write_compute_config(kind, name, directory)
        argv += ['--compute', '%s=%s' % (
            name, os.path.join(directory, os.path.basename(path)))]
    lines = ['[DEFAULT]', 'state_path = %s' % os.path.abspath(
                 os.path.join(directory, 'state')), '',
             '[filter_scheduler]', 'pci_in_placement = true', '',
             '[pci]', 'alias = %s' % json.dumps(fakehost.H200_ALIAS)]
    with open(os.path.join(directory, 'nova.conf'), 'w',
              encoding='utf-8') as conf_file:
        conf_file.write('\n'.join(lines) + '\n')
    return argv


def _parse(values: list[str]) -> dict[str, str]:
    hosts = {}
    for value in values:
        name, sep, kind = value.partition('=')
        if not sep or not name or kind not in fakehost.HOST_KINDS:
            raise ValueError('%r is not allowed; the form is NAME=KIND with '
                             'KIND one of %s' % (
                                 value, ', '.join(sorted(
                                     fakehost.HOST_KINDS))))
        if name in hosts:
            raise ValueError('host %s is given twice' % name)
        hosts[name] = kind
    return hosts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dir', required=True,
                        help='directory to write the files to')
    parser.add_argument('hosts', nargs='+', metavar='NAME=KIND')
    args = parser.parse_args(argv)
    try:
        command = write_fleet(args.dir, _parse(args.hosts))
    except (ValueError, exception.Invalid) as err:
        print(err, file=sys.stderr)
        return 2
    print(' '.join(command))
    return 0


if __name__ == '__main__':
    sys.exit(main())
