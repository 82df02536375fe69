"""The os-services API: listing, the pre-2.53 actions and the 2.53 update,
on a real test database."""

import datetime

from oslo_utils import timeutils

from nova.db import api as db
from nova.db import records
from nova.tests.unit.api import fakes


class ServicesTestCase(fakes.APITestCase):

    def setUp(self):
        super().setUp()
        self.compute = db.service_create(self.admin_context, {
            'host': 'hgx-1', 'binary': 'nova-compute', 'topic': 'compute'})
        db.service_report(self.admin_context, 'hgx-1', 'nova-compute')
        self.conductor = db.service_create(self.admin_context, {
            'host': 'ctl-1', 'binary': 'nova-conductor',
            'topic': 'conductor'})
        db.service_report(self.admin_context, 'ctl-1', 'nova-conductor')

    def row(self, service: records.Service | None = None
            ) -> records.Service:
        service = service or self.compute
        return db.service_get_by_host_and_binary(
            self.admin_context, service.host, service.binary)

    def listed(self, version=None, query='') -> list[dict]:
        response = self.request('GET', '/v2.1/os-services' + query,
                                version=version)
        self.assertEqual(200, response.status_int, response.text)
        return response.json['services']

    def put(self, path: str, body, version: str):
        return self.request('PUT', '/v2.1/os-services/' + path, body,
                            version=version)


class TestList(ServicesTestCase):

    def test_upstream_fields_by_microversion(self):
        old = self.listed()
        self.assertEqual(
            {'id', 'binary', 'host', 'zone', 'status', 'state',
             'updated_at', 'disabled_reason'}, set(old[0]))
        self.assertEqual([self.compute.id, self.conductor.id],
                         [s['id'] for s in old])
        self.assertEqual(['nova', 'internal'], [s['zone'] for s in old])
        self.assertEqual(['up', 'up'], [s['state'] for s in old])
        self.assertEqual(['enabled', 'enabled'],
                         [s['status'] for s in old])
        self.assertIn('forced_down', self.listed('2.11')[0])
        new = self.listed('2.53')
        self.assertEqual([self.compute.uuid, self.conductor.uuid],
                         [s['id'] for s in new])
        self.assertFalse(new[0]['forced_down'])

    def test_filters_by_host_and_binary(self):
        self.assertEqual(['hgx-1'], [s['host'] for s in self.listed(
            query='?binary=nova-compute')])
        self.assertEqual(['nova-conductor'], [s['binary'] for s in
                                              self.listed(
                                                  query='?host=ctl-1')])
        self.assertEqual([], self.listed(
            query='?host=ctl-1&binary=nova-compute'))

    def test_state_down_when_not_reporting(self):
        stale = timeutils.utcnow() - datetime.timedelta(seconds=600)
        db.service_update(self.admin_context, self.compute.id,
                          {'last_seen_up': stale})
        self.assertEqual('down', self.listed()[0]['state'])

    def test_admin_only(self):
        for method, path, body in (
                ('GET', '/v2.1/os-services', None),
                ('PUT', '/v2.1/os-services/disable',
                 {'host': 'hgx-1', 'binary': 'nova-compute'})):
            self.assertFault(self.request(method, path, body,
                                          token=fakes.MEMBER),
                             403, 'forbidden', 'os-services')
        self.assertFalse(self.row().disabled)


class TestActionsBefore253(ServicesTestCase):

    BODY = {'host': 'hgx-1', 'binary': 'nova-compute'}

    def test_disable_with_reason_then_enable(self):
        response = self.put('disable-log-reason',
                            dict(self.BODY, disabled_reason='RMA'), '2.1')
        self.assertEqual(200, response.status_int, response.text)
        self.assertEqual({'service': {
            'host': 'hgx-1', 'binary': 'nova-compute', 'status': 'disabled',
            'disabled_reason': 'RMA'}}, response.json)
        self.assertEqual(('disabled', 'RMA'), (
            self.listed()[0]['status'], self.listed()[0]['disabled_reason']))
        response = self.put('enable', self.BODY, '2.1')
        self.assertEqual({'service': {
            'host': 'hgx-1', 'binary': 'nova-compute',
            'status': 'enabled'}}, response.json)
        self.assertEqual((False, None), (self.row().disabled,
                                         self.row().disabled_reason))

    def test_disable(self):
        response = self.put('disable', self.BODY, '2.52')
        self.assertEqual('disabled', response.json['service']['status'])
        self.assertTrue(self.row().disabled)

    def test_force_down_from_2_11(self):
        body = dict(self.BODY, forced_down=True)
        self.assertFault(self.put('force-down', body, '2.10'),
                         404, 'itemNotFound', "'force-down'")
        response = self.put('force-down', body, '2.11')
        self.assertEqual({'service': {
            'host': 'hgx-1', 'binary': 'nova-compute',
            'forced_down': True}}, response.json)
        self.assertTrue(self.row().forced_down)
        self.assertEqual('down', self.listed('2.11')[0]['state'])
        # Spelt as a string, as upstream's boolean allows.
        response = self.put('force-down', dict(self.BODY,
                                               forced_down='false'), '2.11')
        self.assertIs(False, response.json['service']['forced_down'])
        self.assertFalse(self.row().forced_down)

    def test_bad_requests_name_the_problem(self):
        self.assertFault(self.put('reboot', self.BODY, '2.1'),
                         404, 'itemNotFound', "'reboot'", 'enable')
        self.assertFault(self.put('disable', {'host': 'hgx-1'}, '2.1'),
                         400, 'badRequest', 'binary')
        self.assertFault(self.put('disable', dict(self.BODY, color='red'),
                                  '2.1'), 400, 'badRequest', 'color')
        self.assertFault(self.put('force-down', dict(
            self.BODY, forced_down='maybe'), '2.11'),
            400, 'badRequest', 'forced_down', "'maybe'")
        self.assertFault(self.put('disable', {
            'host': 'hgx-9', 'binary': 'nova-compute'}, '2.1'),
            404, 'itemNotFound', 'hgx-9')
        self.assertFalse(self.row().disabled)


class TestUpdate253(ServicesTestCase):

    def path(self, service: records.Service | None = None) -> str:
        return (service or self.compute).uuid

    def test_force_down_and_up(self):
        response = self.put(self.path(), {'forced_down': True}, '2.53')
        self.assertEqual(200, response.status_int, response.text)
        shown = response.json['service']
        self.assertEqual((self.compute.uuid, True, 'down', 'enabled'), (
            shown['id'], shown['forced_down'], shown['state'],
            shown['status']))
        response = self.put(self.path(), {'forced_down': False}, '2.53')
        self.assertEqual('up', response.json['service']['state'])
        self.assertFalse(self.row().forced_down)
        # Spelt as a string, as upstream's boolean allows.
        response = self.put(self.path(), {'forced_down': 'True'}, '2.53')
        self.assertIs(True, response.json['service']['forced_down'])
        self.assertTrue(self.row().forced_down)

    def test_disable_with_reason_and_enable_clears_it(self):
        response = self.put(self.path(), {
            'status': 'disabled', 'disabled_reason': 'NVSwitch RMA'},
            '2.53')
        self.assertEqual(('disabled', 'NVSwitch RMA'), (
            response.json['service']['status'],
            response.json['service']['disabled_reason']))
        self.put(self.path(), {'status': 'enabled'}, '2.53')
        self.assertEqual((False, None), (self.row().disabled,
                                         self.row().disabled_reason))

    def test_bad_requests_name_the_problem(self):
        for body, fragments in (
                ({'status': 'enabled', 'disabled_reason': 'x'},
                 ('disabled_reason', "'enabled'")),
                ({'disabled_reason': 'x'}, ('disabled_reason', 'None')),
                ({}, ('status', 'forced_down')),
                ({'status': 'off'}, ('status', "'off'")),
                ({'forced_down': 'maybe'}, ('forced_down', "'maybe'")),
                ({'status': 'disabled', 'disabled_reason': 'x' * 256},
                 ('disabled_reason',))):
            self.assertFault(self.put(self.path(), body, '2.53'),
                             400, 'badRequest', *fragments)
        self.assertFault(self.put('hgx-1', {'forced_down': True}, '2.53'),
                         400, 'badRequest', "'hgx-1'", 'uuid')
        self.assertFault(self.put(self.path(self.conductor),
                                  {'forced_down': True}, '2.53'),
                         400, 'badRequest', 'nova-conductor',
                         'nova-compute')
        missing = '7f8a0f3c-0c1e-4b55-9d5e-2b1c0e6f9a11'
        self.assertFault(self.put(missing, {'forced_down': True}, '2.53'),
                         404, 'itemNotFound', missing)
        # The pre-2.53 actions are gone at 2.53.
        self.assertFault(self.put('disable', {
            'host': 'hgx-1', 'binary': 'nova-compute'}, '2.53'),
            400, 'badRequest', "'disable'")
        row = self.row()
        self.assertEqual((False, False), (row.disabled,
                                          row.forced_down))
        self.assertFalse(self.row(self.conductor).forced_down)
