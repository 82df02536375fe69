"""Tests for the one policy of freeing allocations (frees.py)."""

from unittest import mock

from nova import context as nova_context
from nova import exception
from nova import test
from nova.compute import task_states
from nova.compute import vm_states
from nova.db import api as db
from nova.scheduler import frees
from nova.tests.fixtures import database as db_fixture

DOWN = exception.PlacementAPIConnectFailure(url='http://placement',
                                            error='connection refused')
HELD = {'allocations': {'rp1': {'resources': {'PGPU': 1}}},
        'project_id': 'p1', 'user_id': 'u1', 'consumer_generation': 3}


class TestFrees(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        self.ctx = nova_context.get_admin_context()
        self.client = mock.Mock()
        self.client.get_allocations_for_consumer.return_value = HELD
        self.client.delete_allocation_at_generation.return_value = True

    def pending(self) -> list[tuple[str, str | None]]:
        return [(row['consumer_uuid'], row['host'])
                for row in db.pending_free_get_all(self.ctx)]

    def retry(self, host: str = 'cmp1') -> list[str]:
        return frees.retry_pending_frees(self.ctx, self.client, host)

    def test_failed_free_is_recorded_once(self):
        self.client.delete_allocation_for_instance.side_effect = DOWN
        for _ in range(2):
            self.assertFalse(frees.free_allocation(self.ctx, self.client,
                                                   'vm1', 'cmp1'))
        self.assertEqual([('vm1', 'cmp1')], self.pending())

    def test_free_that_works_records_nothing(self):
        self.assertTrue(frees.free_allocation(self.ctx, self.client, 'vm1',
                                              'cmp1'))
        self.client.delete_allocation_for_instance.assert_called_once_with(
            'vm1')
        self.assertEqual([], self.pending())

    def test_retry_frees_this_host_and_hostless_ones(self):
        db.pending_free_add(self.ctx, 'vm1', 'cmp1')
        db.pending_free_add(self.ctx, 'vm2', 'cmp2')
        db.pending_free_add(self.ctx, 'vm3', None)
        self.assertEqual(['vm1', 'vm3'], self.retry())
        self.assertEqual([('vm2', 'cmp2')], self.pending())
        # Each delete is guarded by the allocation read before it.
        self.client.delete_allocation_at_generation.assert_has_calls(
            [mock.call('vm1', HELD), mock.call('vm3', HELD)])

    def test_retry_keeps_the_rows_while_placement_is_away(self):
        db.pending_free_add(self.ctx, 'vm1', 'cmp1')
        for step in ('get_allocations_for_consumer',
                     'delete_allocation_at_generation'):
            with mock.patch.object(self.client, step, side_effect=DOWN):
                self.assertEqual([], self.retry())
            self.assertEqual([('vm1', 'cmp1')], self.pending())

    def test_retry_of_a_consumer_holding_nothing_drops_the_row(self):
        db.pending_free_add(self.ctx, 'vm1', 'cmp1')
        self.client.get_allocations_for_consumer.return_value = dict(
            HELD, allocations={})
        self.assertEqual([], self.retry())
        self.client.delete_allocation_at_generation.assert_not_called()
        self.assertEqual([], self.pending())

    def test_retry_spares_an_instance_scheduled_again(self):
        # Offloaded during the outage, unshelved once Placement was back:
        # its allocation is the new claim's, not the one to free.
        db.instance_create(self.ctx, {
            'uuid': 'vm1', 'vm_state': vm_states.SHELVED_OFFLOADED,
            'task_state': task_states.UNSHELVING})
        db.pending_free_add(self.ctx, 'vm1', 'cmp1')
        self.assertEqual([], self.retry())
        self.client.delete_allocation_at_generation.assert_not_called()
        self.assertEqual([], self.pending())

    def test_retry_waits_when_the_allocation_changed_after_the_read(self):
        db.pending_free_add(self.ctx, 'vm1', 'cmp1')
        self.client.delete_allocation_at_generation.return_value = False
        self.assertEqual([], self.retry())
        self.assertEqual([('vm1', 'cmp1')], self.pending())

    def test_which_instances_own_nothing(self):
        cases = [
            (vm_states.SHELVED_OFFLOADED, None, None, True),
            (vm_states.SHELVED_OFFLOADED, task_states.UNSHELVING, None,
             False),
            (vm_states.ERROR, None, None, True),    # a failed build
            (vm_states.ERROR, None, 'cmp1', False),  # failed on its host
            (vm_states.ACTIVE, None, 'cmp1', False),
            (vm_states.BUILDING, task_states.SCHEDULING, None, False),
        ]
        for index, (vm_state, task_state, host, released) in enumerate(
                cases):
            uuid = 'vm%d' % index
            db.instance_create(self.ctx, {
                'uuid': uuid, 'vm_state': vm_state,
                'task_state': task_state, 'host': host})
            self.assertEqual(released, frees._released(self.ctx, uuid),
                             (vm_state, task_state, host))
        self.assertTrue(frees._released(self.ctx, 'deleted'))
