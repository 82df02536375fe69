"""The codes of a refusal: each reason's, and the NoValidHost's that the
scheduler raises (the conductor acts on them, not on the words)."""

from unittest import mock

from nova import context as nova_context
from nova import test
from nova.db import records
from nova.db import api as db
from nova.fleet import board
from nova.pci import device as pci_device
from nova.pci import placement_names as names
from nova.pci import request as pci_request
from nova.scheduler import manager
from nova.scheduler import refusal
from nova.scheduler import request_builder
from nova.tests.fixtures import database as db_fixture

FLAVOR = records.FlavorSnapshot.of_flavor(
    {'vcpus': 4, 'memory_mb': 4096, 'root_gb': 0, 'extra_specs': {}})
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


SIZE_8 = names.group_size_trait('nvlink', 8)
FIRST_OF_8 = names.group_member_trait('nvlink', 8, 0)


def _fleet(free: int, declared: int, offered: int) -> mock.Mock:
    """A report client whose Placement has ``free`` free devices,
    ``declared`` groups of 8 (devices at member index 0) of which
    ``offered`` carry the size trait, and no unhealthy device."""
    def count_providers(resources=None, required=()):
        if names.UNHEALTHY_TRAIT in required:
            return 0
        if FIRST_OF_8 in required:
            return declared
        if SIZE_8 in required:
            return offered
        return free
    return mock.Mock(count_providers=mock.Mock(side_effect=count_providers))


def _host_board(host: str, unhealthy: bool = False,
                withheld: str | None = None) -> board.HostBoard:
    """An 8-GPU board whose first GPU is unhealthy or ``withheld``."""
    devices = []
    for gpu in range(8):
        first = gpu == 0
        devices.append(pci_device.TrackedDevice(
            id=gpu, compute_node_id=1, address='0000:0%d:00.0' % gpu,
            vendor_id='10de', product_id='2335',
            dev_type=pci_device.DEV_TYPE_PCI,
            group_path='board/quad-%s' % 'ab'[gpu // 4],
            status='available',
            health='unhealthy' if first and unhealthy else 'healthy',
            health_source='operator', health_reason='RMA 4711',
            extra_info=dict({'resource_class': 'PGPU'}, **(
                {'withheld': withheld} if first and withheld else {}))))
    return board.HostBoard(host, devices, {})


class TestWithheldGroups(test.TestCase):
    """A size whose groups exist but are all withheld is refused for
    that, naming each group's host and why; never for fragmentation,
    which would have the conductor move servers for nothing."""

    def test_board_withheld_by_an_unhealthy_gpu(self):
        found = refusal.reasons(
            _fleet(free=15, declared=2, offered=0), _request(8),
            lambda: [_host_board('cmp1', unhealthy=True),
                     _host_board('cmp2', withheld='in an active '
                                 'partition Fabric Manager reports')])
        self.assertEqual([refusal.UNHEALTHY, refusal.WITHHELD],
                         [reason.code for reason in found])
        self.assertEqual(
            'no nvlink group of 8 is offered: 1 nvlink group(s) of 8 '
            'withheld for unhealthy devices (cmp1 board: 0000:00:00.0 '
            'unhealthy since ? (operator): RMA 4711); 1 nvlink group(s) '
            'of 8 withheld by their computes (cmp2 board: device '
            '0000:00:00.0 in an active partition Fabric Manager reports)',
            refusal.explain(found))

    def test_withheld_without_boards_says_where_to_look(self):
        found = refusal.reasons(_fleet(free=15, declared=1, offered=0),
                                _request(8))
        self.assertEqual([refusal.WITHHELD],
                         [reason.code for reason in found])
        self.assertEqual(
            'no nvlink group of 8 is offered: 1 nvlink group(s) of 8 '
            'withheld by their computes (see nova-manage pci board)',
            refusal.explain(found))

    def test_fragmentation_names_the_withheld_groups_apart(self):
        # One board offered but partly used, one withheld: moving servers
        # can free the first, so fragmentation it is.
        found = refusal.reasons(
            _fleet(free=14, declared=2, offered=1), _request(8),
            lambda: [_host_board('cmp1', unhealthy=True)])
        self.assertEqual([refusal.FRAGMENTATION],
                         [reason.code for reason in found])
        self.assertEqual(
            FRAGMENTED.replace('8 PGPU', '14 PGPU') + '; 1 nvlink '
            'group(s) of 8 withheld for unhealthy devices (cmp1 board: '
            '0000:00:00.0 unhealthy since ? (operator): RMA 4711)',
            refusal.explain(found))

    def test_no_group_of_the_size_before_too_few(self):
        found = refusal.reasons(_fleet(free=2, declared=0, offered=0),
                                _request(8))
        self.assertEqual([refusal.NO_GROUP_SIZE],
                         [reason.code for reason in found])
        self.assertEqual('no nvlink group of 8 on any host (no host '
                         'declares one, trait %s)' % SIZE_8,
                         refusal.explain(found))


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
