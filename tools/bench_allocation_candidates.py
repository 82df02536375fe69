"""Benchmark GET /allocation_candidates for three PCI provider-tree models.

Builds N HGX H200 hosts with nova's own translator and report client in a
real embedded Placement (one SQLite file per model) and asks for ``h200:N``:

* flat: device RPs under the compute RP, N plain PGPU:1 groups (upstream);
* nested: group RPs but no member-index traits, N groups + a resourceless
  ``CUSTOM_PCI_GROUP_NVLINK_<N>`` group + same_subtree;
* member: nova's model (doc/source/admin/pci-groups.rst, "What Placement
  shows").

Placement runs in a child process so that a query exceeding ``--timeout``
can be stopped (the child is killed and restarted on the same database).
Example: ``.venv/bin/python tools/bench_allocation_candidates.py --hosts 10``
"""

import argparse
from importlib import metadata
import json
import multiprocessing
import re
import resource
import statistics
import sys
import tempfile
import time

from oslo_config import cfg

from nova.compute import pci_placement_translator as translator
from nova.compute import provider_tree as ptree
from nova.conf import placement as placement_conf
from nova import embedded_placement
from nova import exception
from nova.db import records
from nova.pci import devspec
from nova.pci import groups as pci_groups
from nova.pci import placement_names
from nova.pci import request as pci_request
from nova.scheduler.client import report
from nova.scheduler import request_builder
from nova.virt.fake import host as fakehost

MODELS = ('flat', 'nested', 'member')
FLAVOR = records.FlavorSnapshot.of_flavor(
    {'vcpus': 4, 'memory_mb': 8192, 'root_gb': 0, 'extra_specs': {}})
# The compute RP as the resource tracker reports an HGX H200 host.
ROOT_INVENTORY = {rc: placement_names.inventory_record(n)
                  for rc, n in (('VCPU', 224), ('MEMORY_MB', 2097152))}
SERVER_MEMORY_MB = 8192  # address-space cap of the Placement child
_MEMBER_TRAIT_RE = re.compile(r'^CUSTOM_PCI_GROUP_.*_M\d+$')


def valid_device_sets(group_tree: pci_groups.GroupTree, size: int,
                      addresses: list[str]) -> set[frozenset]:
    """Device sets a request for ``size`` devices may get on one host."""
    if size == 1:
        return {frozenset([a]) for a in addresses}
    return {frozenset(g.addresses) for g in group_tree.groups()
            if g.size == size}


def candidate_devices(allocation_request: dict,
                      devices: dict[str, tuple[str, str]]
                      ) -> list[tuple[str, str]]:
    """(host, address) of the device RPs of one allocation request."""
    return [devices[rp] for rp in allocation_request['allocations']
            if rp in devices]


def is_valid(chosen: list[tuple[str, str]], size: int,
             valid_sets: set[frozenset]) -> bool:
    """True if ``chosen`` is exactly one allowed device set of one host."""
    hosts = {host for host, _ in chosen}
    addresses = frozenset(address for _, address in chosen)
    return (len(chosen) == size and len(hosts) == 1 and
            len(addresses) == size and addresses in valid_sets)


def format_table(rows: list[dict], timeout: float) -> str:
    """Markdown table of results; ``> S s`` marks a query stopped at
    the timeout."""
    lines = ['| model | N | candidates | valid | groups found | median |',
             '|---|---|---|---|---|---|']
    for row in rows:
        cells = ['-', '-', '-']
        if row['candidates'] is not None:
            cells = ['{:,}'.format(row['candidates']), '%.0f%%' % (
                100.0 * row['valid'] / max(row['candidates'], 1)),
                '%d / %d' % (row['distinct_valid'], row['expected'])]
        seconds = ('> %g s' % timeout if row['seconds'] is None else
                   '%.3f s' % row['seconds'])
        lines.append('| %s | %d | %s | %s |' % (
            row['model'], row['size'], ' | '.join(cells),
            row.get('error') or seconds))
    return '\n'.join(lines)


def _serve(state_path: str, max_candidates: int, conn) -> None:
    """Child process: run an embedded Placement until killed."""
    limit = SERVER_MEMORY_MB * 2 ** 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    placement = embedded_placement.EmbeddedPlacement(state_path=state_path)
    placement.conf.set_override('max_allocation_candidates', max_candidates,
                                group='placement')
    placement.start()
    conn.send(placement.url)
    while True:
        time.sleep(3600)


class PlacementServer:
    """An embedded Placement in a child process, restartable."""

    def __init__(self, state_path: str, max_candidates: int,
                 timeout: float) -> None:
        self._args = (state_path, max_candidates)
        self._timeout = timeout
        self._proc: multiprocessing.Process | None = None
        self.client: report.SchedulerReportClient | None = None

    def start(self) -> None:
        ctx = multiprocessing.get_context('spawn')
        ours, theirs = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=self._args + (theirs,),
                                 daemon=True)
        self._proc.start()
        if not ours.poll(300):
            raise RuntimeError('embedded Placement did not start')
        conf = cfg.ConfigOpts()
        placement_conf.register_opts(conf)
        placement_conf.use_noauth_placement(conf, ours.recv())
        conf.set_override('timeout', self._timeout, group='placement')
        conf([], project='nova', default_config_files=[],
             default_config_dirs=[])
        self.client = report.SchedulerReportClient(conf)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
            self._proc = None


def build_hosts(model: str, hosts: int, client: report.SchedulerReportClient
                ) -> dict[str, tuple[str, str]]:
    """Push ``hosts`` H200 trees of ``model``; return device RP index."""
    config = fakehost.h200_pci_config()
    whitelist = devspec.Whitelist.from_config(config['device_spec'],
                                              report_in_placement=True)
    group_tree = (pci_groups.GroupTree([]) if model == 'flat' else
                  pci_groups.GroupTree.from_config(config['device_group']))
    host_devices = fakehost.hgx_h200_devices()
    devices = fakehost.tracked_devices(host_devices)
    specs = whitelist.classify(host_devices)
    index = {}
    for number in range(1, hosts + 1):
        host = 'hgx-%d' % number
        tree = ptree.ProviderTree()
        tree.add(host)
        tree.update_inventory(host, ROOT_INVENTORY)
        translator.update_provider_tree_for_pci(
            tree, host, devices, specs, group_tree, [], dict)
        for provider in tree.providers() if model == 'nested' else []:
            tree.update_traits(provider.uuid, {
                t for t in provider.traits if not _MEMBER_TRAIT_RE.match(t)})
        client.update_from_provider_tree(tree)
        for address in fakehost.H200_GPU_ADDRESSES:
            name = placement_names.device_rp_name(host, address)
            index[tree.data(name).uuid] = (host, address)
    return index


def build_query(model: str, size: int) -> list[tuple[str, str]]:
    """GET /allocation_candidates parameters for ``h200:<size>``."""
    alias = {'name': 'h200', 'resource_class': 'PGPU'}
    if model != 'flat':
        alias['group_type'] = 'nvlink'
    aliases = pci_request.get_alias_from_config([json.dumps(alias)])
    requests = pci_request.get_pci_requests_from_flavor(
        {pci_request.EXTRA_SPEC_ALIAS: 'h200:%d' % size}, aliases)
    rr = request_builder.build_resource_request(FLAVOR, requests)
    if model == 'nested':
        for group in rr.groups:
            group.required_traits = {t for t in group.required_traits
                                     if not _MEMBER_TRAIT_RE.match(t)}
    return rr.to_query_params(limit=None)


def measure(server: PlacementServer, model: str, size: int, hosts: int,
            index: dict, args: argparse.Namespace) -> dict:
    """Run one query ``--repeat`` times; stop at the first timeout."""
    query = build_query(model, size)
    group_tree = pci_groups.GroupTree.from_config(
        fakehost.h200_pci_config()['device_group'])
    valid_sets = valid_device_sets(group_tree, size,
                                   list(fakehost.H200_GPU_ADDRESSES))
    row = {'model': model, 'size': size, 'candidates': None, 'valid': None,
           'distinct_valid': None, 'expected': hosts * len(valid_sets),
           'seconds': None, 'error': None}
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        try:
            body = server.client.get_allocation_candidates(query)
        except exception.PlacementAPIConnectFailure:
            # Timed out (or the server died): kill the runaway query with
            # its server and start a fresh one on the same database.
            if time.perf_counter() - start < args.timeout:
                row['error'] = 'server failed'
            server.stop()
            server.start()
            return row
        except exception.PlacementAPIError as e:
            row['error'] = 'error %s' % e.kwargs.get('status')
            return row
        times.append(time.perf_counter() - start)
    chosen = [candidate_devices(ar, index)
              for ar in body['allocation_requests']]
    good = [c for c in chosen if is_valid(c, size, valid_sets)]
    row.update(candidates=len(chosen), valid=len(good),
               distinct_valid=len({frozenset(c) for c in good}),
               seconds=statistics.median(times))
    return row


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=10)
    parser.add_argument('--sizes', default='1,2,4,8',
                        help='comma-separated GPU counts N')
    parser.add_argument('--models', default=','.join(MODELS))
    parser.add_argument('--repeat', type=int, default=3,
                        help='runs per query; the median is shown')
    parser.add_argument('--timeout', type=float, default=60,
                        help='seconds allowed per query')
    parser.add_argument('--max-candidates', type=int, default=-1,
                        help="Placement's [placement]"
                             "max_allocation_candidates")
    parser.add_argument('--json', metavar='PATH',
                        help="also write the results as JSON ('-': stdout)")
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(',')]
    args.models = args.models.split(',')
    if set(args.models) - set(MODELS):
        parser.error('models are %s' % ', '.join(MODELS))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix='bench-ac-') as tmp:
        for model in args.models:
            server = PlacementServer('%s/%s' % (tmp, model),
                                     args.max_candidates, args.timeout)
            server.start()
            try:
                index = build_hosts(model, args.hosts, server.client)
                for size in args.sizes:
                    rows.append(measure(server, model, size, args.hosts,
                                        index, args))
                    print(format_table(rows[-1:], args.timeout)
                          .splitlines()[-1], file=sys.stderr, flush=True)
            finally:
                server.stop()
    print('%d hosts, Placement %s, max_allocation_candidates %d, median '
          'of %d' % (args.hosts, metadata.version('openstack-placement'),
                     args.max_candidates, args.repeat))
    print(format_table(rows, args.timeout))
    if args.json:
        text = json.dumps({'hosts': args.hosts, 'timeout': args.timeout,
                           'rows': rows}, indent=2)
        if args.json == '-':
            print(text)
        else:
            with open(args.json, 'w', encoding='utf-8') as out:
                out.write(text + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
