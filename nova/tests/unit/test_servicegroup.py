"""Service liveness: registration, heartbeats and the up/down rule."""

import dataclasses
import datetime
import time

from oslo_config import cfg
from oslo_utils import timeutils
import sqlalchemy as sa

import nova.conf
from nova import context as nova_context
from nova.db import api as db
from nova.db import models
from nova.db import records
from nova import manager
from nova import service
from nova.servicegroup import api as servicegroup
from nova import test
from nova.tests.fixtures import database as db_fixture

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0)


def _conf(**overrides) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    nova.conf.register_all(conf)
    conf([], default_config_files=[], default_config_dirs=[])
    for name, value in overrides.items():
        conf.set_override(name, value)
    return conf


class TestUpDown(test.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = _conf()

    def _service(self, seconds_ago=None, created_ago=3600):
        return records.Service(
            id=1, uuid='7c1f5b4e-0d4a-4d8e-9f3c-2b8a6e1d5f00', host='hgx-2',
            binary='nova-compute', topic='compute', disabled=False,
            disabled_reason=None, forced_down=False, report_count=0,
            last_seen_up=None if seconds_ago is None else
            NOW - datetime.timedelta(seconds=seconds_ago),
            created_at=NOW - datetime.timedelta(seconds=created_ago),
            updated_at=None)

    def test_defaults_are_upstreams(self):
        self.assertEqual(10, self.conf.report_interval)
        self.assertEqual(60, self.conf.service_down_time)

    def test_up_within_service_down_time(self):
        self.assertTrue(servicegroup.is_up(self._service(60), self.conf,
                                           NOW))
        self.assertFalse(servicegroup.is_up(self._service(61), self.conf,
                                            NOW))

    def test_never_reported_counts_from_creation(self):
        self.assertTrue(servicegroup.is_up(
            self._service(created_ago=5), self.conf, NOW))
        self.assertFalse(servicegroup.is_up(self._service(), self.conf,
                                            NOW))

    def test_missing_service_is_down(self):
        self.assertFalse(servicegroup.is_up(None, self.conf, NOW))
        self.assertEqual(
            'hgx-2 is down (no service has ever reported from it)',
            servicegroup.down_reason(None, 'hgx-2', NOW))

    def test_down_reason_says_when_it_was_last_seen(self):
        self.assertEqual(
            'hgx-2 is down (last seen 73s ago, at 2026-01-01 11:58:47 UTC)',
            servicegroup.down_reason(self._service(73), 'hgx-2', NOW))

    def test_forced_down_is_down_even_when_reporting(self):
        service = dataclasses.replace(self._service(1), forced_down=True)
        self.assertFalse(servicegroup.is_up(service, self.conf, NOW))
        self.assertEqual(
            'hgx-2 is down (forced down by an operator)',
            servicegroup.down_reason(service, 'hgx-2', NOW))
        service = dataclasses.replace(service, forced_down=False)
        self.assertTrue(servicegroup.is_up(service, self.conf, NOW))


class _Manager(manager.Manager):
    binary = 'nova-scheduler'
    topic = 'scheduler'

    def __init__(self, conf):
        super().__init__(conf)
        self.seen_at_init = None

    def init_host(self):
        ctx = nova_context.get_admin_context()
        self.seen_at_init = db.service_get_by_host_and_binary(
            ctx, 'sched-1', self.binary)


class TestHeartbeats(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        self.ctx = nova_context.get_admin_context()

    def _row(self, host='sched-1', binary='nova-scheduler'):
        return db.service_get_by_host_and_binary(self.ctx, host, binary)

    def test_report_state_registers_then_counts(self):
        before = timeutils.utcnow()
        servicegroup.report_state(self.ctx, 'cond-1', 'nova-conductor',
                                  'conductor')
        first = self._row('cond-1', 'nova-conductor')
        servicegroup.report_state(self.ctx, 'cond-1', 'nova-conductor',
                                  'conductor')
        second = self._row('cond-1', 'nova-conductor')
        self.assertEqual(first.id, second.id)
        self.assertEqual(1, first.report_count)
        self.assertEqual(2, second.report_count)
        self.assertGreaterEqual(second.last_seen_up,
                                first.last_seen_up)
        self.assertGreaterEqual(first.last_seen_up, before)
        self.assertEqual('conductor', second.topic)
        self.assertEqual(1, len(db.service_get_all(self.ctx)))

    def test_report_state_recreates_a_removed_row(self):
        servicegroup.report_state(self.ctx, 'cond-1', 'nova-conductor',
                                  'conductor')
        with db.context_manager.writer.using(self.ctx):
            self.ctx.session.execute(sa.delete(models.Service))
        servicegroup.report_state(self.ctx, 'cond-1', 'nova-conductor',
                                  'conductor')
        self.assertEqual(1, self._row('cond-1',
                                      'nova-conductor').report_count)

    def test_heartbeats_keep_forced_down(self):
        servicegroup.report_state(self.ctx, 'cpu-1', 'nova-compute',
                                  'compute')
        row = self._row('cpu-1', 'nova-compute')
        self.assertFalse(row.forced_down)
        self.assertEqual(36, len(row.uuid))
        db.service_update(self.ctx, row.id, {'forced_down': True})
        servicegroup.report_state(self.ctx, 'cpu-1', 'nova-compute',
                                  'compute')
        row = self._row('cpu-1', 'nova-compute')
        self.assertEqual(2, row.report_count)
        self.assertTrue(row.forced_down)
        self.assertFalse(servicegroup.is_up(row, _conf()))

    def test_service_reports_before_init_host_and_periodically(self):
        conf = _conf(report_interval=1, host='sched-1')
        mgr = _Manager(conf)
        svc = service.Service(mgr)
        svc.start()
        self.addCleanup(svc.stop)
        # Up before its manager prepared the host.
        self.assertEqual(1, mgr.seen_at_init.report_count)
        self.assertIsNotNone(mgr.seen_at_init.last_seen_up)
        deadline = time.monotonic() + 30
        while self._row().report_count < 3 and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertGreaterEqual(self._row().report_count, 3)
        self.assertTrue(servicegroup.is_up(self._row(), conf))

    def test_manager_without_binary_does_not_register(self):
        mgr = manager.Manager(_conf())
        # The base manager knows nothing of Placement.
        self.assertFalse(hasattr(mgr, 'reportclient'))
        svc = service.Service(mgr, host='somewhere')
        svc.start()
        svc.stop()
        self.assertEqual([], db.service_get_all(self.ctx))

    def test_warns_when_down_time_is_not_above_interval(self):
        svc = service.Service(_Manager(_conf(report_interval=30,
                                             service_down_time=30,
                                             host='sched-1')))
        svc.start()
        svc.stop()
        self.assertIn('service_down_time (30s) is not longer',
                      self.logger.output)
