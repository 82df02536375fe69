"""The codes of a refusal: each reason's, and the NoValidHost's that the
scheduler raises (the conductor acts on them, not on the words)."""

from unittest import mock

from nova import context as nova_context
from nova import test
from nova.db import api as db
from nova.pci import placement_names as names
from nova.pci import request as pci_request
from nova.scheduler import manager
from nova.scheduler import refusal
from nova.scheduler import request_builder
from nova.tests.fixtures import database as db_fixture

FLAVOR = {'vcpus': 4, 'memory_mb': 4096, 'root_gb': 0, 'extra_specs': {}}
FRAGMENTED = ('fragmentation: 8 PGPU devices free, but no nvlink group of '
              '8 is wholly free (the free devices sit in partly used '
              'groups)')


def _request(gpus: int) -> request_builder.ResourceRequest:
    return request_builder.build_resource_request(FLAVOR, [
        pci_request.InstancePCIRequest(
            request_id='r-1', alias_name='h200', count=gpus,
            spec=[{'resource_class': 'PGPU', 'group_type': 'nvlink'}],
            numa_policy='legacy', group_type='nvlink',
            resource_class='PGPU', traits=set())])


def _placement(free: int = 8, missing=()) -> mock.Mock:
    """A report client whose Placement has ``free`` providers of whatever
    is asked, except no unhealthy device and nothing of ``missing``."""
    def count_providers(resources=None, required=()):
        if names.UNHEALTHY_TRAIT in required or \
                set(resources or ()) & set(missing):
            return 0
        return free
    return mock.Mock(count_providers=mock.Mock(side_effect=count_providers))


class TestReasonCodes(test.TestCase):

    def test_fragmentation_alone(self):
        found = refusal.reasons(_placement(), _request(8))
        self.assertEqual([refusal.FRAGMENTATION],
                         [reason.code for reason in found])
        self.assertEqual(FRAGMENTED, refusal.explain(found))

    def test_fragmentation_and_a_missing_flavor_resource(self):
        found = refusal.reasons(_placement(missing=['VCPU']), _request(8))
        self.assertEqual([refusal.NO_FLAVOR_RESOURCES, refusal.FRAGMENTATION],
                         [reason.code for reason in found])
        self.assertEqual('no host has 4 VCPU free; ' + FRAGMENTED,
                         refusal.explain(found))

    def test_too_few_devices_is_no_fragmentation(self):
        found = refusal.reasons(_placement(free=7), _request(8))
        self.assertEqual([refusal.TOO_FEW_DEVICES],
                         [reason.code for reason in found])

    def test_leaked_capacity_is_no_reason_of_its_own(self):
        # The refusal counter's labels stay the reasons.
        self.assertNotIn(refusal.LEAKED_CAPACITY, refusal.CODES)


class TestWithLeaks(test.TestCase):
    """``_with_leaks`` re-raises a refusal naming leaked capacity; the
    codes go along, with LEAKED_CAPACITY when capacity leaked."""

    REASON = refusal.no_candidate('8 x PGPU', FRAGMENTED)

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        self.ctx = nova_context.get_admin_context()

    def test_codes_kept_without_leaks(self):
        error = manager._with_leaks(self.ctx, self.REASON,
                                    [refusal.FRAGMENTATION])
        self.assertEqual([refusal.FRAGMENTATION], error.kwargs['codes'])
        self.assertEqual(self.REASON, error.kwargs['reason'])

    def test_leaks_add_their_code_and_words(self):
        db.pending_free_add(self.ctx, 'c0ffee00-0000-4000-8000-000000000001',
                            'cmp1')
        error = manager._with_leaks(self.ctx, self.REASON,
                                    [refusal.FRAGMENTATION])
        self.assertEqual(sorted([refusal.FRAGMENTATION,
                                 refusal.LEAKED_CAPACITY]),
                         error.kwargs['codes'])
        self.assertEqual(
            self.REASON + '; leaked capacity: 1 deleted or offloaded '
            'server(s) still hold allocations in Placement, whose free '
            'failed while Placement did not answer and is retried at '
            'their compute\'s next resource update (cmp1: '
            'c0ffee00-0000-4000-8000-000000000001)', error.kwargs['reason'])
