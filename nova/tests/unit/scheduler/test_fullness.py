"""Band-by-band candidate queries (nova.scheduler.fullness)."""

import json

from nova.db import records
from nova.pci import placement_names as names
from nova.pci import request as pci_request
from nova.scheduler import band_shards
from nova.scheduler import fullness
from nova.scheduler import request_builder
from nova import test
from nova.virt.fake import host as fakehost

BANDS = {'CUSTOM_PCI_FREE_PGPU_%d' % b for b in (1, 2, 4, 8)}
FLAVOR = records.FlavorSnapshot.of_flavor(
    {'vcpus': 4, 'memory_mb': 4096, 'root_gb': 0, 'extra_specs': {}})


def gpu_request(count: int) -> request_builder.ResourceRequest:
    aliases = pci_request.get_alias_from_config(
        [json.dumps(fakehost.H200_ALIAS)])
    return request_builder.build_resource_request(
        FLAVOR, pci_request.get_pci_requests_from_flavor(
            {pci_request.EXTRA_SPEC_ALIAS: 'h200:%d' % count}, aliases))


class TestAllocationCandidates(test.TestCase):

    def ask_with(self, answers: dict):
        """An ``ask`` answering one candidate for the bands in
        ``answers`` (band trait or None for no band), none otherwise;
        records the band of each query."""
        asked = []

        def ask(params):
            bands = [value for name, value in params
                     if name == 'root_required' and value in BANDS]
            band = bands[0] if bands else None
            asked.append(band)
            return {'allocation_requests': [answers[band]]
                    if band in answers else [], 'provider_summaries': {}}
        return ask, asked

    def test_fullest_band_with_a_candidate_wins(self):
        ask, asked = self.ask_with({'CUSTOM_PCI_FREE_PGPU_4': 'c4',
                                    None: 'any'})
        body = fullness.allocation_candidates(
            gpu_request(2), 1000, ask, lambda prefix: BANDS)
        self.assertEqual(['c4'], body['allocation_requests'])
        # Band 1 cannot hold 2 GPUs: not asked.
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_2',
                          'CUSTOM_PCI_FREE_PGPU_4'], asked)

    def test_no_band_last(self):
        ask, asked = self.ask_with({None: 'any'})
        known = []
        body = fullness.allocation_candidates(
            gpu_request(8), 1000, ask,
            lambda prefix: known.append(prefix) or BANDS)
        self.assertEqual(['any'], body['allocation_requests'])
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_8', None], asked)
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_', 'CUSTOM_PCI_FIT_PGPU_'],
                         known)

    def test_request_without_devices_is_one_query(self):
        ask, asked = self.ask_with({None: 'any'})
        plain = request_builder.build_resource_request(FLAVOR, [])
        self.assertIsNone(fullness.banded_resource(plain))
        fullness.allocation_candidates(plain, 1000, ask, lambda p: BANDS)
        self.assertEqual([None], asked)
        self.assertEqual(('PGPU', 4),
                         fullness.banded_resource(gpu_request(4)))

    def test_band_only_on_unusable_hosts_is_skipped(self):
        ask, asked = self.ask_with({'CUSTOM_PCI_FREE_PGPU_1': 'tried',
                                    'CUSTOM_PCI_FREE_PGPU_4': 'c4'})
        body = fullness.allocation_candidates(
            gpu_request(1), 1000, ask, lambda prefix: BANDS,
            lambda body: body['allocation_requests'] not in ([], ['tried']))
        self.assertEqual(['c4'], body['allocation_requests'])
        self.assertEqual(['CUSTOM_PCI_FREE_PGPU_1', 'CUSTOM_PCI_FREE_PGPU_2',
                          'CUSTOM_PCI_FREE_PGPU_4'], asked)


class TestShards(test.TestCase):
    """Bands asked in one shard of the fleet, then wider ones."""

    def setUp(self):
        super().setUp()
        # 64 hosts: name -> (root traits, shard traits); a host's root
        # provider UUID is its name here.
        self.hosts = {'hgx-%d' % n: ({'CUSTOM_PCI_FREE_PGPU_8'},
                                     names.shard_traits('hgx-%d' % n))
                      for n in range(1, 65)}
        self.queries = []
        # Fitting sizes some host has published.
        self.fits = set()
        self.listed = []

    def ask(self, params):
        """Placement on ``self.hosts``: every host whose root has the
        root traits and whose devices have each group's traits answers
        one candidate; with ``in_tree``, that host only."""
        roots = set().union(*[set(value.split(',')) for name, value in params
                              if name == 'root_required'])
        groups = [set(value.split(',')) for name, value in params
                  if name.startswith('required') and name != 'required']
        trees = {value for name, value in params
                 if name.startswith('in_tree')}
        self.queries.append((roots, groups))
        self.trees.append(trees)
        matching = sorted(
            host for host, (root, shard) in self.hosts.items()
            if roots <= root | shard and trees <= {host} and all(
                group - names.SHARD_TRAITS == group - shard
                for group in groups))
        return {'allocation_requests': [{'host': h} for h in matching],
                'provider_summaries': {}}

    trees: list

    def candidates(self, shards, size=8, usable=None, hosts_with=None,
                   by_host=True):
        self.trees = []
        extra = {} if usable is None else {'usable': usable}
        if hosts_with is not None:
            extra['hosts_with'] = hosts_with
        body = fullness.allocation_candidates(
            gpu_request(size), 1000, self.ask,
            lambda prefix: {'CUSTOM_PCI_FREE_PGPU_%d' % b
                            for b in (1, 2, 4, 8)} | {
                                'CUSTOM_PCI_FIT_PGPU_%d' % n
                                for n in self.fits},
            shards=shards, by_host=by_host, **extra)
        return {c['host'] for c in body['allocation_requests']}

    def fitting(self, host, band=2):
        """``host`` fits a pair (in ``band``); every other host is in
        band 2."""
        self.fits = {2}
        self.hosts = {name: ({'CUSTOM_PCI_FREE_PGPU_2'}, shard)
                      for name, (_root, shard) in self.hosts.items()}
        self.hosts[host] = ({'CUSTOM_PCI_FIT_PGPU_2',
                             'CUSTOM_PCI_FREE_PGPU_%d' % band},
                            self.hosts[host][1])

    def hosts_with(self, traits):
        self.listed.append(traits)
        return [fullness.Host(host, host)
                for host, (root, _shard) in sorted(self.hosts.items())
                if traits <= root]

    def asked(self):
        """(shard level, root traits other than shards) of each query."""
        return [(len(roots & names.SHARD_TRAITS),
                 ','.join(sorted(roots - names.SHARD_TRAITS)))
                for roots, _groups in self.queries]

    def test_a_fitting_host_is_asked_alone(self):
        self.fitting('hgx-1')
        shard = names.shard_number('hgx-1') % 8
        self.assertEqual({'hgx-1'}, self.candidates(
            band_shards.widening(3, shard), size=2,
            hosts_with=self.hosts_with))
        # Listed in band 2 (none fits in band 1), asked in its tree with
        # its finest shard on the root and the group provider's group.
        self.assertEqual([{'CUSTOM_PCI_FIT_PGPU_2',
                           'CUSTOM_PCI_FREE_PGPU_2'}], self.listed)
        self.assertEqual([(8, 'CUSTOM_PCI_FIT_PGPU_2')], self.asked())
        self.assertEqual([{'hgx-1'}], self.trees)
        ((_roots, groups),) = self.queries
        finest = names.shard_traits('hgx-1')
        # Groups by suffix: the two devices', then the group provider's.
        self.assertEqual([False, False, True],
                         [finest <= group for group in groups])

    def test_fitting_hosts_of_the_fullest_band_first(self):
        self.fitting('hgx-1', band=4)
        self.hosts['hgx-2'] = ({'CUSTOM_PCI_FIT_PGPU_2',
                                'CUSTOM_PCI_FREE_PGPU_2'},
                               self.hosts['hgx-2'][1])
        self.assertEqual({'hgx-2'}, self.candidates(
            band_shards.widening(3, 0), size=2, hosts_with=self.hosts_with))
        self.assertEqual(1, len(self.listed))
        unusable = self.candidates(
            band_shards.widening(3, 0), size=2, hosts_with=self.hosts_with,
            usable=lambda body: any(c['host'] != 'hgx-2'
                                    for c in body['allocation_requests']))
        self.assertEqual({'hgx-1'}, unusable)
        self.assertEqual([{'hgx-2'}, {'hgx-1'}], self.trees)

    def test_no_fitting_host_usable_then_bands(self):
        self.fitting('hgx-1')
        hosts = self.candidates(
            band_shards.widening(3, 0), size=2,
            hosts_with=self.hosts_with,
            usable=lambda body: any(c['host'] != 'hgx-1'
                                    for c in body['allocation_requests']))
        self.assertNotIn('hgx-1', hosts)
        self.assertEqual([(8, 'CUSTOM_PCI_FIT_PGPU_2'),
                          (3, 'CUSTOM_PCI_FREE_PGPU_2')], self.asked())

    def test_at_most_fit_tries_hosts_asked_alone(self):
        self.fitting('hgx-1')
        for name in ('hgx-2', 'hgx-3', 'hgx-4', 'hgx-5'):
            self.hosts[name] = ({'CUSTOM_PCI_FIT_PGPU_2',
                                 'CUSTOM_PCI_FREE_PGPU_2'},
                                self.hosts[name][1])
        self.candidates(band_shards.widening(3, 0), size=2,
                        hosts_with=self.hosts_with,
                        usable=lambda body: False)
        alone = [trees for trees in self.trees if trees]
        self.assertEqual(fullness.FIT_TRIES, len(alone))

    def test_unsharded_fleet_asks_fitting_hosts_in_one_query(self):
        self.fitting('hgx-1')
        self.assertEqual({'hgx-1'}, self.candidates(
            (None,), size=2, hosts_with=self.hosts_with))
        self.assertEqual([], self.listed)
        self.assertEqual([set()], self.trees)

    def test_shard_search_finds_a_rare_fitting_host_by_its_name(self):
        # by_host False: the search before per-host queries.
        self.fitting('hgx-1')
        other = (names.shard_number('hgx-1') + 1) % 8
        self.assertEqual({'hgx-1'}, self.candidates(
            band_shards.widening(3, other), size=2,
            hosts_with=self.hosts_with, by_host=False))
        # Its finest shard: 8 traits.
        self.assertEqual([(3, 'CUSTOM_PCI_FIT_PGPU_2'),
                          (8, 'CUSTOM_PCI_FIT_PGPU_2')], self.asked())
        self.assertEqual([{'CUSTOM_PCI_FIT_PGPU_2'}], self.listed)

    def in_shard(self, level, index):
        return {host for host in self.hosts
                if names.shard_number(host) % (1 << level) == index}

    def test_one_shard_on_the_root_and_in_every_device_group(self):
        shard = band_shards.Shard(2, 1)
        self.assertEqual(self.in_shard(2, 1), self.candidates([shard]))
        ((roots, groups),) = self.queries
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_8'} | shard.traits(), roots)
        # Eight devices and the group provider, each limited to the shard.
        self.assertEqual(9, len(groups))
        for group in groups:
            self.assertLessEqual(shard.traits(), group)
        # The flavor's own group is left alone (its root is limited).
        request = fullness.in_shard(gpu_request(8), shard)
        (plain,) = [g for g in request.groups if g.suffix is None]
        self.assertEqual(set(), plain.required_traits)

    def test_every_band_of_the_shard_before_a_wider_shard(self):
        # Band 1 and 2 hosts exist only outside shard 3 of level 2.
        outside = sorted(self.hosts.keys() - self.in_shard(2, 3))
        self.hosts[outside[0]] = ({'CUSTOM_PCI_FREE_PGPU_1'},
                                  self.hosts[outside[0]][1])
        hosts = self.candidates(band_shards.widening(2, 3), size=1)
        # Bands 1, 2, 4 of the shard are empty; its band 8 answers.
        self.assertEqual(self.in_shard(2, 3), hosts)
        self.assertEqual(4, len(self.queries))

    def test_empty_shard_widens_to_its_parent_then_the_fleet(self):
        index = names.shard_number('hgx-1') % 4
        self.hosts = {'hgx-1': self.hosts['hgx-1']}
        empty = (index + 2) % 4            # same parent shard at level 1
        self.assertEqual({'hgx-1'},
                         self.candidates(band_shards.widening(2, empty)))
        self.assertEqual(2, len(self.queries))
        self.queries.clear()
        other = (index + 1) % 4            # the other half of the fleet
        self.assertEqual({'hgx-1'},
                         self.candidates(band_shards.widening(2, other)))
        self.assertEqual(3, len(self.queries))
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_8'}, self.queries[-1][0])

    def test_shard_only_on_unusable_hosts_widens(self):
        shard = names.shard_number('hgx-7') % 4
        tried = set(self.hosts) - {'hgx-7'}
        hosts = self.candidates(
            band_shards.widening(2, shard + 1), usable=lambda body: any(
                c['host'] not in tried for c in body['allocation_requests']))
        self.assertIn('hgx-7', hosts)

    def test_default_is_the_whole_fleet(self):
        self.assertEqual(set(self.hosts), self.candidates((None,)))
        ((roots, groups),) = self.queries
        self.assertEqual({'CUSTOM_PCI_FREE_PGPU_8'}, roots)
        self.assertFalse(any(group & names.SHARD_TRAITS for group in groups))
