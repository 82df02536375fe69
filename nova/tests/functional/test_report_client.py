"""SchedulerReportClient against a real Placement (PlacementFixture)."""

import socket
import struct
import threading
from unittest import mock

import fixtures
from oslo_config import cfg
from oslo_utils import uuidutils

from nova import context as nova_context
from nova import test
from nova.compute import task_states
from nova.compute import vm_states
from nova.compute import provider_tree as ptree
from nova.conf import placement as placement_conf
from nova import exception
from nova.db import api as db
from nova.scheduler import frees
from nova.scheduler.client import report
from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import placement as placement_fixture

HOST = 'cmp1'
ROOT_INVENTORY = {
    'VCPU': {'total': 32, 'reserved': 0, 'min_unit': 1, 'max_unit': 32,
             'step_size': 1, 'allocation_ratio': 1.0},
    'MEMORY_MB': {'total': 65536, 'reserved': 512, 'min_unit': 1,
                  'max_unit': 65536, 'step_size': 1,
                  'allocation_ratio': 1.0},
}
PGPU_INVENTORY = {'PGPU': {'total': 1, 'reserved': 0, 'min_unit': 1,
                           'max_unit': 1, 'step_size': 1,
                           'allocation_ratio': 1.0}}
PAIR_TRAITS = {'CUSTOM_PCI_GROUP_NVLINK', 'CUSTOM_PCI_GROUP_NVLINK_2'}
DEVICE_TRAITS = {'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'}
# pair -> its two devices, member index = list position.
PAIRS = {'pair-a': ['0000:18:00.0', '0000:3A:00.0'],
         'pair-b': ['0000:2A:00.0', '0000:5D:00.0']}


def device_name(address: str) -> str:
    return '%s_%s' % (HOST, address)


def build_tree(grouped: bool = True,
               tree: ptree.ProviderTree | None = None) -> ptree.ProviderTree:
    """The compute node tree; flat (devices under the root) if not grouped.

    Passing an existing tree keeps the UUIDs of providers it has.
    """
    tree = tree.copy() if tree is not None else ptree.ProviderTree()
    if not tree.exists(HOST):
        tree.add(HOST)
    tree.update_inventory(HOST, ROOT_INVENTORY)
    tree.update_traits(HOST, {'OWNER_NOVA'})
    for pair, addresses in PAIRS.items():
        parent = HOST
        if grouped:
            parent = '%s_%s' % (HOST, pair)
            if not tree.exists(parent):
                tree.add(parent, parent=HOST)
            tree.update_traits(parent, PAIR_TRAITS)
        for index, address in enumerate(addresses):
            name = device_name(address)
            if not tree.exists(name):
                tree.add(name, parent=parent)
            elif tree.data(name).parent_uuid != tree.data(parent).uuid:
                tree.reparent(name, parent)
            tree.update_inventory(name, PGPU_INVENTORY)
            traits = set(DEVICE_TRAITS)
            if grouped:
                traits.add('CUSTOM_PCI_GROUP_NVLINK_2_M%d' % index)
            tree.update_traits(name, traits)
    return tree


def snapshot(tree: ptree.ProviderTree) -> dict:
    """Comparable view: name -> (parent name, inventory, traits)."""
    names = {p.uuid: p.name for p in tree.providers()}
    return {p.name: (names.get(p.parent_uuid), p.inventory, p.traits)
            for p in tree.providers()}


class _ResetFirstConnection(fixtures.Fixture):
    """A TCP proxy in front of ``target``. While ``resets`` is 0, the
    next connection is reset once a request arrived on it (as a server
    closing an idle keep-alive connection just as the client reuses it)
    and ``resets`` becomes 1; every other connection passes through."""

    def __init__(self, target: str) -> None:
        super().__init__()
        host, port = target.split('//', 1)[1].rsplit(':', 1)
        self.target = (host, int(port))
        self.resets = 0

    def _setUp(self) -> None:
        self.listener = socket.create_server(('127.0.0.1', 0))
        self.url = 'http://127.0.0.1:%d' % self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()
        self.addCleanup(self.listener.close)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.resets == 0:
                self.resets += 1
                conn.recv(65536)
                # Linger 0: close sends a TCP reset.
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                struct.pack('ii', 1, 0))
                conn.close()
                continue
            upstream = socket.create_connection(self.target)
            for src, dst in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(src, dst),
                                 daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ReportClientTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = self.useFixture(placement_fixture.PlacementFixture())
        self.conf = cfg.ConfigOpts()
        placement_conf.register_opts(self.conf)
        self.placement.configure_nova(self.conf)
        self.conf([], default_config_files=[])
        self.client = report.SchedulerReportClient(self.conf)

    def client_at(self, url: str) -> report.SchedulerReportClient:
        """A report client configured as ``self.client`` but sending to
        ``url``."""
        conf = cfg.ConfigOpts()
        placement_conf.register_opts(conf)
        self.placement.configure_nova(conf)
        conf.set_override('endpoint', url, group='placement')
        conf([], default_config_files=[])
        return report.SchedulerReportClient(conf)

    def record_calls(self, client=None) -> list[tuple[str, str]]:
        """Record (method, path) of every request ``client`` sends."""
        client = client or self.client
        calls = []
        real = client._call

        def recording(method, path, **kwargs):
            calls.append((method, path))
            return real(method, path, **kwargs)

        patcher = mock.patch.object(client, '_call', recording)
        patcher.start()
        self.addCleanup(patcher.stop)
        return calls

    def rp_generation(self, uuid: str) -> int:
        return self.placement.api.get(
            '/resource_providers/%s' % uuid).json()['generation']

    def all_generations(self) -> dict[str, int]:
        rps = self.placement.api.get(
            '/resource_providers').json()['resource_providers']
        return {rp['uuid']: rp['generation'] for rp in rps}

    def allocate(self, consumer: str, tree: ptree.ProviderTree,
                 device_address: str) -> None:
        self.client.put_allocations(
            consumer,
            {tree.data(HOST).uuid: {'resources': {'VCPU': 2}},
             tree.data(device_name(device_address)).uuid:
                 {'resources': {'PGPU': 1}}},
            project_id='p1', user_id='u1')

    # Tree sync -------------------------------------------------------------

    def test_nested_tree_reads_back_exactly(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)

        fresh = report.SchedulerReportClient(self.conf)
        read = fresh.get_provider_tree(HOST)
        self.assertEqual(snapshot(desired), snapshot(read))
        self.assertEqual({p.name: p.uuid for p in desired.providers()},
                         {p.name: p.uuid for p in read.providers()})
        # The desired tree now carries Placement's generations.
        self.assertEqual(
            {p.uuid: p.generation for p in read.providers()},
            {p.uuid: p.generation for p in desired.providers()})
        self.assertEqual(7, len(self.placement.api.get(
            '/resource_providers', params={'in_tree': read.data(HOST).uuid}
        ).json()['resource_providers']))
        # Lookup by UUID reads the same tree.
        by_uuid = fresh.get_provider_tree(read.data(HOST).uuid)
        self.assertEqual(snapshot(read), snapshot(by_uuid))

    def test_new_client_creates_only_the_traits_no_one_made(self):
        calls = self.record_calls()
        self.client.update_from_provider_tree(build_tree())
        # Every name of the tree looked up once, the missing ones made.
        self.assertEqual(1, calls.count(('GET', '/traits')), calls)
        self.assertEqual(
            sorted(('PUT', '/traits/%s' % name) for name in
                   PAIR_TRAITS | {'CUSTOM_PCI_GROUP_NVLINK_2_M0',
                                  'CUSTOM_PCI_GROUP_NVLINK_2_M1'}),
            sorted(call for call in calls
                   if call[1].startswith('/traits/')))
        # A second compute starting: its pair traits exist already.
        fresh = report.SchedulerReportClient(self.conf)
        calls = self.record_calls(fresh)
        fresh.ensure_traits(PAIR_TRAITS | {'CUSTOM_RACK_9', 'OWNER_NOVA'})
        self.assertEqual(
            [('GET', '/traits'), ('PUT', '/traits/CUSTOM_RACK_9')], calls)
        self.assertIn('CUSTOM_RACK_9', self.placement.api.get(
            '/traits', params={'name': 'startswith:CUSTOM_RACK'}).json()[
            'traits'])
        # Known to this client from now on: nothing is sent again.
        fresh.ensure_traits(PAIR_TRAITS | {'CUSTOM_RACK_9'})
        self.assertEqual(2, len(calls))

    def test_unknown_root_reads_as_none(self):
        self.assertIsNone(self.client.get_provider_tree('nohost'))
        self.assertIsNone(self.client.get_provider_tree(
            uuidutils.generate_uuid()))

    def test_second_sync_sends_no_writes(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        before = self.all_generations()

        calls = self.record_calls()
        self.client.update_from_provider_tree(build_tree(tree=desired))
        self.assertEqual([], calls)

        # A client without a remembered tree reads, but writes nothing.
        fresh = report.SchedulerReportClient(self.conf)
        fresh_calls = self.record_calls(fresh)
        fresh.update_from_provider_tree(build_tree(tree=desired))
        self.assertNotEqual([], fresh_calls)
        self.assertEqual({'GET'}, {method for method, _ in fresh_calls})
        self.assertEqual(before, self.all_generations())

    def test_operator_reserved_survives_when_not_sent(self):
        desired = build_tree()
        device = desired.data(device_name('0000:18:00.0'))
        desired.update_inventory(device.uuid, {'PGPU': {'total': 1,
                                                        'max_unit': 1}})
        self.client.update_from_provider_tree(desired)
        resp = self.placement.api.put(
            '/resource_providers/%s/inventories/PGPU' % device.uuid,
            json={'total': 1, 'max_unit': 1, 'reserved': 1,
                  'resource_provider_generation':
                      self.rp_generation(device.uuid)})
        self.assertEqual(200, resp.status_code, resp.text)

        fresh = report.SchedulerReportClient(self.conf)
        fresh.update_from_provider_tree(desired)
        self.assertEqual(1, fresh.get_inventories(device.uuid)
                         ['PGPU']['reserved'])

    def test_reparent_keeps_uuid_and_allocation(self):
        flat = build_tree(grouped=False)
        self.client.update_from_provider_tree(flat)
        consumer = uuidutils.generate_uuid()
        self.allocate(consumer, flat, '0000:3A:00.0')
        device = flat.data(device_name('0000:3A:00.0'))

        grouped = build_tree(tree=flat)
        self.client.update_from_provider_tree(grouped)

        read = report.SchedulerReportClient(self.conf).get_provider_tree(HOST)
        self.assertEqual(snapshot(grouped), snapshot(read))
        moved = read.data(device_name('0000:3A:00.0'))
        self.assertEqual(device.uuid, moved.uuid)
        self.assertEqual(read.data('%s_pair-a' % HOST).uuid,
                         moved.parent_uuid)
        allocs = self.client.get_allocations_for_consumer(consumer)
        self.assertEqual({'PGPU': 1},
                         allocs['allocations'][device.uuid]['resources'])
        self.assertEqual({'PGPU': 1}, self.client.get_usages(device.uuid))

        tree_allocs = self.client.get_allocations_for_tree(
            read.data(HOST).uuid)
        self.assertEqual([consumer], list(tree_allocs))
        self.assertEqual('p1', tree_allocs[consumer]['project_id'])
        self.assertEqual('u1', tree_allocs[consumer]['user_id'])
        self.assertEqual(1, tree_allocs[consumer]['consumer_generation'])
        self.assertEqual(
            {read.data(HOST).uuid: {'resources': {'VCPU': 2}},
             device.uuid: {'resources': {'PGPU': 1}}},
            {rp: {'resources': a['resources']}
             for rp, a in tree_allocs[consumer]['allocations'].items()})

    def test_rename_and_move_in_one_sync_are_remembered(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        pair = desired.data('%s_pair-a' % HOST)
        device = desired.data(device_name('0000:18:00.0'))

        changed = desired.copy()
        changed.rename(pair.uuid, '%s_nvlink-a' % HOST)
        changed.rename(device.uuid, '%s_gpu1' % HOST)
        changed.reparent(device.uuid, '%s_pair-b' % HOST)
        self.client.update_from_provider_tree(changed)

        read = report.SchedulerReportClient(self.conf).get_provider_tree(HOST)
        self.assertEqual(snapshot(changed), snapshot(read))
        self.assertEqual(pair.uuid, read.data('%s_nvlink-a' % HOST).uuid)
        self.assertEqual(read.data('%s_pair-b' % HOST).uuid,
                         read.data('%s_gpu1' % HOST).parent_uuid)
        # The client remembered the renamed tree: syncing it again costs
        # one listing and no write.
        calls = self.record_calls()
        self.client.update_from_provider_tree(changed.copy())
        self.assertEqual([], calls)
        self.client.get_provider_tree(read.data(HOST).uuid)
        self.assertEqual([('GET', '/resource_providers')], calls)

    def test_remove_providers(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        gone = [p.uuid for p in desired.subtree('%s_pair-b' % HOST)]

        smaller = desired.copy()
        smaller.remove('%s_pair-b' % HOST)
        self.client.update_from_provider_tree(smaller)

        read = report.SchedulerReportClient(self.conf).get_provider_tree(HOST)
        self.assertEqual(snapshot(smaller), snapshot(read))
        for uuid in gone:
            self.assertEqual(404, self.placement.api.get(
                '/resource_providers/%s' % uuid).status_code)

    def test_remove_allocated_device_is_refused(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        self.allocate(uuidutils.generate_uuid(), desired, '0000:2A:00.0')

        smaller = desired.copy()
        smaller.remove(device_name('0000:2A:00.0'))
        error = self.assertRaises(exception.InventoryInUse,
                                  self.client.update_from_provider_tree,
                                  smaller)
        self.assertIn(desired.data(device_name('0000:2A:00.0')).uuid,
                      str(error))
        # The failed sync forgot its remembered tree: a retry re-reads.
        calls = self.record_calls()
        self.assertRaises(exception.InventoryInUse,
                          self.client.update_from_provider_tree, smaller)
        self.assertIn(('GET', '/resource_providers'), calls)

    def test_generation_conflict_is_retried(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        device = desired.data(device_name('0000:18:00.0'))
        # Someone else changes the provider: its generation moves on.
        resp = self.placement.api.put(
            '/resource_providers/%s/traits' % device.uuid,
            json={'traits': ['HW_CPU_X86_AVX'],
                  'resource_provider_generation': device.generation})
        self.assertEqual(200, resp.status_code, resp.text)

        changed = desired.copy()
        changed.update_traits(device.uuid, device.traits | {'CUSTOM_NEW'})
        calls = self.record_calls()
        self.client.update_from_provider_tree(changed)

        self.assertEqual(device.traits | {'CUSTOM_NEW'},
                         self.client.get_traits(device.uuid))
        trait_puts = [c for c in calls
                      if c == ('PUT', '/resource_providers/%s/traits' %
                               device.uuid)]
        self.assertEqual(2, len(trait_puts))
        self.assertEqual(self.rp_generation(device.uuid),
                         changed.data(device.uuid).generation)

    def test_generation_conflict_gives_up(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        device = desired.data(device_name('0000:18:00.0'))
        stale = device.generation
        self.placement.api.put(
            '/resource_providers/%s/traits' % device.uuid,
            json={'traits': [], 'resource_provider_generation': stale})

        changed = desired.copy()
        changed.update_traits(device.uuid, {'OWNER_NOVA'})
        calls = self.record_calls()
        with mock.patch.object(self.client, '_generation',
                               return_value=stale):
            error = self.assertRaises(
                exception.ResourceProviderUpdateConflict,
                self.client.update_from_provider_tree, changed)
        self.assertIn(device.uuid, str(error))
        self.assertEqual(report.MAX_GENERATION_TRIES, calls.count(
            ('PUT', '/resource_providers/%s/traits' % device.uuid)))

    def test_set_traits_changes_some_traits_of_a_provider(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        root = desired.data(HOST).uuid

        written = self.client.set_traits(
            root, lambda traits: traits | {'CUSTOM_BAND_NEW'})

        self.assertEqual({'OWNER_NOVA', 'CUSTOM_BAND_NEW'}, written)
        self.assertEqual(written, self.client.get_traits(root))

    def test_set_traits_reads_again_after_a_generation_conflict(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        root = desired.data(HOST)
        seen = []

        def update(traits):
            if not seen:
                # Someone else writes between our read and our write.
                resp = self.placement.api.put(
                    '/resource_providers/%s/traits' % root.uuid,
                    json={'traits': sorted(traits | {'HW_CPU_X86_AVX'}),
                          'resource_provider_generation':
                              self.rp_generation(root.uuid)})
                self.assertEqual(200, resp.status_code, resp.text)
            seen.append(traits)
            return traits | {'CUSTOM_BAND_NEW'}

        self.client.set_traits(root.uuid, update)

        self.assertEqual([{'OWNER_NOVA'}, {'OWNER_NOVA', 'HW_CPU_X86_AVX'}],
                         seen)
        self.assertEqual({'OWNER_NOVA', 'HW_CPU_X86_AVX', 'CUSTOM_BAND_NEW'},
                         self.client.get_traits(root.uuid))

    def test_set_traits_gives_up_on_lasting_conflicts(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        root = desired.data(HOST).uuid

        def update(traits):
            # Someone else changes the traits each time (an unchanged set
            # would keep the generation).
            self.placement.api.put(
                '/resource_providers/%s/traits' % root,
                json={'traits': sorted(traits ^ {'HW_CPU_X86_AVX'}),
                      'resource_provider_generation':
                          self.rp_generation(root)})
            return traits | {'CUSTOM_BAND_NEW'}

        calls = self.record_calls()
        error = self.assertRaises(exception.ResourceProviderUpdateConflict,
                                  self.client.set_traits, root, update)
        self.assertIn(root, str(error))
        self.assertEqual(report.MAX_GENERATION_TRIES, calls.count(
            ('PUT', '/resource_providers/%s/traits' % root)))
        self.assertEqual({'OWNER_NOVA'}, self.client.get_traits(root))

    # Errors ----------------------------------------------------------------

    def test_unreachable_placement_names_the_url(self):
        with socket.socket() as sock:
            sock.bind(('127.0.0.1', 0))
            port = sock.getsockname()[1]
        url = 'http://127.0.0.1:%d' % port
        client = self.client_at(url)
        error = self.assertRaises(exception.PlacementAPIConnectFailure,
                                  client.get_provider_tree, HOST)
        self.assertIn(url + '/resource_providers', str(error))

    def test_read_on_a_connection_the_server_reset_is_sent_again(self):
        proxy = self.useFixture(_ResetFirstConnection(self.placement.url))
        client = self.client_at(proxy.url)
        self.assertEqual(set(), client.get_trait_names('CUSTOM_NONE_'))
        self.assertEqual(1, proxy.resets)
        # Writes are not sent twice: their effect may have happened.
        proxy.resets = 0
        client = self.client_at(proxy.url)
        self.assertRaises(exception.PlacementAPIConnectFailure,
                          client._call, 'PUT', '/traits/CUSTOM_ONCE')
        self.assertEqual(1, proxy.resets)

    def test_http_error_names_method_url_status_and_detail(self):
        missing = uuidutils.generate_uuid()
        error = self.assertRaises(exception.PlacementAPIError,
                                  self.client.get_inventories, missing)
        message = str(error)
        self.assertIn('GET %s/resource_providers/%s/inventories' %
                      (self.placement.url, missing), message)
        self.assertIn('HTTP 404', message)
        self.assertIn('No resource provider with uuid %s' % missing,
                      message)
        self.assertEqual(404, error.kwargs['status'])

    # Allocation candidates and claims --------------------------------------

    def pair_query(self) -> list[tuple[str, str]]:
        return [('resources_g0', 'PGPU:1'),
                ('required_g0', 'CUSTOM_PCI_GROUP_NVLINK_2_M0'),
                ('resources_g1', 'PGPU:1'),
                ('required_g1', 'CUSTOM_PCI_GROUP_NVLINK_2_M1'),
                ('required_gp', 'CUSTOM_PCI_GROUP_NVLINK_2'),
                ('same_subtree', '_g0,_g1,_gp'),
                ('group_policy', 'none')]

    def test_same_subtree_query_returns_one_candidate_per_pair(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)

        found = self.client.get_allocation_candidates(self.pair_query())
        self.assertEqual(2, len(found['allocation_requests']))
        pairs = []
        for request in found['allocation_requests']:
            parents = {desired.data(rp).parent_uuid
                       for rp in request['allocations']}
            self.assertEqual(1, len(parents))
            pairs.append(desired.data(parents.pop()).name)
        self.assertEqual(['cmp1_pair-a', 'cmp1_pair-b'], sorted(pairs))

        # Claim one pair: only the other one is left, and a second claim
        # of the same devices is refused without raising.
        first, second = found['allocation_requests']
        consumer = uuidutils.generate_uuid()
        self.assertTrue(self.client.claim_resources(consumer, first,
                                                    'p1', 'u1'))
        self.assertEqual(1, len(self.client.get_allocation_candidates(
            self.pair_query())['allocation_requests']))
        self.assertFalse(self.client.claim_resources(
            uuidutils.generate_uuid(), first, 'p1', 'u1'))
        allocs = self.client.get_allocations_for_consumer(consumer)
        self.assertEqual('INSTANCE', allocs['consumer_type'])
        self.assertEqual(set(first['allocations']),
                         set(allocs['allocations']))

        # Free it (twice: deleting is idempotent); both pairs are back.
        self.client.delete_allocation_for_instance(consumer)
        self.client.delete_allocation_for_instance(consumer)
        self.assertEqual({}, self.client.get_allocations_for_consumer(
            consumer)['allocations'])
        self.assertEqual(2, len(self.client.get_allocation_candidates(
            self.pair_query())['allocation_requests']))

    def test_claim_with_stale_consumer_generation_is_refused(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        consumer = uuidutils.generate_uuid()
        self.allocate(consumer, desired, '0000:18:00.0')
        request = {'allocations': {desired.data(HOST).uuid:
                                   {'resources': {'VCPU': 1}}}}
        self.assertFalse(self.client.claim_resources(
            consumer, request, 'p1', 'u1', consumer_generation=None))
        self.assertRaises(exception.PlacementAPIError,
                          self.client.put_allocations, consumer,
                          request['allocations'], 'p1', 'u1')
        self.assertTrue(self.client.claim_resources(
            consumer, request, 'p1', 'u1', consumer_generation=1))

    def test_guarded_delete_spares_an_allocation_changed_since_read(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        consumer = uuidutils.generate_uuid()
        self.allocate(consumer, desired, '0000:18:00.0')
        stale = self.client.get_allocations_for_consumer(consumer)
        # A claim after the read (an unshelve) moves the generation on.
        self.allocate_again(consumer, desired, stale)
        self.assertFalse(self.client.delete_allocation_at_generation(
            consumer, stale))
        self.assertEqual(2, len(self.client.get_allocations_for_consumer(
            consumer)['allocations']))
        fresh = self.client.get_allocations_for_consumer(consumer)
        self.assertTrue(self.client.delete_allocation_at_generation(
            consumer, fresh))
        self.assertEqual({}, self.client.get_allocations_for_consumer(
            consumer)['allocations'])

    def allocate_again(self, consumer: str, tree: ptree.ProviderTree,
                       current: dict) -> None:
        self.client.put_allocations(
            consumer,
            {tree.data(HOST).uuid: {'resources': {'VCPU': 1}},
             tree.data(device_name('0000:2A:00.0')).uuid:
                 {'resources': {'PGPU': 1}}},
            project_id='p1', user_id='u1',
            consumer_generation=current['consumer_generation'])

    def test_pending_free_never_deletes_a_claim_made_during_its_retry(self):
        # The retry reads the allocation, finds the instance offloaded,
        # and an unshelve claims before the delete: the claim survives,
        # and the next retry, seeing the unshelve, drops the free.
        self.useFixture(db_fixture.Database())
        ctx = nova_context.get_admin_context()
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        consumer = uuidutils.generate_uuid()
        db.instance_create(ctx, {'uuid': consumer,
                                 'vm_state': vm_states.SHELVED_OFFLOADED})
        self.allocate(consumer, desired, '0000:18:00.0')
        db.pending_free_add(ctx, consumer, HOST)
        released = frees._released

        def unshelved_after_check(context, uuid):
            answer = released(context, uuid)
            db.instance_update(context, uuid,
                               {'task_state': task_states.UNSHELVING})
            self.allocate_again(
                uuid, desired, self.client.get_allocations_for_consumer(uuid))
            return answer

        with mock.patch.object(frees, '_released', unshelved_after_check):
            self.assertEqual([], frees.retry_pending_frees(
                ctx, self.client, HOST))
        self.assertEqual([consumer], [
            row['consumer_uuid'] for row in db.pending_free_get_all(ctx)])
        self.assertEqual([], frees.retry_pending_frees(ctx, self.client,
                                                       HOST))
        self.assertEqual([], db.pending_free_get_all(ctx))
        self.assertEqual(2, len(self.client.get_allocations_for_consumer(
            consumer)['allocations']))

    def test_move_allocations_between_instance_and_migration(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        instance = uuidutils.generate_uuid()
        migration = uuidutils.generate_uuid()
        self.allocate(instance, desired, '0000:18:00.0')
        before = self.client.get_allocations_for_consumer(instance)

        self.assertTrue(self.client.move_allocations(
            instance, migration, report.CONSUMER_TYPE_MIGRATION))
        self.assertEqual({}, self.client.get_allocations_for_consumer(
            instance)['allocations'])
        moved = self.client.get_allocations_for_consumer(migration)
        self.assertEqual('MIGRATION', moved['consumer_type'])
        self.assertEqual(
            {rp: a['resources'] for rp, a in before['allocations'].items()},
            {rp: a['resources'] for rp, a in moved['allocations'].items()})
        self.assertEqual(('p1', 'u1'), (moved['project_id'],
                                        moved['user_id']))
        # Nothing left to move: a second move is a no-op.
        self.assertFalse(self.client.move_allocations(
            instance, migration, report.CONSUMER_TYPE_MIGRATION))

        # Back to the instance, which meanwhile holds another device: the
        # two are merged.
        other = desired.data(device_name('0000:2A:00.0')).uuid
        self.assertTrue(self.client.claim_resources(
            instance, {'allocations': {other: {'resources': {'PGPU': 1}}}},
            'p1', 'u1'))
        self.assertTrue(self.client.move_allocations(migration, instance))
        back = self.client.get_allocations_for_consumer(instance)
        self.assertEqual('INSTANCE', back['consumer_type'])
        self.assertEqual(set(before['allocations']) | {other},
                         set(back['allocations']))
        self.assertEqual({}, self.client.get_allocations_for_consumer(
            migration)['allocations'])

    def claim_one_gpu(self, consumer):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        device = desired.data(device_name('0000:18:00.0')).uuid
        request = {'allocations': {device: {'resources': {'PGPU': 1}}}}
        return self.client.claim_resources(consumer, request, 'p1', 'u1'), \
            device

    def test_claim_retries_server_errors_and_unreachable(self):
        self.useFixture(fixtures.MockPatchObject(report, 'TRANSIENT_DELAY',
                                                 0.01))
        self.placement.faults.fail('PUT', '/allocations/', count=2,
                                   status=503)
        consumer = uuidutils.generate_uuid()
        claimed, device = self.claim_one_gpu(consumer)
        self.assertTrue(claimed)
        self.assertEqual(2, self.placement.faults.injected)
        self.assertEqual({device: {'PGPU': 1}}, {
            rp: a['resources'] for rp, a in
            self.client.get_allocations_for_consumer(consumer)
            ['allocations'].items()})

    def test_claim_whose_answer_was_lost_counts_as_claimed(self):
        self.useFixture(fixtures.MockPatchObject(report, 'TRANSIENT_DELAY',
                                                 0.01))
        # Placement writes the allocation, the client sees a 502; the
        # retry is refused (the consumer exists now) yet it is ours.
        self.placement.faults.fail('PUT', '/allocations/', status=502,
                                   lost=True)
        consumer = uuidutils.generate_uuid()
        claimed, device = self.claim_one_gpu(consumer)
        self.assertTrue(claimed)
        self.assertEqual({'PGPU': 1}, self.client.get_usages(device))

    def test_claim_gives_up_on_a_lasting_outage(self):
        self.useFixture(fixtures.MockPatchObject(report, 'TRANSIENT_DELAY',
                                                 0.01))
        self.placement.faults.fail('PUT', '/allocations/',
                                   count=report.TRANSIENT_ATTEMPTS)
        error = self.assertRaises(exception.PlacementAPIError,
                                  self.claim_one_gpu,
                                  uuidutils.generate_uuid())
        self.assertIn('HTTP 500', str(error))
        self.assertEqual(report.TRANSIENT_ATTEMPTS,
                         self.placement.faults.injected)

    def test_delete_allocation_retries_server_errors(self):
        self.useFixture(fixtures.MockPatchObject(report, 'TRANSIENT_DELAY',
                                                 0.01))
        consumer = uuidutils.generate_uuid()
        _claimed, device = self.claim_one_gpu(consumer)
        self.placement.faults.fail('DELETE', '/allocations/', count=2)
        self.client.delete_allocation_for_instance(consumer)
        self.assertEqual({'PGPU': 0}, self.client.get_usages(device))

    # Simple reads ----------------------------------------------------------

    def test_lookups(self):
        desired = build_tree()
        self.client.update_from_provider_tree(desired)
        device = desired.data(device_name('0000:5D:00.0'))

        self.assertIsNone(self.client.get_provider_by_name('nope'))
        self.assertEqual(device.uuid, self.client.get_provider_by_name(
            device.name)['uuid'])
        self.assertEqual(desired.data(HOST).uuid,
                         self.client.get_provider_by_name(HOST)['uuid'])
        self.assertEqual(device.traits, self.client.get_traits(device.uuid))
        self.assertEqual(PGPU_INVENTORY,
                         self.client.get_inventories(device.uuid))
        self.assertEqual({'PGPU': 0}, self.client.get_usages(device.uuid))


class PlacementFixtureIsolationTestCase(test.TestCase):
    """Consecutive fixtures in one process each see an empty Placement."""

    def test_each_fixture_is_fresh(self):
        for _round in range(2):
            fixture = placement_fixture.PlacementFixture()
            fixture.setUp()
            try:
                api = fixture.api
                self.assertEqual([], api.get('/resource_providers').json()
                                 ['resource_providers'])
                resp = api.post('/resource_providers', json={'name': HOST})
                self.assertEqual(200, resp.status_code, resp.text)
                self.assertIn('COMPUTE_MANAGED_PCI_DEVICE', api.get(
                    '/traits').json()['traits'])
            finally:
                fixture.cleanUp()
