"""Plan cold migrations that leave a wholly free device group of a size.

Online packing cannot undo what arrivals did: GPUs can be free, scattered
over partly used groups, while no group of the requested size is wholly
free (a NoValidHost for fragmentation, ``nova.scheduler.refusal``). This
module is the pure planner behind ``nova-manage pci defrag``: given the
boards of the fleet (each host's partitions and which server holds which
devices) it finds the cheapest list of moves after which a group of
``size`` devices is wholly free: fewest servers moved, then fewest
devices moved, within ``max_moves``.

Each move is valid when it runs, after the moves before it: the server
is one the operator allowed to move (``Server.movable``), it goes to
another host (a cold migration never stays on its source), the target
partition has exactly as many devices as the server holds and is wholly
free, and a server whose NUMA affinity policy is strict (``required``,
``socket``) never lands on more NUMA nodes than it spans now. A server
moves at most once. A server blocking a wanted target may itself be
moved out of the way first (a chain), counted as a move like any other.

The search is exact over which group to free and which servers to move
(every group is tried, cheapest lower bound first, and branches that
cannot beat the best plan are cut); among free targets of equal cost it
tries them in the scheduler's order (the one breaking the smallest free
group, then the fullest host), at most ``FREE_TARGET_TRIES`` per move,
which keeps a large fleet's search small.

The planner reads nothing: ``load_fleet`` reads what it plans on from
the database (boards through ``nova.fleet.board``, the servers and whether
the operator allowed moving them, the computes that can take a move).
"""

import dataclasses
import typing
from collections.abc import Iterable
from collections.abc import Mapping

from oslo_config import cfg

from nova.db import api as db
from nova.db import records
from nova import states
from nova.fleet import board as fleet_board
from nova.pci import numa as pci_numa
from nova.pci import request as pci_request
from nova.servicegroup import api as servicegroup

# The server metadata item by which the operator lets defragmentation
# move a server.
ALLOW_KEY = 'pci_defrag'
ALLOW_VALUE = 'allow'
COMPUTE_BINARY = 'nova-compute'

# Free targets tried per move, best (scheduler's order) first.
FREE_TARGET_TRIES = 3
STRICT_POLICIES = (pci_numa.REQUIRED, pci_numa.SOCKET)


@dataclasses.dataclass(frozen=True)
class Partition:
    """Devices a server of their number can hold: a group, or one device
    offered alone. ``name`` is the group path, or the device address;
    ``kind`` what devices they are (a server moves only to its kind)."""

    host: str
    name: str
    devices: frozenset[str]
    numa_nodes: frozenset[int | None]
    kind: str = ''

    @property
    def size(self) -> int:
        return len(self.devices)


@dataclasses.dataclass(frozen=True)
class Board:
    """One host's partitions (every group and every device offered
    alone) and which server holds each held device."""

    host: str
    partitions: tuple[Partition, ...]
    holders: Mapping[str, str]   # device address -> server UUID
    # Devices the host does not offer at all: a group with one is never
    # free.
    unusable: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Server:
    """A server holding devices, as the planner sees it."""

    uuid: str
    name: str
    numa_policy: str
    # Whether the operator allowed moving it (and its state permits).
    movable: bool


@dataclasses.dataclass(frozen=True)
class Move:
    """Cold-migrate ``server`` from its partition on ``source_host`` to
    ``target`` (on another host)."""

    server: str
    name: str
    size: int
    source_host: str
    source: str
    target: Partition


@dataclasses.dataclass(frozen=True)
class Plan:
    """Moves, in order, after which ``freed`` is wholly free."""

    freed: Partition
    moves: tuple[Move, ...]

    @property
    def cost(self) -> tuple[int, int]:
        """(servers moved, devices moved): smaller is cheaper."""
        return len(self.moves), sum(m.size for m in self.moves)

    def describe(self) -> list[str]:
        """One line per move, then what is freed."""
        lines = ['%d. %s (%d device%s): %s %s -> %s %s' % (
            number, move.name, move.size, '' if move.size == 1 else 's',
            move.source_host, move.source, move.target.host,
            move.target.name)
            for number, move in enumerate(self.moves, 1)]
        lines.append('frees %s %s (%d devices) with %d move(s), %d '
                     'device(s) moved' % ((self.freed.host, self.freed.name,
                                           self.freed.size) + self.cost))
        return lines


class _State:
    """Who holds what during the search (changed and undone in place)."""

    def __init__(self, boards: Iterable[Board]) -> None:
        self.holder: dict[tuple[str, str], str] = {}
        self.unusable: set[tuple[str, str]] = set()
        self.by_size: dict[int, list[Partition]] = {}
        self.host_partitions: dict[str, list[Partition]] = {}
        self.where: dict[str, tuple[str, frozenset[str]]] = {}
        for board in boards:
            for address, uuid in board.holders.items():
                self.holder[board.host, address] = uuid
            self.unusable.update((board.host, a) for a in board.unusable)
            self.host_partitions[board.host] = list(board.partitions)
            for part in board.partitions:
                self.by_size.setdefault(part.size, []).append(part)
        held: dict[str, tuple[str, set[str]]] = {}
        for (host, address), uuid in self.holder.items():
            held.setdefault(uuid, (host, set()))[1].add(address)
        self.where = {uuid: (host, frozenset(addresses))
                      for uuid, (host, addresses) in held.items()}

    def blockers(self, part: Partition) -> set[str] | None:
        """Servers holding devices of ``part``; None if it has a device
        its host does not offer."""
        found = set()
        for address in part.devices:
            if (part.host, address) in self.unusable:
                return None
            uuid = self.holder.get((part.host, address))
            if uuid is not None:
                found.add(uuid)
        return found

    def free_count(self, host: str) -> int:
        return sum(1 for part in self.host_partitions[host]
                   if part.size == 1 and not self.blockers(part))

    def damage(self, part: Partition) -> int:
        """Size of the largest wholly free group taking ``part`` leaves
        partly used (0 if none): the scheduler's best-fit key."""
        return max((other.size for other in self.host_partitions[part.host]
                    if other.size > 1 and other.devices & part.devices and
                    not other.devices <= part.devices and
                    self.blockers(other) == set()), default=0)

    def move(self, uuid: str, host: str, devices: frozenset[str]) -> tuple:
        """Put ``uuid`` on ``devices`` of ``host``; the undo token."""
        old = self.where[uuid]
        for address in old[1]:
            del self.holder[old[0], address]
        for address in devices:
            self.holder[host, address] = uuid
        self.where[uuid] = (host, devices)
        return uuid, old, host, devices

    def undo(self, token: tuple) -> None:
        uuid, old, host, devices = token
        for address in devices:
            del self.holder[host, address]
        for address in old[1]:
            self.holder[old[0], address] = uuid
        self.where[uuid] = old


class _Task(typing.NamedTuple):
    """A server still to move: to a target the search picks (``target``
    None), or into ``target`` once its blockers moved out."""

    server: str
    target: Partition | None = None


class _Search:
    """Depth-first search of the moves freeing one group."""

    def __init__(self, state: _State, servers: Mapping[str, Server],
                 max_moves: int) -> None:
        self.state = state
        self.servers = servers
        # The partition each set of devices is, by host.
        self.partitions = {(part.host, part.devices): part
                           for parts in state.host_partitions.values()
                           for part in parts}
        self.max_moves = max_moves
        # The cost to beat (another group's plan) and the targets no
        # server may take (the group being freed, a target being
        # cleared).
        self.bound: tuple[int, int] | None = None
        self.reserved: set[tuple[str, str]] = set()
        self.best: tuple[tuple[int, int], tuple[Move, ...]] | None = None

    def run(self, freed: Partition, occupants: set[str],
            bound: tuple[int, int] | None) -> tuple[Move, ...] | None:
        self.best = None
        self.bound = bound
        self.reserved = {(freed.host, a) for a in freed.devices}
        tasks = [_Task(uuid) for uuid in sorted(
            occupants, key=lambda u: (-len(self.state.where[u][1]),
                                      self.servers[u].name, u))]
        self._step(tasks, [], set(occupants))
        return self.best[1] if self.best else None

    def _lower_bound(self, tasks: list[_Task],
                     moves: list[Move]) -> tuple[int, int]:
        """The cost of ``moves`` plus one move of each server still to
        place or commit."""
        return (len(moves) + len(tasks),
                sum(m.size for m in moves) + sum(
                    len(self.state.where[task.server][1]) for task in tasks))

    def _cut(self, tasks: list[_Task], moves: list[Move]) -> bool:
        bound = self._lower_bound(tasks, moves)
        if bound[0] > self.max_moves:
            return True
        for limit in (self.bound, self.best[0] if self.best else None):
            if limit is not None and bound >= limit:
                return True
        return False

    def _step(self, tasks: list[_Task], moves: list[Move],
              busy: set[str]) -> None:
        if self._cut(tasks, moves):
            return
        if not tasks:
            self.best = ((len(moves), sum(m.size for m in moves)),
                         tuple(moves))
            return
        task, rest = tasks[0], tasks[1:]
        if task.target is not None:
            uuid, part = task
            self.reserved.difference_update(
                (part.host, a) for a in part.devices)
            self._apply(uuid, part, rest, moves, busy)
            self.reserved.update((part.host, a) for a in part.devices)
            return
        uuid = task.server
        # Clearing a target moves at least one more server.
        spare = self.max_moves - len(moves) - len(tasks)
        free, blocked = self._targets(uuid, busy, spare)
        for part in free[:FREE_TARGET_TRIES]:
            self._apply(uuid, part, rest, moves, busy)
        for part, blockers in blocked:
            # Move the blockers out first, then this server in; the
            # target is reserved meanwhile so nothing else lands there.
            reserved = {(part.host, a) for a in part.devices}
            self.reserved.update(reserved)
            ordered = sorted(blockers, key=lambda u: (
                -len(self.state.where[u][1]), self.servers[u].name, u))
            self._step([_Task(b) for b in ordered] +
                       [_Task(uuid, part)] + rest, moves,
                       busy | blockers)
            self.reserved.difference_update(reserved)

    def _apply(self, uuid: str, part: Partition, rest: list[_Task],
               moves: list[Move], busy: set[str]) -> None:
        host, devices = self.state.where[uuid]
        move = Move(server=uuid, name=self.servers[uuid].name,
                    size=len(devices), source_host=host,
                    source=self.partitions[host, devices].name,
                    target=part)
        token = self.state.move(uuid, part.host, part.devices)
        self._step(rest, moves + [move], busy)
        self.state.undo(token)

    def _targets(self, uuid: str, busy: set[str], spare: int
                 ) -> tuple[list[Partition],
                            list[tuple[Partition, set[str]]]]:
        """Valid targets of ``uuid`` now: the free ones in the
        scheduler's order, and those at most ``spare`` other servers
        moved out of would free (fewest first)."""
        server = self.servers[uuid]
        host, devices = self.state.where[uuid]
        free, blocked = [], []
        current = self.partitions.get((host, devices))
        if current is None:
            # Its devices are not one partition: no request of the
            # scheduler's gives that shape, so none is planned.
            return free, blocked
        span = len(current.numa_nodes)
        for part in self.state.by_size.get(len(devices), ()):
            if part.host == host or part.kind != current.kind or any(
                    (part.host, a) in self.reserved for a in part.devices):
                continue
            if server.numa_policy in STRICT_POLICIES and \
                    len(part.numa_nodes) > span:
                continue
            blockers = self.state.blockers(part)
            if blockers is None:
                continue
            if not blockers:
                free.append(part)
            elif len(blockers) <= spare and all(
                    self.servers[b].movable and b not in busy
                    for b in blockers):
                blocked.append((part, blockers))
        free.sort(key=lambda p: (self.state.damage(p),
                                 self.state.free_count(p.host), p.host,
                                 p.name))
        blocked.sort(key=lambda item: (
            len(item[1]), sum(len(self.state.where[b][1])
                              for b in item[1]), item[0].host,
            item[0].name))
        return free, blocked


def plan(boards: Iterable[Board], servers: Mapping[str, Server], size: int,
         max_moves: int, host: str | None = None) -> Plan | None:
    """The cheapest plan freeing a group of ``size`` devices (on ``host``
    if given) in at most ``max_moves`` moves; None if there is none.

    A group already wholly free is a plan of no moves. ``servers`` must
    name every holder on ``boards``.
    """
    boards = list(boards)
    state = _State(boards)
    # A move keeps the number of free devices: fewer than ``size`` free
    # devices in all can never make a free group of ``size``.
    free = {(part.host, address) for parts in state.host_partitions.values()
            for part in parts for address in part.devices} - set(
                state.holder) - state.unusable
    if len(free) < size:
        return None
    options = []
    for part in state.by_size.get(size, ()):
        if host is not None and part.host != host:
            continue
        occupants = state.blockers(part)
        if occupants is None or not all(servers[u].movable
                                        for u in occupants):
            continue
        held = sum(len(state.where[u][1]) for u in occupants)
        options.append(((len(occupants), held), part, occupants))
    options.sort(key=lambda o: (o[0], o[1].host, o[1].name))
    search = _Search(state, servers, max_moves)
    best: Plan | None = None
    for lower, part, occupants in options:
        if lower[0] > max_moves or (best and lower >= best.cost):
            break
        moves = search.run(part, occupants, best.cost if best else None)
        if moves is not None:
            best = Plan(freed=part, moves=moves)
    return best


def _kind(devices) -> str:
    """What ``devices`` are: their vendor and product IDs."""
    return ','.join(sorted({'%s:%s' % (d.vendor_id, d.product_id)
                            for d in devices}))


def boards_from(host_boards: Iterable[fleet_board.HostBoard]) -> list[Board]:
    """The planner's boards of ``nova.fleet.board``'s: every group of more
    than one device (each prefix of the devices' group paths) that its
    compute offers and every device offered alone is a partition;
    unhealthy and withheld devices are unusable."""
    boards = []
    for host_board in host_boards:
        by_path: dict[str, list] = {}
        alone, unusable = [], set()
        for dev in host_board.devices:
            # An unhealthy device is never free, whoever holds it: a
            # group with one is withheld, moving its holders frees
            # nothing.
            if host_board.state(dev) in (fleet_board.WITHHELD,
                                         fleet_board.UNHEALTHY):
                unusable.add(dev.address)
            elif not dev.withheld:
                alone.append(dev)
            if dev.group_path:
                parts = dev.group_path.split('/')
                for depth in range(1, len(parts) + 1):
                    by_path.setdefault('/'.join(parts[:depth]),
                                       []).append(dev)
        partitions = [Partition(host_board.host, dev.address,
                                frozenset([dev.address]),
                                frozenset([dev.numa_node]), _kind([dev]))
                      for dev in alone]
        partitions.extend(
            Partition(host_board.host, path,
                      frozenset(d.address for d in members),
                      frozenset(d.numa_node for d in members),
                      _kind(members))
            for path, members in sorted(by_path.items())
            if len(members) > 1 and
            not host_board.not_offered(members))
        holders = {dev.address: dev.instance_uuid
                   for dev in host_board.devices if dev.instance_uuid}
        boards.append(Board(host_board.host, tuple(partitions), holders,
                            frozenset(unusable)))
    return boards


def movable(instance: records.Instance) -> bool:
    """Whether defragmentation may move ``instance`` (a database row):
    its metadata says ``pci_defrag=allow`` and it is ACTIVE or SHUTOFF
    with no task in progress."""
    metadata = instance.server_metadata or {}
    return (metadata.get(ALLOW_KEY) == ALLOW_VALUE and
            instance.vm_state in (states.ACTIVE, states.STOPPED) and
            instance.task_state is None)


def numa_policy(instance: records.Instance) -> str:
    """The strictest PCI NUMA affinity policy of ``instance``'s
    requests (``legacy`` without any)."""
    policies = [req.numa_policy for req in instance.pci_requests]
    strict = [p for p in policies if p in STRICT_POLICIES]
    return (strict or policies or [pci_request.DEFAULT_NUMA_POLICY])[0]


def load_fleet(context, conf: cfg.ConfigOpts
               ) -> tuple[list[Board], dict[str, Server]]:
    """The boards of the computes that are up and enabled (a move can
    neither leave nor reach another) and every server holding devices
    there, from the database."""
    services = {service.host: service for service in
                db.service_get_all(context, COMPUTE_BINARY)}
    nodes = [node for node in db.compute_node_get_all(context)
             if servicegroup.is_up(services.get(node.host), conf) and
             not services[node.host].disabled]
    boards = boards_from(fleet_board.load(context, nodes))
    instances = {i.uuid: i for i in db.instance_get_all(context)}
    servers = {}
    for board in boards:
        for uuid in board.holders.values():
            instance = instances.get(uuid)
            servers[uuid] = Server(
                uuid=uuid,
                name=(instance.display_name if instance else None) or uuid,
                numa_policy=numa_policy(instance) if instance else
                pci_request.DEFAULT_NUMA_POLICY,
                movable=instance is not None and movable(instance))
    return boards, servers
