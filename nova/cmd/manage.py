"""nova-manage: operator commands against the nova database."""

import argparse
import sys

from nova import cmd
from nova import context as nova_context
from nova import exception
from nova.db import api as db
from nova.db import migration

_PCI_COLUMNS = ('host', 'address', 'vendor_id', 'product_id', 'group_path',
                'status', 'instance_uuid')


def _print_table(columns: tuple[str, ...], rows: list[dict]) -> None:
    cells = [[str(row.get(c) or '-') for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells])
              for i, c in enumerate(columns)]
    line = '+' + '+'.join('-' * (w + 2) for w in widths) + '+'
    print(line)
    print('| ' + ' | '.join(c.ljust(w) for c, w in zip(columns, widths)) +
          ' |')
    print(line)
    for row in cells:
        print('| ' + ' | '.join(v.ljust(w) for v, w in zip(row, widths)) +
              ' |')
    print(line)


def pci_list(host: str | None) -> int:
    """List tracked PCI devices with their group path, status, instance."""
    context = nova_context.get_admin_context()
    nodes = db.compute_node_get_all(context)
    if host is not None:
        nodes = [n for n in nodes if n['host'] == host]
        if not nodes:
            known = ', '.join(sorted(n['host'] for n in
                                     db.compute_node_get_all(context)))
            print('No compute host %r; known hosts: %s' % (
                host, known or 'none'), file=sys.stderr)
            return 1
    rows = []
    for node in sorted(nodes, key=lambda n: n['host']):
        for dev in db.pci_device_get_all_by_node(context, node['id']):
            rows.append({**dev, 'host': node['host']})
    _print_table(_PCI_COLUMNS, rows)
    return 0


def db_sync() -> int:
    """Create or upgrade the nova database schema."""
    migration.db_sync()
    print('Database schema is at revision %s' % migration.db_version())
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='nova-manage')
    parser.add_argument('--config-file', action='append', default=[],
                        help='nova.conf to read (repeatable)')
    categories = parser.add_subparsers(dest='category', required=True)
    db_parser = categories.add_parser('db', help='database schema')
    db_actions = db_parser.add_subparsers(dest='action', required=True)
    db_actions.add_parser('sync', help='create or upgrade the schema')
    pci_parser = categories.add_parser('pci', help='PCI devices')
    pci_actions = pci_parser.add_subparsers(dest='action', required=True)
    list_parser = pci_actions.add_parser(
        'list', help='devices with group path, status and instance')
    list_parser.add_argument('--host', help='only this compute host')
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    oslo_args = []
    for path in args.config_file:
        oslo_args += ['--config-file', path]
    try:
        cmd.parse_args(oslo_args)
        if args.category == 'db':
            return db_sync()
        return pci_list(args.host)
    except exception.NovaException as err:
        print(err, file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
