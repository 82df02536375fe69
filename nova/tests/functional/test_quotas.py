"""Quotas enforced through the REST API with every service real: server
creates over the instances, cores, RAM or GPU (PCI alias) limits and
resizes growing past them are refused with upstream's 403 and leave
nothing behind, concurrent creates never exceed a limit, and /limits and
the quota views report the usage.
"""

import json
import threading

from nova import context as nova_context
from nova.db import api as db
from nova.tests.functional import test_resize

MEMBER = 'alice:proj-q'
QS = '/os-quota-sets/proj-q'


class QuotaTestBase(test_resize.MoveTestBase):

    hosts = ('cmp1',)

    def setUp(self):
        super().setUp()
        self.start()

    def as_member(self, method, path, body=None, expect=(200, 202)):
        resp = self.session.request(
            method, self.allinone.api_url + path,
            data=json.dumps(body) if body is not None else None,
            headers={'X-Auth-Token': MEMBER})
        self.assertIn(resp.status_code, expect, resp.text)
        return resp.json() if resp.content else {}

    def set_quota(self, path, values):
        self.api('PUT', path, {'quota_set': values})

    def create(self, flavor_id, expect=(202,)):
        return self.as_member('POST', '/servers', {'server': {
            'name': 'vm', 'flavorRef': flavor_id, 'imageRef': 'none'}},
            expect=expect)

    def project_servers(self):
        return db.instance_get_all(nova_context.get_admin_context(),
                                   {'project_id': 'proj-q'})

    def refused(self, flavor_id, message):
        """A create refused with 403 and exactly ``message``, leaving
        the project's servers as they were."""
        before = [i.uuid for i in self.project_servers()]
        fault = self.create(flavor_id, expect=(403,))['forbidden']
        self.assertEqual(message, fault['message'])
        self.assertEqual(before, [i.uuid for i in self.project_servers()])


class TestCreateQuotas(QuotaTestBase):

    def test_gpu_quota_per_alias(self):
        self.set_quota(QS + '/pci-aliases', {'h200': 4})
        first = self.create(self.flavors[2])['server']
        self.wait_for(first['id'], 'ACTIVE')
        self.refused(self.flavors[4], 'Quota exceeded for pci_alias:h200: '
                     'Requested 4, but already used 2 of 4 pci_alias:h200')
        self.wait_for(self.create(self.flavors[2])['server']['id'],
                      'ACTIVE')
        self.refused(self.flavors[1], 'Quota exceeded for pci_alias:h200: '
                     'Requested 1, but already used 4 of 4 pci_alias:h200')
        shown = self.as_member('GET', QS + '/pci-aliases')['quota_set']
        self.assertEqual({'limit': 4, 'in_use': 4, 'reserved': 0},
                         shown['h200'])
        # Deleting a server gives its GPUs back to the quota.
        self.delete(first['id'])
        self.wait_for(self.create(self.flavors[2])['server']['id'],
                      'ACTIVE')

    def test_instances_cores_and_ram(self):
        # gpu.Nx flavors have 4 vCPUs and 4096 MB each.
        self.set_quota(QS, {'instances': 2})
        for _ in range(2):
            self.create(self.flavors[1])
        self.refused(self.flavors[1], 'Quota exceeded for instances: '
                     'Requested 1, but already used 2 of 2 instances')
        self.set_quota(QS, {'instances': 10, 'cores': 10, 'ram': 10000})
        self.refused(self.flavors[1], 'Quota exceeded for cores, ram: '
                     'Requested 4, 4096, but already used 8, 8192 of 10, '
                     '10000 cores, ram')
        # A user's own limit applies to that user only.
        self.set_quota(QS, {'cores': -1, 'ram': -1})
        self.set_quota(QS + '?user_id=alice', {'instances': 2})
        self.refused(self.flavors[1], 'Quota exceeded for instances: '
                     'Requested 1, but already used 2 of 2 instances')
        absolute = self.as_member('GET', '/limits')['limits']['absolute']
        self.assertEqual((10, -1, -1, 2, 8, 8192), (
            absolute['maxTotalInstances'], absolute['maxTotalCores'],
            absolute['maxTotalRAMSize'], absolute['totalInstancesUsed'],
            absolute['totalCoresUsed'], absolute['totalRAMUsed']))
        detail = self.as_member('GET', QS + '/detail')['quota_set']
        self.assertEqual({'limit': 10, 'in_use': 2, 'reserved': 0},
                         detail['instances'])

    def test_concurrent_creates_never_exceed(self):
        self.set_quota(QS, {'instances': 3})
        threads_n = 8
        barrier = threading.Barrier(threads_n)
        statuses = []

        def create():
            barrier.wait()
            resp = self.session.post(
                self.allinone.api_url + '/servers', json={'server': {
                    'name': 'vm', 'flavorRef': self.flavors[1],
                    'imageRef': 'none'}},
                headers={'X-Auth-Token': MEMBER})
            statuses.append(resp.status_code)

        threads = [threading.Thread(target=create) for _ in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([202] * 3 + [403] * 5, sorted(statuses))
        servers = self.project_servers()
        self.assertEqual(3, len(servers))
        for server in servers:
            self.wait_for(server.uuid, 'ACTIVE')


class TestResizeQuotas(QuotaTestBase):

    hosts = ('cmp1', 'cmp2')

    def test_resize_counts_the_growth(self):
        self.set_quota(QS + '/pci-aliases', {'h200': 2})
        self.set_quota(QS, {'cores': 4})
        server = self.create(self.flavors[1])['server']
        self.wait_for(server['id'], 'ACTIVE')
        resp = self.session.post(
            self.allinone.api_url + '/servers/%s/action' % server['id'],
            json={'resize': {'flavorRef': self.flavors[4]}},
            headers={'X-Auth-Token': MEMBER})
        self.assertEqual(403, resp.status_code, resp.text)
        self.assertEqual('Quota exceeded for pci_alias:h200: Requested 3, '
                         'but already used 1 of 2 pci_alias:h200',
                         resp.json()['forbidden']['message'])
        self.assertEqual('ACTIVE', self.api(
            'GET', '/servers/%s' % server['id'])['server']['status'])
        self.assertEqual([], self.migrations(server['id']))
        # Same cores (4) and one more GPU: within both limits.
        self.resize(server['id'], self.flavors[2])
        # While the resize waits for confirmation the larger flavor counts.
        self.refused(self.flavors[1], 'Quota exceeded for cores, '
                     'pci_alias:h200: Requested 4, 1, but already used 4, '
                     '2 of 4, 2 cores, pci_alias:h200')
        self.confirm(server['id'])
        shown = self.as_member('GET', QS + '/pci-aliases')['quota_set']
        self.assertEqual(2, shown['h200']['in_use'])


class TestMetadataItems(QuotaTestBase):
    """``metadata_items`` limits each server's metadata, as upstream (a
    per-server limit, not a project total): Tempest's
    test_max_metadata_exceed_limit found it kept but not enforced."""

    def test_create_and_metadata_paths_refuse_items_over_the_limit(self):
        self.set_quota(QS, {'metadata_items': 2})
        message = 'Maximum number of metadata items exceeds 2'
        fault = self.as_member('POST', '/servers', {'server': {
            'name': 'vm', 'flavorRef': self.flavors[1], 'imageRef': 'none',
            'metadata': {'a': '1', 'b': '2', 'c': '3'}}},
            expect=(403,))['forbidden']
        self.assertEqual(message, fault['message'])
        self.assertEqual([], self.project_servers())
        server = self.as_member('POST', '/servers', {'server': {
            'name': 'vm', 'flavorRef': self.flavors[1], 'imageRef': 'none',
            'metadata': {'a': '1', 'b': '2'}}})['server']
        self.wait_for(server['id'], 'ACTIVE')
        path = '/servers/%s/metadata' % server['id']
        for method, body in (('POST', {'metadata': {'c': '3'}}),
                             ('PUT', {'metadata': {'x': '1', 'y': '2',
                                                   'z': '3'}})):
            fault = self.as_member(method, path, body,
                                   expect=(403,))['forbidden']
            self.assertEqual(message, fault['message'])
        self.as_member('PUT', path + '/c', {'meta': {'c': '3'}},
                       expect=(403,))
        # Nothing of a refused request was written; replacing an item
        # within the limit is fine.
        self.assertEqual({'a': '1', 'b': '2'},
                         self.as_member('GET', path)['metadata'])
        self.assertEqual({'b': '9'}, self.as_member(
            'PUT', path, {'metadata': {'b': '9'}})['metadata'])
        self.as_member('POST', '/servers/%s/action' % server['id'],
                       {'rebuild': {'imageRef': 'none', 'metadata': {
                           'p': '1', 'q': '2', 'r': '3'}}}, expect=(403,))
        self.assertEqual({'b': '9'},
                         self.as_member('GET', path)['metadata'])
