"""Old HTTP server against new: requests/s and latency under concurrency.

Starts nova-all's parts in this process (the Compute API and the embedded
Placement on a temporary SQLite state, two generated HGX H200 hosts),
boots ``--servers`` mixed 1/2/4/8-GPU servers, then serves the same two
WSGI applications with each server:

* ``baseline``: the hand-written wsgiref/socketserver server nova used
  before cheroot (one thread per connection, one request per
  connection, up to ``max_requests`` at once, a listen backlog of 1024),
  kept here in a minimal copy as the point of comparison only;
* ``cheroot``: ``nova.wsgi_server.WSGIServer``, what nova serves with now.

For each endpoint (``GET /v2.1/servers/detail`` and the
``GET /allocation_candidates`` query nova-scheduler sends for a 1-GPU
flavor), each number of concurrent clients (``--clients``) and each
server, a client process runs that many threads, each sending requests
one after the other for ``--seconds`` (HTTP/1.1, keeping the connection
when the server does). Each cell is measured ``--rounds`` times, the two
servers taking turns and swapping who goes first each round, so a load
that comes and goes on a shared machine falls on both alike; the round
with the median requests/s stands for the server. Output: a table of
requests/s (the median, and the lowest and highest round), p50 and p99
latency in ms, and errors (any answer but 200,
or no answer), and per cell the ratio of cheroot's requests/s to the
baseline's. Example::

    .venv/bin/python tools/bench_wsgi.py --seconds 5
"""

import argparse
import http.client
import json
import multiprocessing
import socketserver
import statistics
import sys
import tempfile
import threading
import time
from urllib import parse
from wsgiref import simple_server

from nova.cmd import all as nova_all
import nova.conf
from nova.conf import placement as placement_conf
from nova import cmd
from nova import demo
from nova.db import records
from nova.db import migration
from nova import embedded_placement
from nova.scheduler import request_builder
from nova.pci import request as pci_request
from nova.tests.functional.lib import workload
from nova.virt.fake import host as fakehost
from nova import wsgi_server

HEADERS = {'X-Auth-Token': workload.TOKEN,
           'OpenStack-API-Version': 'placement 1.39'}
SERVERS = ('baseline', 'cheroot')


# --- The baseline: nova's former hand-written server, minimal copy. ---

class _BaselineHandler(simple_server.WSGIRequestHandler):
    """One request per connection, no access log, no reverse DNS."""

    def log_message(self, format, *args) -> None:
        pass

    def address_string(self) -> str:
        return self.client_address[0]


class _BaselineServer(socketserver.ThreadingMixIn,
                      simple_server.WSGIServer):
    """A thread per connection, at most ``slots`` requests at once."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
        self.setup_environ()

    def process_request(self, request, client_address) -> None:
        self.slots.acquire()
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class BaselineServer:
    """The baseline with WSGIServer's start/stop/url."""

    def __init__(self, app, max_requests: int) -> None:
        self._server = _BaselineServer(('127.0.0.1', 0), _BaselineHandler)
        self._server.set_app(app)
        self._server.slots = threading.BoundedSemaphore(max_requests)
        self.url = 'http://127.0.0.1:%d' % self._server.server_port

    def start(self) -> None:
        threading.Thread(target=self._server.serve_forever,
                         daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# --- The load: a client process of threads. ---

def _client_thread(url: str, deadline: float, latencies: list,
                   errors: list) -> None:
    parts = parse.urlsplit(url)
    path = parts.path + ('?' + parts.query if parts.query else '')
    conn = None
    while time.monotonic() < deadline:
        if conn is None:
            conn = http.client.HTTPConnection(parts.hostname, parts.port,
                                              timeout=60)
        start = time.perf_counter()
        try:
            conn.request('GET', path, headers=HEADERS)
            resp = conn.getresponse()
            resp.read()
        except (OSError, http.client.HTTPException):
            errors.append(1)
            conn.close()
            conn = None
            continue
        latencies.append(time.perf_counter() - start)
        if resp.status != 200:
            errors.append(1)
        if resp.will_close:
            conn.close()
            conn = None
    if conn is not None:
        conn.close()


def run_clients(url: str, clients: int, seconds: float) -> dict:
    """``clients`` threads calling ``url`` for ``seconds``: requests/s,
    p50/p99 latency (ms) and errors. Runs in a client process."""
    latencies: list[float] = []
    errors: list[int] = []
    start = time.monotonic()
    threads = [threading.Thread(target=_client_thread, args=(
        url, start + seconds, latencies, errors)) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return summarize(latencies, len(errors), time.monotonic() - start)


def summarize(latencies: list[float], errors: int, elapsed: float) -> dict:
    """Requests/s, p50 and p99 in ms of the answered requests."""
    ordered = sorted(latencies)
    if len(ordered) > 1:
        cuts = statistics.quantiles(ordered, n=100, method='inclusive')
        p50, p99 = cuts[49], cuts[98]
    else:
        p50 = p99 = ordered[0] if ordered else float('nan')
    return {'rps': len(ordered) / elapsed, 'p50_ms': p50 * 1000,
            'p99_ms': p99 * 1000, 'errors': errors}


def median_round(results: list[dict]) -> dict:
    """The round with the median requests/s (the lower middle one of an
    even count): one real measurement, its latencies kept with it."""
    ordered = sorted(results, key=lambda r: r['rps'])
    return ordered[(len(ordered) - 1) // 2]


def round_order(round_index: int) -> tuple[str, ...]:
    """Who is measured first alternates, so neither always follows the
    other's load."""
    return SERVERS if round_index % 2 == 0 else SERVERS[::-1]


def format_ratios(rows: list[dict]) -> str:
    """Per endpoint and clients, cheroot's requests/s over the baseline's."""
    cells: dict[tuple, dict] = {}
    for row in rows:
        cells.setdefault((row['endpoint'], row['clients']), {})[
            row['server']] = row['rps']
    return '\n'.join(
        '%s, %d clients: cheroot/baseline = %.2f' % (
            endpoint, clients, rps['cheroot'] / rps['baseline'])
        for (endpoint, clients), rps in cells.items()
        if rps.get('baseline') and 'cheroot' in rps)


def format_table(rows: list[dict]) -> str:
    """The results as an RST simple table."""
    header = ('endpoint', 'clients', 'server', 'req/s', 'rounds',
              'p50 ms', 'p99 ms', 'errors')
    lines = [[r['endpoint'], str(r['clients']), r['server'],
              '%.0f' % r['rps'], '%.0f-%.0f' % (min(r['rounds_rps']),
                                                max(r['rounds_rps'])),
              '%.1f' % r['p50_ms'],
              '%.1f' % r['p99_ms'], str(r['errors'])] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines))
              for i, h in enumerate(header)]
    rule = '  '.join('=' * w for w in widths)
    out = [rule, '  '.join(h.ljust(w) for h, w in zip(header, widths))
           .rstrip(), rule]
    out += ['  '.join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
            for line in lines]
    out.append(rule)
    return '\n'.join(out)


# --- The services under test. ---

def allocation_candidates_path() -> str:
    """The query nova-scheduler sends for a 1-GPU H200 flavor."""
    aliases = pci_request.get_alias_from_config(
        [json.dumps(fakehost.H200_ALIAS)])
    requests = pci_request.get_pci_requests_from_flavor(
        {pci_request.EXTRA_SPEC_ALIAS: 'h200:1'}, aliases)
    resource_request = request_builder.build_resource_request(
        records.FlavorSnapshot.of_flavor(
            {'vcpus': 16, 'memory_mb': 65536, 'root_gb': 0,
             'extra_specs': {}}), requests)
    return '/allocation_candidates?' + parse.urlencode(
        resource_request.to_query_params(limit=1000))


def start_services(state_path: str, servers: int):
    """nova-all's API and embedded Placement with ``servers`` booted;
    the two started objects."""
    conf = nova.conf.CONF
    demo.configure(conf)
    conf.set_override('state_path', state_path)
    cmd.parse_args([], conf, log_file='bench.log')
    migration.db_sync()
    placement = embedded_placement.EmbeddedPlacement(state_path=state_path)
    placement.start()
    placement_conf.use_noauth_placement(conf, placement.url)
    allinone = nova_all.AllInOne(conf, ['hgx-1', 'hgx-2'], api_port=0)
    allinone.start()
    client = workload.ComputeClient(allinone.api_url)
    client.create_servers(servers, prefix='bench')
    client.wait_settled()
    return allinone, placement


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--clients', default='1,10,100',
                        help='numbers of concurrent clients (default '
                             '1,10,100)')
    parser.add_argument('--seconds', type=float, default=5,
                        help='length of each measurement (default 5)')
    parser.add_argument('--servers', type=int, default=20,
                        help='servers booted before measuring (default 20)')
    parser.add_argument('--rounds', type=int, default=3,
                        help='measurements per cell and server; the '
                             'median stands (default 3)')
    parser.add_argument('--json', metavar='PATH',
                        help='also write the rows as JSON to PATH')
    args = parser.parse_args(argv)
    try:
        args.clients = [int(c) for c in args.clients.split(',')]
    except ValueError:
        parser.error('--clients %r is not a comma-separated list of '
                     'integers' % args.clients)
    if min(args.clients) < 1 or args.seconds <= 0 or args.servers < 0 \
            or args.rounds < 1:
        parser.error('--clients must be at least 1, --seconds above 0, '
                     '--servers at least 0, --rounds at least 1')
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    state_path = tempfile.mkdtemp(prefix='bench-wsgi-')
    print('Booting %d servers under %s ...' % (args.servers, state_path),
          flush=True)
    allinone, placement = start_services(state_path, args.servers)
    apps = {
        'GET /servers/detail': (allinone.api_server.app, '/v2.1/servers/'
                                'detail', wsgi_server.DEFAULT_MAX_REQUESTS),
        'GET /allocation_candidates': (
            placement.app, allocation_candidates_path(),
            embedded_placement.MAX_CONCURRENT_REQUESTS),
    }
    rows = []
    # A fresh interpreter: the load never shares this one's GIL.
    pool = multiprocessing.get_context('spawn').Pool(1)
    try:
        for endpoint, (app, path, max_requests) in apps.items():
            servers = {
                'baseline': BaselineServer(app, max_requests),
                'cheroot': wsgi_server.WSGIServer(
                    app, max_requests=max_requests)}
            for server in servers.values():
                server.start()
            for clients in args.clients:
                results: dict[str, list[dict]] = {n: [] for n in SERVERS}
                for round_index in range(args.rounds):
                    for name in round_order(round_index):
                        result = pool.apply(run_clients, (
                            servers[name].url + path, clients,
                            args.seconds))
                        results[name].append(result)
                        print('%s, %d clients, %s, round %d: %.0f req/s' % (
                            endpoint, clients, name, round_index + 1,
                            result['rps']), flush=True)
                for name in SERVERS:
                    rows.append(dict(
                        median_round(results[name]), endpoint=endpoint,
                        clients=clients, server=name,
                        rounds_rps=[r['rps'] for r in results[name]]))
            for server in servers.values():
                server.stop()
    finally:
        pool.close()
        allinone.stop()
        placement.stop()
    print(format_table(rows))
    print(format_ratios(rows))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
