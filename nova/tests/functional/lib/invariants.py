"""What must hold in a nova deployment, whatever load or faults it saw.

:func:`check` reads the three sources of truth (the Compute API over REST,
Placement over REST, the nova database through ``nova.db.api``) and
returns one human-readable string per violation; an empty list means the
deployment is consistent. Functional tests assert on it and the soak
script prints it, so it works the same against an in-process ``nova-all``
and a separate-process deployment (the caller points ``nova.db.api`` at
the deployment's database first, e.g. with ``nova.db.api.configure``).

Checked:

- no server is in BUILD (only with ``settled=True``);
- an ACTIVE, SHUTOFF or SHELVED (not offloaded) server holds exactly as
  many device rows as its flavor's ``pci_passthrough:alias`` asks for,
  and, on a host with device groups, they are exactly the devices of one
  group (a single device for 1);
- every held device row belongs to an instance that exists and is one of
  those or building, and device status and holder agree;
- no device provider is allocated to more than one consumer;
- Placement's device allocations of such a server are exactly its
  device rows, and it has allocations only in its host's provider tree;
- every consumer with allocations is an ACTIVE, SHUTOFF, SHELVED (not
  offloaded), VERIFY_RESIZE or building server, or a migration in
  progress (any other consumer, e.g. a SHELVED_OFFLOADED server, is a
  leak);
- a server in VERIFY_RESIZE (or evacuated from a compute that has not
  come back yet) holds one partition of its new flavor on its host
  (allocated to it) and one of its old flavor on the source of the move
  (allocated to the migration), told apart by PCI request id and host;
- no provider's usage exceeds its capacity;
- no allocation on an unhealthy device except the one it had: the only
  consumer allowed on an unhealthy device's provider is the instance
  that held the device when it became unhealthy (its inventory is
  reserved, so that allocation alone may exceed the capacity left).

The reads are not one snapshot: check a deployment at rest (no request in
flight) or expect transient findings about servers that were changing.
"""

import collections
from collections.abc import Sequence

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import requests

from nova import context as nova_context
from nova.db import api as db
from nova.db import records
from nova.pci import request as pci_request

PLACEMENT_MICROVERSION = '1.39'
COMPUTE_MICROVERSION = '2.47'
ALIAS_SPEC = 'pci_passthrough:alias'
# Device statuses in which a row belongs to an instance.
_HELD = ('claimed', 'allocated')
# Instance vm_states that may hold devices and allocations.
_HOLDING = ('active', 'building', 'stopped', 'shelved', 'resized')
# vm_state -> status of servers that must hold exactly their flavor's
# devices and allocation on their host (a stopped or shelved, not
# offloaded, server keeps them as an ACTIVE one does).
_SETTLED = {'active': 'ACTIVE', 'stopped': 'SHUTOFF', 'shelved': 'SHELVED'}


def placement_adapter(url: str, token: str = 'admin') -> ks_adapter.Adapter:
    """A keystoneauth Adapter for Placement at ``url`` with a fixed token
    (``admin`` is what Placement's noauth2 treats as the admin)."""
    return ks_adapter.Adapter(
        ks_session.Session(auth=token_endpoint.Token(url, token)),
        service_type='placement', raise_exc=False)


def check(compute_url: str, token: str,
          placement: ks_adapter.Adapter | str,
          context: nova_context.RequestContext | None = None,
          settled: bool = False, timeout: float = 60) -> list[str]:
    """Return every invariant violation found (empty list: all hold).

    ``compute_url`` is the Compute API base (``.../v2.1``) and ``token``
    an admin token for it; ``placement`` is a keystoneauth Adapter or a
    noauth2 Placement URL; ``context`` defaults to an admin context.
    ``settled=True`` also reports servers still in BUILD.
    """
    if isinstance(placement, str):
        placement = placement_adapter(placement)
    context = context or nova_context.get_admin_context()
    servers = {s['id']: s for s in _servers(compute_url, token, timeout)}
    instances = {i.uuid: i for i in db.instance_get_all(context)}
    nodes = {node.hypervisor_hostname: node.uuid
             for node in db.compute_node_get_all(context)}
    devices = _device_rows(context)
    migrations = {m.uuid: m for m in db.migration_get_in_progress(context)}
    providers, allocations, capacity, totals = _placement_state(placement)

    violations = []
    if settled:
        violations += ['server %s is still in BUILD' % uuid
                       for uuid, s in sorted(servers.items())
                       if s['status'] == 'BUILD']
    violations += _device_holders(devices, instances)
    violations += _partitions(devices, instances, migrations)
    violations += _allocations(devices, instances, nodes, providers,
                               allocations, migrations)
    broken = _unhealthy_holders(context, devices)
    violations += _unhealthy_allocations(devices, allocations, broken)
    violations += _usage(allocations, capacity, totals, broken)
    return violations


# Reading the three sources --------------------------------------------------

def _servers(compute_url: str, token: str, timeout: float) -> list[dict]:
    resp = requests.get(
        compute_url.rstrip('/') + '/servers/detail',
        params={'all_tenants': '1'}, timeout=timeout,
        headers={'X-Auth-Token': token,
                 'X-OpenStack-Nova-API-Version': COMPUTE_MICROVERSION})
    resp.raise_for_status()
    return resp.json()['servers']


def _device_rows(context) -> list[dict]:
    """Every PCI device row, with its compute node's name as ``host``."""
    return [dict(row, host=node.hypervisor_hostname)
            for node in db.compute_node_get_all(context)
            for row in db.pci_device_get_all_by_node(context, node.id)]


def _unhealthy_holders(context, devices: list[dict]
                       ) -> dict[str, str | None]:
    """Provider uuid -> the instance holding the device when it last
    became unhealthy (None: it was free), for each unhealthy device."""
    nodes = {node.hypervisor_hostname: node.id
             for node in db.compute_node_get_all(context)}
    holders = {}
    for row in devices:
        if row.get('health') != 'unhealthy' or not row['rp_uuid']:
            continue
        events = [e for e in db.pci_device_health_events_get(
            context, nodes[row['host']], row['address'])
            if e['health'] == 'unhealthy']
        holders[row['rp_uuid']] = events[-1]['instance_uuid'] \
            if events else None
    return holders


def _get(placement: ks_adapter.Adapter, path: str) -> dict:
    resp = placement.get(path, headers={
        'OpenStack-API-Version': 'placement %s' % PLACEMENT_MICROVERSION})
    if resp.status_code != 200:
        raise RuntimeError('Placement GET %s answered %s: %s' % (
            path, resp.status_code, resp.text))
    return resp.json()


def _placement_state(placement: ks_adapter.Adapter):
    """(provider uuid -> root uuid, consumer -> {rp: {rc: amount}},
    (rp, rc) -> capacity, (rp, rc) -> capacity with nothing reserved) for
    every provider."""
    providers = {}
    allocations: dict[str, dict[str, dict[str, int]]] = (
        collections.defaultdict(dict))
    capacity = {}
    totals = {}
    for rp in _get(placement, '/resource_providers')['resource_providers']:
        uuid = rp['uuid']
        providers[uuid] = rp['root_provider_uuid']
        base = '/resource_providers/%s' % uuid
        for consumer, alloc in _get(
                placement, base + '/allocations')['allocations'].items():
            allocations[consumer][uuid] = alloc['resources']
        for rc, inv in _get(placement,
                            base + '/inventories')['inventories'].items():
            capacity[uuid, rc] = int(
                (inv['total'] - inv['reserved']) * inv['allocation_ratio'])
            totals[uuid, rc] = int(inv['total'] * inv['allocation_ratio'])
    return providers, dict(allocations), capacity, totals


# The invariants -------------------------------------------------------------

def _state(instances: dict, uuid: str) -> str:
    instance = instances.get(uuid)
    return 'deleted' if instance is None else str(instance.vm_state)


def _device_holders(devices: list[dict], instances: dict) -> list[str]:
    """Held rows belong to live holding instances; status matches."""
    violations = []
    for row in devices:
        name = '%s %s' % (row['host'], row['address'])
        holder = row['instance_uuid']
        if (row['status'] in _HELD) != (holder is not None):
            violations.append('device %s has status %s and holder %s' % (
                name, row['status'], holder))
        if holder is not None and _state(instances, holder) not in _HOLDING:
            violations.append('device %s is held by instance %s, which is '
                              '%s' % (name, holder, _state(instances,
                                                           holder)))
    return violations


def _requested_devices(flavor: records.FlavorSnapshot | None) -> int:
    specs = flavor.extra_specs if flavor else {}
    if ALIAS_SPEC not in specs:
        return 0
    return sum(count for _name, count in
               pci_request.parse_alias_extra_spec(specs[ALIAS_SPEC]))


def _request_ids(pci_requests: Sequence[pci_request.InstancePCIRequest]
                 ) -> set[str]:
    return {request.request_id for request in pci_requests}


def _settled_moves(instances: dict, migrations: dict[str, records.Migration]
                   ) -> dict[str, records.Migration]:
    """Instance UUID -> its move that holds both ends at rest: the finished
    resize or cold migration of a VERIFY_RESIZE server, or the evacuation
    of an ACTIVE or SHUTOFF server whose source compute has not cleaned
    up yet."""
    moves = {}
    for move in migrations.values():
        state = _state(instances, move.instance_uuid)
        if (move.status, state) in (('finished', 'resized'),
                                    ('done', 'active'),
                                    ('done', 'stopped')):
            moves[move.instance_uuid] = move
    return moves


def _holdings(devices: list[dict], instances: dict, migrations: dict
              ) -> list[tuple[str, str, str, records.FlavorSnapshot | None,
                              list[dict]]]:
    """(holder name, consumer, node, flavor, device rows) for every set
    of devices a settled server should hold as one partition: an ACTIVE,
    SHUTOFF or SHELVED server's, and both ends of a settled move (see
    ``_settled_moves``; the migration holds the source)."""
    rows_of = collections.defaultdict(list)
    for row in devices:
        if row['instance_uuid']:
            rows_of[row['instance_uuid']].append(row)
    moves = _settled_moves(instances, migrations)
    result = []
    for uuid, instance in sorted(instances.items()):
        rows = rows_of.get(uuid, [])
        if uuid in moves:
            move = moves[uuid]
            label = '%s server %s' % (move.migration_type, uuid)
            old = _request_ids(move.old_pci_requests)
            new = _request_ids(move.new_pci_requests)
            dest = [r for r in rows if r['request_id'] in new and
                    r['host'] == move.dest_node]
            source = [r for r in rows if r['request_id'] in old and
                      r['host'] == move.source_node]
            result.append(('%s (destination)' % label, uuid,
                           move.dest_node, move.new_flavor, dest))
            result.append(('%s (source kept by migration %s)' % (
                label, move.uuid), move.uuid, move.source_node,
                move.old_flavor, source))
            kept = [r for r in rows if r not in dest and r not in source]
            if kept:
                result.append(('%s (outside its move)' % label, uuid, None,
                               None, kept))
        elif instance.vm_state in _SETTLED:
            result.append(('%s server %s' % (
                _SETTLED[instance.vm_state], uuid), uuid,
                instance.node, instance.flavor, rows))
    return result


def _group_members(rows: list[dict]) -> dict[str, frozenset[str]]:
    """Group path (e.g. ``board/quad-a``) -> addresses of its devices."""
    members = collections.defaultdict(set)
    for row in rows:
        parts = row['group_path'].split('/') if row['group_path'] else []
        for depth in range(1, len(parts) + 1):
            members['/'.join(parts[:depth])].add(row['address'])
    return {path: frozenset(addresses) for path, addresses in
            members.items()}


def _partitions(devices: list[dict], instances: dict,
                migrations: dict) -> list[str]:
    """Each holding (see ``_holdings``) is its flavor's count of devices,
    on its node, as one whole group."""
    by_host = collections.defaultdict(list)
    for row in devices:
        by_host[row['host']].append(row)
    violations = []
    for name, _consumer, node, flavor, rows in _holdings(
            devices, instances, migrations):
        wanted = _requested_devices(flavor)
        if len(rows) != wanted:
            violations.append('%s holds %d devices, its flavor asks for %d'
                              % (name, len(rows), wanted))
            continue
        hosts = {row['host'] for row in rows}
        if hosts - {node}:
            violations.append('%s holds devices on %s, not (only) on its '
                              'node %s' % (name, sorted(hosts), node))
            continue
        if wanted < 2:
            continue
        groups = _group_members(by_host[node])
        addresses = frozenset(row['address'] for row in rows)
        if groups and addresses not in groups.values():
            violations.append('%s holds %s, which is not one device group'
                              % (name, sorted(addresses)))
    return violations


def _allocations(devices: list[dict], instances: dict, nodes: dict,
                 providers: dict, allocations: dict,
                 migrations: dict) -> list[str]:
    """Placement holds what nova's servers and moves hold, and nothing
    else."""
    device_rps = {row['rp_uuid']: row for row in devices if row['rp_uuid']}
    violations = []
    users = collections.defaultdict(list)
    for consumer, by_rp in sorted(allocations.items()):
        for rp in by_rp:
            if rp in device_rps:
                users[rp].append(consumer)
        state = _state(instances, consumer)
        if consumer in migrations:
            state = 'migration'
        if state not in _HOLDING and state != 'migration':
            violations.append('consumer %s holds allocations %s but is %s '
                              '(leaked)' % (consumer, by_rp, state))
    for name, consumer, node, _flavor, rows in _holdings(
            devices, instances, migrations):
        if node is None:
            violations.append('%s holds devices %s' % (
                name, sorted(r['address'] for r in rows)))
            continue
        by_rp = allocations.get(consumer)
        if not by_rp:
            # The scheduler claims for every server (at least its VCPU
            # and RAM).
            violations.append('%s has no allocation in Placement' % name)
            continue
        roots = {providers.get(rp) for rp in by_rp}
        if roots != {nodes.get(node)}:
            violations.append('%s on %s has allocations in provider trees '
                              '%s' % (name, node,
                                      sorted(str(r) for r in roots)))
        in_placement = {rp for rp in by_rp if rp in device_rps}
        in_nova = {row['rp_uuid'] for row in rows}
        if in_placement != in_nova:
            violations.append('%s is allocated device providers %s in '
                              'Placement but holds %s in nova' % (
                                  name, sorted(in_placement),
                                  sorted(in_nova)))
    for rp, consumers in sorted(users.items()):
        if len(consumers) > 1:
            row = device_rps[rp]
            violations.append('device %s %s is allocated to %d consumers: '
                              '%s' % (row['host'], row['address'],
                                      len(consumers), sorted(consumers)))
    return violations


def _unhealthy_allocations(devices: list[dict], allocations: dict,
                           broken: dict[str, str | None]) -> list[str]:
    """No consumer but the one that had it is allocated an unhealthy
    device."""
    rows = {row['rp_uuid']: row for row in devices if row['rp_uuid']}
    violations = []
    for consumer, by_rp in sorted(allocations.items()):
        for rp in sorted(set(by_rp) & set(broken)):
            if consumer != broken[rp]:
                violations.append(
                    'unhealthy device %s %s is allocated to %s, which did '
                    'not hold it when it became unhealthy (holder then: %s)'
                    % (rows[rp]['host'], rows[rp]['address'], consumer,
                       broken[rp] or 'none'))
    return violations


def _usage(allocations: dict, capacity: dict, totals: dict,
           broken: dict[str, str | None]) -> list[str]:
    """No provider is used beyond its capacity; an unhealthy device's
    reservation does not count against the allocation it kept."""
    used: dict[tuple[str, str], int] = collections.Counter()
    for by_rp in allocations.values():
        for rp, resources in by_rp.items():
            for rc, amount in resources.items():
                used[rp, rc] += amount
    limit = {key: totals.get(key, 0) if key[0] in broken else value
             for key, value in capacity.items()}
    return ['provider %s uses %d %s of a capacity of %d' % (
                rp, amount, rc, limit.get((rp, rc), 0))
            for (rp, rc), amount in sorted(used.items())
            if amount > limit.get((rp, rc), 0)]


def summary(violations: list[str]) -> str:
    """One line per violation, or a line saying that all invariants hold
    (for logs and the soak script's output)."""
    if not violations:
        return 'all invariants hold'
    return '\n'.join(['%d invariant violation(s):' % len(violations)] +
                     ['  - %s' % v for v in violations])
