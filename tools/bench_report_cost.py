#!/usr/bin/env python3
"""What the computes' periodic resource updates cost Placement and the
database, per minute.

``--hosts`` generated HGX H200 hosts (8 GPUs, libvirt's ``test:///``
driver) each get a real compute manager (``nova.compute.manager.
ComputeManager``: resource tracker, PCI tracker, report client) in this
process, reporting to a real Placement (``nova.embedded_placement``, as
nova-all serves it) with nova's and Placement's databases on MariaDB
(``--database``; SQLite files with ``--sqlite``). Every host's periodic
update (``ComputeManager.update_available_resource``, what runs every
``[DEFAULT]update_resources_interval``, 60 s by default, so one cycle of
every host is one minute of the fleet) is run:

- start: the first update of each host (registration: its providers,
  inventories and traits, its compute node and device rows);
- steady: a cycle where nothing changed;
- burst: ``--burst`` of the hosts (spread over the fleet) each get a
  2-GPU server as a boot gives it: the scheduler's claim in Placement,
  the compute's device claim and its publish of the host's new band;
- after burst: the next cycle;
- steady again: the cycle after that.

Counted per phase: Placement requests by method and path (the path's
UUIDs and names folded, from Placement's request log) and the rows
written by INSERT, UPDATE and DELETE statements in each database
(SQLAlchemy's ``after_cursor_execute`` on every engine of the process:
nova's and Placement's). Timings are printed for orientation only.
Example::

    .venv/bin/python tools/bench_report_cost.py --hosts 1000 --burst 100
"""

import argparse
import collections
import concurrent.futures
import logging
import os
import re
import sys
import threading
import time

import fixtures
from oslo_config import cfg
from oslo_utils import uuidutils
import sqlalchemy as sa

from nova.compute import manager as compute_manager
from nova import conf as nova_conf
from nova.conf import placement as placement_conf
from nova import embedded_placement
from nova.pci import placement_names
from nova.scheduler.client import report
from nova.tests.fixtures import database as db_fixture
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import driver as libvirt_driver

# Placement's request log line: '... "GET /path?query" status: 200 ...'.
_REQUEST = re.compile(r'"(\w+) ([^ "?]+)[^"]*" status: (\d+)')
_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                   r'[0-9a-f]{12}')
_NAME = re.compile(r'^/(traits|resource_classes)/[A-Z0-9_]+$')
_WRITE = re.compile(r'^\s*(INSERT|UPDATE|DELETE)\b', re.IGNORECASE)
# The GPUs of each server of the burst: the board's first NVLink pair.
PAIR = [fakehost.H200_GPU_ADDRESSES[gpu - 1] for gpu in
        next(iter(fakehost.H200_NVLINK_PAIRS.values()))]
_TABLE = re.compile(r'^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+'
                    r'`?(\w+)`?', re.IGNORECASE)


def fold(path: str) -> str:
    """A request path with its UUIDs and trait/class names folded."""
    path = _UUID.sub('{uuid}', path)
    match = _NAME.match(path)
    return '/%s/{name}' % match.group(1) if match else path


class Counter(logging.Handler):
    """Placement requests (from its request log) and database rows
    written (by statement, per database), since the last ``take``."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.requests: collections.Counter = collections.Counter()
        self.rows: collections.Counter = collections.Counter()
        self.statements: collections.Counter = collections.Counter()
        self._counting = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        match = _REQUEST.search(record.getMessage())
        if match:
            with self._counting:
                self.requests[(match.group(1), fold(match.group(2)))] += 1

    def after_execute(self, conn, cursor, statement, parameters, context,
                      executemany) -> None:
        if _WRITE.match(statement):
            table = _TABLE.match(statement)
            key = (conn.engine.url.database or '?').rsplit('/', 1)[-1]
            key = '%s.%s' % ('placement' if 'placement' in key else 'nova',
                             table.group(1) if table else '?')
            with self._counting:
                self.statements[key] += 1
                self.rows[key] += max(cursor.rowcount, 0)

    def take(self) -> tuple[collections.Counter, collections.Counter,
                            collections.Counter]:
        """What was counted since the last call, and start again."""
        with self._counting:
            taken = (self.requests, self.statements, self.rows)
            self.requests = collections.Counter()
            self.rows = collections.Counter()
            self.statements = collections.Counter()
        return taken


def nova_config(placement_url: str, state_path: str) -> cfg.ConfigOpts:
    """nova's options for the computes: the H200 [pci] config reported
    in Placement, the report client pointed at ``placement_url``."""
    conf = cfg.ConfigOpts()
    nova_conf.register_all(conf)
    placement_conf.use_noauth_placement(conf, placement_url)
    conf([], project='nova', default_config_files=[],
         default_config_dirs=[])
    conf.set_override('state_path', state_path)
    for name, value in fakehost.h200_pci_config().items():
        conf.set_override(name, value, group='pci')
    conf.set_override('report_in_placement', True, group='pci')
    return conf


def start_computes(conf: cfg.ConfigOpts, hosts: int, state_path: str
                   ) -> list[compute_manager.ComputeManager]:
    """One compute manager per generated host, each with its report
    client, as each nova-compute has."""
    xml = fakehost.hgx_h200_node_xml()
    managers = []
    for number in range(1, hosts + 1):
        host = 'hgx-%d' % number
        uri = fakehost.write_node_xml(
            os.path.join(state_path, '%s.xml' % host), xml)
        managers.append(compute_manager.ComputeManager(
            conf, libvirt_driver.LibvirtDriver(
                uri, bar_reader=fakehost.bar_sizes,
                page_pools=fakehost.hugepage_pools),
            report.SchedulerReportClient(conf), host=host))
    return managers


def cycle(managers: list[compute_manager.ComputeManager],
          threads: int) -> None:
    """Every host's periodic resource update, ``threads`` hosts at a
    time (the computes of a fleet run theirs independently)."""
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        # list(): a host's failure is raised here.
        list(pool.map(lambda manager: manager.update_available_resource(),
                      managers))


# A consumer's allocations: provider UUID -> {"resources": {...}}.
Allocations = dict[str, dict]


def burst_plan(managers: list[compute_manager.ComputeManager],
               count: int) -> list[tuple[compute_manager.ComputeManager,
                                         Allocations]]:
    """``count`` hosts spread over the fleet, each with the allocation
    of a 2-GPU server on its first NVLink pair (read before the burst:
    the scheduler has them from its candidates)."""
    step = max(1, len(managers) // max(1, count))
    plan = []
    for manager in managers[::step][:count]:
        client = manager.reportclient
        root = client.get_provider_by_name(manager.host)['uuid']
        allocations = {root: {'resources': {'VCPU': 4,
                                            'MEMORY_MB': 2048}}}
        for address in PAIR:
            gpu = client.get_provider_by_name(
                placement_names.device_rp_name(manager.host, address))
            allocations[gpu['uuid']] = {'resources': {'PGPU': 1}}
        plan.append((manager, allocations))
    return plan


def burst(plan: list[tuple[compute_manager.ComputeManager,
                           Allocations]]) -> None:
    """Place the planned servers as a boot does: the scheduler's claim
    in Placement, then the compute's device claim and the publish of its
    host's new free-device band."""
    for manager, allocations in plan:
        consumer = uuidutils.generate_uuid()
        manager.reportclient.put_allocations(
            consumer, allocations, project_id='bench', user_id='bench')
        manager.rt.report_claimed(manager.rt.claim(consumer, 'req-1',
                                                   PAIR))


def format_phase(name: str, hosts: int, seconds: float,
                 taken: tuple) -> str:
    """One phase: requests by method and path, rows written by table."""
    requests, statements, rows = taken
    lines = ['%s: %d Placement requests, %d rows written by %d '
             'statements (%.1f s, %.1f ms per host)' % (
                 name, sum(requests.values()), sum(rows.values()),
                 sum(statements.values()), seconds,
                 1000.0 * seconds / hosts)]
    for (method, path), count in sorted(requests.items(),
                                        key=lambda item: -item[1]):
        lines.append('    %6d  %s %s' % (count, method, path))
    for table, count in sorted(rows.items(), key=lambda item: -item[1]):
        lines.append('    %6d  rows %s (%d statements)' % (
            count, table, statements[table]))
    return '\n'.join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=1000,
                        help='generated hosts (default 1000)')
    parser.add_argument('--burst', type=int, default=100,
                        help='hosts that get a server in the burst '
                             '(default 100)')
    parser.add_argument('--database',
                        default=db_fixture.server_url('mysql'),
                        help='MariaDB server URL (databases are created '
                             'on it and dropped at the end)')
    parser.add_argument('--threads', type=int, default=8,
                        help='hosts updating at once (default 8)')
    parser.add_argument('--sqlite', action='store_true',
                        help='SQLite files instead of MariaDB')
    args = parser.parse_args(argv)
    if args.hosts < 1 or not 0 <= args.burst <= args.hosts:
        parser.error('--hosts must be at least 1 and --burst between 0 '
                     'and --hosts, got %d and %d' % (args.hosts, args.burst))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    counter = Counter()
    sa.event.listen(sa.engine.Engine, 'after_cursor_execute',
                    counter.after_execute)
    with fixtures.TempDir() as tmp, fixtures.Fixture() as owner:
        server = None if args.sqlite else args.database
        owner.useFixture(db_fixture.Database(server_url=server))
        connection = None if server is None else \
            db_fixture.create_server_database(owner, server,
                                              'placement_bench_')
        placement = embedded_placement.EmbeddedPlacement(
            connection, state_path=tmp.path)
        placement.start()
        owner.addCleanup(placement.stop)
        conf = nova_config(placement.url, tmp.path)
        managers = start_computes(conf, args.hosts, tmp.path)
        print('%d hosts, %s, Placement %s' % (
            args.hosts, 'SQLite' if server is None else 'MariaDB',
            placement.url), flush=True)
        # Once every part is set up: a logging set-up on the way may
        # have disabled the loggers that existed then.
        requestlog = logging.getLogger('placement.requestlog')
        requestlog.setLevel(logging.INFO)
        requestlog.addHandler(counter)
        requestlog.propagate = False
        counter.take()

        def run_cycle():
            cycle(managers, args.threads)
        plan = []
        # Unnamed steps are the benchmark's own, not counted.
        phases = [('start (first update)', run_cycle),
                  (None, lambda: plan.extend(burst_plan(managers,
                                                        args.burst))),
                  ('steady (nothing changed)', run_cycle),
                  ('burst (%d servers placed)' % args.burst,
                   lambda: burst(plan)),
                  ('after burst (next cycle)', run_cycle),
                  ('steady again', run_cycle)]
        for name, run in phases:
            started = time.monotonic()
            run()
            taken = counter.take()
            if name is not None:
                print(format_phase(name, args.hosts,
                                   time.monotonic() - started, taken),
                      flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
