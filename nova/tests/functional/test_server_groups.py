"""Server groups through the REST API with every service real: GPU jobs
packed onto one host (affinity) or spread over hosts (anti-affinity), the
soft policies that prefer but never refuse, concurrent boots of one
anti-affinity group, and moves that keep the policy.

The hosts are HGX H200 boards and the servers 1-GPU jobs, so the
scheduler on its own packs them onto the fullest host: each test shows a
policy winning over that packing, or refusing, where it must.
"""

import concurrent.futures
import threading
import time

import fixtures

from nova import context as nova_context
from nova.db import api as db
from nova.scheduler import affinity
from nova.tests.functional.lib import invariants
from nova.tests.functional import test_boot_gpu_groups as boot


class ServerGroupTestBase(boot.BootTestBase):
    """HGX hosts, the gpu.Nx flavors and helpers for groups."""

    hosts = ('cmp1', 'cmp2')

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.ctx = nova_context.get_admin_context()
        self.start_services(hosts=self.hosts)
        self.flavors = self.gpu_flavors()

    def versioned(self, method, path, version, body=None,
                  expect=(200, 202, 204)):
        response = self.session.request(
            method, self.allinone.api_url + path, json=body,
            headers={'OpenStack-API-Version': 'compute %s' % version})
        self.assertIn(response.status_code, expect, response.text)
        return response.json() if response.content else {}

    def group(self, policy, rules=None):
        """A new server group (microversion 2.64); its id."""
        body = {'name': policy, 'policy': policy}
        if rules:
            body['rules'] = rules
        return self.versioned('POST', '/os-server-groups', '2.64',
                              {'server_group': body})['server_group']['id']

    def members(self, group_id):
        return self.api('GET', '/os-server-groups/%s' %
                        group_id)['server_group']['members']

    def boot_in(self, group_id, name, gpus=1, status='ACTIVE'):
        server = self.api('POST', '/servers', {
            'server': {'name': name, 'flavorRef': self.flavors[gpus],
                       'imageRef': 'none'},
            'os:scheduler_hints': {'group': group_id}})['server']
        return self.wait_for(server['id'], status)

    def wait_done(self, server_id):
        """The server once ACTIVE or ERROR (a build of a burst)."""
        deadline = time.monotonic() + boot.TIMEOUT
        server = self.api('GET', '/servers/%s' % server_id)['server']
        while server['status'] not in ('ACTIVE', 'ERROR'):
            self.assertLess(time.monotonic(), deadline, server)
            time.sleep(0.05)
            server = self.api('GET', '/servers/%s' % server_id)['server']
        return server

    @staticmethod
    def host(server):
        return server['OS-EXT-SRV-ATTR:host']

    def assert_consistent(self):
        violations = invariants.check(self.allinone.api_url, 'admin',
                                      self.placement.api, self.ctx,
                                      settled=True)
        self.assertEqual([], violations, invariants.summary(violations))

    def assert_refused_for(self, server, group_id, policy):
        """An ERROR server whose fault is the scheduler's refusal naming
        the group and its policy, holding nothing."""
        message = server['fault']['message']
        self.assertIn('No valid host was found', message)
        self.assertIn('%s server group %s' % (policy, group_id), message)
        self.assert_nothing_held(server['id'])


class TestPolicies(ServerGroupTestBase):

    def test_anti_affinity_spreads_then_refuses(self):
        group = self.group('anti-affinity')
        first = self.boot_in(group, 'a1')
        # Packing alone would put the second 1-GPU job beside the first.
        second = self.boot_in(group, 'a2')
        self.assertEqual({'cmp1', 'cmp2'},
                         {self.host(first), self.host(second)})
        third = self.boot_in(group, 'a3', status='ERROR')
        self.assert_refused_for(third, group, 'anti-affinity')
        # A server outside the group still fits (7 GPUs free per host).
        self.boot(self.flavors[1], 'outsider')
        self.assertEqual(sorted([first['id'], second['id'], third['id']]),
                         sorted(self.members(group)))
        # Its host freed, a new member may take it.
        self.delete(first['id'])
        self.assertNotIn(first['id'], self.members(group))
        fourth = self.boot_in(group, 'a4')
        self.assertEqual(self.host(first), self.host(fourth))
        self.assert_consistent()

    def test_max_server_per_host(self):
        group = self.group('anti-affinity', {'max_server_per_host': 2})
        servers = [self.boot_in(group, 'm%d' % n) for n in range(4)]
        hosts = [self.host(server) for server in servers]
        self.assertEqual(hosts[0], hosts[1])
        self.assertEqual(hosts[2], hosts[3])
        self.assertNotEqual(hosts[0], hosts[2])
        refused = self.boot_in(group, 'm4', status='ERROR')
        self.assert_refused_for(refused, group, 'anti-affinity')

    def test_affinity_packs_and_refuses_when_its_host_is_full(self):
        group = self.group('affinity')
        members = [self.boot_in(group, 'p%d' % n) for n in range(2)]
        host = self.host(members[0])
        self.assertEqual(host, self.host(members[1]))
        # The rest of that board taken by servers outside the group: the
        # next member is refused although the other host is empty.
        for gpus, name in ((4, 'quad'), (2, 'pair')):
            filler = self.boot(self.flavors[gpus], name)
            self.assertEqual(host, self.host(filler))
        refused = self.boot_in(group, 'p2', gpus=2, status='ERROR')
        self.assert_refused_for(refused, group, 'affinity')
        self.assert_consistent()

    def test_soft_policies_prefer_but_never_refuse(self):
        spread = self.group('soft-anti-affinity')
        first = self.boot_in(spread, 's1')
        second = self.boot_in(spread, 's2')
        self.assertNotEqual(self.host(first), self.host(second))
        # Every host holds a member: the third still boots.
        third = self.boot_in(spread, 's3')
        for server in (first, second, third):
            self.delete(server['id'])
        packed = self.group('soft-affinity')
        board = self.boot_in(packed, 'k1', gpus=8)
        # Its host full, the next member goes to the other one.
        beside = self.boot_in(packed, 'k2')
        self.assertNotEqual(self.host(board), self.host(beside))
        self.assert_consistent()

    def test_server_shows_its_group_from_2_71(self):
        group = self.group('affinity')
        server = self.boot_in(group, 'g1')
        shown = self.versioned('GET', '/servers/%s' % server['id'],
                               '2.71')['server']
        self.assertEqual([group], shown['server_groups'])
        outsider = self.boot(self.flavors[1], 'plain')
        shown = self.versioned('GET', '/servers/%s' % outsider['id'],
                               '2.71')['server']
        self.assertEqual([], shown['server_groups'])
        listed = self.versioned('GET', '/servers/detail', '2.71')
        self.assertNotIn('server_groups', listed['servers'][0])
        # Deleting the group keeps its servers, outside any group.
        self.api('DELETE', '/os-server-groups/%s' % group)
        shown = self.versioned('GET', '/servers/%s' % server['id'],
                               '2.71')['server']
        self.assertEqual(([], 'ACTIVE'),
                         (shown['server_groups'], shown['status']))


class TestConcurrentAntiAffinity(ServerGroupTestBase):

    def test_two_members_decided_at_once_never_share_a_host(self):
        """Both decisions read the group before either is recorded, as
        two schedulers (or two threads of one) may: the second to record
        loses the compare-and-swap, gives its claim back and decides
        again on the new state."""
        group = self.group('anti-affinity')
        barrier = threading.Barrier(2, timeout=30)
        real_load = affinity.load
        loads = []

        def load_together(context, instance_uuid):
            state = real_load(context, instance_uuid)
            loads.append(instance_uuid)
            if len(loads) <= 2:
                try:
                    barrier.wait()
                except threading.BrokenBarrierError:
                    pass
            return state

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.affinity.load', load_together))
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            servers = list(pool.map(
                lambda n: self.boot_in(group, 'c%d' % n), range(2)))
        self.assertEqual({'cmp1', 'cmp2'},
                         {self.host(server) for server in servers})
        # One of them was decided again.
        self.assertEqual(3, len(loads))
        self.assert_consistent()

    def test_a_burst_fills_each_host_once_and_refuses_the_rest(self):
        group = self.group('anti-affinity')
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            ids = list(pool.map(lambda n: self.api('POST', '/servers', {
                'server': {'name': 'b%d' % n,
                           'flavorRef': self.flavors[1],
                           'imageRef': 'none'},
                'os:scheduler_hints': {'group': group}})['server']['id'],
                range(4)))
        servers = [self.wait_done(uuid) for uuid in ids]
        active = [s for s in servers if s['status'] == 'ACTIVE']
        self.assertEqual({'cmp1', 'cmp2'},
                         {self.host(server) for server in active})
        self.assertEqual(2, len(active))
        for server in servers:
            if server['status'] == 'ERROR':
                self.assert_refused_for(server, group, 'anti-affinity')
        self.assert_consistent()


class TestMultipleCreate(ServerGroupTestBase):
    """One create of min_count servers into a group, as Tempest's
    multinode group tests make them."""

    def create_many(self, group_id, **counts):
        """The servers of one create, found by its reservation id."""
        reservation = self.api('POST', '/servers', {
            'server': dict(counts, name='job', flavorRef=self.flavors[2],
                           imageRef='none', return_reservation_id=True),
            'os:scheduler_hints': {'group': group_id}})['reservation_id']
        self.assertRegex(reservation, '^r-[a-z0-9]{8}$')
        servers = sorted(self.versioned(
            'GET', '/servers/detail?reservation_id=' + reservation, '2.3')[
                'servers'], key=lambda s: s['name'])
        self.assertEqual(
            [reservation] * len(servers),
            [s['OS-EXT-SRV-ATTR:reservation_id'] for s in servers])
        return [self.wait_done(s['id']) for s in servers]

    def test_anti_affinity_and_affinity_pairs(self):
        spread = self.group('anti-affinity')
        servers = self.create_many(spread, min_count=2)
        self.assertEqual(['job-1', 'job-2'], [s['name'] for s in servers])
        self.assertEqual(['ACTIVE'] * 2, [s['status'] for s in servers])
        self.assertEqual({'cmp1', 'cmp2'}, {self.host(s) for s in servers})
        # Without return_reservation_id the first server answers.
        first = self.api('POST', '/servers', {'server': {
            'name': 'solo', 'flavorRef': self.flavors[1],
            'imageRef': 'none', 'max_count': 1}})['server']
        self.delete(self.wait_done(first['id'])['id'])
        self.assertEqual(sorted(s['id'] for s in servers),
                         sorted(self.members(spread)))
        for server in servers:
            self.delete(server['id'])
        pack = self.group('affinity')
        servers = self.create_many(pack, min_count='2', max_count='2')
        self.assertEqual(['ACTIVE'] * 2, [s['status'] for s in servers])
        self.assertEqual(1, len({self.host(s) for s in servers}))
        self.assert_consistent()

    def test_quota_allows_fewer_than_max_count(self):
        """max_count servers when the quota allows, else as many as it
        allows down to min_count (403 below it), as upstream."""
        # The test session's project.
        self.api('PUT', '/os-quota-sets/admin',
                 {'quota_set': {'instances': 2}})
        group = self.group('soft-anti-affinity')
        servers = self.create_many(group, min_count=1, max_count=3)
        self.assertEqual(['job-1', 'job-2'], [s['name'] for s in servers])
        response = self.session.post(
            self.allinone.api_url + '/servers', json={'server': {
                'name': 'more', 'flavorRef': self.flavors[1],
                'imageRef': 'none', 'min_count': 1, 'max_count': 2}})
        self.assertEqual(403, response.status_code, response.text)
        self.assert_consistent()


class TestMoves(ServerGroupTestBase):

    hosts = ('cmp1', 'cmp2', 'cmp3')

    def test_cold_migration_never_joins_another_member(self):
        group = self.group('anti-affinity')
        first = self.boot_in(group, 'a1')
        second = self.boot_in(group, 'a2')
        empty = ({'cmp1', 'cmp2', 'cmp3'} -
                 {self.host(first), self.host(second)}).pop()
        # Packing prefers the host of the other member (a GPU in use);
        # the policy sends the move to the empty one.
        moved = self.settle(first['id'], {'migrate': None}, 'VERIFY_RESIZE')
        self.assertEqual(empty, self.host(moved))
        self.settle(first['id'], {'confirmResize': None}, 'ACTIVE')
        # The resize of the other member: the first's old host is free
        # again, the two others hold members.
        resized = self.settle(second['id'],
                              {'resize': {'flavorRef': self.flavors[2]}},
                              'VERIFY_RESIZE')
        self.assertEqual(self.host(first), self.host(resized))
        self.assert_consistent()


class TestMoveRefused(ServerGroupTestBase):

    def test_cold_migration_with_no_allowed_host_stays(self):
        group = self.group('anti-affinity')
        first = self.boot_in(group, 'a1')
        second = self.boot_in(group, 'a2')
        stays = self.settle(first['id'], {'migrate': None}, 'ACTIVE')
        self.assertEqual(self.host(first), self.host(stays))
        [migration] = db.migration_get_all(
            self.ctx, {'instance_uuid': first['id']})
        self.assertEqual('error', migration.status)
        self.assertNotEqual(self.host(first), self.host(second))
        self.assert_consistent()
