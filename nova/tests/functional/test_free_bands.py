"""Free-device bands with real Placement: what computes publish and how
the scheduler uses it under a small candidate limit, and band shards
(nova.pci.placement_names, nova.scheduler.fullness, band_shards)."""

import concurrent.futures
import json
from urllib import parse

from oslo_utils import uuidutils

from nova.db import records
from nova.pci import placement_names
from nova.pci import request as pci_request
from nova.scheduler import band_shards
from nova.scheduler import fullness
from nova.scheduler import request_builder
from nova.tests.functional.lib import base
from nova.tests.functional import test_boot_gpu_groups as boot_test
from nova.tests.functional import test_pci_placement_tree as tree_test
from nova.virt.fake import host as fakehost

GPUS = base.GPUS


def gpu_request(count: int) -> request_builder.ResourceRequest:
    """What the scheduler asks Placement for a flavor ``h200:<count>``."""
    aliases = pci_request.get_alias_from_config(
        [json.dumps(fakehost.H200_ALIAS)])
    return request_builder.build_resource_request(
        records.FlavorSnapshot.of_flavor(
            {'vcpus': 4, 'memory_mb': 4096, 'root_gb': 0, 'extra_specs': {}}),
        pci_request.get_pci_requests_from_flavor(
            {pci_request.EXTRA_SPEC_ALIAS: 'h200:%d' % count}, aliases))


def bands_of(traits: set[str]) -> set[str]:
    return {trait for trait in traits if placement_names.is_band_trait(trait)}


class TestComputePublishesItsBand(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.compute = self.start_compute('cmp1')
        self.root = self.provider_view('cmp1')['cmp1']['uuid']

    def root_traits(self) -> set[str]:
        return set(self.placement_get(
            '/resource_providers/%s/traits' % self.root)['traits'])

    def claim(self, gpus: list[int]) -> str:
        consumer = uuidutils.generate_uuid()
        devices = self.compute.rt.pci_tracker.claim(
            consumer, 'req-1', [GPUS[gpu - 1] for gpu in gpus])
        self.compute.rt.report_claimed(devices)
        return consumer

    def test_band_follows_claims_and_frees(self):
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_8'},
                         bands_of(self.root_traits()))
        # Claims are published at once: 7 free, 3, 1, none.
        first = self.claim([1])
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_4'},
                         bands_of(self.root_traits()))
        quad = self.claim([5, 6, 7, 8])
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_2'},
                         bands_of(self.root_traits()))
        # The other pair of GPU 1's quad, then GPU 1's partner.
        pair = self.claim(list(base.pair_of(base.not_a_pair(1)[1])))
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_1'},
                         bands_of(self.root_traits()))
        last = self.claim([n for n in base.pair_of(1) if n != 1])
        self.assertEqual(set(), bands_of(self.root_traits()))
        # Frees are published by the next resource update: 4 free.
        self.compute.rt.pci_tracker.free_instance(quad)
        self.compute.update_available_resource()
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_4'},
                         bands_of(self.root_traits()))
        for consumer in (first, pair, last):
            self.compute.rt.pci_tracker.free_instance(consumer)
        self.compute.update_available_resource()
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_8'},
                         bands_of(self.root_traits()))

    def test_fitting_sizes_follow_claims_and_frees(self):
        def fits():
            return {trait for trait in self.root_traits()
                    if placement_names.is_fit_trait(trait)}
        self.assertEqual({'CUSTOM_PCI_FIT_PGPU_8'}, fits())
        first = self.claim([1])
        # GPU 1's partner, the other pair of its quad, the other quad.
        self.assertEqual({'CUSTOM_PCI_FIT_PGPU_%d' % n for n in (1, 2, 4)},
                         fits())
        self.claim([5, 6, 7, 8])
        self.assertEqual({'CUSTOM_PCI_FIT_PGPU_%d' % n for n in (1, 2)},
                         fits())
        self.compute.rt.pci_tracker.free_instance(first)
        self.compute.update_available_resource()
        self.assertEqual({'CUSTOM_PCI_FIT_PGPU_4'}, fits())

    def test_other_root_traits_are_kept(self):
        traits = self.placement_get('/resource_providers/%s/traits' %
                                    self.root)
        resp = self.placement.api.put('/traits/CUSTOM_RACK_7')
        self.assertIn(resp.status_code, (201, 204), resp.text)
        resp = self.placement.api.put(
            '/resource_providers/%s/traits' % self.root,
            json={'traits': traits['traits'] + ['CUSTOM_RACK_7'],
                  'resource_provider_generation':
                      traits['resource_provider_generation']})
        self.assertEqual(200, resp.status_code, resp.text)
        self.claim(list(base.pair_of(1)))
        self.assertIn('CUSTOM_RACK_7', self.root_traits())
        self.assertIn('CUSTOM_PCI_FREE_PGPU_4', self.root_traits())


class TestSchedulerAsksTheFullestBand(boot_test.BootTestBase):
    """With ``max_placement_results=1`` Placement returns one candidate;
    the band still brings the fullest host."""

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.flags('scheduler', max_placement_results=1)
        # fill_quad_b's consumer is no instance: the allocation audit, whose
        # first run races the test, would free it.
        self.flags(allocation_audit_interval=0)
        self.start_services(hosts=('cmp1', 'cmp2', 'cmp3'))
        self.flavors = self.gpu_flavors()

    def fill_quad_b(self, host: str) -> None:
        """GPUs 5-8 of ``host`` held in Placement and by its compute."""
        view = self.provider_view(host)
        consumer = uuidutils.generate_uuid()
        allocations = {view[host]['uuid']: {'resources': {'VCPU': 4}}}
        for gpu in (5, 6, 7, 8):
            allocations[view[tree_test.dev(host, gpu)]['uuid']] = {
                'resources': {'PGPU': 1}}
        self.reportclient.put_allocations(consumer, allocations,
                                          project_id='p', user_id='u')
        compute = self.computes[host]
        compute.rt.report_claimed(compute.rt.pci_tracker.claim(
            consumer, 'req-1', GPUS[4:]))

    def first_candidate_host(self, size: int) -> str:
        """Host of Placement's only candidate for ``h200:<size>`` with
        limit 1 and no band: what the scheduler would get without bands."""
        names = {self.provider_view(host)[host]['uuid']: host
                 for host in self.computes}
        query = [('resources', 'MEMORY_MB:4096,VCPU:4'),
                 ('resources1', 'PGPU:%d' % size), ('limit', '1')]
        body = self.reportclient.get_allocation_candidates(query)
        [candidate] = body['allocation_requests']
        roots = {body['provider_summaries'][uuid]['root_provider_uuid']
                 for uuid in candidate['allocations']}
        return names[roots.pop()]

    def test_small_requests_fill_the_fullest_host(self):
        # Half fill a host that Placement's first candidate is not on (the
        # computes start together, so which host comes first varies).
        first = self.first_candidate_host(1)
        fullest = max(host for host in self.computes if host != first)
        self.fill_quad_b(fullest)
        # Without the band, limit 1 would offer another host.
        self.assertNotEqual(fullest, self.first_candidate_host(1))
        hosts = [self.boot(self.flavors[size], 'vm%d' % i)[
            'OS-EXT-SRV-ATTR:host'] for i, size in enumerate((1, 2, 1))]
        self.assertEqual([fullest] * 3, hosts)
        # That host is full now; the next request goes elsewhere.
        other = self.boot(self.flavors[1], 'vm3')['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(fullest, other)


class TestDeletePublishesTheBand(boot_test.BootTestBase):
    """A delete republishes its host's band at once: with
    ``update_resources_interval = 0`` nothing else would."""

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.flags(update_resources_interval=0)
        self.start_services(hosts=('cmp1', 'cmp2'))
        self.flavors = self.gpu_flavors()

    def test_pair_freed_on_a_full_host_is_used_before_a_free_quad(self):
        # Packing fills one host (a quad and two pairs: no band left at
        # its last claim), then a quad goes to the other host.
        quad = self.boot(self.flavors[4], 'quad')
        full = quad['OS-EXT-SRV-ATTR:host']
        pairs = [self.boot(self.flavors[2], 'pair%d' % i) for i in (1, 2)]
        self.assertEqual({full}, {s['OS-EXT-SRV-ATTR:host'] for s in pairs})
        other = self.boot(self.flavors[4], 'other')['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(full, other)
        root = self.provider_view(full)[full]
        self.assertEqual(set(), bands_of(root['traits']))

        self.delete(pairs[0]['id'])
        # The full host has exactly a free pair again, and says so.
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_2'},
                         bands_of(self.provider_view(full)[full]['traits']))
        # So a pair goes there, not into the other host's free quad.
        server = self.boot(self.flavors[2], 'pair3')
        self.assertEqual(full, server['OS-EXT-SRV-ATTR:host'])


class TestSchedulerAsksOneShard(boot_test.BootTestBase):
    """With ``band_shard_hosts = 1`` the scheduler splits four hosts into
    four shards (cmp1 and cmp3 share shard 2, cmp2 is shard 0, cmp4 shard
    1, shard 3 is empty) and asks one, then wider ones."""

    HOSTS = ('cmp1', 'cmp2', 'cmp3', 'cmp4')

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.flags('scheduler', band_shard_hosts=1,
                   max_attempts=len(self.HOSTS))
        self.start_services(hosts=self.HOSTS)
        self.flavors = self.gpu_flavors()

    def candidate_hosts(self, level: int, index: int) -> set[str]:
        """Hosts of Placement's candidates for 8 GPUs in shard ``index``
        of ``level``, the query as the scheduler sends it."""
        request = fullness.in_shard(gpu_request(8),
                                    band_shards.Shard(level, index))
        body = self.reportclient.get_allocation_candidates(
            request.to_query_params(None))
        names = {self.provider_view(host)[host]['uuid']: host
                 for host in self.HOSTS}
        return {names[summary['root_provider_uuid']]
                for summary in body['provider_summaries'].values()}

    def test_a_shard_query_finds_exactly_its_hosts(self):
        self.reportclient.ensure_traits(placement_names.SHARD_TRAITS)
        self.assertEqual(
            [{'cmp2'}, {'cmp4'}, {'cmp1', 'cmp3'}, set()],
            [self.candidate_hosts(2, index) for index in range(4)])
        self.assertEqual(set(self.HOSTS), self.candidate_hosts(0, 0))
        self.assertEqual({'cmp1'}, self.candidate_hosts(3, 6))

    def test_a_fitting_host_asked_alone_answers_for_itself(self):
        fit = placement_names.fit_trait('PGPU', 8)
        hosts = [fullness.Host(uuid, name) for uuid, name in
                 self.reportclient.providers(required={fit})]
        self.assertEqual(sorted(self.HOSTS),
                         sorted(host.name for host in hosts))
        for host in hosts:
            request = fullness.on_host(gpu_request(8), host, fit)
            body = self.reportclient.get_allocation_candidates(
                request.to_query_params(None))
            self.assertEqual(1, len(body['allocation_requests']), host)
            self.assertEqual({host.uuid}, {
                summary['root_provider_uuid']
                for summary in body['provider_summaries'].values()})

    def test_concurrent_boards_fill_every_host_through_shards(self):
        seen = len(self.placement.faults.query_strings)

        def boot(number):
            return self.boot(self.flavors[8], 'vm%d' % number)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            servers = list(pool.map(boot, range(4)))
        self.assertEqual(sorted(self.HOSTS), sorted(
            s['OS-EXT-SRV-ATTR:host'] for s in servers))
        # The queries named shards, on the root and in the groups.
        queries = [parse.parse_qs(query) for query in
                   self.placement.faults.query_strings[seen:]]
        sharded = [q for q in queries if any(
            placement_names.is_shard_trait(trait)
            for trait in q.get('root_required', [''])[0].split(','))]
        self.assertTrue(sharded, queries)
        # Every host fits a board, so each decision asked fitting hosts
        # one at a time: in_tree in the flavor's and the devices' groups
        # (9), the host's finest shard on the root and in the group
        # provider's group.
        alone = [q for q in sharded if any(
            name.startswith('in_tree') for name in q)]
        self.assertTrue(alone, sharded)
        for query in alone:
            trees = {name: values[0] for name, values in query.items()
                     if name.startswith('in_tree')}
            self.assertEqual(9, len(trees))
            self.assertEqual(1, len(set(trees.values())))
        for query in sharded:
            shard = {trait for trait in query['root_required'][0].split(',')
                     if placement_names.is_shard_trait(trait)}
            groups = {name[len('required'):]: values[0]
                      for name, values in query.items()
                      if name.startswith('required') and name != 'required'}
            self.assertEqual(9, len(groups))   # 8 devices, their group
            for suffix, group in groups.items():
                if 'in_tree' + suffix not in query:
                    self.assertLessEqual(shard, set(group.split(',')))
        # No board is left: refused, nothing held.
        refused = self.boot(self.flavors[8], 'late', status='ERROR')
        self.assert_nothing_held(refused['id'])
