"""Tests for nova.compute.quota: limits, usage counting and the locked
check (on SQLite here; on MariaDB/PostgreSQL in
nova.tests.functional.db.test_quota)."""

import threading

from oslo_config import cfg

from nova import test
from nova.compute import quota
import nova.conf
from nova import context as nova_context
from nova.db import api as db
from nova.db import records
from nova import exception
from nova.pci import request as pci_request
from nova.tests.fixtures import database as db_fixture

FLAVOR_2X = records.FlavorSnapshot.of_flavor(
    {'id': 2, 'flavorid': 'gpu.2x', 'vcpus': 8, 'memory_mb': 8192})
FLAVOR_4X = records.FlavorSnapshot.of_flavor(
    {'id': 4, 'flavorid': 'gpu.4x', 'vcpus': 16, 'memory_mb': 16384})


def pci(count: int, alias: str = 'h200'
        ) -> list[pci_request.InstancePCIRequest]:
    return [pci_request.InstancePCIRequest(
        request_id='r-%s-%d' % (alias, count), alias_name=alias,
        count=count, spec=[{'vendor_id': '10de', 'product_id': '2335'}],
        numa_policy='legacy', group_type=None,
        resource_class='CUSTOM_PCI_10DE_2335', traits=set())]


class TestPureLogic(test.TestCase):

    def test_flavor_usage_sums_alias_requests(self):
        self.assertEqual(
            {'instances': 1, 'cores': 8, 'ram': 8192,
             'pci_alias:h200': 3, 'pci_alias:a100': 1},
            quota.flavor_usage(FLAVOR_2X, pci(2) + pci(1) +
                               pci(1, 'a100')))
        self.assertEqual({'instances': 1, 'cores': 0, 'ram': 0},
                         quota.flavor_usage(None, ()))

    def test_overs_ignores_unlimited_and_shrinking(self):
        limits = {'cores': 20, 'ram': -1, 'instances': 2}
        usage = {'cores': 16, 'ram': 10 ** 6, 'instances': 2}
        self.assertEqual([quota.Over('cores', 8, 16, 20)],
                         quota.overs(limits, usage, {
                             'cores': 8, 'ram': 5, 'instances': 0}))
        self.assertEqual([], quota.overs(limits, usage, {'cores': 4}))
        self.assertEqual([], quota.overs(limits, usage, {'cores': -8}))

    def test_message_is_upstreams(self):
        error = quota.too_many([quota.Over('cores', 8, 16, 20)])
        self.assertEqual(403, error.code)
        self.assertEqual('Quota exceeded for cores: Requested 8, but '
                         'already used 16 of 20 cores', error.message)
        error = quota.too_many([quota.Over('cores', 8, 16, 20),
                                quota.Over('ram', 512, 1024, 1200)])
        self.assertEqual('Quota exceeded for cores, ram: Requested 8, 512, '
                         'but already used 16, 1024 of 20, 1200 cores, ram',
                         error.message)

    def test_defaults_and_bad_alias_limit(self):
        conf = cfg.ConfigOpts()
        nova.conf.register_all(conf)
        conf([], project='nova')
        conf.set_override('pci_alias_limits', {'h200': '8'}, 'quota')
        limits = quota.defaults(conf, ['h200', 'a100'])
        self.assertEqual((8, -1, -1, 128, 255),
                         (limits['pci_alias:h200'], limits['pci_alias:a100'],
                          limits['floating_ips'], limits['metadata_items'],
                          limits['injected_file_path_bytes']))
        self.assertEqual(set(quota.RESOURCES) | {'pci_alias:h200',
                                                 'pci_alias:a100'},
                         set(limits))
        for bad in ('eight', '-2'):
            conf.set_override('pci_alias_limits', {'h200': bad}, 'quota')
            error = self.assertRaises(exception.InvalidConfiguration,
                                      quota.defaults, conf, ['h200'])
            self.assertIn("alias 'h200' is %r" % bad, error.message)


class TestCountAndReserve(test.TestCase):

    BACKEND = None

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database(
            db_fixture.url_for(self, self.BACKEND)))
        self.conf = cfg.ConfigOpts()
        nova.conf.register_all(self.conf)
        self.conf([], project='nova')
        self.ctx = nova_context.RequestContext(user_id='alice',
                                               project_id='proj')

    def _instance(self, flavor=FLAVOR_2X, requests=None, user='alice',
                  project='proj'):
        return db.instance_create(self.ctx, {
            'project_id': project, 'user_id': user, 'flavor': flavor,
            'pci_requests': requests if requests is not None else pci(2),
            'vm_state': 'active'})

    def test_count_by_project_and_user_skips_deleted(self):
        self._instance()
        self._instance(user='bob')
        self._instance(project='other')
        db.instance_destroy(self.ctx, self._instance().uuid)
        self.assertEqual({'instances': 2, 'cores': 16, 'ram': 16384,
                          'pci_alias:h200': 4},
                         quota.count(self.ctx, 'proj'))
        self.assertEqual({'instances': 1, 'cores': 8, 'ram': 8192,
                          'pci_alias:h200': 2},
                         quota.count(self.ctx, 'proj', 'bob'))
        self.assertEqual({'instances': 0, 'cores': 0, 'ram': 0},
                         quota.count(self.ctx, 'nobody'))

    def test_resize_in_progress_counts_the_larger_flavor(self):
        instance = self._instance()
        migration = db.migration_create(self.ctx, {
            'instance_uuid': instance.uuid, 'migration_type': 'resize',
            'status': 'migrating', 'old_flavor': FLAVOR_2X,
            'new_flavor': FLAVOR_4X, 'old_pci_requests': pci(2),
            'new_pci_requests': pci(1)})
        self.assertEqual({'instances': 1, 'cores': 16, 'ram': 16384,
                          'pci_alias:h200': 2},
                         quota.count(self.ctx, 'proj'))
        db.migration_update(self.ctx, migration.uuid,
                            {'status': 'confirmed'})
        self.assertEqual(8, quota.count(self.ctx, 'proj')['cores'])

    def test_check_user_and_project_limits(self):
        self._instance()
        db.quota_set(self.ctx, 'proj', {'pci_alias:h200': 4})
        quota.check(self.ctx, self.conf, 'proj', 'alice',
                    {'pci_alias:h200': 2})
        error = self.assertRaises(
            exception.TooManyInstances, quota.check, self.ctx, self.conf,
            'proj', 'alice', {'pci_alias:h200': 4, 'cores': 8})
        self.assertEqual('Quota exceeded for pci_alias:h200: Requested 4, '
                         'but already used 2 of 4 pci_alias:h200',
                         error.message)
        db.quota_set(self.ctx, 'proj', {'cores': 12}, user_id='alice')
        error = self.assertRaises(
            exception.TooManyInstances, quota.check, self.ctx, self.conf,
            'proj', 'alice', {'cores': 8})
        self.assertIn('already used 8 of 12 cores', error.message)
        # Bob has no limit of his own: only the project's.
        quota.check(self.ctx, self.conf, 'proj', 'bob', {'cores': 8})

    def test_concurrent_reserves_never_exceed(self):
        db.quota_set(self.ctx, 'proj', {'instances': 3})
        threads_n = 8
        barrier = threading.Barrier(threads_n)
        outcomes = []

        def create():
            ctx = nova_context.RequestContext(user_id='alice',
                                              project_id='proj')
            barrier.wait()
            try:
                quota.reserve(ctx, self.conf, {'instances': 1, 'cores': 8},
                              lambda: db.instance_create(ctx, {
                                  'project_id': 'proj', 'user_id': 'alice',
                                  'flavor': FLAVOR_2X}))
                outcomes.append('created')
            except exception.TooManyInstances as error:
                outcomes.append(error.message)

        threads = [threading.Thread(target=create) for _ in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(3, outcomes.count('created'), outcomes)
        self.assertEqual(
            ['Quota exceeded for instances: Requested 1, but already used '
             '3 of 3 instances'] * 5,
            [o for o in outcomes if o != 'created'])
        self.assertEqual(3, len(db.instance_get_all(
            self.ctx, {'project_id': 'proj'})))

    def test_nothing_recorded_when_over(self):
        db.quota_set(self.ctx, 'proj', {'instances': 0})
        recorded = []
        self.assertRaises(exception.TooManyInstances, quota.reserve,
                          self.ctx, self.conf, {'instances': 1},
                          lambda: recorded.append(1))
        self.assertEqual([], recorded)
