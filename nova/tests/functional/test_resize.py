"""Resize and cold migration of GPU servers through the REST API.

Real services in-process (API over HTTP, conductor, scheduler, computes on
libvirt's test driver, real Placement and database). After every action
the deployment is checked: each server's devices are exactly one declared
partition of its flavor's size, Placement allocations equal what servers
and migrations hold, no device row is claimed twice and no libvirt domain
exists without a server on that host.
"""

import datetime
import threading
import time
from urllib import parse

import fixtures
from oslo_utils import timeutils
import sqlalchemy

from nova import context as nova_context
from nova.compute import rpcapi as compute_rpcapi
from nova.conductor import manager as conductor_manager
from nova.db import api as db
from nova.db import models
from nova.pci import placement_names
from nova.tests.fixtures import libvirt_faults
from nova.tests.functional.lib import invariants
from nova.tests.functional import test_boot_gpu_groups as boot

PAIRS = boot.PAIRS
QUADS = boot.QUADS
BOARD = boot.BOARD
ADMIN_2_56 = {'X-OpenStack-Nova-API-Version': '2.56'}


class MoveTestBase(boot.BootTestBase):
    """Two HGX H200 hosts and the gpu.1x/2x/4x/8x flavors."""

    hosts = ('cmp1', 'cmp2')

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.ctx = nova_context.get_admin_context()
        # Server views with the flavor's name (2.47).
        self.session.headers['X-OpenStack-Nova-API-Version'] = '2.47'

    def start(self, same_host: bool = False):
        self.flags(allow_resize_to_same_host=same_host)
        self.start_services(hosts=self.hosts)
        self.flavors = self.gpu_flavors()

    # Actions ------------------------------------------------------------

    def action(self, server_id, body, expect=(202, 204), headers=None):
        resp = self.session.post(
            self.allinone.api_url + '/servers/%s/action' % server_id,
            json=body, headers=headers or {})
        self.assertIn(resp.status_code, expect, resp.text)
        return resp

    def instance_actions(self, server_id) -> list[dict]:
        """The server's actions, newest first, each with its events."""
        url = self.allinone.api_url + '/servers/%s/os-instance-actions' % (
            server_id)
        headers = {'X-OpenStack-Nova-API-Version': '2.51'}
        listed = self.session.get(url, headers=headers).json()
        return [self.session.get(url + '/' + action['request_id'],
                                 headers=headers).json()['instanceAction']
                for action in listed['instanceActions']]

    def wait_settled(self, server_id, status, *others):
        """Wait until the server is in ``status`` (or one of ``others``)
        with no task in flight; fail at once on an unexpected ERROR."""
        wanted = (status,) + others
        deadline = time.monotonic() + boot.TIMEOUT
        server = None
        while time.monotonic() < deadline:
            server = self.api('GET', '/servers/%s' % server_id)['server']
            if server['OS-EXT-STS:task_state'] is None:
                if server['status'] in wanted:
                    return server
                if server['status'] == 'ERROR':
                    self.fail('server %s went to ERROR: %s' % (server_id,
                                                               server))
            time.sleep(0.05)
        self.fail('server %s never reached %s: %s' % (server_id, wanted,
                                                      server))

    def resize(self, server_id, flavor_id, status='VERIFY_RESIZE'):
        self.action(server_id, {'resize': {'flavorRef': flavor_id}})
        return self.wait_settled(server_id, status)

    def confirm(self, server_id):
        self.action(server_id, {'confirmResize': None})
        return self.wait_settled(server_id, 'ACTIVE')

    def revert(self, server_id):
        self.action(server_id, {'revertResize': None})
        return self.wait_settled(server_id, 'ACTIVE')

    def evacuate(self, server_id, body=None, expect=(200,), version='2.14'):
        return self.action(server_id, {'evacuate': body or {}},
                           expect=expect,
                           headers={'X-OpenStack-Nova-API-Version': version})

    def migrations(self, server_id):
        return db.migration_get_all(self.ctx, {'instance_uuid': server_id})

    # What is held ---------------------------------------------------------

    def gpus_on(self, host, consumer_rows_of):
        return frozenset(
            boot.GPUS.index(d.address) + 1
            for d in self.computes[host].rt.pci_tracker.pci_devs
            if d.instance_uuid == consumer_rows_of)

    def allocated_gpus(self, consumer, host):
        names = {rp['uuid']: name for name, rp in
                 self.provider_view(host).items()}
        allocs = self.placement_get('/allocations/%s' % consumer)
        return frozenset(
            boot.GPUS.index(names[rp].split('_', 1)[1].lower()) + 1
            for rp, alloc in allocs['allocations'].items()
            if 'PGPU' in alloc['resources'])

    def assert_consistent(self):
        """The invariants, and every libvirt domain belongs to a server
        that lives on that host."""
        violations = invariants.check(self.allinone.api_url, 'admin',
                                      self.placement.api, self.ctx,
                                      settled=True)
        self.assertEqual([], violations, invariants.summary(violations))
        servers = {s['id']: s for s in self.api(
            'GET', '/servers/detail?all_tenants=1')['servers']}
        for host, compute in self.computes.items():
            for uuid in compute.driver.list_instance_uuids():
                self.assertIn(uuid, servers, 'domain %s on %s has no '
                              'server' % (uuid, host))
                self.assertEqual(host, servers[uuid]['OS-EXT-SRV-ATTR:host'],
                                 'domain of %s on %s' % (uuid, host))


class TestResize(MoveTestBase):

    def test_grow_to_another_host_then_confirm(self):
        self.start()
        server = self.boot(self.flavors[2], 'grow')
        source = server['OS-EXT-SRV-ATTR:host']
        pair = self.assert_server_holds(server, PAIRS)

        resized = self.resize(server['id'], self.flavors[4])
        dest = resized['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, dest)
        self.assertEqual('gpu.4x', resized['flavor']['original_name'])
        self.assert_server_holds(resized, QUADS)
        # The source pair is still the server's, held in Placement by the
        # migration.
        migration = self.migrations(server['id'])[0]
        self.assertEqual(('resize', 'finished'), (
            migration.migration_type, migration.status))
        self.assertEqual(pair, self.gpus_on(source, server['id']))
        self.assertEqual(pair, self.allocated_gpus(migration.uuid,
                                                   source))
        self.assertIsNone(self.computes[source].driver.host.lookup_domain(
            server['id']))
        self.assert_consistent()

        confirmed = self.confirm(server['id'])
        self.assertEqual(dest, confirmed['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(confirmed, QUADS)
        self.assertEqual(frozenset(), self.gpus_on(source, server['id']))
        self.assertEqual({}, self.placement_get(
            '/allocations/%s' % migration.uuid)['allocations'])
        self.assertEqual('confirmed',
                         self.migrations(server['id'])[0].status)
        actions = self.instance_actions(server['id'])
        self.assertEqual(['confirmResize', 'resize', 'create'],
                         [a['action'] for a in actions])
        self.assertEqual(
            [('conductor_migrate_server', 'Success')],
            [(e['event'], e['result']) for e in actions[1]['events']])
        self.assert_consistent()

    def test_revert_returns_to_the_same_pair(self):
        self.start()
        server = self.boot(self.flavors[2], 'back')
        source = server['OS-EXT-SRV-ATTR:host']
        pair = self.assert_server_holds(server, PAIRS)
        self.resize(server['id'], self.flavors[4])

        reverted = self.revert(server['id'])
        self.assertEqual(source, reverted['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('gpu.2x', reverted['flavor']['original_name'])
        self.assertEqual(pair, self.assert_server_holds(reverted, PAIRS))
        migration = self.migrations(server['id'])[0]
        self.assertEqual('reverted', migration.status)
        self.assertEqual({}, self.placement_get(
            '/allocations/%s' % migration.uuid)['allocations'])
        dest = migration.dest_compute
        self.assertEqual(frozenset(), self.gpus_on(dest, server['id']))
        self.assert_consistent()

    def test_shrink_and_grow_to_the_whole_board(self):
        self.start()
        server = self.boot(self.flavors[4], 'quad')
        self.assert_server_holds(server, QUADS)
        shrunk = self.confirm(self.resize(server['id'],
                                          self.flavors[2])['id'])
        self.assert_server_holds(shrunk, PAIRS)
        self.assert_consistent()
        grown = self.resize(server['id'], self.flavors[4])
        self.assert_server_holds(grown, QUADS)
        self.confirm(server['id'])
        board = self.confirm(self.resize(server['id'],
                                         self.flavors[8])['id'])
        self.assert_server_holds(board, {BOARD})
        self.assert_consistent()

    def test_source_pair_cannot_be_given_away_before_confirm(self):
        """While the server waits in VERIFY_RESIZE, boots cannot take the
        pair it came from, so the revert always has it back."""
        self.start()
        server = self.boot(self.flavors[2], 'held')
        pair = self.gpus_of(server)
        source = server['OS-EXT-SRV-ATTR:host']
        self.resize(server['id'], self.flavors[4])
        # Free now: three pairs on the source, two on the destination.
        others = [self.boot(self.flavors[2], 'p%d' % i) for i in range(5)]
        for other in others:
            self.assertNotEqual(
                (source, pair),
                (other['OS-EXT-SRV-ATTR:host'], self.gpus_of(other)))
        refused = self.boot(self.flavors[2], 'one-too-many', status='ERROR')
        self.assertIn('No valid host', refused['fault']['message'])
        self.delete(refused['id'])
        self.assert_consistent()

        reverted = self.revert(server['id'])
        self.assertEqual((source, pair), (
            reverted['OS-EXT-SRV-ATTR:host'], self.gpus_of(reverted)))
        self.assert_consistent()

    def test_no_valid_host_keeps_the_server_where_it_was(self):
        self.start()
        # Each host gets a quad server first: no host has a free board.
        blockers = [self.boot(self.flavors[4], 'b%d' % i) for i in range(2)]
        server = self.boot(self.flavors[4], 'wants-8')
        before = (server['OS-EXT-SRV-ATTR:host'], self.gpus_of(server))
        stays = self.resize(server['id'], self.flavors[8], status='ACTIVE')
        self.assertEqual(before, (stays['OS-EXT-SRV-ATTR:host'],
                                  self.gpus_of(stays)))
        self.assertEqual('gpu.4x', stays['flavor']['original_name'])
        self.assert_server_holds(stays, QUADS)
        migration = self.migrations(server['id'])[0]
        self.assertEqual('error', migration.status)
        # The refusal is on record where the user looks for it.
        resize = self.instance_actions(server['id'])[0]
        self.assertEqual(('resize', 'Error'),
                         (resize['action'], resize['message']))
        [event] = resize['events']
        self.assertEqual(('conductor_migrate_server', 'Error'),
                         (event['event'], event['result']))
        self.assertIn('No valid host', event['traceback'])
        self.assertEqual({}, self.placement_get(
            '/allocations/%s' % migration.uuid)['allocations'])
        for blocker in blockers:
            self.assert_server_holds(blocker, QUADS)
        self.assert_consistent()

    def test_destination_failing_mid_resize_rolls_back(self):
        self.start()
        server = self.boot(self.flavors[2], 'victim')
        source = server['OS-EXT-SRV-ATTR:host']
        pair = self.gpus_of(server)
        dest = ({'cmp1', 'cmp2'} - {source}).pop()
        faults = self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.computes[dest].driver.host, ['create', 'createWithFlags']))
        stays = self.resize(server['id'], self.flavors[4], status='ACTIVE')
        self.assertTrue(faults.triggered)
        self.assertEqual((source, pair), (stays['OS-EXT-SRV-ATTR:host'],
                                          self.gpus_of(stays)))
        self.assertEqual(pair, self.domain_gpus(stays))
        self.assertEqual(pair, self.placement_gpus(stays))
        self.assertEqual(frozenset(), self.gpus_on(dest, server['id']))
        self.assertEqual('error', self.migrations(server['id'])[0].status)
        self.assert_consistent()

    def test_resize_to_the_same_flavor_or_unknown_flavor_is_refused(self):
        self.start()
        server = self.boot(self.flavors[2], 'same')
        resp = self.action(server['id'], {'resize': {
            'flavorRef': self.flavors[2]}}, expect=(400,))
        self.assertIn('already has flavor', resp.text)
        resp = self.action(server['id'], {'resize': {
            'flavorRef': 'no-such-flavor'}}, expect=(400,))
        self.assertIn('no-such-flavor', resp.text)
        resp = self.action(server['id'], {'confirmResize': None},
                           expect=(409,))
        self.assertIn('resized', resp.text)
        resp = self.action(server['id'], {'frobnicate': None},
                           expect=(400,))
        self.assertIn('frobnicate', resp.text)
        self.assertEqual([], self.migrations(server['id']))
        self.assert_consistent()

    def test_delete_while_waiting_for_confirm_frees_both_ends(self):
        self.start()
        server = self.boot(self.flavors[2], 'gone')
        self.resize(server['id'], self.flavors[4])
        self.delete(server['id'])
        self.assert_nothing_held(server['id'])
        migration = self.migrations(server['id'])[0]
        self.assertEqual('confirmed', migration.status)
        self.assertEqual({}, self.placement_get(
            '/allocations/%s' % migration.uuid)['allocations'])
        self.assert_consistent()

    def test_concurrent_resizes(self):
        """Four pairs fill one host; the other has two free quads; four
        resizes to 4 GPUs at once: exactly two find a quad, two stay
        where they were, nothing is booked twice."""
        self.start()
        servers = [self.boot(self.flavors[2], 'c%d' % i) for i in range(4)]
        full = {s['OS-EXT-SRV-ATTR:host'] for s in servers}
        self.assertEqual(1, len(full), full)
        other = {'cmp1', 'cmp2'} - full
        codes = []

        def resize(server_id):
            codes.append(self.session.post(
                self.allinone.api_url + '/servers/%s/action' % server_id,
                json={'resize': {'flavorRef': self.flavors[4]}}).status_code)
        threads = [threading.Thread(target=resize, args=(s['id'],))
                   for s in servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([202] * 4, codes)
        settled = [self.wait_settled(s['id'], 'VERIFY_RESIZE', 'ACTIVE')
                   for s in servers]
        statuses = sorted(s['status'] for s in settled)
        self.assertEqual(['ACTIVE', 'ACTIVE', 'VERIFY_RESIZE',
                          'VERIFY_RESIZE'], statuses)
        self.assertEqual(other, {s['OS-EXT-SRV-ATTR:host'] for s in settled
                                 if s['status'] == 'VERIFY_RESIZE'})
        self.assert_consistent()
        for s in settled:
            if s['status'] == 'VERIFY_RESIZE':
                self.assert_server_holds(self.confirm(s['id']), QUADS)
            else:
                self.assert_server_holds(s, PAIRS)
        self.assert_consistent()


class TestRacingResizes(MoveTestBase):
    """Two resizes to the whole board at once, with two free boards."""

    hosts = ('cmp1', 'cmp2', 'cmp3')

    def test_both_get_a_board_after_a_claim_conflict(self):
        self.start()
        servers = [self.boot(self.flavors[1], 'r%d' % i) for i in range(2)]
        [source] = {s['OS-EXT-SRV-ATTR:host'] for s in servers}
        free = sorted(set(self.hosts) - {source})
        # One free host's band and fitting sizes went missing (a free
        # whose traits could not be published): the fullest band offers
        # the other host's board alone, and this one is found only by the
        # query without a band.
        root = self.provider_view(free[1])[free[1]]
        traits = self.placement_get('/resource_providers/%s/traits' %
                                    root['uuid'])
        resp = self.placement.api.put(
            '/resource_providers/%s/traits' % root['uuid'], json={
                'traits': [t for t in traits['traits']
                           if not t.startswith(('CUSTOM_PCI_FREE_',
                                                'CUSTOM_PCI_FIT_'))],
                'resource_provider_generation':
                    traits['resource_provider_generation']})
        self.assertEqual(200, resp.status_code, resp.text)
        # Both schedulings hold their candidates before either claims.
        scheduler = next(svc.manager for svc in self.allinone.services
                         if svc.manager.binary == 'nova-scheduler')
        claim = scheduler.reportclient.claim_resources
        together = threading.Barrier(2, timeout=30)
        first_claims = set()

        def claim_together(consumer, *args, **kwargs):
            if consumer not in first_claims:
                first_claims.add(consumer)
                together.wait()
            return claim(consumer, *args, **kwargs)
        self.useFixture(fixtures.MockPatchObject(
            scheduler.reportclient, 'claim_resources', claim_together))

        threads = [threading.Thread(target=self.action, args=(
            s['id'], {'resize': {'flavorRef': self.flavors[8]}}))
            for s in servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        settled = [self.wait_settled(s['id'], 'VERIFY_RESIZE', 'ACTIVE')
                   for s in servers]
        self.assertEqual(['VERIFY_RESIZE'] * 2,
                         [s['status'] for s in settled],
                         [self.migrations(s['id']) for s in servers])
        self.assertEqual(set(free),
                         {s['OS-EXT-SRV-ATTR:host'] for s in settled})
        for server in settled:
            self.assert_server_holds(server, {BOARD})
        self.assert_consistent()


class TestResizeSameHost(MoveTestBase):

    hosts = ('cmp1',)

    def test_grow_in_place_takes_a_fresh_quad_and_keeps_the_pair(self):
        self.start(same_host=True)
        server = self.boot(self.flavors[2], 'inplace')
        pair = self.assert_server_holds(server, PAIRS)
        resized = self.resize(server['id'], self.flavors[4])
        self.assertEqual('cmp1', resized['OS-EXT-SRV-ATTR:host'])
        held = self.gpus_on('cmp1', server['id'])
        # Both held at once: the old pair (for a revert) and a quad that
        # does not contain it.
        quad = held - pair
        self.assertIn(quad, QUADS)
        self.assertEqual(quad, self.domain_gpus(resized))
        self.assertEqual(quad, self.placement_gpus(resized))
        migration = self.migrations(server['id'])[0]
        self.assertEqual(pair, self.allocated_gpus(migration.uuid,
                                                   'cmp1'))
        self.assert_consistent()

        reverted = self.revert(server['id'])
        self.assertEqual(pair, self.assert_server_holds(reverted, PAIRS))
        self.assert_consistent()

        self.resize(server['id'], self.flavors[4])
        confirmed = self.confirm(server['id'])
        self.assertEqual(quad, self.assert_server_holds(confirmed, QUADS))
        self.assert_consistent()

    def test_without_the_option_one_host_cannot_resize(self):
        self.start(same_host=False)
        server = self.boot(self.flavors[2], 'stuck')
        pair = self.gpus_of(server)
        stays = self.resize(server['id'], self.flavors[4], status='ACTIVE')
        self.assertEqual(pair, self.gpus_of(stays))
        self.assertEqual('error', self.migrations(server['id'])[0].status)
        self.assert_consistent()


class TestColdMigrate(MoveTestBase):

    def test_migrate_confirm_keeps_the_size(self):
        self.start()
        server = self.boot(self.flavors[4], 'mover')
        source = server['OS-EXT-SRV-ATTR:host']
        self.action(server['id'], {'migrate': None})
        moved = self.wait_settled(server['id'], 'VERIFY_RESIZE')
        self.assertNotEqual(source, moved['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('gpu.4x', moved['flavor']['original_name'])
        self.assert_server_holds(moved, QUADS)
        migration = self.migrations(server['id'])[0]
        self.assertEqual('migration', migration.migration_type)
        self.assert_consistent()
        confirmed = self.confirm(server['id'])
        self.assert_server_holds(confirmed, QUADS)
        self.assertEqual(frozenset(), self.gpus_on(source, server['id']))
        self.assert_consistent()

    def test_migrate_to_named_host_and_revert(self):
        self.start()
        server = self.boot(self.flavors[2], 'named')
        source = server['OS-EXT-SRV-ATTR:host']
        pair = self.gpus_of(server)
        target = ({'cmp1', 'cmp2'} - {source}).pop()
        # A host needs 2.56; before it the body must be null.
        resp = self.action(server['id'], {'migrate': {'host': target}},
                           expect=(400,))
        self.assertIn('2.56', resp.text)
        resp = self.action(server['id'], {'migrate': {'host': 'nowhere'}},
                           expect=(400,), headers=ADMIN_2_56)
        self.assertIn('nowhere', resp.text)
        self.action(server['id'], {'migrate': {'host': target}},
                    headers=ADMIN_2_56)
        moved = self.wait_settled(server['id'], 'VERIFY_RESIZE')
        self.assertEqual(target, moved['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(moved, PAIRS)
        self.assert_consistent()
        reverted = self.revert(server['id'])
        self.assertEqual((source, pair), (
            reverted['OS-EXT-SRV-ATTR:host'], self.gpus_of(reverted)))
        self.assert_consistent()


class TestMigrateToNamedHostInShards(MoveTestBase):
    """With shards of one host (``band_shard_hosts = 1``), a move to a
    named host asks that host's shard first."""

    hosts = ('cmp1', 'cmp2', 'cmp3', 'cmp4')

    def test_named_host_in_another_shard(self):
        self.flags('scheduler', band_shard_hosts=1)
        self.start()
        server = self.boot(self.flavors[2], 'named')
        source = server['OS-EXT-SRV-ATTR:host']
        # cmp2 is alone in shard 0 of level 2, cmp4 in shard 1.
        target = 'cmp4' if source == 'cmp2' else 'cmp2'
        seen = len(self.placement.faults.query_strings)
        self.action(server['id'], {'migrate': {'host': target}},
                    headers=ADMIN_2_56)
        moved = self.wait_settled(server['id'], 'VERIFY_RESIZE')
        self.assertEqual(target, moved['OS-EXT-SRV-ATTR:host'])
        shard = placement_names.shard_query(
            2, placement_names.shard_number(target) % 4)
        first = next(parse.parse_qs(query) for query in
                     self.placement.faults.query_strings[seen:]
                     if 'root_required' in parse.parse_qs(query))
        self.assertLessEqual(shard, set(
            first['root_required'][0].split(',')))
        self.confirm(server['id'])
        self.assert_consistent()


class TestMigrationsAPI(MoveTestBase):

    def test_os_migrations_and_server_migrations(self):
        self.start()
        server = self.boot(self.flavors[2], 'listed')
        self.resize(server['id'], self.flavors[4])
        headers = {'X-OpenStack-Nova-API-Version': '2.80'}
        listed = self.session.get(self.allinone.api_url + '/os-migrations',
                                  headers=headers).json()['migrations']
        self.assertEqual(1, len(listed))
        record = listed[0]
        migration = self.migrations(server['id'])[0]
        self.assertEqual({
            'instance_uuid': server['id'], 'migration_type': 'resize',
            'status': 'finished', 'uuid': migration.uuid,
            'source_compute': server['OS-EXT-SRV-ATTR:host'],
            'old_instance_type_id': migration.old_instance_type_id,
            'new_instance_type_id': migration.new_instance_type_id},
            {key: record[key] for key in (
                'instance_uuid', 'migration_type', 'status', 'uuid',
                'source_compute', 'old_instance_type_id',
                'new_instance_type_id')})
        self.assertNotEqual(record['old_instance_type_id'],
                            record['new_instance_type_id'])
        for key in ('dest_compute', 'dest_node', 'dest_host',
                    'source_node', 'project_id', 'user_id', 'links'):
            self.assertIn(key, record)
        # Old microversion: no uuid, no migration_type.
        old = self.session.get(
            self.allinone.api_url + '/os-migrations',
            headers={'X-OpenStack-Nova-API-Version': '2.1'}).json()[
                'migrations'][0]
        self.assertNotIn('uuid', old)
        self.assertNotIn('migration_type', old)
        filtered = self.session.get(
            self.allinone.api_url + '/os-migrations?status=confirmed',
            headers=headers).json()['migrations']
        self.assertEqual([], filtered)

        base = self.allinone.api_url + '/servers/%s/migrations' % (
            server['id'])
        in_progress = self.session.get(base, headers=headers).json()
        self.assertEqual([migration.uuid], [
            m['uuid'] for m in in_progress['migrations']])
        one = self.session.get(base + '/%d' % migration.id,
                               headers=headers)
        self.assertEqual(200, one.status_code, one.text)
        self.assertEqual(server['id'], one.json()['migration']['server_uuid'])
        self.assertEqual(404, self.session.get(base, headers={
            'X-OpenStack-Nova-API-Version': '2.22'}).status_code)
        self.confirm(server['id'])
        self.assertEqual([], self.session.get(base, headers=headers).json()[
            'migrations'])
        self.assertEqual(404, self.session.get(
            base + '/%d' % migration.id, headers=headers).status_code)


class TestMoveRecovery(MoveTestBase):
    """A compute or conductor dying in the middle of a move: the move is
    finished or rolled back so nothing is held by nobody, and the log says
    what was repaired."""

    def conductor(self):
        return next(svc.manager for svc in self.allinone.services
                    if isinstance(svc.manager,
                                  conductor_manager.ConductorManager))

    def test_destination_dies_mid_finish_then_restarts(self):
        # The conductor gives up on a compute that stopped answering
        # after 1 s (RabbitMQ's call monitor does this for a dead one).
        self.useFixture(fixtures.MockPatchObject(
            compute_rpcapi, 'BUILD_TIMEOUT', 1))
        self.start()
        server = self.boot(self.flavors[2], 'survivor')
        source = server['OS-EXT-SRV-ATTR:host']
        pair = self.gpus_of(server)
        dest = ({'cmp1', 'cmp2'} - {source}).pop()
        driver = self.computes[dest].driver
        real_spawn = driver.spawn
        frozen = threading.Event()
        self.addCleanup(frozen.set)

        def spawn_then_freeze(*args, **kwargs):
            real_spawn(*args, **kwargs)
            # The process is gone from here on: it never answers.
            frozen.wait(60)
            raise RuntimeError('nova-compute was killed')

        self.useFixture(fixtures.MockPatchObject(
            driver, 'spawn', side_effect=spawn_then_freeze))
        stays = self.resize(server['id'], self.flavors[4], status='ACTIVE')
        self.assertEqual((source, pair), (stays['OS-EXT-SRV-ATTR:host'],
                                          self.gpus_of(stays)))
        self.assertEqual(pair, self.domain_gpus(stays))
        self.assertEqual(pair, self.placement_gpus(stays))
        self.assertEqual('error', self.migrations(server['id'])[0].status)
        # Left on the dead destination: its guest and device claims.
        self.assertEqual(4, len(self.gpus_on(dest, server['id'])))

        with self.assertLogs('nova.compute.repair', 'WARNING') as logs:
            self.start_compute(dest, driver=driver)
        repairs = '\n'.join(logs.output)
        self.assertIn('guest of instance %s destroyed' % server['id'],
                      repairs)
        self.assertIn('freed: instance %s' % server['id'], repairs)
        self.assertEqual(frozenset(), self.gpus_on(dest, server['id']))
        self.assert_consistent()

    def test_conductor_dies_before_finish_another_rolls_back(self):
        self.start()
        server = self.boot(self.flavors[2], 'orphan')
        source = server['OS-EXT-SRV-ATTR:host']
        pair = self.gpus_of(server)
        conductor = self.conductor()
        # The conductor dies right after the source stopped the guest:
        # the destination is never asked to finish.
        self.useFixture(fixtures.MockPatchObject(
            conductor.moves.compute_api, 'finish_resize',
            return_value=None))
        self.action(server['id'], {'resize': {'flavorRef': self.flavors[4]}})
        deadline = time.monotonic() + boot.TIMEOUT
        while self.migrations(server['id'])[0].status != \
                'post-migrating' and time.monotonic() < deadline:
            time.sleep(0.05)
        migration = self.migrations(server['id'])[0]
        self.assertEqual('post-migrating', migration.status)
        self.assertEqual('RESIZE', self.api(
            'GET', '/servers/%s' % server['id'])['server']['status'])
        self.assertIsNone(self.computes[source].driver.host.lookup_domain(
            server['id']))
        # Nothing recovers a move whose lease is still fresh.
        self.assertEqual([], conductor.recover_orphaned_moves())
        db.instance_update(self.ctx, server['id'], {
            'build_heartbeat': timeutils.utcnow() - datetime.timedelta(
                seconds=3600)})

        with self.assertLogs('nova.conductor.manager', 'WARNING') as logs:
            threads = conductor.recover_orphaned_moves()
        self.assertIn('post-migrating', '\n'.join(logs.output))
        self.assertEqual(1, len(threads))
        threads[0].join(boot.TIMEOUT)
        back = self.wait_settled(server['id'], 'ACTIVE')
        self.assertEqual((source, pair), (back['OS-EXT-SRV-ATTR:host'],
                                          self.gpus_of(back)))
        self.assertEqual(pair, self.domain_gpus(back))
        self.assertEqual('error', self.migrations(server['id'])[0].status)
        self.assert_consistent()

    def test_source_restart_while_waiting_keeps_the_revert_possible(self):
        self.start()
        server = self.boot(self.flavors[2], 'patient')
        source = server['OS-EXT-SRV-ATTR:host']
        pair = self.gpus_of(server)
        self.resize(server['id'], self.flavors[4])

        self.start_compute(source, driver=self.computes[source].driver)
        self.assertEqual(pair, self.gpus_on(source, server['id']))
        self.assert_consistent()
        reverted = self.revert(server['id'])
        self.assertEqual((source, pair), (
            reverted['OS-EXT-SRV-ATTR:host'], self.gpus_of(reverted)))
        self.assert_consistent()


class TestResizeConfirmWindow(MoveTestBase):

    def test_expired_resize_is_confirmed_by_the_destination(self):
        self.start()
        server = self.boot(self.flavors[2], 'forgotten')
        resized = self.resize(server['id'], self.flavors[4])
        dest = self.computes[resized['OS-EXT-SRV-ATTR:host']]
        migration = self.migrations(server['id'])[0]
        # 0 (the default) never confirms.
        self.assertEqual([], dest.confirm_expired_resizes())
        self.flags(resize_confirm_window=3600)
        self.assertEqual([], dest.confirm_expired_resizes())
        with db.get_engine().begin() as conn:
            conn.execute(sqlalchemy.update(models.Migration).where(
                models.Migration.uuid == migration.uuid).values(
                    updated_at=timeutils.utcnow() - datetime.timedelta(
                        hours=2)))
        self.assertEqual([migration.uuid],
                         dest.confirm_expired_resizes())
        confirmed = self.wait_settled(server['id'], 'ACTIVE')
        self.assert_server_holds(confirmed, QUADS)
        self.assertEqual('confirmed',
                         self.migrations(server['id'])[0].status)
        self.assertEqual([], dest.confirm_expired_resizes())
        self.assert_consistent()
