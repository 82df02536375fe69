"""nova-manage: operator commands against the nova database."""

import argparse
import getpass
import os
import signal
import sys

from oslo_config import cfg
import sqlalchemy as sa

from nova import cmd
from nova.cmd import defrag
from nova import context as nova_context
from nova import exception
from nova.compute import audit
from nova.compute import pci_placement_translator as translator
from nova.compute import rpcapi as compute_rpcapi
from nova.conf import placement as placement_conf
from nova.db import api as db
from nova.db import migration
from nova.db import records
from nova.db import sqlite
from nova.fleet import board
from nova.fleet import board_svg
from nova.pci import manager as pci_manager
from nova.pci import utils as pci_utils
from nova.scheduler.client import report
from nova.servicegroup import api as servicegroup
from nova.virt.libvirt import gpu_modules
from nova.virt.libvirt import nvlink

# Exit codes of ``placement audit``, as upstream nova-manage has them.
AUDIT_NOTHING_FOUND = 0
AUDIT_FOUND = 3
AUDIT_ALL_DELETED = 4
AUDIT_BAD_INPUT = 127
# A command whose reader went away (a closed pipe), as a shell reports
# one killed by SIGPIPE.
BROKEN_PIPE = 128 + signal.SIGPIPE

_PCI_COLUMNS = ('host', 'address', 'vendor_id', 'product_id', 'group_path',
                'status', 'instance_uuid', 'health', 'not_offered')
_HEALTH_EVENT_COLUMNS = ('created_at', 'host', 'address', 'health', 'source',
                         'actor', 'instance_uuid', 'reason')


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


def _nodes(context, host: str | None
           ) -> list[records.ComputeNode] | None:
    """Compute nodes of ``host`` (all when None); None after printing an
    error naming the known hosts when ``host`` is unknown."""
    nodes = db.compute_node_get_all(context)
    if host is None:
        return nodes
    found = [n for n in nodes if n.host == host]
    if not found:
        known = ', '.join(sorted(n.host for n in nodes))
        print('No compute host %r; known hosts: %s' % (
            host, known or 'none'), file=sys.stderr)
        return None
    return found


def pci_list(host: str | None) -> int:
    """List tracked PCI devices with their group path, status, instance
    and why the compute does not offer a device, if it does not."""
    context = nova_context.get_admin_context()
    nodes = _nodes(context, host)
    if nodes is None:
        return 1
    rows = []
    for node in sorted(nodes, key=lambda n: n.host):
        for dev in pci_manager.devices_of_node(context, node.id):
            rows.append({**dev.to_row(), 'host': node.host,
                         'health': dev.describe_health() or dev.health,
                         'not_offered': dev.withheld})
    _print_table(_PCI_COLUMNS, rows)
    return 0


def placement_audit(conf: cfg.ConfigOpts, verbose: bool = False,
                    delete: bool = False,
                    resource_provider: str | None = None,
                    reportclient: report.SchedulerReportClient | None = None
                    ) -> int:
    """Find (and with ``delete`` remove) what no instance owns.

    Audits the provider trees of every compute node (or only the one whose
    root provider is ``resource_provider``): Placement allocations held by
    consumers that are no building or running instance, and PCI device
    rows claimed by instances not on that host (``nova.compute.audit``).
    ``delete`` removes those allocations; a device is freed here only if
    the compute of its host is down, because a running compute must
    destroy the guest that may still use the device first (its periodic
    audit and its start do). Returns 0 if nothing was found, 3 if
    something found was left, 4 if all of it was removed, 127 for an
    unknown provider.
    """
    context = nova_context.get_admin_context()
    nodes = db.compute_node_get_all(context)
    if resource_provider is not None:
        nodes = [node for node in nodes if node.uuid == resource_provider]
        if not nodes:
            print('No compute node has resource provider %s' %
                  resource_provider, file=sys.stderr)
            return AUDIT_BAD_INPUT
    reportclient = reportclient or report.SchedulerReportClient(conf)
    if verbose:
        for node in nodes:
            print('Auditing compute node %s (resource provider %s)' % (
                node.host, node.uuid))
    orphans = audit.find_orphan_allocations(
        context, reportclient, [node.uuid for node in nodes])
    claims = audit.find_orphan_device_claims(context, nodes)
    for orphan in orphans:
        print('Allocation of consumer %s is orphaned: %s' % (
            orphan.consumer_uuid, orphan.reason))
        if verbose:
            print('  %s' % audit.describe_resources(orphan.resources))
    for claim in claims:
        print('PCI device %s on %s is claimed by %s, which does not own '
              'it: %s' % (claim.address, claim.host, claim.instance_uuid,
                          claim.reason))
    if not orphans and not claims:
        print('No orphaned allocations or PCI device claims found')
        return AUDIT_NOTHING_FOUND
    if not delete:
        print('Found %d orphaned allocation(s) and %d orphaned PCI device '
              'claim(s); run with --delete to remove them' % (
                  len(orphans), len(claims)))
        return AUDIT_FOUND
    removed = audit.remove_allocations(reportclient, orphans)
    for consumer in removed:
        print('Deleted the allocation of consumer %s' % consumer)
    freed = _free_device_claims(context, conf, claims)
    left = len(orphans) - len(removed) + len(claims) - freed
    if left:
        print('%d finding(s) left; see above' % left)
        return AUDIT_FOUND
    return AUDIT_ALL_DELETED


def _free_device_claims(context, conf: cfg.ConfigOpts,
                        claims: list[audit.OrphanDeviceClaim]) -> int:
    """Free the device claims on hosts whose compute is down; count them.
    """
    services = {service.host: service for service in db.service_get_all(
        context, compute_rpcapi.BINARY)}
    freed = 0
    done: set[tuple[int, str]] = set()
    for claim in claims:
        service = services.get(claim.host)
        if servicegroup.is_up(service, conf):
            print('Left PCI device %s on %s to its nova-compute, which is '
                  'up: it destroys the guest of %s before freeing the '
                  'device' % (claim.address, claim.host,
                              claim.instance_uuid))
            continue
        key = (claim.compute_node_id, claim.instance_uuid)
        if key not in done:
            done.add(key)
            tracker = pci_manager.PciDevTracker(context,
                                                claim.compute_node_id)
            tracker.free_instance(claim.instance_uuid)
        print('Freed PCI device %s on %s (compute down: %s), claimed by %s'
              % (claim.address, claim.host,
                 servicegroup.down_reason(service, claim.host),
                 claim.instance_uuid))
        freed += 1
    return freed


def _node_of_device(context, address: str, host: str | None
                    ) -> records.ComputeNode | None:
    """The compute node tracking the device at ``address`` (on ``host``
    if given); None after printing an error naming the hosts to choose
    from."""
    nodes = _nodes(context, host)
    if nodes is None:
        return None
    address = pci_utils.normalize_address(address)
    found = [n for n in nodes if any(
        d.address == address
        for d in pci_manager.devices_of_node(context, n.id))]
    if len(found) == 1:
        return found[0]
    if not found:
        print('No compute host%s tracks PCI device %s' % (
            ' %r' % host if host else '', address), file=sys.stderr)
    else:
        print('PCI device %s is tracked on several hosts (%s); name one '
              'with --host' % (address, ', '.join(
                  sorted(n.host for n in found))), file=sys.stderr)
    return None


def _operator() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = 'unknown user'
    return 'nova-manage (%s)' % user


# Tries of the Placement write of ``pci device set`` when the compute
# writes the same tree concurrently (a generation conflict).
_WITHHOLD_ATTEMPTS = 4


def _reportclient(conf: cfg.ConfigOpts) -> report.SchedulerReportClient:
    """A Placement client as the managed services have: ``[placement]``
    of the config file or, when it names no ``auth_type``, nova-all's
    embedded Placement (noauth2 on 127.0.0.1,
    ``[all_in_one]placement_listen_port``), which nova-all's services
    use whatever ``[placement]`` says."""
    if conf.placement.auth_type is None:
        placement_conf.use_noauth_placement(conf, 'http://127.0.0.1:%d' % (
            conf.all_in_one.placement_listen_port))
    return report.SchedulerReportClient(conf)


def _withhold_in_placement(reportclient: report.SchedulerReportClient,
                           node: records.ComputeNode, address: str) -> str:
    """Stop Placement offering the device at ``address`` of compute
    ``node`` and its groups now (``translator.withhold_unhealthy``), not
    at the compute's next resource update; what happened, in words."""
    later = ('its compute withholds it at its next resource update; until '
             'then its claims refuse the device, so a build given it is '
             'rescheduled')
    attempt = 1
    while True:
        try:
            tree = reportclient.get_provider_tree(node.uuid)
            if tree is None or not translator.withhold_unhealthy(
                    tree, node.hypervisor_hostname, address):
                return 'It has no provider of its own in Placement: ' + later
            reportclient.update_from_provider_tree(tree)
            return 'Placement no longer offers it or its groups'
        except exception.NovaException as err:
            if isinstance(err, exception.ResourceProviderUpdateConflict) \
                    and attempt < _WITHHOLD_ATTEMPTS:
                attempt += 1
                continue
            print('Placement not updated (%s): %s' % (err, later),
                  file=sys.stderr)
            return 'Placement not updated: ' + later


def pci_device_set(conf: cfg.ConfigOpts, address: str, host: str | None,
                   unhealthy: bool, reason: str | None,
                   reportclient: report.SchedulerReportClient | None = None
                   ) -> int:
    """Mark a device unhealthy with a reason, or clear that mark.

    A mark takes effect at once: the compute's claims refuse the device
    (they read its health from the database) and Placement stops
    offering it and its groups before the command returns. A cleared
    mark takes effect at the compute's next resource update, which also
    consults the observations.
    """
    context = nova_context.get_admin_context()
    node = _node_of_device(context, address, host)
    if node is None:
        return 1
    change = pci_manager.set_device_health(
        context, node.id, address, unhealthy, reason, _operator())
    if change is None:
        print('PCI device %s of %s: nothing to change' % (
            address, node.host))
    elif change.healthy:
        print('PCI device %s of %s: operator mark cleared; its observed '
              'health applies from the next resource update' % (
                  address, node.host))
    else:
        print('PCI device %s of %s is unhealthy: %s%s. %s.' % (
            address, node.host, change.reason,
            '; instance %s holds it' % change.instance_uuid
            if change.instance_uuid else '',
            _withhold_in_placement(reportclient or _reportclient(conf),
                                   node, change.address)))
    return 0


def pci_device_history(address: str, host: str | None) -> int:
    """The audit trail of a device's health: every change, who made it
    and why."""
    context = nova_context.get_admin_context()
    node = _node_of_device(context, address, host)
    if node is None:
        return 1
    events = db.pci_device_health_events_get(
        context, node.id, pci_utils.normalize_address(address))
    _print_table(_HEALTH_EVENT_COLUMNS, [
        {**event, 'host': node.host,
         'created_at': event['created_at'].isoformat(timespec='seconds')}
        for event in events])
    return 0


BOARD_FORMATS = ('text', 'svg', 'html')


def pci_board(host: str | None, output_format: str = 'text') -> int:
    """Draw each host's device groups with holders, then the free
    partitions per size across the hosts shown: as text, as the SVG
    picture of one host, or as an HTML page of the hosts' pictures."""
    context = nova_context.get_admin_context()
    nodes = _nodes(context, host)
    if nodes is None:
        return 1
    if output_format == 'svg' and len(nodes) != 1:
        print('--format svg draws one host; name it with --host (hosts: '
              '%s), or use --format html for the fleet' % ', '.join(
                  sorted(n.host for n in nodes)), file=sys.stderr)
        return 1
    boards = board.load(context, nodes)
    if output_format == 'svg':
        print(board_svg.to_svg(boards[0]))
        return 0
    if output_format == 'html':
        print(board_svg.fleet_html(boards))
        return 0
    for host_board in boards:
        print(host_board.draw())
        print()
    print(board.draw_fleet_summary(boards))
    return 0


_PARTITION_COLUMNS = ('partition', 'module_ids', 'addresses', 'fm_state',
                      'nova_holder', 'devices_held_by', 'difference')


def _partition_rows(parts: nvlink.NVLinkPartitions,
                    holder_of_device: dict[str, str | None]) -> list[dict]:
    """One row per FM partition, with what FM and nova each say."""
    holders = parts.holders()
    rows = []
    for partition in parts.partitions():
        addresses = parts.addresses_of(partition)
        holder = holders.get(partition.id)
        users = sorted({holder_of_device.get(a) or '-'
                        for a in addresses or []})
        if addresses is None:
            difference = 'module IDs not all mapped to PCI addresses'
        elif partition.active and holder is None:
            difference = 'ACTIVE in FM, no instance holds it in nova'
        elif holder is not None and not partition.active:
            difference = 'held by %s in nova, NOT ACTIVE in FM' % holder
        elif holder is not None and users != [holder]:
            difference = 'nova records %s, its devices are held by %s' % (
                holder, ', '.join(users))
        else:
            difference = ''
        rows.append({
            'partition': str(partition.id),
            'module_ids': ','.join(map(str, sorted(partition.module_ids))),
            'addresses': ' '.join(addresses or []) or '?',
            'fm_state': 'active' if partition.active else 'inactive',
            'nova_holder': holder, 'devices_held_by': ','.join(users),
            'difference': difference})
    return rows


def pci_partitions(conf, host: str | None) -> int:
    """Fabric Manager's partitions of a host next to nova's records.

    Run on the compute host: it asks FM through [libvirt]fmpm_path and
    reads the module map and records the compute keeps under state_path.
    """
    host = host or conf.host
    parts = nvlink.from_config(conf)
    if parts is None:
        print('[libvirt]nvlink_partitions is %s; nova drives no Fabric '
              'Manager partitions' % conf.libvirt.nvlink_partitions,
              file=sys.stderr)
        return 1
    context = nova_context.get_admin_context()
    try:
        node = db.compute_node_get_by_nodename(context, host)
    except exception.NotFound:
        known = ', '.join(sorted(n.host for n in
                                 db.compute_node_get_all(context)))
        print('No compute host %r; known hosts: %s' % (
            host, known or 'none'), file=sys.stderr)
        return 1
    devices = pci_manager.devices_of_node(context, node.id)
    parts.load(host, [d.address for d in devices
                      if d.vendor_id == gpu_modules.NVIDIA_VENDOR_ID])
    rows = _partition_rows(parts, {d.address: d.instance_uuid
                                   for d in devices})
    _print_table(_PARTITION_COLUMNS, rows)
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
    board_parser = pci_actions.add_parser(
        'board', help='each host\'s groups with free and used devices, '
                      'and free partitions per size')
    board_parser.add_argument('--host', help='only this compute host')
    board_parser.add_argument(
        '--format', choices=BOARD_FORMATS, default='text',
        help='text (default), svg (a picture of one --host) or html (the '
             'pictures of the hosts on one page)')
    device_parser = pci_actions.add_parser(
        'device', help='one device: set its health, show its health '
        'history')
    device_actions = device_parser.add_subparsers(dest='device_action',
                                                  required=True)
    set_parser = device_actions.add_parser(
        'set', help='mark a device unhealthy (it and its groups are not '
        'offered) or clear that mark')
    set_parser.add_argument('address', help='PCI address, e.g. '
                            '0000:18:00.0')
    set_parser.add_argument('--host', help='the compute host, when the '
                            'address is tracked on several')
    health = set_parser.add_mutually_exclusive_group(required=True)
    health.add_argument('--unhealthy', action='store_true',
                        help='take the device out of service')
    health.add_argument('--healthy', action='store_true',
                        help='clear the operator mark')
    set_parser.add_argument('--reason', help='why (required with '
                            '--unhealthy)')
    history_parser = device_actions.add_parser(
        'history', help="every change of a device's health, who made it "
        'and why')
    history_parser.add_argument('address')
    history_parser.add_argument('--host')
    defrag_parser = pci_actions.add_parser(
        'defrag', help='free a whole device group by cold-migrating '
        'servers with metadata pci_defrag=allow')
    steps = defrag_parser.add_subparsers(dest='step', required=True)
    for step, text in (('plan', 'print the cheapest plan; exit 0 with '
                        'one, %d without' % defrag.NO_PLAN),
                       ('apply', 'carry the plan out one confirmed move '
                        'at a time; exit 0 once the group is free, %d '
                        'without a plan, %d at a failed move' % (
                            defrag.NO_PLAN, defrag.MOVE_FAILED))):
        step_parser = steps.add_parser(step, help=text)
        step_parser.add_argument('--size', type=int, required=True,
                                 help='devices in the group to free')
        step_parser.add_argument('--host', help='free it on this host')
        step_parser.add_argument('--max-moves', type=int, default=3,
                                 help='servers to move at most '
                                 '(default 3)')
        if step == 'apply':
            step_parser.add_argument(
                '--timeout', type=float, default=600,
                help='seconds to wait for each migration and confirm '
                '(default 600)')
    placement_parser = categories.add_parser('placement', help='Placement')
    placement_actions = placement_parser.add_subparsers(dest='action',
                                                        required=True)
    audit_parser = placement_actions.add_parser(
        'audit', help='find allocations and PCI device claims that no '
                      'instance owns; exit 0 if none, 3 if some found, 4 '
                      'if all were deleted')
    audit_parser.add_argument('--verbose', action='store_true',
                              help='also print what each allocation holds')
    audit_parser.add_argument('--delete', action='store_true',
                              help='remove what is found')
    audit_parser.add_argument('--resource_provider', metavar='UUID',
                              help='only the compute node with this root '
                                   'resource provider')
    partitions_parser = pci_actions.add_parser(
        'partitions', help="Fabric Manager's NVLink partitions and the "
        'instance holding each, differences to nova marked')
    partitions_parser.add_argument(
        '--host', help='compute host whose records to read (default: '
        '[DEFAULT]host)')
    return parser


def _open_database(conf: cfg.ConfigOpts, command: str) -> bool:
    """Point ``nova.db.api`` at the database of ``conf``; whether it has
    nova's schema (``db sync`` makes it), after saying which database it
    is and what to do if not. The commands read the database of the
    service they manage, which its config file names; a SQLite file that
    does not exist is not created."""
    connection = conf.database.connection
    if command != 'db' and sqlite.is_sqlite_file(connection) and \
            not os.path.exists(sa.engine.make_url(connection).database):
        why = 'the file does not exist'
    else:
        db.configure(conf)
        why = (None if command == 'db' or migration.db_version()
               else 'it has no tables of nova')
    if why is None:
        return True
    print('nova-manage: the nova database %s has no schema (%s). Pass '
          'the --config-file of the service it manages (its [database]'
          'connection, or [DEFAULT]state_path for the default SQLite '
          'file; state_path is %s here), or create the schema with '
          '"nova-manage --config-file ... db sync"' % (
              sa.engine.make_url(connection).render_as_string(
                  hide_password=True), why, conf.state_path),
          file=sys.stderr)
    return False


def _run(args: argparse.Namespace) -> int:
    oslo_args = []
    for path in args.config_file:
        oslo_args += ['--config-file', path]
    try:
        conf = cmd.parse_args(oslo_args, configure_db=False)
        if not _open_database(conf, args.category):
            return 1
        if args.category == 'db':
            return db_sync()
        if args.category == 'placement':
            return placement_audit(conf, args.verbose, args.delete,
                                   args.resource_provider)
        if args.action == 'board':
            return pci_board(args.host, args.format)
        if args.action == 'device' and args.device_action == 'set':
            return pci_device_set(conf, args.address, args.host,
                                  args.unhealthy, args.reason)
        if args.action == 'device':
            return pci_device_history(args.address, args.host)
        if args.action == 'defrag' and args.step == 'plan':
            return defrag.plan(conf, args.size, args.host, args.max_moves)
        if args.action == 'defrag':
            return defrag.apply(conf, args.size, args.host, args.max_moves,
                                args.timeout)
        if args.action == 'partitions':
            return pci_partitions(conf, args.host)
        return pci_list(args.host)
    except exception.NovaException as err:
        print(err, file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. Output cut short by the reader
    (``nova-manage pci board | head``) ends quietly with the status a
    shell gives a command killed by SIGPIPE, as other commands do."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        code = _run(args)
        # What is still buffered goes out now, so that a closed pipe is
        # seen here and not at interpreter exit.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Nothing more can be written there, and Python's flush at exit
        # must not complain about it either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE


if __name__ == '__main__':
    sys.exit(main())
