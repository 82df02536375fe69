#!/usr/bin/env python3
"""Boots per second of the separate-process deployment, end to end.

Starts the deployment the deployment tests and ``tools/soak.py`` run
(``nova/tests/functional/lib/deployment.py``): the Compute API and
Placement under gunicorn (two worker processes each), nova-conductor,
``--schedulers`` nova-schedulers and one nova-compute per generated HGX
H200 host (8 GPUs; with ``--hosts-per-process N``, N hosts per process,
each run as its own nova-compute runs it: ``compute_pack``), on MariaDB
and a private RabbitMQ vhost. Then, for
each burst size, fires that many ``POST /servers`` at once (one thread
each, mixed 1/2/4/8-GPU flavors in turn), waits until none is in BUILD,
and reports:

- boots/s: servers ACTIVE over the time from the first request to the
  last server settled;
- p50/p99 seconds from a request's send to its server ACTIVE;
- the Placement requests made for an ACTIVE boot (mean: the scheduler's
  and the compute's, by the request id Placement logs);
- where the time goes, per boot (p50/p99 of each stage, read from the
  services' logs by the request id the client sent, see below);
- the invariant checks of ``workload.check`` (one NVLink partition per
  ACTIVE server, no device held twice, Placement allocations equal to
  the held devices, nothing in BUILD, no 5xx, no ERROR server whose size
  was still free); then every server is deleted at once and the checks
  run again.

Stages of a boot (each client request carries ``X-OpenStack-Request-ID``,
which every service logs and Placement receives):

- api: the ``POST /servers`` answer time, at the client;
- queue: from the answer to the scheduler's first Placement request (the
  cast to the conductor, its lease, the call to a scheduler and the
  scheduler's read of the compute nodes);
- scheduler: from there to the scheduler's ``scheduled to`` log line
  (Placement queries, weighing, the claim), of which ``placement`` is the
  time Placement spent serving the scheduler's requests (gunicorn's
  access log, joined by Placement's own request id);
- conductor: from ``scheduled to`` to the conductor's ``Building
  instance`` line (the answer back, recording the host);
- compute: from there to the compute's ``is running`` line (the call,
  the device claim, the spawn on libvirt's test driver).

Exit status 1 if any check found a violation. Service logs stay in
``--workdir``. Example (64 hosts, bursts of 50, 100 and 200)::

    .venv/bin/python tools/bench_boots.py --hosts 64 --bursts 50,100,200
"""

import argparse
import collections
import concurrent.futures
import dataclasses
import datetime
import itertools
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid

import requests

from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import rabbit as rabbit_fixture
from nova.tests.functional.lib import deployment
from nova.tests.functional.lib import workload

POLL_INTERVAL = 0.5
PLACEMENT_REQUEST_LOGGER = 'placement.requestlog'
STAGES = ('api', 'queue', 'scheduler', 'placement', 'conductor', 'compute')
# oslo.log's default line: "2026-12-06 19:11:38.043 15247 INFO name
# [global-id local-id ...] message".
_LINE = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \d+ \w+ '
                   r'(\S+) \[(req-[0-9a-f-]+) (req-[0-9a-f-]+)[^\]]*\] (.*)$')
_ACCESS = re.compile(r'^ACCESS "(\w+) (\S+) [^"]*" (\d+) (\d+)ms '
                     r'(req-[0-9a-f-]+)')


@dataclasses.dataclass
class Boot:
    """One ``POST /servers`` of a burst and what became of it."""
    request_id: str
    size: int
    sent: float
    answered: float | None = None
    server: str | None = None
    status: str | None = None
    settled: float | None = None


@dataclasses.dataclass(frozen=True)
class LogLine:
    """One log line of a request: when, which logger, which local
    request id, the message."""
    when: float
    logger: str
    local_id: str
    message: str


def _log_time(text: str) -> float:
    return datetime.datetime.strptime(
        text, '%Y-%m-%d %H:%M:%S.%f').timestamp()


def request_lines(text: str, wanted: set[str]) -> dict[str, list[LogLine]]:
    """Global request id -> its lines in the log ``text`` (only ids of
    ``wanted``)."""
    found: dict[str, list[LogLine]] = collections.defaultdict(list)
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and match.group(3) in wanted:
            found[match.group(3)].append(LogLine(
                _log_time(match.group(1)), match.group(2), match.group(4),
                match.group(5)))
    return found


def access_times(text: str) -> dict[str, float]:
    """Placement's request id -> seconds gunicorn took to serve it."""
    return {match.group(5): int(match.group(4)) / 1000.0
            for match in map(_ACCESS.match, text.splitlines()) if match}


def fire(api_url: str, flavors: dict[int, str], count: int,
         sizes: tuple[int, ...], prefix: str) -> list[Boot]:
    """``count`` creates released at once, cycling through ``sizes``."""
    plan = list(itertools.islice(itertools.cycle(sizes), count))
    barrier = threading.Barrier(count)

    def create(index: int, size: int) -> Boot:
        boot = Boot('req-%s' % uuid.uuid4(), size, 0.0)
        barrier.wait()
        boot.sent = time.time()
        try:
            resp = requests.post(
                api_url + '/servers', timeout=workload.REQUEST_TIMEOUT,
                headers={'X-Auth-Token': workload.TOKEN,
                         'X-OpenStack-Request-ID': boot.request_id},
                json={'server': {'name': '%s-%d-%dgpu' % (prefix, index,
                                                          size),
                                 'flavorRef': flavors[size],
                                 'imageRef': 'none'}})
        except requests.RequestException as err:
            boot.status = 'no answer: %s' % err
            return boot
        boot.answered = time.time()
        if resp.status_code == 202:
            boot.server = resp.json()['server']['id']
        else:
            boot.status = 'HTTP %d' % resp.status_code
        return boot
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(create, range(count), plan))


def wait_settled(client: workload.ComputeClient, boots: list[Boot],
                 timeout: float) -> None:
    """Poll the servers until none of ``boots`` builds; note when each
    was first seen ACTIVE or ERROR (the compute's log refines ACTIVE)."""
    pending = {boot.server: boot for boot in boots if boot.server}
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        now = time.time()
        for server in client.servers():
            boot = pending.get(server['id'])
            if boot is not None and server['status'] != 'BUILD':
                boot.status, boot.settled = server['status'], now
                del pending[server['id']]
        time.sleep(POLL_INTERVAL)
    for boot in pending.values():
        boot.status = 'BUILD'


def stages(boots: list[Boot], logs: dict[str, str]
           ) -> dict[str, list[float]]:
    """Stage -> seconds per ACTIVE boot (see the module docstring), and
    ``requests``: the Placement requests made for each; also sets each
    ACTIVE boot's ``settled`` to the compute's ``is running`` line."""
    wanted = {boot.request_id for boot in boots}
    lines: dict[str, list[LogLine]] = collections.defaultdict(list)
    for name, text in logs.items():
        if name != 'placement':
            for rid, found in request_lines(text, wanted).items():
                lines[rid] += found
    # Placement's request log only (not its warnings, e.g. a refused
    # claim's "Over capacity").
    placement = {rid: [line for line in found
                       if line.logger == PLACEMENT_REQUEST_LOGGER]
                 for rid, found in request_lines(logs['placement'],
                                                 wanted).items()}
    served = access_times(logs['placement'])
    spent: dict[str, list[float]] = {stage: [] for stage in STAGES}
    spent['requests'] = []
    for boot in boots:
        mine = lines.get(boot.request_id, [])
        scheduled = _first(mine, 'nova.scheduler', ' scheduled to ')
        building = _first(mine, 'nova.conductor', 'Building instance ')
        running = _first(mine, 'nova.compute', ' is running on ')
        asked = [line for line in placement.get(boot.request_id, [])
                 if scheduled is None or line.when <= scheduled]
        if boot.status != 'ACTIVE' or None in (
                boot.answered, scheduled, building, running) or not asked:
            continue
        boot.settled = running
        # Placement logs a request once served.
        start = asked[0].when - served.get(asked[0].local_id, 0.0)
        spent['api'].append(boot.answered - boot.sent)
        spent['queue'].append(max(0.0, start - boot.answered))
        spent['scheduler'].append(scheduled - start)
        spent['placement'].append(sum(served.get(line.local_id, 0.0)
                                      for line in asked))
        spent['conductor'].append(building - scheduled)
        spent['compute'].append(running - building)
        spent['requests'].append(len(placement.get(boot.request_id, [])))
    return spent


def _first(lines: list[LogLine], logger: str, text: str) -> float | None:
    return min((line.when for line in lines
                if line.logger.startswith(logger) and text in line.message),
               default=None)


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1,
                       max(0, round(fraction * len(ordered) + 0.5) - 1))]


def run_burst(target: deployment.Deployment, hosts: int, count: int,
              sizes: tuple[int, ...], timeout: float) -> tuple[dict, int]:
    """One burst, checked, then everything deleted and checked; its row
    and the number of violations found."""
    client = workload.ComputeClient(target.api_url)
    flavors = client.ensure_flavors()
    boots = fire(target.api_url, flavors, count, sizes,
                 'b%d-%d' % (hosts, count))
    wait_settled(client, boots, timeout)
    spent = stages(boots, target.logs())
    checks = workload.check(client, target.placement_url, fault_free=True)
    violations = [v for found in checks.values() for v in found]
    client = workload.ComputeClient(target.api_url)
    violations += client.delete_all()
    violations += [v for found in workload.check(
        client, target.placement_url, fault_free=True).values()
        for v in found]
    for violation in violations:
        print('    VIOLATION %s' % violation)
    active = [boot for boot in boots if boot.status == 'ACTIVE']
    statuses = collections.Counter(boot.status for boot in boots)
    first = min(boot.sent for boot in boots)
    last = max((boot.settled for boot in boots if boot.settled),
               default=first)
    latencies = [boot.settled - boot.sent for boot in active]
    row = {'hosts': hosts, 'burst': count,
           'active': len(active),
           'error': statuses.get('ERROR', 0),
           'other': count - len(active) - statuses.get('ERROR', 0),
           'boots/s': len(active) / (last - first) if last > first else 0.0,
           'p50': percentile(latencies, 0.5),
           'p99': percentile(latencies, 0.99),
           'requests': statistics.mean(spent['requests'] or [0]),
           'violations': len(violations)}
    for stage in STAGES:
        row[stage] = (statistics.median(spent[stage]) if spent[stage]
                      else 0.0, percentile(spent[stage], 0.99))
    return row, len(violations)


def format_rows(rows: list[dict]) -> str:
    """The two tables of the results, as reStructuredText."""
    out = []
    head = ('hosts', 'burst', 'active', 'error', 'boots/s', 'p50 s',
            'p99 s', 'Placement req/boot', 'violations')
    body = [(str(r['hosts']), str(r['burst']), str(r['active']),
             str(r['error'] + r['other']), '%.1f' % r['boots/s'],
             '%.1f' % r['p50'], '%.1f' % r['p99'], '%.0f' % r['requests'],
             str(r['violations']))
            for r in rows]
    out.append(_table(head, body))
    head = ('hosts', 'burst') + STAGES
    body = [(str(r['hosts']), str(r['burst'])) + tuple(
        '%.2f / %.2f' % r[stage] for stage in STAGES) for r in rows]
    out.append('Seconds per ACTIVE boot in each stage (p50 / p99):\n\n' +
               _table(head, body))
    return '\n\n'.join(out)


def _table(head: tuple, body: list[tuple]) -> str:
    widths = [max(len(row[i]) for row in [head] + body)
              for i in range(len(head))]
    rule = '  '.join('=' * w for w in widths)
    lines = [rule, '  '.join(h.ljust(w) for h, w in zip(head, widths)),
             rule]
    lines += ['  '.join(c.ljust(w) for c, w in zip(row, widths))
              for row in body]
    return '\n'.join(lines + [rule])


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(',')]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            '%r is not allowed; give positive integers separated by '
            'commas, e.g. 50,100,200' % text)
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=_int_list, default=[64],
                        help='generated HGX H200 hosts, one deployment per '
                             'value (default 64)')
    parser.add_argument('--bursts', type=_int_list, default=[50, 100, 200],
                        help='concurrent boots per burst (default '
                             '50,100,200)')
    parser.add_argument('--sizes', type=_int_list, default=[1, 2, 4, 8],
                        help='GPUs per server, in turn (default 1,2,4,8)')
    parser.add_argument('--schedulers', type=int, default=2)
    parser.add_argument('--start-batch', type=int, default=8,
                        help='services started at a time (default 8)')
    parser.add_argument('--hosts-per-process', type=int, default=1,
                        help='hosts each compute process runs, each as '
                             'its own nova-compute would (default 1: one '
                             'nova-compute per host; 256 of those do not '
                             'fit in 24 GB)')
    parser.add_argument('--timeout', type=float, default=600,
                        help='seconds a burst may take to settle')
    parser.add_argument('--database',
                        default=db_fixture.server_url('mysql'),
                        help='MariaDB server URL')
    parser.add_argument('--workdir', help='where state and logs go '
                        '(default: a new temporary directory, kept)')
    args = parser.parse_args(argv)
    if args.hosts_per_process < 1:
        parser.error('--hosts-per-process must be at least 1, got %d' %
                     args.hosts_per_process)
    bad = sorted(set(args.sizes) - set(workload.SIZES))
    if bad:
        parser.error('--sizes %s: allowed are %s' % (
            ','.join(map(str, bad)), ','.join(map(str, workload.SIZES))))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reason = rabbit_fixture.unavailable_reason()
    if reason is not None:
        print('cannot run: %s' % reason, file=sys.stderr)
        return 1
    workdir = args.workdir or tempfile.mkdtemp(prefix='nova-bench-boots-')
    rows, violations = [], 0
    for hosts in args.hosts:
        started = time.monotonic()
        with deployment.Deployment(
                args.database, hosts=['hgx-%d' % i
                                      for i in range(1, hosts + 1)],
                schedulers=args.schedulers, access_log=True,
                start_batch=args.start_batch,
                hosts_per_process=args.hosts_per_process,
                workdir=os.path.join(workdir, '%d-hosts' % hosts)) \
                as target:
            print('%d hosts: deployment started in %.0f s (logs in %s)' % (
                hosts, time.monotonic() - started, target.workdir),
                flush=True)
            for count in args.bursts:
                row, found = run_burst(target, hosts, count,
                                       tuple(args.sizes), args.timeout)
                rows.append(row)
                violations += found
                print(format_rows([row]), flush=True)
    print(format_rows(rows))
    print('%d violation(s); logs in %s' % (violations, workdir))
    return 1 if violations else 0


if __name__ == '__main__':
    sys.exit(main())
