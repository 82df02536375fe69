"""100 GPU servers created at once, then deleted at once, on nova-all.

The services run as nova-all runs them (AllInOne: API, conductor,
scheduler, two computes on libvirt's test driver, in-process messaging),
nova's database and Placement's each in a SQLite file with the settings
nova-all gives them (PlacementFixture uses the embedded Placement's
configuration). Mixed 1/2/4/8-GPU flavors ask for far more than two
8-GPU hosts have, so the burst both fills the hosts and refuses the rest.
"""

import collections
import concurrent.futures
import time

import requests

from nova import context as nova_context
from nova.db import api as db
from nova.tests.functional.lib import invariants
from nova.tests.functional import test_boot_gpu_groups as boot

# Flavor size (GPUs) -> servers of that size in the burst.
MIX = {1: 40, 2: 30, 4: 20, 8: 10}
HOSTS = ('hgx-1', 'hgx-2')
SETTLE_TIMEOUT = 240


class BurstTestBase(boot.BootTestBase):
    """Two HGX hosts set up for a burst of concurrent boots in this one
    process (no tests of its own)."""

    TIMEOUT = 600

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        # Every host is tried once per server: a server that fits nowhere
        # fails with "No valid host" rather than bouncing between hosts.
        self.flags('scheduler', max_attempts=len(HOSTS))
        # Everything runs in this one Python process on a 2-core machine
        # that other tests share: the last of 100 scheduling requests can
        # wait in the scheduler's queue longer than the default 60 s RPC
        # timeout, and the conductor then fails the build ("No reply on
        # topic scheduler"). That is a timeout, not a lost claim; give the
        # burst the time it needs so the test checks claims and cleanup.
        self.flags(rpc_response_timeout=300)
        self.start_services(hosts=HOSTS)
        self.ctx = nova_context.get_admin_context()


class TestConcurrentBoots(BurstTestBase):

    def request_all(self, method: str, paths_and_bodies: list) -> list:
        """Send every request at once (one connection each); return the
        responses in order."""
        def send(item):
            path, body = item
            return requests.request(
                method, self.allinone.api_url + path, json=body,
                headers={'X-Auth-Token': 'admin'}, timeout=120)
        with concurrent.futures.ThreadPoolExecutor(
                len(paths_and_bodies)) as pool:
            return list(pool.map(send, paths_and_bodies))

    def settle(self, expect_gone: bool = False) -> list[dict]:
        """Wait until no server is in BUILD (or, after the deletes, until
        none is left); return the servers."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            servers = self.api('GET', '/servers/detail?all_tenants=1'
                               )['servers']
            busy = [s for s in servers if expect_gone or
                    s['status'] == 'BUILD']
            if not busy:
                return servers
            if time.monotonic() > deadline:
                self.fail('%d server(s) never settled: %s' % (
                    len(busy), sorted(s['id'] for s in busy)))
            time.sleep(0.5)

    def check(self, settled: bool = True) -> None:
        violations = invariants.check(self.allinone.api_url, 'admin',
                                      self.placement.api, self.ctx,
                                      settled=settled)
        self.assertEqual([], violations, invariants.summary(violations))

    def free_groups(self) -> dict[int, int]:
        """Size -> number of device groups (or single GPUs) with every
        device free, over all hosts."""
        free = collections.Counter()
        for node in db.compute_node_get_all(self.ctx):
            rows = db.pci_device_get_all_by_node(self.ctx, node.id)
            free[1] += sum(1 for r in rows if r['instance_uuid'] is None)
            members = collections.defaultdict(list)
            for row in rows:
                parts = row['group_path'].split('/')
                for depth in range(1, len(parts) + 1):
                    members['/'.join(parts[:depth])].append(row)
            for group in members.values():
                if len(group) > 1 and all(r['instance_uuid'] is None
                                          for r in group):
                    free[len(group)] += 1
        return free

    def test_burst_of_mixed_boots_then_deletes(self):
        flavors = self.gpu_flavors()
        sizes = [size for size, count in MIX.items() for _ in range(count)]
        responses = self.request_all('POST', [
            ('/servers', {'server': {'name': 'burst-%d' % i,
                                     'flavorRef': flavors[size],
                                     'imageRef': 'none'}})
            for i, size in enumerate(sizes)])
        self.assertEqual([202] * len(sizes),
                         [r.status_code for r in responses],
                         [r.text for r in responses if r.status_code != 202])
        size_of = {r.json()['server']['id']: size
                   for r, size in zip(responses, sizes)}

        servers = self.settle()
        self.assertEqual(set(size_of), {s['id'] for s in servers})
        by_status = collections.defaultdict(list)
        for server in servers:
            by_status[server['status']].append(server)
        self.assertEqual({'ACTIVE', 'ERROR'}, set(by_status), by_status)
        # Two hosts of 8 GPUs: at most 16 GPUs handed out, and since the
        # burst asks for many more, the hosts end up with nothing left
        # that a refused server could have used.
        active_gpus = sum(size_of[s['id']] for s in by_status['ACTIVE'])
        self.assertLessEqual(active_gpus, 16)
        free = self.free_groups()
        for server in by_status['ERROR']:
            self.assertIn('No valid host', server['fault']['message'],
                          server)
            self.assertEqual(0, free[size_of[server['id']]], (
                'server %s of %d GPUs was refused but a group of its size '
                'is free: %s' % (server['id'], size_of[server['id']],
                                 dict(free))))
        self.check(settled=True)

        # Delete everything at once.
        responses = self.request_all('DELETE', [
            ('/servers/%s' % uuid, None) for uuid in size_of])
        self.assertEqual([204] * len(size_of),
                         [r.status_code for r in responses],
                         [r.text for r in responses if r.status_code != 204])
        self.assertEqual([], self.settle(expect_gone=True))
        self.check(settled=True)
        for node in db.compute_node_get_all(self.ctx):
            self.assertEqual([], [
                r['address'] for r in db.pci_device_get_all_by_node(
                    self.ctx, node.id) if r['instance_uuid'] is not None])
        for rp in self.placement_get('/resource_providers')[
                'resource_providers']:
            self.assertEqual({}, self.placement_get(
                '/resource_providers/%s/allocations' % rp['uuid'])
                ['allocations'], rp['name'])
