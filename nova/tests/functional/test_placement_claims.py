"""Concurrent claims on a real Placement never book a unit twice.

Placement as hosted here (nova.embedded_placement's settings, the same in
the fixture) is run on SQLite, MariaDB and PostgreSQL; the server
databases are skipped when not reachable. Many clients claim the same
scarce devices at the same moment over HTTP; exactly the claims that fit
win, every other one is refused with 409 (never a 5xx), and no provider is
ever used beyond its capacity.
"""

import collections
import threading

from oslo_utils import uuidutils

from nova import test
from nova.scheduler.client import report
from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import placement as placement_fixture

CLAIMERS = 20
ROUNDS = 3


class ClaimRaceTests:
    """Mixed into a TestCase per backend; BACKEND None is a SQLite file."""

    BACKEND: str | None = None

    def setUp(self):
        super().setUp()
        server_url = (None if self.BACKEND is None else
                      db_fixture.server_url_or_skip(self, self.BACKEND))
        self.placement = self.useFixture(
            placement_fixture.PlacementFixture(server_url=server_url))
        self.api = self.placement.api

    def provider(self, name: str, total: int = 1,
                 parent: str | None = None) -> str:
        body = {'name': name}
        if parent:
            body['parent_provider_uuid'] = parent
        resp = self.api.post('/resource_providers', json=body)
        self.assertEqual(200, resp.status_code, resp.text)
        rp = resp.json()
        if total:
            resp = self.api.put(
                '/resource_providers/%s/inventories' % rp['uuid'],
                json={'resource_provider_generation': rp['generation'],
                      'inventories': {'VGPU': {'total': total}}})
            self.assertEqual(200, resp.status_code, resp.text)
        return rp['uuid']

    def race(self, claim, requests: list) -> list:
        """Run ``claim(request)`` for every request at the same moment;
        return the results in request order."""
        barrier = threading.Barrier(len(requests))
        results = [None] * len(requests)

        def run(index):
            barrier.wait()
            try:
                results[index] = claim(requests[index])
            except Exception as error:  # reported by the assertions
                results[index] = error
        threads = [threading.Thread(target=run, args=(i,))
                   for i in range(len(requests))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(test.TestCase.TIMEOUT)
        return results

    def put(self, allocations: dict) -> int:
        resp = self.api.put('/allocations/%s' % uuidutils.generate_uuid(),
                            json={'allocations': allocations,
                                  'project_id': 'p', 'user_id': 'u',
                                  'consumer_generation': None,
                                  'consumer_type': 'INSTANCE'})
        return resp.status_code

    def usage(self, rp: str) -> int:
        resp = self.api.get('/resource_providers/%s/usages' % rp)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()['usages'].get('VGPU', 0)

    def free(self) -> None:
        """Delete every allocation (between rounds)."""
        consumers = set()
        for rp in self.api.get('/resource_providers').json()[
                'resource_providers']:
            consumers.update(self.api.get(
                '/resource_providers/%s/allocations' % rp['uuid']
            ).json()['allocations'])
        for consumer in consumers:
            self.assertEqual(204, self.api.delete(
                '/allocations/%s' % consumer).status_code)

    def test_one_unit_goes_to_exactly_one_claim(self):
        gpu = self.provider('gpu')
        allocation = {gpu: {'resources': {'VGPU': 1}}}
        for _round in range(ROUNDS):
            codes = self.race(self.put, [allocation] * CLAIMERS)
            self.assertEqual({204: 1, 409: CLAIMERS - 1},
                             dict(collections.Counter(codes)))
            self.assertEqual(1, self.usage(gpu))
            self.free()

    def test_pairs_racing_for_the_last_gpus_never_overlap(self):
        root = self.provider('host', total=0)
        gpus = [self.provider('gpu%d' % i, parent=root) for i in range(4)]
        # Every pair of the four GPUs, twice: 12 claims, at most 2 fit.
        pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)] * 2
        for _round in range(ROUNDS):
            codes = self.race(self.put, [
                {gpus[a]: {'resources': {'VGPU': 1}},
                 gpus[b]: {'resources': {'VGPU': 1}}} for a, b in pairs])
            self.assertEqual(set(), set(codes) - {204, 409}, codes)
            winners = [pair for pair, code in zip(pairs, codes)
                       if code == 204]
            taken = [gpu for pair in winners for gpu in pair]
            self.assertEqual(len(taken), len(set(taken)), winners)
            self.assertIn(len(winners), (1, 2))
            self.assertEqual([taken.count(i) for i in range(4)],
                             [self.usage(gpu) for gpu in gpus])
            self.free()

    def test_report_client_claims_are_exclusive(self):
        gpu = self.provider('gpu')
        client = report.SchedulerReportClient(adapter=self.api)
        request = {'allocations': {gpu: {'resources': {'VGPU': 1}}}}
        results = self.race(
            lambda consumer: client.claim_resources(consumer, request,
                                                    'p', 'u'),
            [uuidutils.generate_uuid() for _ in range(CLAIMERS)])
        self.assertEqual({True: 1, False: CLAIMERS - 1},
                         dict(collections.Counter(results)))
        self.assertEqual(1, self.usage(gpu))


class SQLiteClaimRaceTestCase(ClaimRaceTests, test.TestCase):
    BACKEND = None


class MySQLClaimRaceTestCase(ClaimRaceTests, test.TestCase):
    BACKEND = 'mysql'


class PostgreSQLClaimRaceTestCase(ClaimRaceTests, test.TestCase):
    BACKEND = 'postgresql'
