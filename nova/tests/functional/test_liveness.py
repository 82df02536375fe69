"""Service liveness, deletes that finish, and Placement outages.

Every service is real and in-process (REST API, conductor, scheduler,
computes on libvirt's test driver, real Placement and database). A compute
"goes down" by stopping its service (no RPC, no heartbeats) and dating its
last heartbeat back past ``[DEFAULT]service_down_time``; Placement goes
down by closing its listening socket and comes back on the same port.

``NOVA_TEST_PLACEMENT_OUTAGE`` sets the outage of the burst test in seconds
(default 2; the 30 s scenario is the soak script's).
"""

import concurrent.futures
import os
import threading
import time

import fixtures

from nova import context as nova_context
from nova import exception
from nova.compute import audit
from nova.db import api as db
from nova.tests.functional import test_boot_gpu_groups as boot

OUTAGE = float(os.environ.get('NOVA_TEST_PLACEMENT_OUTAGE', '2'))


class LivenessTestBase(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.ctx = nova_context.get_admin_context()

    # What is held ------------------------------------------------------------

    def settle(self, server_id):
        """The server once it left BUILD (ACTIVE or ERROR)."""
        deadline = time.monotonic() + boot.TIMEOUT
        while time.monotonic() < deadline:
            server = self.api('GET', '/servers/%s' % server_id)['server']
            if server['status'] in ('ACTIVE', 'ERROR'):
                return server
            time.sleep(0.05)
        self.fail('server %s never left BUILD' % server_id)

    def domain_uuids(self, host):
        return set(self.computes[host].driver.list_instance_uuids())

    def assert_consistent(self, servers):
        """ACTIVE servers hold one valid partition in Placement, the PCI
        tracker and libvirt alike; nothing else holds anything."""
        active = {s['id']: s for s in servers if s['status'] == 'ACTIVE'}
        for server in servers:
            if server['status'] == 'ERROR':
                self.assertTrue(server['fault']['message'], server)
                self.assert_nothing_held(server['id'])
        for server in active.values():
            self.assert_server_holds(server, boot.PAIRS | boot.QUADS | {
                frozenset({g}) for g in range(1, 9)} | {boot.BOARD})
        pgpu_used = 0
        for host, compute in self.computes.items():
            holders = {d.instance_uuid
                       for d in compute.rt.pci_tracker.pci_devs
                       if d.instance_uuid}
            self.assertLessEqual(holders, set(active), host)
            self.assertLessEqual(self.domain_uuids(host), set(active), host)
            for rp in self.provider_view(host).values():
                pgpu_used += self.usages(rp['uuid']).get('PGPU', 0)
        self.assertEqual(sum(len(self.gpus_of(s)) for s in active.values()),
                         pgpu_used)
        roots = [c.rt.compute_node.uuid for c in self.computes.values()]
        self.assertEqual([], audit.find_orphan_allocations(
            self.ctx, self.reportclient, roots))


class TestHeartbeats(LivenessTestBase):

    def test_every_service_reports(self):
        self.flags(report_interval=1)
        self.start_services(hosts=('cmp1', 'cmp2'))
        services = {(s.host, s.binary): s
                    for s in db.service_get_all(self.ctx)}
        self.assertEqual(
            {(self.conf.host, 'nova-conductor'),
             (self.conf.host, 'nova-scheduler'),
             ('cmp1', 'nova-compute'), ('cmp2', 'nova-compute')},
            set(services))
        for service in services.values():
            self.assertGreaterEqual(service.report_count, 1)
            self.assertIsNotNone(service.last_seen_up)
        deadline = time.monotonic() + boot.TIMEOUT
        while time.monotonic() < deadline:
            counts = [s.report_count for s in db.service_get_all(self.ctx)]
            if min(counts) >= 3:
                break
            time.sleep(0.1)
        self.assertGreaterEqual(min(counts), 3)

    def test_scheduler_avoids_a_compute_that_is_down(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        flavors = self.gpu_flavors()
        self.stop_compute('cmp2')
        servers = [self.boot(flavors[2], 'p%d' % i) for i in range(4)]
        self.assertEqual({'cmp1'}, {s['OS-EXT-SRV-ATTR:host']
                                    for s in servers})
        failed = self.boot(flavors[2], 'p5', status='ERROR')
        self.assertIn('No valid host', failed['fault']['message'])
        self.assertIn('cmp2 is down (last seen 6', failed['fault']['message'])
        self.assert_nothing_held(failed['id'])
        # Back up: it is used again.
        self.restart_compute('cmp2')
        server = self.boot(flavors[2], 'p6')
        self.assertEqual('cmp2', server['OS-EXT-SRV-ATTR:host'])


class TestDeletesThatFinish(LivenessTestBase):

    def test_delete_while_the_compute_is_down(self):
        self.start_services()
        flavors = self.gpu_flavors()
        server = self.boot(flavors[2])
        gpus = self.assert_server_holds(server, boot.PAIRS)
        self.stop_compute('cmp1')

        self.delete(server['id'])

        # Placement is free at once; the guest and the device claims stay
        # on the dead host until its compute comes back.
        self.assertEqual({}, self.placement_get(
            '/allocations/%s' % server['id'])['allocations'])
        self.assertIn(server['id'], self.domain_uuids('cmp1'))
        self.assertEqual(gpus, self.gpus_of(server))

        self.restart_compute('cmp1')

        self.assert_nothing_held(server['id'])
        # The whole board is usable again.
        self.assert_server_holds(self.boot(flavors[8]), {boot.BOARD})

    def test_delete_while_placement_is_down(self):
        self.start_services()
        flavors = self.gpu_flavors()
        server = self.boot(flavors[4])
        self.assert_server_holds(server, boot.QUADS)
        self.placement.stop_server()
        self.addCleanup(self.placement.start_server)

        self.delete(server['id'])

        compute = self.computes['cmp1']
        self.assertNotIn(server['id'], self.domain_uuids('cmp1'))
        self.assertEqual([], [d for d in compute.rt.pci_tracker.pci_devs
                              if d.instance_uuid])
        self.placement.start_server()
        # The allocation the delete could not free is the audit's.
        self.assertNotEqual({}, self.placement_get(
            '/allocations/%s' % server['id'])['allocations'])
        compute.audit_allocations()
        self.assert_nothing_held(server['id'])
        self.assert_server_holds(self.boot(flavors[8]), {boot.BOARD})

    def test_periodic_audit_keeps_builds_and_frees_leftovers(self):
        self.start_services()
        flavors = self.gpu_flavors()
        compute = self.computes['cmp1']
        driver = compute.driver
        entered, release = threading.Event(), threading.Event()
        real_spawn = driver.spawn

        def slow_spawn(*args, **kwargs):
            entered.set()
            self.assertTrue(release.wait(boot.TIMEOUT))
            return real_spawn(*args, **kwargs)
        self.useFixture(fixtures.MockPatchObject(driver, 'spawn',
                                                 side_effect=slow_spawn))
        building = self.api('POST', '/servers', {'server': {
            'name': 'building', 'flavorRef': flavors[2],
            'imageRef': 'none'}})['server']
        self.assertTrue(entered.wait(boot.TIMEOUT))
        # A consumer no instance owns holds a GPU, as a late claim would.
        view = self.provider_view('cmp1')
        stranger = '5e1f0000-0000-4000-8000-000000000001'
        free_gpu = next(
            name for name, rp in view.items() if 'PGPU' in rp['inventory']
            and not self.usages(rp['uuid']).get('PGPU'))
        resp = self.placement.api.put('/allocations/%s' % stranger, json={
            'allocations': {view[free_gpu]['uuid']: {
                'resources': {'PGPU': 1}}},
            'project_id': 'p', 'user_id': 'u', 'consumer_generation': None,
            'consumer_type': 'INSTANCE'})
        self.assertEqual(204, resp.status_code, resp.text)

        compute.audit_allocations()

        self.assertEqual({}, self.placement_get(
            '/allocations/%s' % stranger)['allocations'])
        self.assertNotEqual({}, self.placement_get(
            '/allocations/%s' % building['id'])['allocations'])
        release.set()
        server = self.settle(building['id'])
        self.assertEqual('ACTIVE', server['status'], server)
        self.assert_consistent([server])


class TestPlacementOutage(LivenessTestBase):

    def test_burst_with_placement_down(self):
        """Builds in flight when Placement goes away finish; builds that
        need it while it is away fail with a fault naming it; the
        compute's periodic update recovers; nothing leaks."""
        self.start_services(hosts=('cmp1', 'cmp2'))
        flavors = self.gpu_flavors()
        gate, parked = threading.Event(), threading.Semaphore(0)
        for compute in self.computes.values():
            real_spawn = compute.driver.spawn

            def gated_spawn(*args, _spawn=real_spawn, **kwargs):
                parked.release()
                self.assertTrue(gate.wait(boot.TIMEOUT))
                return _spawn(*args, **kwargs)
            self.useFixture(fixtures.MockPatchObject(
                compute.driver, 'spawn', side_effect=gated_spawn))

        def create(gpus, name):
            return self.api('POST', '/servers', {'server': {
                'name': name, 'flavorRef': flavors[gpus],
                'imageRef': 'none'}})['server']['id']
        # Claimed one after the other (concurrent claims on SQLite are the
        # load tests' subject), then all in flight at once, parked in spawn.
        in_flight = []
        for index, gpus in enumerate([1, 2, 4, 1, 2, 1]):
            in_flight.append(create(gpus, 'f%d' % index))
            self.assertTrue(parked.acquire(timeout=boot.TIMEOUT))

        self.placement.stop_server()
        self.addCleanup(self.placement.start_server)
        outage_started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            during = list(pool.map(create, [2, 1, 4, 1],
                                   ['d%d' % i for i in range(4)]))
        failed = [self.settle(server_id) for server_id in during]
        gate.set()
        for compute in self.computes.values():
            self.assertRaises(exception.PlacementAPIConnectFailure,
                              compute.update_available_resource)
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - outage_started)))
        self.placement.start_server()

        for server in failed:
            self.assertEqual('ERROR', server['status'], server)
            self.assertIn('Unable to reach the Placement service',
                          server['fault']['message'])
        built = [self.settle(server_id) for server_id in in_flight]
        self.assertEqual(['ACTIVE'] * len(built),
                         [s['status'] for s in built])
        # The periodic update works again by itself.
        for compute in self.computes.values():
            compute.update_available_resource()
        # Frees that failed during the outage are the audit's.
        for compute in self.computes.values():
            compute.audit_allocations()
        self.assert_consistent(built + failed)
        # A new create succeeds.
        self.assert_server_holds(self.boot(flavors[2], 'after'), boot.PAIRS)

        for server in self.api('GET', '/servers')['servers']:
            self.delete(server['id'])
        for compute in self.computes.values():
            self.assertEqual([], [d for d in compute.rt.pci_tracker.pci_devs
                                  if d.instance_uuid])
            for rp in self.provider_view(compute.host).values():
                self.assertEqual({}, {rc: n for rc, n in
                                      self.usages(rp['uuid']).items() if n})
