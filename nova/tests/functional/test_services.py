"""Compute services through the REST API: forcing a dead compute down to
evacuate it at once, and disabling a compute so it gets no new servers.

Real services in-process (Placement, conductor, scheduler, two libvirt
test-driver computes), driven with ``/os-services`` at microversion 2.53.
"""

from nova.tests.functional import test_resize

QUADS = test_resize.QUADS
MV = {'X-OpenStack-Nova-API-Version': '2.53'}


class ServicesTestBase(test_resize.MoveTestBase):

    def services(self, **query) -> list[dict]:
        resp = self.session.get(self.allinone.api_url + '/os-services',
                                params=query, headers=MV)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()['services']

    def compute_service(self, host: str) -> dict:
        found = self.services(host=host, binary='nova-compute')
        self.assertEqual(1, len(found), found)
        return found[0]

    def update_service(self, host: str, body: dict) -> dict:
        uuid = self.compute_service(host)['id']
        resp = self.session.put(
            self.allinone.api_url + '/os-services/%s' % uuid, json=body,
            headers=MV)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()['service']


class TestForceDownToEvacuate(ServicesTestBase):

    def test_forced_down_compute_is_evacuated_at_once(self):
        self.start()
        server = self.boot(self.flavors[4], 'refugee')
        source = server['OS-EXT-SRV-ATTR:host']
        target = ({'cmp1', 'cmp2'} - {source}).pop()

        # The compute dies, but its last heartbeat is fresh: without an
        # operator it would count as up for service_down_time.
        self.stop_compute(source, seconds_ago=0)
        self.assertEqual('up', self.compute_service(source)['state'])
        resp = self.evacuate(server['id'], expect=(400,))
        self.assertIn('still up', resp.text)
        self.assertEqual([], self.migrations(server['id']))

        shown = self.update_service(source, {'forced_down': True})
        self.assertEqual((True, 'down', 'enabled'), (
            shown['forced_down'], shown['state'], shown['status']))
        self.evacuate(server['id'])
        moved = self.wait_settled(server['id'], 'ACTIVE')
        self.assertEqual(target, moved['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(moved, QUADS)
        self.assertEqual([], test_resize.invariants.check(
            self.allinone.api_url, 'admin', self.placement.api, self.ctx,
            settled=True))

        # The old compute comes back and cleans up; it stays down (no new
        # servers) until the operator says otherwise.
        self.restart_compute(source)
        self.assertEqual(frozenset(), self.gpus_on(source, server['id']))
        self.assertNotIn(server['id'],
                         self.computes[source].driver.list_instance_uuids())
        self.assertEqual('completed',
                         self.migrations(server['id'])[0].status)
        self.assertEqual('down', self.compute_service(source)['state'])
        shown = self.update_service(source, {'forced_down': False})
        self.assertEqual((False, 'up'), (shown['forced_down'],
                                         shown['state']))
        self.assert_consistent()
        # The freed quad on the old host serves a new server.
        fresh = self.boot(self.flavors[8], 'whole-board')
        self.assertEqual(source, fresh['OS-EXT-SRV-ATTR:host'])
        self.assert_consistent()


class TestDisabledCompute(ServicesTestBase):

    def test_disabled_compute_gets_no_new_servers(self):
        self.start()
        shown = self.update_service('cmp1', {
            'status': 'disabled', 'disabled_reason': 'NVSwitch RMA'})
        self.assertEqual(('disabled', 'NVSwitch RMA', 'up'), (
            shown['status'], shown['disabled_reason'], shown['state']))

        first = self.boot(self.flavors[8], 'first')
        self.assertEqual('cmp2', first['OS-EXT-SRV-ATTR:host'])
        # cmp1's eight GPUs are free, yet nothing may land there.
        refused = self.boot(self.flavors[8], 'second', status='ERROR')
        self.assertIn('cmp1 is disabled', refused['fault']['message'])
        self.assertEqual(frozenset(), frozenset().union(*(
            self.gpus_on('cmp1', s['id']) for s in self.api(
                'GET', '/servers/detail')['servers'])))

        shown = self.update_service('cmp1', {'status': 'enabled'})
        self.assertEqual(('enabled', None), (shown['status'],
                                             shown['disabled_reason']))
        third = self.boot(self.flavors[8], 'third')
        self.assertEqual('cmp1', third['OS-EXT-SRV-ATTR:host'])
        self.assert_consistent()
