"""Replay a seeded GPU workload on an H200 fleet: what host choice buys.

A trace of requests (Poisson arrivals, exponential lifetimes, 40/30/20/10 %
asking for 1/2/4/8 GPUs, offered load 85 % of the fleet's GPUs by default)
is replayed through the project's real path: the request builder turns the
``h200:N`` flavor into its Placement request, nova-scheduler's decision
(``nova.scheduler.choice.choose``: ``GET /allocation_candidates`` with
``limit`` as the scheduler sends it, to a real embedded Placement, then
the order, then ``PUT /allocations``) claims a candidate; an instance's
end deletes its allocations. Hosts are HGX H200 trees built by
nova's translator (pairs 1+3, 2+4, 5+7, 6+8, quartets 1-4 and 5-8, the
board of 8). Host choices, all on the same trace and fleet and through
the same decision, each with its own queries and order (``host_order``):

* scheduler: the scheduler's order (``choice.by_fit``) on one query with
  ``limit`` (nova-scheduler before free-GPU bands);
* bands: the same choice on the fullest free-GPU band's candidates
  (``nova.scheduler.fullness``, what nova-scheduler asks with
  ``[scheduler]band_shard_hosts = 0``); the band each host would publish
  is put on its root right after each claim and end;
* shards: hosts the request fits first, then bands, asked in one random
  shard of about ``--band-shard-hosts`` hosts first and then in wider ones
  (``nova.scheduler.band_shards``, nova-scheduler before per-host
  queries); the sizes each host can take without breaking a free group
  are put on its root with its band;
* hosts: as shards, but the hosts the request fits are listed band by
  band and asked one at a time with ``in_tree``
  (``nova.scheduler.fullness.on_host``, what nova-scheduler asks by
  default);
* first: Placement's first candidate;
* random: a random candidate (seeded);
* spread: emptiest host first (most free GPUs), Placement's order inside;
* defrag: bands, and a request refused by every band is given a plan of
  at most ``--defrag-max-moves`` moves by ``nova.fleet.defrag`` (on the
  fleet's boards and holders, every instance allowed to move), carried
  out in Placement (each moved instance's allocation deleted and claimed
  on its target partition, as a cold migration ends) before the request
  is asked again.

The no-topology limit replays the same trace against one pool of all the
fleet's GPUs with no partition rule. Acceptance and utilization count the
requests arriving after ``--warmup`` mean lifetimes (the fleet fills up
first). Decision latency is the Placement queries and the choice (the
decision's own work, claims excluded), timed separately. One host is
reported through the translator and the report client, the others are
copies of it in Placement's database (``tools/placement_copy.py``, which
depends on Placement's private schema); ``--prefill`` starts from a
loaded fleet (see build_fleet_at). Example::

    .venv/bin/python tools/bench_fleet.py --hosts 16 --requests 2000
"""

import argparse
import collections
import dataclasses
import heapq
from importlib import metadata
import json
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable, Iterable

from oslo_config import cfg
from oslo_utils import uuidutils

from nova.compute import pci_placement_translator as translator
from nova.compute import provider_tree as ptree
from nova.conf import placement as placement_conf
from nova import embedded_placement
from nova import exception
from nova.db import records
from nova.fleet import defrag
from nova.pci import devspec
from nova.pci import free_groups
from nova.pci import groups as pci_groups
from nova.pci import placement_names
from nova.pci import request as pci_request
from nova.scheduler import band_shards
from nova.scheduler import candidates as scheduler_candidates
from nova.scheduler import choice
from nova.scheduler import fullness
from nova.scheduler.client import report
from nova.scheduler import request_builder
from nova.virt.fake import host as fakehost
import placement_copy

# Requested GPUs -> share of requests.
MIX = {1: 0.4, 2: 0.3, 4: 0.2, 8: 0.1}
GPUS_PER_HOST = 8
# Small enough that CPU and memory never decide (8 instances per host at
# most); the GPUs alone are scheduled.
FLAVOR = records.FlavorSnapshot.of_flavor(
    {'vcpus': 4, 'memory_mb': 8192, 'root_gb': 0})
ROOT_INVENTORY = {rc: {'total': n, 'reserved': 0, 'min_unit': 1,
                       'max_unit': n, 'step_size': 1, 'allocation_ratio': 1.0}
                  for rc, n in (('VCPU', 224), ('MEMORY_MB', 2097152))}
# Hosts replaying the warm-up of a prefilled fleet (--prefill).
TEMPLATE_HOSTS = 16
POLICIES = ('scheduler', 'bands', 'shards', 'hosts', 'first', 'random',
            'spread', 'defrag')
# Host choices that ask Placement band by band.
BANDED = ('bands', 'shards', 'hosts', 'defrag')
# Banded host choices that use the fitting sizes hosts publish: as shards
# (the scheduler before per-host queries) or host by host (the scheduler).
FITTING = ('shards', 'hosts')
PROJECT = USER = 'bench-fleet'


@dataclasses.dataclass(frozen=True)
class Request:
    """One instance of the trace."""

    index: int
    arrival: float
    lifetime: float
    size: int


def make_trace(gpus: int, count: int, load: float, seed: int,
               mix: dict[int, float] = MIX) -> list[Request]:
    """``count`` requests whose offered load is ``load`` x ``gpus``.

    Time is in mean lifetimes: lifetimes are exponential with mean 1, so
    the arrival rate is ``load * gpus / mean size``.
    """
    rng = random.Random(seed)
    sizes, shares = zip(*sorted(mix.items()))
    mean_size = sum(s * p for s, p in mix.items()) / sum(shares)
    rate = load * gpus / mean_size
    trace, now = [], 0.0
    for index in range(count):
        now += rng.expovariate(rate)
        trace.append(Request(index, now, rng.expovariate(1.0),
                             rng.choices(sizes, shares)[0]))
    return trace


def replay(trace: list[Request], place: Callable[[Request], object],
           release: Callable[[object], None]) -> list[bool]:
    """Run the trace: ends before each arrival, then ``place``.

    ``place`` returns a handle for an accepted request or None; ``release``
    gets the handle back at the request's end (also for those still
    running after the last arrival). Returns acceptance per request.
    """
    running: list[tuple[float, int, object]] = []
    accepted = []
    for request in trace:
        while running and running[0][0] <= request.arrival:
            release(heapq.heappop(running)[2])
        handle = place(request)
        accepted.append(handle is not None)
        if handle is not None:
            heapq.heappush(running, (request.arrival + request.lifetime,
                                     request.index, handle))
    while running:
        release(heapq.heappop(running)[2])
    return accepted


def no_topology(trace: list[Request], gpus: int) -> list[bool]:
    """Acceptance against one pool of ``gpus`` with no partition rule."""
    free = [gpus]

    def place(request: Request):
        if request.size > free[0]:
            return None
        free[0] -= request.size
        return request.size

    def release(size: int) -> None:
        free[0] += size

    return replay(trace, place, release)


def summarize(trace: list[Request], accepted: list[bool], gpus: int,
              warmup: float) -> dict:
    """Acceptance per size and GPU utilization after ``warmup``.

    Utilization is the time-averaged share of GPUs held between the
    first measured arrival and the last arrival.
    """
    start, end = warmup, trace[-1].arrival
    if end <= start:
        raise ValueError('the trace ends at %.2f mean lifetimes, before '
                         'the warm-up of %.2f; give more requests or a '
                         'shorter --warmup' % (end, start))
    asked: dict[int, int] = {}
    got: dict[int, int] = {}
    held = 0.0
    for request, ok in zip(trace, accepted):
        if ok:
            overlap = (min(request.arrival + request.lifetime, end) -
                       max(request.arrival, start))
            held += request.size * max(overlap, 0.0)
        if request.arrival >= start:
            asked[request.size] = asked.get(request.size, 0) + 1
            got[request.size] = got.get(request.size, 0) + int(ok)
    return {'acceptance': {size: got[size] / asked[size]
                           for size in sorted(asked)},
            'asked': {size: asked[size] for size in sorted(asked)},
            'all': sum(got.values()) / sum(asked.values()),
            'utilization': held / (gpus * (end - start))}


# Host choices --------------------------------------------------------------

def _free_gpus(summaries: dict) -> dict[str, int]:
    """Root provider -> free PGPU on its tree."""
    free: dict[str, int] = {}
    for summary in summaries.values():
        pgpu = summary.get('resources', {}).get('PGPU')
        if pgpu:
            root = summary['root_provider_uuid']
            free[root] = free.get(root, 0) + pgpu['capacity'] - pgpu['used']
    return free


def host_order(policy: str, rng: random.Random) -> choice.Order:
    """The order host choice ``policy`` tries an answer's candidates in:
    the scheduler's (``choice.by_fit``) or a baseline's."""
    if policy in ('scheduler',) + BANDED:
        return choice.by_fit
    if policy == 'first':
        return lambda found, summaries, request: list(found)
    if policy == 'random':
        return lambda found, summaries, request: rng.sample(found,
                                                            len(found))
    if policy == 'spread':
        def emptiest_first(found, summaries, request):
            free = _free_gpus(summaries)
            return sorted(found, key=lambda c: -free[c.host])
        return emptiest_first
    raise ValueError('host choice %r is not allowed; choose from %s' % (
        policy, ', '.join(POLICIES)))


# The fleet in Placement ------------------------------------------------------

def build_fleet_at(state_path: str, hosts: int,
                   prefill: argparse.Namespace | None = None) -> None:
    """Worker: build the fleet in a fresh Placement database.

    One host goes through the translator and the report client, as its
    compute would report it; the others are copies of its providers,
    inventories and traits written straight into Placement's database
    (new UUIDs and names), which takes seconds where the HTTP API takes
    about 0.6 s per host. The trace then only uses Placement's API.

    With ``prefill`` (the run's arguments), the fleet starts loaded
    instead of empty: the first ``TEMPLATE_HOSTS`` hosts replay the
    warm-up of a trace of their size with the band design (real
    Placement, as in a run), and every other host is a copy of one of
    them, allocations and band included.
    """
    placement, client = embedded_client(state_path)
    try:
        build_fleet(client, 1)
        templates = [host_name(1)]
        if prefill is not None:
            templates = [host_name(n) for n in range(1, TEMPLATE_HOSTS + 1)]
            placement.stop()
            placement_copy.copy_host(_database(state_path), templates[0],
                                     templates[1:])
            placement, client = embedded_client(state_path)
            warm_up(client, prefill)
    finally:
        placement.stop()
    copies = range(len(templates) + 1, hosts + 1)
    for offset, template in enumerate(templates):
        placement_copy.copy_host(
            _database(state_path), template,
            [host_name(n) for n in copies[offset::len(templates)]])


def warm_up(client: report.SchedulerReportClient,
            args: argparse.Namespace) -> None:
    """Replay the arrivals before ``args.warmup`` of a trace for
    ``TEMPLATE_HOSTS`` hosts with the band design; the instances running
    at the end stay."""
    gpus = TEMPLATE_HOSTS * GPUS_PER_HOST
    # Enough arrivals to pass the warm-up (the mean size is at least 1).
    trace = make_trace(gpus, int(args.warmup * args.load * gpus) + 100,
                       args.load, args.seed)
    run = FleetRun(client, 'bands', args.limit or None, args.seed)
    running: list[tuple[float, str]] = []
    for request in trace:
        if request.arrival >= args.warmup:
            return
        while running and running[0][0] <= request.arrival:
            run.release(heapq.heappop(running)[1])
        consumer = run.place(request)
        if consumer is not None:
            heapq.heappush(running,
                           (request.arrival + request.lifetime, consumer))


def host_name(number: int) -> str:
    return 'hgx-%d' % number


def build_fleet(client: report.SchedulerReportClient, hosts: int) -> None:
    """Push ``hosts`` HGX H200 trees, as their computes would report
    them, through the translator and the report client."""
    config = fakehost.h200_pci_config()
    whitelist = devspec.Whitelist.from_config(config['device_spec'],
                                              report_in_placement=True)
    group_tree = pci_groups.GroupTree.from_config(config['device_group'])
    host_devices = fakehost.hgx_h200_devices()
    devices = fakehost.tracked_devices(host_devices)
    specs = whitelist.classify(host_devices)
    for number in range(1, hosts + 1):
        host = host_name(number)
        tree = ptree.ProviderTree()
        tree.add(host)
        tree.update_inventory(host, ROOT_INVENTORY)
        tree.update_traits(host, {placement_names.OWNER_NOVA_TRAIT})
        translator.update_provider_tree_for_pci(
            tree, host, devices, specs, group_tree, [], dict)
        client.update_from_provider_tree(tree)
    # As the scheduler does before its queries: Placement refuses a
    # trait it does not know (no device is withheld alone here, and the
    # copies have shard traits this host does not).
    client.ensure_traits([placement_names.GROUP_ONLY_TRAIT,
                          *placement_names.SHARD_TRAITS])


def resource_request(size: int) -> request_builder.ResourceRequest:
    """What the scheduler asks Placement for a flavor ``h200:<size>``."""
    aliases = pci_request.get_alias_from_config(
        [json.dumps(fakehost.H200_ALIAS)])
    requests = pci_request.get_pci_requests_from_flavor(
        {pci_request.EXTRA_SPEC_ALIAS: 'h200:%d' % size}, aliases)
    return request_builder.build_resource_request(FLAVOR, requests)


class DecisionClock:
    """Where one decision's time goes: Placement's reads (the query),
    the claims, and the rest (the choice)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.query = 0.0
        self.claims = 0.0

    def querying(self, call: Callable) -> Callable:
        """``call``, its time counted as the query's."""
        return self._timed(call, 'query')

    def claiming(self, call: Callable) -> Callable:
        """``call``, its time counted as the claims'."""
        return self._timed(call, 'claims')

    def _timed(self, call: Callable, counter: str) -> Callable:
        def timed(*args):
            begun = time.perf_counter()
            try:
                return call(*args)
            finally:
                setattr(self, counter, getattr(self, counter) +
                        time.perf_counter() - begun)
        return timed

    def split(self) -> tuple[float, float]:
        """(query seconds, choice seconds) so far."""
        spent = time.perf_counter() - self.started
        return self.query, spent - self.query - self.claims


class FleetRun:
    """Replays a trace on the Placement fleet with one host choice."""

    def __init__(self, client: report.SchedulerReportClient, policy: str,
                 limit: int | None, seed: int,
                 boards: 'FleetBoards | None' = None,
                 max_moves: int = 0) -> None:
        self.client = client
        # The fleet's size and the hosts of a shard, as the shards host
        # choice sees them (0: whole bands), and its choice of shard.
        self.fleet_hosts = 0
        self.shard_hosts = 0
        self.shard_rng = random.Random(seed)
        # The boards and holders the defrag host choice plans on.
        self.boards = boards
        self.max_moves = max_moves
        # (arrival, size, moves, GPUs moved) of each plan carried out.
        self.move_log: list[tuple[float, int, int, int]] = []
        self.policy = policy
        self.limit = limit
        self.order = host_order(policy, random.Random(seed))
        # size -> [(query seconds, choice seconds)]
        self.latency: dict[int, list[tuple[float, float]]] = {}
        # root provider -> GPUs held; consumer -> (root, GPUs)
        self.held: dict[str, int] = collections.Counter()
        self.consumers: dict[str, tuple[str, int]] = {}
        self.busy_hosts = 0
        # Accepted requests, and those whose claim broke a wholly free
        # group (a best-fit miss: the buddy rule had a better place).
        self.claims = 0
        self.breaking = 0
        # (arrival, density after the request was placed or refused)
        self.densities: list[tuple[float, float]] = []

    def _known_traits(self, prefix: str) -> set[str]:
        """Traits Placement knows starting with ``prefix``, as the host
        choice sees them: none without bands (one query, as the scheduler
        before them), fitting sizes only for shards (bands and defrag are
        the scheduler before them; the hosts built by the translator
        carry them)."""
        if self.policy not in BANDED or (
                self.policy not in FITTING and
                prefix.startswith(placement_names.FIT_TRAIT_PREFIX)):
            return set()
        return self.client.get_trait_names(prefix)

    def _choose(self, rr: request_builder.ResourceRequest, consumer: str,
                clock: 'DecisionClock') -> choice.Choice | None:
        """The scheduler's decision (``nova.scheduler.choice.choose``)
        with this host choice's view of Placement and order, claiming for
        ``consumer``; None when it finds no host."""
        def shards() -> list[band_shards.Shard | None]:
            if self.policy not in BANDED:
                return [None]
            return band_shards.for_request(
                self.fleet_hosts, self.shard_hosts, None, self.shard_rng)

        placement = choice.Placement(
            ask=clock.querying(self.client.get_allocation_candidates),
            known_traits=clock.querying(self._known_traits),
            hosts_with=clock.querying(
                lambda traits: [fullness.Host(*host) for host in
                                self.client.providers(required=traits)]),
            claim=clock.claiming(
                lambda candidate: self.client.claim_resources(
                    consumer, candidate.allocation_request, PROJECT, USER)),
            fit_by_host=self.policy == 'hosts')
        # Every host of the fleet may be used (no compute is down); the
        # benchmark needs no reason for a refusal.
        fleet = choice.Fleet(usable=lambda body: (
            {summary['root_provider_uuid'] for summary in
             body.get('provider_summaries', {}).values()}, []),
            refusals=list, shards=shards)
        try:
            return choice.choose(rr, placement, fleet, self.limit,
                                 order=self.order)
        except exception.NoValidHost:
            return None

    def place(self, request: Request) -> str | None:
        """Schedule one request; its consumer UUID if claimed."""
        rr = resource_request(request.size)
        consumer = uuidutils.generate_uuid()
        clock = DecisionClock()
        chosen = self._choose(rr, consumer, clock)
        self.latency.setdefault(request.size, []).append(clock.split())
        if chosen is None and self.policy == 'defrag' and \
                self._defragment(request):
            chosen = self._choose(rr, consumer, DecisionClock())
        if chosen is not None:
            self._claimed(consumer, chosen, rr, request.size)
        self.densities.append((request.arrival, self.density()))
        return consumer if chosen is not None else None

    def _claimed(self, consumer: str, chosen: choice.Choice,
                 rr: request_builder.ResourceRequest, size: int) -> None:
        """Book a claim made: what the host holds, its band and whether
        the claim broke a wholly free group."""
        candidate = chosen.candidate
        # The boards first: the traits _hold publishes read them.
        if self.boards is not None:
            self.boards.hold(consumer, candidate.host, frozenset(
                scheduler_candidates.taken_providers(
                    candidate.pci_providers)))
        self._hold(consumer, candidate.host, size)
        self._count_breaking(candidate, chosen.summaries, rr)

    def _defragment(self, request: Request) -> bool:
        """Plan and carry out the moves freeing a group of the
        request's size; whether there was such a plan with moves."""
        plan = defrag.plan(self.boards.boards(), self.boards.servers(),
                           request.size, self.max_moves)
        if plan is None or not plan.moves:
            return False
        for move in plan.moves:
            self.client.delete_allocation_for_instance(move.server)
            allocations = {move.target.host: {'resources': dict(
                resource_request(move.size).groups[0].resources)}}
            allocations.update({device: {'resources': {'PGPU': 1}}
                                for device in move.target.devices})
            if not self.client.claim_resources(
                    move.server, {'allocations': allocations}, PROJECT,
                    USER):
                raise RuntimeError('the move of %s to %s was refused' % (
                    move.server, move.target.name))
            self._hold(None, move.source_host, -move.size)
            self._hold(None, move.target.host, move.size)
            if move.server in self.consumers:
                self.consumers[move.server] = (move.target.host, move.size)
            self.boards.hold(move.server, move.target.host,
                             move.target.devices)
        self.move_log.append((request.arrival, request.size) + plan.cost)
        return True

    def _count_breaking(self, candidate: choice.Candidate, summaries: dict,
                        rr: request_builder.ResourceRequest) -> None:
        tree = {uuid: summary for uuid, summary in summaries.items()
                if summary['root_provider_uuid'] == candidate.host}
        host = scheduler_candidates.HostView(candidate.host, tree,
                                             rr.pci_resource_classes)
        largest, _count = host.damage(
            scheduler_candidates.taken_providers(candidate.pci_providers))
        self.claims += 1
        self.breaking += int(largest > 0)

    def release(self, consumer: str) -> None:
        self.client.delete_allocation_for_instance(consumer)
        root, size = self.consumers.pop(consumer)
        if self.boards is not None:
            self.boards.release(consumer)
        self._hold(None, root, -size)

    def _hold(self, consumer: str | None, root: str, size: int) -> None:
        """Count ``size`` more GPUs held on ``root``; with bands, publish
        the host's new band as its compute would (see publish_band)."""
        if consumer is not None:
            self.consumers[consumer] = (root, size)
        self.busy_hosts += int(self.held[root] + size > 0) - int(
            self.held[root] > 0)
        self.held[root] += size
        if self.policy in BANDED:
            publish_band(self.client, root,
                         GPUS_PER_HOST - self.held[root],
                         self.boards.fitting_sizes(root)
                         if self.policy in FITTING else ())

    def density(self) -> float:
        """GPUs held over the GPUs of the hosts holding any: 1.0 when
        instances are packed on as few hosts as possible."""
        return sum(self.held.values()) / (
            self.busy_hosts * GPUS_PER_HOST or 1)


class FleetBoards:
    """The fleet's partitions and who holds which GPU, as
    ``nova.fleet.defrag`` plans on them: read once from Placement's
    database (``placement_copy.read_fleet``; groups are the providers
    with a group size trait, their GPUs the PGPU providers below), then
    kept by the run."""

    def __init__(self, providers: list[placement_copy.Provider],
                 held: list[placement_copy.Held]) -> None:
        children = collections.defaultdict(list)
        for provider in providers:
            children[provider.parent].append(provider)
        by_uuid = {provider.uuid: provider for provider in providers}

        def node(uuid: str) -> int | None:
            return placement_names.locality_from_traits(
                by_uuid[uuid].traits).node

        def gpus_below(provider: placement_copy.Provider) -> list[str]:
            found, pending = [], [provider]
            while pending:
                current = pending.pop()
                if current.gpu:
                    found.append(current.uuid)
                pending.extend(children[current.uuid])
            return found

        self.partitions: dict[str, list[defrag.Partition]] = \
            collections.defaultdict(list)
        for provider in providers:
            if provider.gpu:
                members = [provider.uuid]
            elif any(placement_names.is_group_size_trait(t)
                     for t in provider.traits):
                members = gpus_below(provider)
            else:
                continue
            self.partitions[provider.root].append(defrag.Partition(
                provider.root, provider.name, frozenset(members),
                frozenset(node(m) for m in members)))
        self.placed: dict[str, tuple[str, frozenset[str]]] = {}
        for gpu in held:
            _root, devices = self.placed.get(gpu.consumer,
                                             (gpu.root, frozenset()))
            self.placed[gpu.consumer] = (gpu.root, devices | {gpu.device})

    @classmethod
    def from_database(cls, database: str) -> 'FleetBoards':
        """The boards of the fleet in Placement's SQLite ``database``."""
        return cls(*placement_copy.read_fleet(database))

    def hold(self, consumer: str, root: str,
             devices: frozenset[str]) -> None:
        self.placed[consumer] = (root, devices)

    def release(self, consumer: str) -> None:
        self.placed.pop(consumer, None)

    def boards(self) -> list[defrag.Board]:
        holders: dict[str, dict[str, str]] = collections.defaultdict(dict)
        for consumer, (root, devices) in self.placed.items():
            holders[root].update((device, consumer) for device in devices)
        return [defrag.Board(root, tuple(parts), holders[root])
                for root, parts in self.partitions.items()]

    def fitting_sizes(self, root: str) -> set[int]:
        """Sizes host ``root`` can take without breaking a free group,
        as its compute would publish them."""
        busy = {device for consumer, (host, devices) in self.placed.items()
                if host == root for device in devices}
        return free_groups.fitting_sizes(
            (partition.devices for partition in self.partitions[root]), busy)

    def servers(self) -> dict[str, defrag.Server]:
        return {consumer: defrag.Server(consumer, consumer,
                                        pci_request.DEFAULT_NUMA_POLICY,
                                        True)
                for consumer in self.placed}


def publish_band(client: report.SchedulerReportClient, root: str,
                 free: int, fits: Iterable[int] = ()) -> None:
    """Put the free-GPU band trait of ``free`` PGPU and the traits of
    the ``fits`` sizes it can take without breaking a free group on host
    ``root``.

    A compute publishes them with its provider tree update (the
    translator, from its PCI tracker); the benchmark runs no computes, so
    it sets the same traits (``translator.host_state_traits``) at once
    after each claim and end, as a compute updating right away would.
    """
    client.set_traits(root, lambda traits: translator.host_state_traits(
        traits, {'PGPU': free}, {'PGPU': fits}))


def embedded_client(state_path: str, max_candidates: int = -1,
                    connection: str | None = None):
    """An embedded Placement keeping its SQLite file in ``state_path``
    (or on the database at ``connection``), and a report client for it;
    ``max_candidates`` is Placement's ``[placement]
    max_allocation_candidates`` (-1: no bound)."""
    placement = embedded_placement.EmbeddedPlacement(
        connection=connection, state_path=state_path)
    placement.conf.set_override('max_allocation_candidates', max_candidates,
                                group='placement')
    placement.start()
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    placement_conf.use_noauth_placement(conf, placement.url)
    conf([], project='nova', default_config_files=[],
         default_config_dirs=[])
    return placement, report.SchedulerReportClient(conf)


def _database(state_path: str) -> str:
    return os.path.join(state_path, 'placement.sqlite')


def run_policy(job: tuple) -> tuple[dict, dict]:
    """Worker: replay the trace with one host choice on a copy of the
    built fleet, in a Placement of its own; returns the summary and the
    latencies by size."""
    policy, fleet_path, state_path, args = job
    os.makedirs(state_path)
    shutil.copyfile(_database(fleet_path), _database(state_path))
    gpus = args.hosts * GPUS_PER_HOST
    trace = make_trace(gpus, args.requests, args.load, args.seed)
    placement, client = embedded_client(state_path)
    try:
        started = time.perf_counter()
        boards = (FleetBoards.from_database(_database(state_path))
                  if policy in ('defrag',) + FITTING else None)
        run = FleetRun(client, policy, args.limit or None, args.seed,
                       boards, args.defrag_max_moves)
        if policy in FITTING:
            run.fleet_hosts = args.hosts
            run.shard_hosts = args.band_shard_hosts
        for root, held in placement_copy.gpus_held(
                _database(state_path)).items():
            run.held[root] = held
            run.busy_hosts += 1
        if policy in FITTING:
            # The fleet was built (and prefilled) with bands only; every
            # compute would publish its fitting sizes at its next update.
            for root in boards.partitions:
                publish_band(client, root, GPUS_PER_HOST - run.held[root],
                             boards.fitting_sizes(root))
        accepted = replay(trace, run.place, run.release)
        print('%s: %.0f s' % (policy, time.perf_counter() - started),
              file=sys.stderr, flush=True)
    finally:
        placement.stop()
    # A prefilled fleet is measured from the first request on.
    warmup = 0.0 if args.prefill else args.warmup
    measured = [d for arrival, d in run.densities if arrival >= warmup]
    return (dict(summarize(trace, accepted, gpus, warmup),
                 policy=policy, density=statistics.mean(measured),
                 breaking=run.breaking / (run.claims or 1),
                 moves=_moves_by_size(trace, accepted, run.move_log, warmup)
                 if policy == 'defrag' else None),
            run.latency)


def _moves_by_size(trace: list[Request], accepted: list[bool],
                   log: list[tuple[float, int, int, int]],
                   warmup: float) -> dict[int, tuple[int, int, int]]:
    """Size -> (requests accepted, moves, GPUs moved), counting the
    requests arriving after ``warmup``."""
    counts = {size: [0, 0, 0] for size in sorted(MIX)}
    for request, ok in zip(trace, accepted):
        if ok and request.arrival >= warmup:
            counts.setdefault(request.size, [0, 0, 0])[0] += 1
    for arrival, size, moves, gpus in log:
        if arrival >= warmup:
            counts[size][1] += moves
            counts[size][2] += gpus
    return {size: tuple(values) for size, values in counts.items()}


# Output ---------------------------------------------------------------------

def format_results(rows: list[dict]) -> str:
    """One line per host choice: acceptance per size, overall,
    utilization, mean packing density and the share of claims that broke
    a wholly free group (``-`` where they do not apply)."""
    sizes = sorted(rows[0]['acceptance'])
    head = ('| host choice | ' + ' | '.join('accept %d' % s for s in sizes)
            + ' | accept all | utilization | density | breaking |')
    lines = [head, '|' + '---|' * (len(sizes) + 5)]
    for row in rows:
        extra = ['-' if row.get(key) is None else '%.3f' % row[key]
                 for key in ('density', 'breaking')]
        lines.append('| %s | %s | %.3f | %.3f | %s |' % (
            row['policy'], ' | '.join('%.3f' % row['acceptance'][s]
                                      for s in sizes),
            row['all'], row['utilization'], ' | '.join(extra)))
    return '\n'.join(lines)


def format_moves(row: dict) -> str:
    """Moves and GPUs moved for the accepted requests of each size
    (the defrag host choice), measured requests only."""
    lines = ['moves, %s:' % row['policy'],
             '| N | accepted | moves | moves per accepted | GPUs moved |',
             '|---|---|---|---|---|']
    for size, (accepted, moves, gpus) in sorted(row['moves'].items()):
        lines.append('| %d | %d | %d | %.3f | %d |' % (
            size, accepted, moves, moves / (accepted or 1), gpus))
    return '\n'.join(lines)


def format_latency(policy: str,
                   latency: dict[int, list[tuple[float, float]]]) -> str:
    """Median Placement query and choice time per requested size."""
    lines = ['decision latency, %s:' % policy,
             '| N | queries | query median | choice median | choice/query |',
             '|---|---|---|---|---|']
    for size in sorted(latency):
        query = statistics.median(q for q, _ in latency[size])
        choice = statistics.median(c for _, c in latency[size])
        lines.append('| %d | %d | %.1f ms | %.2f ms | %.1f%% |' % (
            size, len(latency[size]), query * 1e3, choice * 1e3,
            100.0 * choice / query))
    return '\n'.join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=16)
    parser.add_argument('--requests', type=int, default=2000,
                        help='length of the trace')
    parser.add_argument('--load', type=float, default=0.85,
                        help="offered load, share of the fleet's GPUs")
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--warmup', type=float, default=1.0,
                        help='mean lifetimes not counted at the start')
    parser.add_argument('--limit', type=int, default=1000,
                        help='limit of GET /allocation_candidates, as '
                             '[scheduler]max_placement_results; 0: none')
    parser.add_argument('--prefill', action='store_true',
                        help='start from a fleet loaded as after --warmup '
                             '(copies of %d hosts that replayed it) and '
                             'measure every request; the prefilled '
                             'instances outlive the trace' % TEMPLATE_HOSTS)
    parser.add_argument('--policies', default=','.join(POLICIES),
                        help='host choices to replay, comma-separated')
    parser.add_argument('--defrag-max-moves', type=int, default=2,
                        help='moves a defrag plan may make for one '
                             'request (host choice defrag)')
    parser.add_argument('--band-shard-hosts', type=int, default=16,
                        help='hosts of a shard, about (host choice '
                             'shards), as [scheduler]band_shard_hosts')
    parser.add_argument('--jobs', type=int, default=2,
                        help='host choices replayed at once, each in a '
                             'process and Placement of its own')
    parser.add_argument('--state-dir', default=None,
                        help="parent directory of Placement's SQLite file "
                             "(e.g. /dev/shm to keep disk syncs out of "
                             "the timings); default: the system's temp")
    args = parser.parse_args(argv)
    args.policies = args.policies.split(',')
    unknown = set(args.policies) - set(POLICIES)
    if unknown:
        parser.error('unknown host choice(s) %s; choose from %s' % (
            ', '.join(sorted(unknown)), ', '.join(POLICIES)))
    for name in ('hosts', 'requests', 'jobs', 'band_shard_hosts'):
        if getattr(args, name) < 1:
            parser.error('--%s must be at least 1' % name.replace('_', '-'))
    if args.prefill and args.hosts < TEMPLATE_HOSTS:
        parser.error('--prefill needs at least %d hosts, got %d' % (
            TEMPLATE_HOSTS, args.hosts))
    if not 0 < args.load:
        parser.error('--load must be positive, got %s' % args.load)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    gpus = args.hosts * GPUS_PER_HOST
    trace = make_trace(gpus, args.requests, args.load, args.seed)
    limit_row = summarize(trace, no_topology(trace, gpus), gpus,
                          0.0 if args.prefill else args.warmup)
    with tempfile.TemporaryDirectory(prefix='bench-fleet-',
                                     dir=args.state_dir) as tmp:
        fleet_path = os.path.join(tmp, 'fleet')
        started = time.perf_counter()
        # Built once in a child, so this process never configures
        # Placement's process-wide database; each host choice replays on
        # a copy of the same fleet.
        ctx = multiprocessing.get_context('spawn')
        with ctx.Pool(1) as pool:
            pool.apply(build_fleet_at, (fleet_path, args.hosts,
                                        args if args.prefill else None))
        print('built %d hosts in %.0f s' % (
            args.hosts, time.perf_counter() - started), file=sys.stderr,
            flush=True)
        jobs = [(policy, fleet_path, os.path.join(tmp, policy), args)
                for policy in args.policies]
        # One job per process: Placement configures its database once
        # per process.
        with ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
            results = pool.map(run_policy, jobs, chunksize=1)
    rows = [row for row, _latency in results]
    if not args.prefill:
        # An empty pool is no limit for a loaded fleet.
        rows.append(dict(limit_row, policy='no-topology limit'))
    print('%d H200 hosts (%d GPUs), %d requests, load %.2f, seed %d, '
          'limit %s, warm-up %.1f lifetimes%s, Placement %s' % (
              args.hosts, gpus, args.requests, args.load, args.seed,
              args.limit or 'none', args.warmup,
              ' (prefilled from %d hosts)' % TEMPLATE_HOSTS
              if args.prefill else '',
              metadata.version('openstack-placement')))
    print('requests measured per size: %s' % ', '.join(
        '%d: %d' % item for item in sorted(limit_row['asked'].items())))
    print(format_results(rows))
    for row, latency in results:
        if row.get('moves') is not None:
            print()
            print(format_moves(row))
        print()
        print(format_latency(row['policy'], latency))
    return 0


if __name__ == '__main__':
    sys.exit(main())
