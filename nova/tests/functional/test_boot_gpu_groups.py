"""Booting GPU servers through the REST API onto whole NVLink groups.

Every service is real and in-process: the Compute API over HTTP, the
conductor and scheduler over oslo.messaging, computes on libvirt's test
driver, real Placement and a real database.
"""

import datetime
import json
import threading
import time

import fixtures
from oslo_utils import timeutils
import requests

from nova import cmd
from nova import context as nova_context
from nova import exception
from nova.cmd import all as nova_all
from nova.compute import manager as compute_manager
from nova.db import api as db
from nova.tests.fixtures import libvirt_faults
from nova.tests.fixtures import rpc as rpc_fixture
from nova.tests.functional.lib import base
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import config as libvirt_config
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import imagecache

GPUS = base.GPUS
PAIRS = {frozenset(p) for p in fakehost.H200_NVLINK_PAIRS.values()}
QUADS = {frozenset({1, 2, 3, 4}), frozenset({5, 6, 7, 8})}
BOARD = frozenset(range(1, 9))
TIMEOUT = 60


class BootTestBase(base.FunctionalTestCase):
    """Starts nova-all's services against the test's Placement and DB."""

    def setUp(self):
        super().setUp()
        self.useFixture(rpc_fixture.RPCFixture(self.conf))
        self.flags('api', listen='127.0.0.1')
        self.flags('scheduler', max_attempts=2)
        self.flags(update_resources_interval=0)
        self.session = requests.Session()
        self.session.headers.update({'X-Auth-Token': 'admin',
                                     'Content-Type': 'application/json'})

    def start_allinone(self, hosts, **kwargs) -> None:
        """API, conductor, scheduler and the computes of ``hosts`` in this
        process; ``kwargs`` go to AllInOne (drivers, compute_confs)."""
        self.allinone = nova_all.AllInOne(self.conf, list(hosts),
                                          api_port=0, **kwargs)
        self.allinone.start()
        self.addCleanup(self.allinone.stop)
        self.computes = self.allinone.computes

    def make_driver(self, host, devices=None):
        """The hypervisor of ``host``: a libvirt test:/// host."""
        return libvirt_driver.LibvirtDriver(
            self.node_uri(host, devices), self.conf.instances_path,
            bar_reader=fakehost.bar_sizes,
            page_pools=fakehost.hugepage_pools,
            image_cache=imagecache.ImageCache.from_config(self.conf))

    def start_services(self, hosts=('cmp1',), devices=None):
        self.start_allinone(hosts, drivers={
            host: self.make_driver(host, devices) for host in hosts})

    # REST helpers ----------------------------------------------------------

    def api(self, method, path, body=None, expect=(200, 201, 202, 204)):
        resp = self.session.request(
            method, self.allinone.api_url + path,
            data=json.dumps(body) if body is not None else None)
        self.assertIn(resp.status_code, expect, resp.text)
        return resp.json() if resp.content else {}

    def flavor(self, name, alias_value):
        flavor = self.api('POST', '/flavors', {'flavor': {
            'name': name, 'vcpus': 4, 'ram': 4096, 'disk': 0}})['flavor']
        if alias_value:
            self.api('POST', '/flavors/%s/os-extra_specs' % flavor['id'],
                     {'extra_specs': {'pci_passthrough:alias': alias_value}})
        return flavor['id']

    def gpu_flavors(self):
        return {n: self.flavor('gpu.%dx' % n, 'h200:%d' % n)
                for n in (1, 2, 4, 8)}

    def boot(self, flavor_id, name='vm', status='ACTIVE', image='none'):
        server = self.api('POST', '/servers', {'server': {
            'name': name, 'flavorRef': flavor_id,
            'imageRef': image}})['server']
        return self.wait_for(server['id'], status)

    def wait_for(self, server_id, status):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            server = self.api('GET', '/servers/%s' % server_id)['server']
            if server['status'] in ('ACTIVE', 'ERROR'):
                self.assertEqual(status, server['status'], server)
                return server
            time.sleep(0.05)
        self.fail('server %s never left BUILD' % server_id)

    def settle(self, server_id, body, status):
        """Run a server action and wait for ``status`` with no task."""
        self.api('POST', '/servers/%s/action' % server_id, body)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            server = self.api('GET', '/servers/%s' % server_id)['server']
            if server['OS-EXT-STS:task_state'] is None and \
                    server['status'] in (status, 'ERROR'):
                self.assertEqual(status, server['status'], server)
                return server
            time.sleep(0.05)
        self.fail('server %s never reached %s' % (server_id, status))

    def delete(self, server_id):
        self.api('DELETE', '/servers/%s' % server_id)
        self.api('GET', '/servers/%s' % server_id, expect=(404,))

    # Services going away and coming back -----------------------------------

    def _service_of(self, host):
        return next(svc for svc in self.allinone.services
                    if svc.manager is self.computes[host])

    def stop_compute(self, host, seconds_ago=600):
        """The compute of ``host`` dies; it last reported long ago."""
        svc = self._service_of(host)
        svc.stop()
        self.allinone.services.remove(svc)
        ctx = nova_context.get_admin_context()
        service = db.service_get_by_host_and_binary(ctx, host,
                                                    'nova-compute')
        db.service_update(ctx, service.id, {
            'last_seen_up': timeutils.utcnow() - datetime.timedelta(
                seconds=seconds_ago)})

    def restart_compute(self, host):
        """The compute of ``host`` starts again on the same hypervisor."""
        manager = compute_manager.ComputeManager(
            self.conf, self.computes[host].driver,
            self.computes[host].reportclient, host=host)
        svc = cmd.rpc_service(manager, 'compute', host)
        self.allinone.services.append(svc)
        self.computes[host] = manager
        return manager

    # What each layer holds ------------------------------------------------

    def gpus_of(self, server):
        """1-based GPU numbers the compute assigned to the server."""
        host = server['OS-EXT-SRV-ATTR:host']
        devs = self.computes[host].rt.pci_tracker.pci_devs
        return frozenset(GPUS.index(d.address) + 1 for d in devs
                         if d.instance_uuid == server['id'])

    def domain_gpus(self, server):
        """GPU numbers in the libvirt domain's hostdevs; the domain runs
        as the server's power state says (a stopped server's does not).
        """
        host = self.computes[server['OS-EXT-SRV-ATTR:host']].driver.host
        domain = host.lookup_domain(server['id'])
        self.assertIsNotNone(domain, 'no libvirt domain for %s' % server)
        self.assertEqual(server['OS-EXT-STS:power_state'] == 1,
                         bool(domain.isActive()), server)
        return frozenset(
            GPUS.index(h.address) + 1 for h in
            libvirt_config.parse_guest_hostdevs(domain.XMLDesc()))

    def placement_gpus(self, server):
        """GPU numbers of the device providers allocated to the server."""
        host = server['OS-EXT-SRV-ATTR:host']
        allocs = self.placement_get('/allocations/%s' % server['id'])
        names = {rp['uuid']: name for name, rp in
                 self.provider_view(host).items()}
        gpus = set()
        for rp_uuid, alloc in allocs['allocations'].items():
            if 'PGPU' in alloc['resources']:
                address = names[rp_uuid].split('_', 1)[1].lower()
                gpus.add(GPUS.index(address) + 1)
        return frozenset(gpus)

    def assert_server_holds(self, server, valid_sets):
        gpus = self.gpus_of(server)
        self.assertIn(gpus, valid_sets, server)
        self.assertEqual(gpus, self.domain_gpus(server))
        self.assertEqual(gpus, self.placement_gpus(server))
        return gpus

    def assert_nothing_held(self, server_id):
        # A failed build goes to ERROR first and is freed after (see
        # ConductorManager._fail): wait for the free, then check it all.
        deadline = time.monotonic() + TIMEOUT
        while self.placement_get('/allocations/%s' % server_id)[
                'allocations'] and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual({}, self.placement_get(
            '/allocations/%s' % server_id)['allocations'])
        for compute in self.computes.values():
            self.assertEqual([], [d for d in compute.rt.pci_tracker.pci_devs
                                  if d.instance_uuid == server_id])
            self.assertIsNone(compute.driver.host.lookup_domain(server_id))


class TestNVLinkGroups(BootTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()

    def test_2gpu_flavor_always_gets_a_pair(self):
        self.start_services()
        flavors = self.gpu_flavors()
        taken = [self.assert_server_holds(self.boot(flavors[2], 'p%d' % i),
                                          PAIRS) for i in range(4)]
        self.assertEqual(PAIRS, set(taken))
        self.boot(flavors[2], 'p5', status='ERROR')

    def test_4gpu_flavor_gets_a_quad_and_8gpu_the_board(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        flavors = self.gpu_flavors()
        quads = [self.boot(flavors[4], 'q%d' % i) for i in range(2)]
        for quad in quads:
            self.assert_server_holds(quad, QUADS)
        # Packed, not spread: both quads on one host.
        self.assertEqual(1, len({q['OS-EXT-SRV-ATTR:host'] for q in quads}))
        board = self.boot(flavors[8], 'b')
        self.assertEqual(BOARD, self.assert_server_holds(board, {BOARD}))
        self.assertNotEqual(quads[0]['OS-EXT-SRV-ATTR:host'],
                            board['OS-EXT-SRV-ATTR:host'])
        failed = self.boot(flavors[1], 'one-more', status='ERROR')
        self.assertIn('No valid host', failed['fault']['message'])

    def test_no_pair_left_when_every_pair_is_broken(self):
        self.start_services()
        compute = self.computes['cmp1']
        view = self.provider_view('cmp1')
        # Another consumer holds the first GPU of every pair.
        blocker = '44444444-2222-3333-4444-555555555555'
        firsts = [GPUS[first - 1] for first, _ in
                  fakehost.H200_NVLINK_PAIRS.values()]
        resp = self.placement.api.put('/allocations/%s' % blocker, json={
            'allocations': {view['cmp1_' + a.upper()]['uuid']:
                            {'resources': {'PGPU': 1}} for a in firsts},
            'project_id': 'p', 'user_id': 'u', 'consumer_generation': None,
            'consumer_type': 'INSTANCE'})
        self.assertEqual(204, resp.status_code, resp.text)
        for address in firsts:
            compute.rt.pci_tracker.claim(blocker, 'r-' + address, [address])
        flavors = self.gpu_flavors()
        failed = self.boot(flavors[2], 'pair', status='ERROR')
        self.assertIn('No valid host', failed['fault']['message'])
        self.assertIn('nvlink group of 2', failed['fault']['message'])
        self.assert_nothing_held(failed['id'])
        # Single GPUs still fit: the four free partners.
        singles = [self.boot(flavors[1], 's%d' % i) for i in range(4)]
        self.assertEqual({frozenset({second}) for _, second in
                          fakehost.H200_NVLINK_PAIRS.values()},
                         {self.gpus_of(s) for s in singles})

    def test_delete_frees_devices_and_allocations(self):
        self.start_services()
        flavors = self.gpu_flavors()
        server = self.boot(flavors[4])
        self.assert_server_holds(server, QUADS)
        self.delete(server['id'])
        self.assert_nothing_held(server['id'])
        for rp in self.provider_view('cmp1').values():
            self.assertEqual(0, self.usages(rp['uuid']).get('PGPU', 0))
        # The whole board is free again.
        board = self.boot(flavors[8])
        self.assert_server_holds(board, {BOARD})

    def test_buddy_rule_fills_broken_pairs_first(self):
        self.start_services()
        flavors = self.gpu_flavors()
        first = self.gpus_of(self.boot(flavors[1], 'a'))
        second = self.gpus_of(self.boot(flavors[1], 'b'))
        self.assertIn(first | second, PAIRS)
        # A quad is still free for a 4-GPU server.
        self.assert_server_holds(self.boot(flavors[4], 'q'), QUADS)

    def test_compute_failure_reschedules_and_frees_everything(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        flavors = self.gpu_flavors()
        # The first server makes its host the fuller one, which packing
        # tries first; then that host fails to start guests.
        bad = self.boot(flavors[1], 'first')['OS-EXT-SRV-ATTR:host']
        good = ({'cmp1', 'cmp2'} - {bad}).pop()
        faults = self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.computes[bad].driver.host, ['create', 'createWithFlags']))
        server = self.boot(flavors[2], 'resched')
        self.assertTrue(faults.triggered)
        self.assertEqual(good, server['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(server, PAIRS)
        # Nothing of it left on the failing host.
        failing = self.computes[bad]
        self.assertEqual([], [d for d in failing.rt.pci_tracker.pci_devs
                              if d.instance_uuid == server['id']])
        self.assertIsNone(failing.driver.host.lookup_domain(server['id']))
        allocs = self.placement_get('/allocations/%s' % server['id'])
        bad_rps = {rp['uuid'] for rp in self.provider_view(bad).values()}
        self.assertEqual(set(), set(allocs['allocations']) & bad_rps)

    def test_failure_on_every_host_leaves_error_and_nothing_held(self):
        self.start_services()
        self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.computes['cmp1'].driver.host, ['createWithFlags',
                                                'create']))
        flavors = self.gpu_flavors()
        server = self.boot(flavors[2], 'doomed', status='ERROR')
        self.assertIn('cmp1', server['fault']['message'])
        self.assert_nothing_held(server['id'])
        ctx = nova_context.get_admin_context()
        self.assertEqual('error',
                         db.instance_get_by_uuid(ctx, server['id']).vm_state)

    def test_two_hosts_fill_with_pairs(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        flavors = self.gpu_flavors()
        servers = [self.boot(flavors[2], 'p%d' % i) for i in range(8)]
        by_host = {}
        for server in servers:
            gpus = self.assert_server_holds(server, PAIRS)
            by_host.setdefault(server['OS-EXT-SRV-ATTR:host'], []).append(
                gpus)
        self.assertEqual({'cmp1', 'cmp2'}, set(by_host))
        for pairs in by_host.values():
            self.assertEqual(PAIRS, set(pairs))
        # The first host was filled before the second was touched.
        first_host = servers[0]['OS-EXT-SRV-ATTR:host']
        self.assertEqual([first_host] * 4,
                         [s['OS-EXT-SRV-ATTR:host'] for s in servers[:4]])
        self.boot(flavors[2], 'p9', status='ERROR')

    def test_alias_checked_when_flavor_extra_spec_is_set(self):
        self.start_services()
        flavor = self.flavor('bad', None)
        body = self.api('POST', '/flavors/%s/os-extra_specs' % flavor,
                        {'extra_specs': {'pci_passthrough:alias': 'h100:2'}},
                        expect=(400,))
        message = body['badRequest']['message']
        self.assertIn('h100', message)
        self.assertIn('h200', message)


class TestUngroupedAlias(BootTestBase):
    """An alias without group_type behaves as upstream: any devices."""

    def test_any_two_gpus(self):
        self.flags('pci', report_in_placement=True,
                   device_spec=base.H200_CONFIG['device_spec'],
                   alias=['{"name": "gpu", "resource_class": "PGPU"}'])
        self.flags('filter_scheduler', pci_in_placement=True)
        self.start_services()
        flavor = self.flavor('gpu.2x', 'gpu:2')
        servers = [self.boot(flavor, 'g%d' % i) for i in range(4)]
        held = [self.gpus_of(s) for s in servers]
        self.assertEqual(set(range(1, 9)), set().union(*held))
        for server, gpus in zip(servers, held):
            self.assertEqual(2, len(gpus))
            self.assertEqual(gpus, self.domain_gpus(server))
            self.assertEqual(gpus, self.placement_gpus(server))
        self.boot(flavor, 'g5', status='ERROR')

    def test_flavor_without_pci(self):
        self.enable_h200_groups()
        self.start_services()
        server = self.boot(self.flavor('plain', None))
        self.assertEqual(frozenset(), self.gpus_of(server))
        self.assertEqual(frozenset(), self.domain_gpus(server))
        allocs = self.placement_get('/allocations/%s' % server['id'])
        self.assertEqual([{'VCPU': 4, 'MEMORY_MB': 4096}],
                         [a['resources'] for a in
                          allocs['allocations'].values()])


class TestStaticGroups(BootTestBase):
    """The upstream spec's static groups are handed out whole."""

    def test_static_group_boots_whole(self):
        left = {'bus': '(18|2a|3a|5d)'}
        right = {'bus': '(9a|ab|ba|db)'}
        specs = [json.dumps({'vendor_id': '10de', 'product_id': '2335',
                             'address': addr, 'group_name': name,
                             'group_type': 'nvlink'})
                 for name, addr in (('hgx-left', left),
                                    ('hgx-right', right))]
        self.flags('pci', report_in_placement=True, device_spec=specs,
                   alias=['{"name": "hgx-half", "resource_class": '
                          '"CUSTOM_PCI_GROUP_NVLINK"}'])
        self.flags('filter_scheduler', pci_in_placement=True)
        self.start_services()
        flavor = self.flavor('half', 'hgx-half:1')
        servers = [self.boot(flavor, 'h%d' % i) for i in range(2)]
        self.assertEqual(QUADS, {self.gpus_of(s) for s in servers})
        for server in servers:
            self.assertEqual(self.gpus_of(server), self.domain_gpus(server))
        self.boot(flavor, 'h3', status='ERROR')
        self.delete(servers[0]['id'])
        self.assert_nothing_held(servers[0]['id'])
        self.assertIn(self.gpus_of(self.boot(flavor, 'h4')), QUADS)


class TestDeleteDuringPlacementOutage(BootTestBase):
    """A delete whose allocation Placement does not free is freed at the
    next resource update after Placement answers again."""

    INTERVAL = 2

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.flags(update_resources_interval=self.INTERVAL)
        self.start_services(hosts=('cmp1',))
        self.flavors = self.gpu_flavors()
        self.ctx = nova_context.get_admin_context()

    def test_allocation_freed_when_placement_is_back(self):
        gone = self.boot(self.flavors[8], 'gone')['id']
        client = self.computes['cmp1'].reportclient
        delete = client.delete_allocation_for_instance

        def placement_away(consumer):
            if consumer == gone:
                raise exception.PlacementAPIConnectFailure(
                    url='http://placement', error='connection refused')
            return delete(consumer)
        outage = fixtures.MockPatchObject(
            client, 'delete_allocation_for_instance', placement_away)
        outage.setUp()
        try:
            self.delete(gone)
            self.assertNotEqual({}, self.placement_get(
                '/allocations/%s' % gone)['allocations'])
            self.assertEqual([(gone, 'cmp1')], [
                (row['consumer_uuid'], row['host'])
                for row in db.pending_free_get_all(self.ctx)])
            # The board is held by a server that is gone: the refusal
            # says so, rather than blaming a race.
            refused = self.boot(self.flavors[8], 'refused', 'ERROR')
            fault = refused['fault']['message']
            self.assertIn('leaked capacity', fault)
            self.assertIn('cmp1: %s' % gone, fault)
        finally:
            outage.cleanUp()
        # Placement is back: the next resource update frees the board.
        deadline = time.monotonic() + self.INTERVAL + 5
        while self.placement_get('/allocations/%s' % gone)['allocations'] \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual({}, self.placement_get(
            '/allocations/%s' % gone)['allocations'])
        self.assertEqual([], db.pending_free_get_all(self.ctx))
        self.assert_server_holds(self.boot(self.flavors[8], 'next'),
                                 {BOARD})


class TestDeleteDuringBuild(BootTestBase):

    def test_delete_while_spawning_leaves_nothing(self):
        self.enable_h200_groups()
        self.start_services()
        flavors = self.gpu_flavors()
        driver = self.computes['cmp1'].driver
        entered, release = threading.Event(), threading.Event()
        real_spawn = driver.spawn

        def slow_spawn(*args, **kwargs):
            entered.set()
            self.assertTrue(release.wait(TIMEOUT))
            return real_spawn(*args, **kwargs)
        self.useFixture(fixtures.MockPatchObject(driver, 'spawn',
                                                 side_effect=slow_spawn))
        server = self.api('POST', '/servers', {'server': {
            'name': 'doomed', 'flavorRef': flavors[2],
            'imageRef': 'none'}})['server']
        self.assertTrue(entered.wait(TIMEOUT))
        deleter = threading.Thread(target=self.api, args=(
            'DELETE', '/servers/%s' % server['id']))
        deleter.start()
        # The delete found the host and waits for the build to finish.
        time.sleep(0.5)
        release.set()
        deleter.join(TIMEOUT)
        self.assertFalse(deleter.is_alive())
        self.api('GET', '/servers/%s' % server['id'], expect=(404,))
        self.assert_nothing_held(server['id'])
        # The pair is free again: four pairs still fit.
        for i in range(4):
            self.assert_server_holds(self.boot(flavors[2], 'p%d' % i),
                                     PAIRS)
