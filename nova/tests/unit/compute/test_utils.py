"""Tests for the frees shared by the compute API and manager."""

from unittest import mock

from nova import context as nova_context
from nova import exception
from nova import test
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.db import api as db
from nova.tests.fixtures import database as db_fixture

DOWN = exception.PlacementAPIConnectFailure(url='http://placement',
                                            error='connection refused')


class TestPendingFrees(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        self.ctx = nova_context.get_admin_context()
        self.client = mock.Mock()

    def pending(self) -> list[tuple[str, str | None]]:
        return [(row['consumer_uuid'], row['host'])
                for row in db.pending_free_get_all(self.ctx)]

    def test_failed_free_is_recorded_once(self):
        self.client.delete_allocation_for_instance.side_effect = DOWN
        for _ in range(2):
            compute_utils.free_allocation(self.ctx, self.client, 'vm1',
                                          'cmp1')
        self.assertEqual([('vm1', 'cmp1')], self.pending())

    def test_free_that_works_records_nothing(self):
        compute_utils.free_allocation(self.ctx, self.client, 'vm1', 'cmp1')
        self.client.delete_allocation_for_instance.assert_called_once_with(
            'vm1')
        self.assertEqual([], self.pending())

    def test_retry_frees_this_host_and_hostless_ones(self):
        db.pending_free_add(self.ctx, 'vm1', 'cmp1')
        db.pending_free_add(self.ctx, 'vm2', 'cmp2')
        db.pending_free_add(self.ctx, 'vm3', None)
        self.assertEqual(['vm1', 'vm3'], compute_utils.retry_pending_frees(
            self.ctx, self.client, 'cmp1'))
        self.assertEqual([('vm2', 'cmp2')], self.pending())

    def test_retry_keeps_the_rows_while_placement_is_away(self):
        db.pending_free_add(self.ctx, 'vm1', 'cmp1')
        self.client.delete_allocation_for_instance.side_effect = DOWN
        self.assertEqual([], compute_utils.retry_pending_frees(
            self.ctx, self.client, 'cmp1'))
        self.assertEqual([('vm1', 'cmp1')], self.pending())

    def test_retry_spares_an_instance_scheduled_again(self):
        # Offloaded during the outage, unshelved once Placement was back:
        # its allocation is the new claim's, not the one to free.
        db.instance_create(self.ctx, {
            'uuid': 'vm1', 'vm_state': vm_states.SHELVED_OFFLOADED,
            'task_state': task_states.UNSHELVING})
        db.pending_free_add(self.ctx, 'vm1', 'cmp1')
        self.assertEqual([], compute_utils.retry_pending_frees(
            self.ctx, self.client, 'cmp1'))
        self.client.delete_allocation_for_instance.assert_not_called()
        self.assertEqual([], self.pending())
