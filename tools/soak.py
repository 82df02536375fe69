#!/usr/bin/env python3
"""Reliability soak: concurrent bursts and faults, then the invariants.

Against ``nova-all`` (one process: SQLite, embedded Placement) and against
the separate-process deployment (the Compute API and Placement as WSGI
applications under gunicorn with two worker processes each,
nova-conductor, two nova-schedulers, two nova-computes, on MariaDB and a
private RabbitMQ vhost), both started here as subprocesses (see
nova/tests/functional/lib/deployment.py):

- ``--rounds`` rounds of ``--servers`` concurrent mixed 1/2/4/8-GPU boots
  on two HGX H200 hosts, checked once settled, then all deleted at once
  and checked again;
- faults, each during a burst and followed by the same checks and a
  delete of everything: kill -9 of every service process and restart
  (nova-all is one process: it is the one killed), and a Placement outage
  of ``--outage`` seconds (deployment).

Each check is printed per round; the exit status is 1 if any check found
a violation (an HTTP 5xx is one), 0 otherwise. Logs of the services stay
in ``--workdir``.
"""

import argparse
import os
import sys
import tempfile
import threading
import time

from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import rabbit as rabbit_fixture
from nova.tests.functional.lib import deployment
from nova.tests.functional.lib import workload

# Bound on waiting for a burst to reach the point a fault is injected at.
FAULT_WAIT = 60


class Soak:
    """Runs phases against one started target, printing every check."""

    def __init__(self, target, label: str, servers: int) -> None:
        self.target = target
        self.label = label
        self.servers = servers
        self.violations = 0

    def _report(self, phase: str, client: workload.ComputeClient,
                fault_free: bool, extra: dict | None = None) -> None:
        checks = dict(extra or {})
        checks.update(workload.check(client, self.target.placement_url,
                                     fault_free))
        print('[%s] %s: %s' % (self.label, phase,
                               workload.describe(client.servers(), client)))
        for name, found in checks.items():
            print('    %-4s %s' % ('FAIL' if found else 'ok', name))
            for violation in found:
                print('         - %s' % violation)
            self.violations += len(found)
        sys.stdout.flush()

    def _phase(self, phase: str, run, fault_free: bool = False) -> None:
        """``run(client)`` a phase, check, then delete every server at
        once and check that nothing is left."""
        client = workload.ComputeClient(self.target.api_url)
        started = time.monotonic()
        run(client)
        self._report('%s (%.0f s)' % (phase, time.monotonic() - started),
                     client, fault_free)
        client = workload.ComputeClient(self.target.api_url)
        left = client.delete_all()
        self._report('%s, then all deleted at once' % phase, client, True,
                     {'every server deleted': left})

    def bursts(self, rounds: int) -> None:
        for index in range(1, rounds + 1):
            self._phase('round %d/%d: %d concurrent boots' % (
                index, rounds, self.servers),
                lambda client: client.create_servers(self.servers),
                fault_free=True)

    def fault(self, what: str, inject,
              when=workload.handed_to_compute) -> None:
        """A burst from another thread; ``inject()`` once an instance row
        is as ``when`` wants (default: a build reached a compute); then
        wait for the burst's answers."""
        def run(client):
            burst = threading.Thread(target=client.create_servers,
                                     args=(self.servers,))
            burst.start()
            try:
                workload.wait_for_instance(when, FAULT_WAIT)
                inject()
            finally:
                burst.join()
        self._phase('%s during %d concurrent boots' % (what, self.servers),
                    run)


def soak_nova_all(args, workdir: str) -> int:
    with deployment.AllInOne(workdir=os.path.join(workdir, 'nova-all')) \
            as target:
        print('nova-all: %s (logs in %s)' % (
            target.api_url, target.workdir), flush=True)
        workload.ComputeClient(target.api_url).ensure_flavors()
        soak = Soak(target, 'nova-all', args.servers)
        soak.bursts(args.rounds)
        soak.fault('kill -9 of nova-all',
                   lambda: target.restart('nova-all'),
                   when=lambda instance: True)
        return soak.violations


def soak_deployment(args, workdir: str) -> int:
    with deployment.Deployment(
            args.database, workdir=os.path.join(workdir, 'deployment')) \
            as target:
        print('deployment: %s, Placement %s (logs in %s)' % (
            target.api_url, target.placement_url, target.workdir),
            flush=True)
        workload.ComputeClient(target.api_url).ensure_flavors()
        soak = Soak(target, 'deployment', args.servers)
        soak.bursts(args.rounds)
        for name in list(target.processes):
            # nova-api dies while requests are in flight (the first
            # server is recorded); the others while builds run.
            soak.fault('kill -9 of %s' % name,
                       lambda name=name: target.restart(name),
                       **({'when': lambda instance: True}
                          if name == 'nova-api' else {}))

        def outage():
            target.kill('placement')
            time.sleep(args.outage)
            target.start('placement')
        soak.fault('Placement down %d s' % args.outage, outage)
        return soak.violations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--target', choices=('nova-all', 'deployment',
                                             'both'), default='both')
    parser.add_argument('--servers', type=int, default=100,
                        help='concurrent boots per burst (default 100)')
    parser.add_argument('--rounds', type=int, default=3,
                        help='burst-and-delete rounds (default 3)')
    parser.add_argument('--outage', type=int, default=30,
                        help='seconds Placement is down (default 30)')
    parser.add_argument('--database',
                        default=db_fixture.server_url('mysql'),
                        help='MariaDB server URL for the deployment')
    parser.add_argument('--workdir', help='where state and logs go '
                        '(default: a new temporary directory, kept)')
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix='nova-soak-')
    violations = 0
    if args.target in ('nova-all', 'both'):
        violations += soak_nova_all(args, workdir)
    if args.target in ('deployment', 'both'):
        reason = rabbit_fixture.unavailable_reason()
        if reason is not None:
            print('deployment: cannot run: %s' % reason)
            return 1
        violations += soak_deployment(args, workdir)
    print('SOAK %s: %d violation(s); logs in %s' % (
        'FAILED' if violations else 'PASSED', violations, workdir))
    return 1 if violations else 0


if __name__ == '__main__':
    sys.exit(main())
