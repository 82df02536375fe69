"""When the conductor's automatic mode moves servers for a refused build:
on the refusal's codes, never its words."""

from unittest import mock

import fixtures

from nova import test
from nova.conductor import defrag
from nova.pci import request as pci_request
from nova.scheduler import refusal
from nova.tests.fixtures import instances

INSTANCE = instances.instance(pci_requests=[
    pci_request.InstancePCIRequest(
        request_id='r-1', alias_name='h200', count=8,
        spec=[{'resource_class': 'PGPU', 'group_type': 'nvlink'}],
        numa_policy='legacy', group_type='nvlink', resource_class='PGPU',
        traits=set())])
FREED = defrag.Outcome(mock.sentinel.partition, moved=1)


class TestFreeFor(test.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = test.make_conf()
        self.conf.set_override('defrag_max_moves', 2, group='scheduler')
        self.instance_get = self.useFixture(fixtures.MockPatch(
            'nova.db.api.instance_get_by_uuid',
            return_value=INSTANCE)).mock
        self.free_group = self.useFixture(fixtures.MockPatch(
            'nova.conductor.defrag.free_group', return_value=FREED)).mock
        self.useFixture(fixtures.MockPatch(
            'nova.conductor.rpcapi.ConductorAPI'))
        self.auto = defrag.AutoDefrag(self.conf)

    def test_fragmentation_alone_frees_a_group(self):
        self.assertTrue(self.auto.free_for(mock.sentinel.ctx, 'i-1',
                                           [refusal.FRAGMENTATION]))
        self.assertEqual(8, self.free_group.call_args.args[3])

    def test_a_build_wants_the_size_of_its_group(self):
        # What the build asks before it hands itself to the moves.
        self.assertEqual(8, self.auto.wants(mock.sentinel.ctx, 'i-1',
                                            [refusal.FRAGMENTATION]))
        self.assertIsNone(self.auto.wants(mock.sentinel.ctx, 'i-1',
                                          [refusal.TOO_FEW_DEVICES]))
        self.free_group.assert_not_called()

    def test_other_codes_move_nothing(self):
        for codes in ([],
                      [refusal.FRAGMENTATION, refusal.NO_FLAVOR_RESOURCES],
                      [refusal.FRAGMENTATION, refusal.LEAKED_CAPACITY],
                      [refusal.TOO_FEW_DEVICES],
                      # Withheld groups: moving servers frees none.
                      [refusal.UNHEALTHY],
                      [refusal.WITHHELD],
                      [refusal.UNHEALTHY, refusal.WITHHELD],
                      [refusal.CLAIMS_TAKEN]):
            self.assertFalse(self.auto.free_for(mock.sentinel.ctx, 'i-1',
                                                codes), codes)
        self.instance_get.assert_not_called()
        self.free_group.assert_not_called()

    def test_nothing_moves_with_the_option_off(self):
        self.conf.set_override('defrag_max_moves', 0, group='scheduler')
        self.assertFalse(self.auto.free_for(mock.sentinel.ctx, 'i-1',
                                            [refusal.FRAGMENTATION]))
        self.free_group.assert_not_called()
