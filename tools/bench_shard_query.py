"""Time the shapes a shard query can take on one loaded fleet, side by side.

Placement 16 resolves every request group served by one provider (each
device of a PCI request) by first listing every provider of the fleet
with a free unit of the group's resource class
(``placement.objects.research_context.get_providers_with_resource``,
called when the group's search context is made); only ``in_tree``
narrows that listing, to one tree. Required traits and ``member_of`` are
applied to the providers afterwards. This tool measures what that means
for a band query of the scheduler in one shard of about 16 hosts (band 8,
the wholly free hosts, which every size can use, so that every shape
answers for every size) on a fleet prefilled as ``tools/bench_fleet.py
--prefill`` builds it, each shape on the same shard in the same round:

* traits: the query nova-scheduler sends (shard traits required on the
  root and in every device group, the band trait on the root);
* member_of: the shard as a Placement aggregate instead (every provider
  of a host a member of its shard's aggregate at each level, written in
  Placement's tables as the copies are), ``member_of`` on the unsuffixed
  group and on every device group;
* member_of root: the aggregate on the unsuffixed group only (Placement
  spreads a root's aggregate over its tree for that group);
* in_tree: the shard's hosts in the band listed (``GET
  /resource_providers`` with the shard and band traits), then one of them
  asked alone as nova-scheduler asks a host a request fits
  (``nova.scheduler.fullness.on_host``: ``in_tree`` in every group with
  resources, the host's finest shard traits on the root and in the group
  provider's group); the listing and the query timed together, and the
  query alone (``in_tree query``).

Queries go straight to Placement's WSGI application in this process
(no HTTP), so the times are Placement's own work. With ``--profile N``
one round of N-GPU trait queries is profiled (cProfile) and the share of
the time in the per-class listing and in the trait filter is printed.
Example::

    .venv/bin/python tools/bench_shard_query.py --hosts 1000 \\
        --state-dir /dev/shm --profile 8
"""

import argparse
import cProfile
import dataclasses
from importlib import metadata
import multiprocessing
import os
import pstats
import random
import statistics
import sys
import tempfile
import time
from urllib import parse
import uuid

import webob

from nova.conf import placement as placement_conf
from nova.pci import placement_names
from nova.scheduler import band_shards
from nova.scheduler import fullness
import bench_fleet
import placement_copy

SIZES = (1, 2, 4, 8)
SHAPES = ('traits', 'member_of', 'member_of root', 'in_tree')
# Columns of the table: the shapes, and the in_tree query without its
# listing.
COLUMNS = SHAPES + ('in_tree query',)
# The band asked: the wholly free hosts, where every size has candidates.
BAND = placement_names.band_trait('PGPU', 8)
# Aggregates of the shards: stable UUIDs, so every run names them alike.
_NAMESPACE = uuid.UUID('4f1e2b7a-8c3d-4e5f-9a6b-7c8d9e0f1a2b')


def shard_aggregate(level: int, index: int) -> str:
    """UUID of the aggregate of shard ``index`` of ``level``."""
    return str(uuid.uuid5(_NAMESPACE, 'pci-shard-%d-%d' % (level, index)))


class Placement:
    """Placement's WSGI application, called in this process."""

    def __init__(self, app) -> None:
        self.app = app

    def get(self, path: str, params: list[tuple[str, str]]) -> dict:
        request = webob.Request.blank(
            path + '?' + parse.urlencode(params, safe=',:!'))
        request.headers['OpenStack-API-Version'] = 'placement 1.39'
        request.headers['X-Auth-Token'] = placement_conf.NOAUTH_TOKEN
        response = request.get_response(self.app)
        if response.status_int != 200:
            raise RuntimeError('GET %s: %s %s' % (
                request.path_qs, response.status, response.text))
        return response.json


def shaped_query(shape: str, size: int, shard: band_shards.Shard,
                 host: fullness.Host | None) -> list[tuple[str, str]]:
    """GET /allocation_candidates parameters of ``shape`` for a
    ``size``-GPU request on the hosts of band ``BAND`` in ``shard``
    (``in_tree``: on ``host``)."""
    request = bench_fleet.resource_request(size)
    suffixes = [group.suffix for group in request.groups if group.suffix]
    if shape == 'in_tree':
        return fullness.on_host(request, host, BAND).to_query_params(1000)
    if shape == 'traits':
        sharded = fullness.in_shard(request, shard)
        return dataclasses.replace(
            sharded, root_required=sharded.root_required | {BAND}
        ).to_query_params(1000)
    params = dataclasses.replace(request, root_required={BAND}) \
        .to_query_params(1000)
    member = 'in:' + shard_aggregate(shard.level, shard.index)
    params.append(('member_of', member))
    if shape == 'member_of':
        params += [('member_of' + suffix, member) for suffix in suffixes]
    return params


def band_hosts(placement: Placement, shard: band_shards.Shard
               ) -> list[fullness.Host]:
    """The hosts of ``shard`` in ``BAND``."""
    required = shard.traits() | {BAND}
    return [fullness.Host(provider['uuid'], provider['name'])
            for provider in placement.get(
        '/resource_providers', [('required', ','.join(sorted(required)))])[
        'resource_providers']]


def measure(placement: Placement, level: int, rounds: int,
            rng: random.Random, shapes: tuple[str, ...] = SHAPES) -> dict:
    """size -> shape -> ([seconds], candidates found): each round draws
    a shard and asks every shape for it, in turn."""
    results = {size: {column: ([], 0) for column in COLUMNS}
               for size in SIZES}

    def record(size: int, column: str, seconds: float, found: int) -> None:
        times, count = results[size][column]
        times.append(seconds)
        results[size][column] = (times, count + found)

    for _round in range(rounds):
        for size in SIZES:
            shard = band_shards.Shard(level, rng.randrange(1 << level))
            for shape in shapes:
                started = time.perf_counter()
                host = None
                if shape == 'in_tree':
                    hosts = band_hosts(placement, shard)
                    if not hosts:
                        continue
                    host = rng.choice(hosts)
                asked = time.perf_counter()
                body = placement.get('/allocation_candidates', shaped_query(
                    shape, size, shard, host))
                done = time.perf_counter()
                found = len(body['allocation_requests'])
                record(size, shape, done - started, found)
                if shape == 'in_tree':
                    record(size, 'in_tree query', done - asked, found)
    return results


def profile(placement: Placement, level: int, size: int, shape: str,
            rounds: int, rng: random.Random) -> str:
    """Where the time of ``rounds`` ``shape`` queries (traits or
    in_tree) for ``size`` GPUs goes, as shares of Placement's candidate
    search. A round whose shard has no host in ``BAND`` asks no
    ``in_tree`` query, as in ``measure``."""
    profiler = cProfile.Profile()
    queries = []
    for _round in range(rounds):
        shard = band_shards.Shard(level, rng.randrange(1 << level))
        hosts = band_hosts(placement, shard) if shape == 'in_tree' else [None]
        if hosts:
            queries.append(shaped_query(shape, size, shard, rng.choice(hosts)))
    if not queries:
        return 'profile: no shard drawn had a host in %s' % BAND
    profiler.enable()
    for query in queries:
        placement.get('/allocation_candidates', query)
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    spent = {}
    for (filename, _line, function), row in stats.items():
        if 'placement/objects' in filename:
            spent[function] = spent.get(function, 0.0) + row[3]
    total = spent['_get_by_requests']
    parts = (('get_providers_with_resource', 'per-class listing'),
             ('provider_ids_matching_required_traits', 'trait filter'),
             ('get_traits_by_provider_tree', "trees' traits"),
             ('_alloc_candidates_single_provider', 'single-provider '
              'candidates'),
             ('_merge_candidates', 'merging groups'))
    return '\n'.join(
        ['profile, %d %s queries for %d GPUs (cProfile): %.2f s in the '
         'candidate search' % (len(queries), shape, size, total)] +
        ['  %-28s %4.0f %%' % (label, 100.0 * spent.get(function, 0.0) /
                               total) for function, label in parts])


def format_results(results: dict) -> str:
    """Median ms per size and shape, each shape's ratio to ``traits``,
    and each shape's 8-GPU over 1-GPU median."""
    head = '| N | ' + ' | '.join(COLUMNS) + ' | candidates |'
    lines = [head, '|' + '---|' * (len(COLUMNS) + 2)]
    medians = {}
    for size in SIZES:
        cells, found = [], []
        for shape in COLUMNS:
            times, count = results[size][shape]
            medians[size, shape] = statistics.median(times) if times \
                else None
            found.append(str(count))
            if not times:
                cells.append('-')
                continue
            cells.append('%.0f ms (%.2f)' % (
                medians[size, shape] * 1e3,
                medians[size, shape] / medians[size, 'traits']))
        lines.append('| %d | %s | %s |' % (size, ' | '.join(cells),
                                           '/'.join(found)))
    lines.append('| 8/1 | %s | |' % ' | '.join(
        '%.1f' % (medians[8, shape] / medians[1, shape])
        if medians[8, shape] and medians[1, shape] else '-'
        for shape in COLUMNS))
    return '\n'.join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--rounds', type=int, default=10,
                        help='queries of each size and shape')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--band-shard-hosts', type=int, default=16,
                        help='hosts of a shard, about, as '
                             '[scheduler]band_shard_hosts')
    parser.add_argument('--profile', type=int, default=0, choices=(0,) +
                        SIZES, help='profile the queries of this '
                                    'size (0: none)')
    parser.add_argument('--shapes', default=','.join(SHAPES),
                        help='the shapes measured, comma separated '
                             '(traits always)')
    parser.add_argument('--profile-shape', default='traits',
                        choices=('traits', 'in_tree'),
                        help='the shape profiled')
    parser.add_argument('--state-dir', default=None,
                        help="parent directory of Placement's SQLite file")
    parser.add_argument('--database', default=None,
                        help='serve the fleet from this empty database '
                             '(a SQLAlchemy URL, e.g. mysql+pymysql://'
                             'root@127.0.0.1/bench_placement) instead of '
                             'SQLite')
    args = parser.parse_args(argv)
    if args.hosts < bench_fleet.TEMPLATE_HOSTS:
        parser.error('--hosts must be at least %d, got %d' % (
            bench_fleet.TEMPLATE_HOSTS, args.hosts))
    unknown = set(args.shapes.split(',')) - set(SHAPES)
    if unknown:
        parser.error('unknown shape(s) %s; choose from %s' % (
            ', '.join(sorted(unknown)), ', '.join(SHAPES)))
    args.shapes = tuple(shape for shape in SHAPES
                        if shape in args.shapes.split(',') + ['traits'])
    if args.rounds < 1 or args.band_shard_hosts < 1:
        parser.error('--rounds and --band-shard-hosts must be at least 1')
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    fleet_args = bench_fleet.parse_args([
        '--hosts', str(args.hosts), '--prefill', '--seed', str(args.seed)])
    with tempfile.TemporaryDirectory(prefix='bench-shard-query-',
                                     dir=args.state_dir) as tmp:
        started = time.perf_counter()
        # Built in a child: Placement configures its database once per
        # process, and this one serves the copy.
        ctx = multiprocessing.get_context('spawn')
        with ctx.Pool(1) as pool:
            pool.apply(bench_fleet.build_fleet_at,
                       (tmp, args.hosts, fleet_args))
        memberships = placement_copy.add_shard_aggregates(
            os.path.join(tmp, 'placement.sqlite'), shard_aggregate)
        if args.database:
            # Placement creates its tables there, then they are filled.
            placement, _client = bench_fleet.embedded_client(
                tmp, connection=args.database)
            placement.stop()
            placement_copy.to_server(os.path.join(tmp, 'placement.sqlite'),
                                     args.database)
        placement, _client = bench_fleet.embedded_client(
            tmp, connection=args.database)
        try:
            print('built %d hosts (%d aggregate memberships) in %.0f s' % (
                args.hosts, memberships, time.perf_counter() - started),
                file=sys.stderr, flush=True)
            app = Placement(placement.app)
            level = band_shards.level_for(args.hosts, args.band_shard_hosts)
            rng = random.Random(args.seed)
            results = measure(app, level, args.rounds, rng, args.shapes)
            print('%d H200 hosts prefilled, shard level %d (%d shards), %d '
                  'rounds, Placement %s on %s; median ms (ratio to traits)'
                  % (args.hosts, level, 1 << level, args.rounds,
                     metadata.version('openstack-placement'),
                     placement.connection.split(':')[0]))
            print(format_results(results))
            if args.profile:
                print(profile(app, level, args.profile, args.profile_shape,
                              args.rounds, rng))
        finally:
            placement.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
