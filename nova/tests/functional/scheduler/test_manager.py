"""SchedulerManager.select_destination against real Placement and DB."""

import fixtures
import oslo_messaging
from oslo_utils import timeutils
import sqlalchemy as sa

from nova.db import api as db
from nova.db import models
from nova import exception
from nova.scheduler.client import report
from nova.scheduler import manager
from nova.scheduler import refusal
from nova.scheduler import request_builder
from nova.scheduler import rpcapi as scheduler_rpcapi
from nova.tests.functional.lib import base
from nova.tests.functional.lib import gpu_hosts


class _RacingReportClient(report.SchedulerReportClient):
    """Another scheduler takes the devices of the first candidate we try
    between our GET /allocation_candidates and our claim."""

    def __init__(self, conf, hosts):
        super().__init__(conf)
        self.hosts = hosts
        self.claimed = []      # allocation requests we tried to claim
        self.intruder = None

    def claim_resources(self, consumer_uuid, allocation_request, *args):
        self.claimed.append(allocation_request)
        if self.intruder is None:
            self.intruder = 'e7c1f0a4-0000-4000-8000-000000000001'
            self.hosts.allocate(self.intruder, {
                rp: alloc['resources']
                for rp, alloc in allocation_request['allocations'].items()
                if 'PGPU' in alloc['resources']})
        return super().claim_resources(consumer_uuid, allocation_request,
                                       *args)


OWNER = 'conductor-1:test'


class _LateReportClient(report.SchedulerReportClient):
    """Runs ``before_claim`` (what happens elsewhere while the scheduler
    is slow) right before the claim reaches Placement."""

    def __init__(self, conf, before_claim):
        super().__init__(conf)
        self.before_claim = before_claim
        self.claims = 0

    def claim_resources(self, consumer_uuid, *args):
        self.before_claim(consumer_uuid)
        claimed = super().claim_resources(consumer_uuid, *args)
        self.claims += claimed
        return claimed


class TestSelectDestination(gpu_hosts.GpuHostsTestCase):

    def setUp(self):
        super().setUp()
        self.context = self.admin
        self.scheduler = manager.SchedulerManager(self.conf)

    def _select(self, instance, excluded=(), owner=OWNER):
        # As the conductor does before it asks.
        db.instance_build_lease_take(self.context, instance.uuid, OWNER,
                                     timeutils.utcnow(), any_unowned=True)
        try:
            return scheduler_rpcapi.Selection.from_primitive(
                self.scheduler.select_destination(
                    self.context, instance.uuid, list(excluded), owner,
                    return_selection=True))
        except oslo_messaging.ExpectedException as wrapped:
            # What the RPC dispatcher unwraps for a remote caller.
            raise wrapped.exc_info[1]

    def test_picks_a_pair_and_claims_it(self):
        self.hosts.add_host('cmp1')
        instance = gpu_hosts.create_instance(self.context, 2)

        selection = self._select(instance)

        self.assertEqual('cmp1', selection.host)
        self.assertEqual('cmp1', selection.nodename)
        allocations = self.hosts.allocations(instance.uuid)
        gpus = self.hosts.gpus_of('cmp1', allocations)
        self.assertIn(frozenset(gpus), gpu_hosts.PAIRS)
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 4096},
                         allocations[self.hosts.roots['cmp1']])
        self.assertEqual(selection.allocation_request['allocations'],
                         {rp: {'resources': res}
                          for rp, res in allocations.items()})
        # The device providers of the PCI request, one per device, by
        # request id.
        rid = instance.pci_requests[0].request_id
        self.assertEqual([rid], list(selection.pci_providers))
        mapped = selection.pci_providers[rid]
        self.assertEqual(2, len(mapped))
        self.assertEqual(gpus, self.hosts.gpus_of('cmp1', mapped))

    def test_chosen_providers_worked_out_once_per_candidate(self):
        # NUMA filter, weighing, NUMA preference and the claim all use the
        # providers each candidate gives the PCI requests: one answer per
        # candidate, not one per step.
        self.hosts.add_host('cmp1')
        instance = gpu_hosts.create_instance(self.context, 2)
        answers, worked_out = [], []
        ask = manager.SchedulerManager._ask_placement
        chosen = request_builder.ResourceRequest.pci_providers

        def recording_ask(scheduler, *args):
            answers.append(ask(scheduler, *args))
            return answers[-1]

        def counting_chosen(request, candidate):
            worked_out.append(candidate)
            return chosen(request, candidate)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.manager.SchedulerManager._ask_placement',
            recording_ask))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_builder.ResourceRequest.pci_providers',
            counting_chosen))

        self._select(instance)

        # The last answer is the one chosen from (the fullest band with
        # a candidate).
        offered = answers[-1]['allocation_requests']
        self.assertEqual(4, len(offered))     # the 4 free pairs of cmp1
        self.assertEqual(len(offered), len(worked_out))

    def test_packs_into_the_broken_quad_of_the_fuller_host(self):
        self.hosts.add_host('cmp1')
        self.hosts.add_host('cmp2')
        self.hosts.use('cmp2', [1])     # quad-a of cmp2 is broken
        instance = gpu_hosts.create_instance(self.context, 2)

        selection = self._select(instance)

        self.assertEqual('cmp2', selection.host)
        gpus = self.hosts.gpus_of(
            'cmp2', self.hosts.allocations(instance.uuid))
        # The other pair of GPU 1's quad, by the board's module map.
        self.assertEqual(set(base.pair_of(base.not_a_pair(1)[1])), gpus)

    def test_skips_excluded_hosts(self):
        self.hosts.add_host('cmp1')
        self.hosts.add_host('cmp2')
        self.hosts.use('cmp2', [1])     # cmp2 would be preferred
        instance = gpu_hosts.create_instance(self.context, 2)

        selection = self._select(instance, excluded=['cmp2'])

        self.assertEqual('cmp1', selection.host)
        allocations = self.hosts.allocations(instance.uuid)
        self.assertIn(self.hosts.roots['cmp1'], allocations)
        self.assertNotIn(self.hosts.roots['cmp2'], allocations)

    def test_skips_disabled_compute_services(self):
        self.hosts.add_host('cmp1', disabled=True)
        self.hosts.add_host('cmp2')
        instance = gpu_hosts.create_instance(self.context, 1)

        self.assertEqual('cmp2', self._select(instance).host)

    def test_skips_compute_services_that_stopped_reporting(self):
        self.hosts.add_host('cmp1')
        self.hosts.add_host('cmp2')
        self.hosts.use('cmp2', [1])     # the fuller host is preferred...
        self.hosts.last_seen('cmp2', 61)  # ...but its compute is down
        self.hosts.last_seen('cmp1', 5)
        instance = gpu_hosts.create_instance(self.context, 1)

        self.assertEqual('cmp1', self._select(instance).host)

    def test_skips_forced_down_compute_services(self):
        self.hosts.add_host('cmp1')
        self.hosts.add_host('cmp2')
        self.hosts.use('cmp2', [1])     # the fuller host is preferred...
        service = db.service_get_by_host_and_binary(
            self.context, 'cmp2', 'nova-compute')
        db.service_update(self.context, service.id,
                          {'forced_down': True})  # ...but forced down
        instance = gpu_hosts.create_instance(self.context, 1)

        self.assertEqual('cmp1', self._select(instance).host)

    def test_no_valid_host_says_which_computes_are_down(self):
        self.hosts.add_host('hgx-2')
        # The clock stands still, so the age in the reason is exact
        # however long the test takes.
        timeutils.set_time_override()
        self.addCleanup(timeutils.clear_time_override)
        self.hosts.last_seen('hgx-2', 300)
        instance = gpu_hosts.create_instance(self.context, 2)

        error = self.assertRaises(exception.NoValidHost, self._select,
                                  instance)

        self.assertIn('hgx-2 is down (last seen 300s ago', error.message)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))

    def test_compute_node_without_service_is_not_used(self):
        self.hosts.add_host('cmp1')
        with db.context_manager.writer.using(self.context):
            self.context.session.execute(
                sa.update(models.ComputeNode).values(service_id=None))
            self.context.session.execute(sa.delete(models.Service))
        instance = gpu_hosts.create_instance(self.context, 1)

        error = self.assertRaises(exception.NoValidHost, self._select,
                                  instance)

        self.assertIn('cmp1 is down (no service has ever reported',
                      error.message)

    def test_retries_next_candidate_when_claim_conflicts(self):
        self.hosts.add_host('cmp1')
        racing = _RacingReportClient(self.conf, self.hosts)
        self.scheduler = manager.SchedulerManager(self.conf, racing)
        instance = gpu_hosts.create_instance(self.context, 2)

        selection = self._select(instance)

        self.assertEqual(2, len(racing.claimed))
        self.assertEqual(racing.claimed[1],
                         selection.allocation_request)
        ours = self.hosts.gpus_of(
            'cmp1', self.hosts.allocations(instance.uuid))
        theirs = self.hosts.gpus_of(
            'cmp1', self.hosts.allocations(racing.intruder))
        self.assertIn(frozenset(ours), gpu_hosts.PAIRS)
        self.assertIn(frozenset(theirs), gpu_hosts.PAIRS)
        self.assertEqual(set(), ours & theirs)

    def test_asks_again_when_every_candidate_was_taken(self):
        # One candidate per answer: the intruder takes the only board
        # offered, and the next answer offers the other host's board.
        self.conf.set_override('max_placement_results', 1, 'scheduler')
        for host in ('cmp1', 'cmp2'):
            self.hosts.add_host(host)
        racing = _RacingReportClient(self.conf, self.hosts)
        self.scheduler = manager.SchedulerManager(self.conf, racing)
        instance = gpu_hosts.create_instance(self.context, 8)

        selection = self._select(instance)

        self.assertEqual(2, len(racing.claimed))
        self.assertEqual(racing.claimed[1], selection.allocation_request)
        taken = self.hosts.allocations(racing.intruder)
        self.assertEqual(set(), set(taken) & set(
            self.hosts.allocations(instance.uuid)))

    def test_queries_are_bounded_by_max_claim_rounds(self):
        self.conf.set_override('max_placement_results', 1, 'scheduler')
        self.conf.set_override('max_claim_rounds', 1, 'scheduler')
        for host in ('cmp1', 'cmp2'):
            self.hosts.add_host(host)
        racing = _RacingReportClient(self.conf, self.hosts)
        self.scheduler = manager.SchedulerManager(self.conf, racing)
        instance = gpu_hosts.create_instance(self.context, 8)

        error = self.assertRaises(exception.NoValidHost, self._select,
                                  instance)

        self.assertIn('refused the claims on all 1 candidate(s)',
                      error.message)
        self.assertIn('found in 1 queries ([scheduler]max_claim_rounds)',
                      error.message)
        self.assertEqual([refusal.CLAIMS_TAKEN], error.kwargs['codes'])
        self.assertEqual({}, self.hosts.allocations(instance.uuid))

    def test_no_candidates_raises_no_valid_host_naming_the_request(self):
        self.hosts.add_host('cmp1')
        self.hosts.use('cmp1', [5])     # the board is no longer free
        instance = gpu_hosts.create_instance(self.context, 8)

        error = self.assertRaises(exception.NoValidHost, self._select,
                                  instance)

        self.assertEqual(
            'No valid host was found. There are not enough hosts '
            'available: no host can provide 4 VCPU, 4096 MEMORY_MB and a '
            'free nvlink group of 8 x PGPU: only 7 PGPU devices free, 8 '
            'needed', error.message)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))

    def test_group_size_no_host_declares_raises_no_valid_host(self):
        self.hosts.add_host('cmp1')
        # No host has groups of 3, so Placement has never seen the traits
        # of that size and refuses the query itself.
        instance = gpu_hosts.create_instance(self.context, 3)

        error = self.assertRaises(exception.NoValidHost, self._select,
                                  instance)

        self.assertIn('a free nvlink group of 3 x PGPU', error.message)
        self.assertIn('CUSTOM_PCI_GROUP_NVLINK_3', error.message)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))

    def test_all_candidates_excluded_raises_no_valid_host(self):
        self.hosts.add_host('cmp1')
        instance = gpu_hosts.create_instance(self.context, 4)

        error = self.assertRaises(exception.NoValidHost, self._select,
                                  instance, ['cmp1'])

        self.assertIn('cmp1 already tried', error.message)
        self.assertIn('a free nvlink group of 4 x PGPU', error.message)
        self.assertEqual([refusal.HOSTS_UNUSABLE], error.kwargs['codes'])
        self.assertEqual({}, self.hosts.allocations(instance.uuid))

    def test_unknown_instance(self):
        self.assertRaises(exception.InstanceNotFound,
                          self.scheduler.select_destination, self.context,
                          'c0ffee00-0000-4000-8000-000000000000', [], OWNER)

    def test_flavor_only_request(self):
        self.hosts.add_host('cmp1')
        instance = gpu_hosts.create_instance(self.context, 0)

        selection = self._select(instance)

        self.assertEqual('cmp1', selection.host)
        self.assertEqual(
            {self.hosts.roots['cmp1']: {'VCPU': 4, 'MEMORY_MB': 4096}},
            self.hosts.allocations(instance.uuid))
        self.assertEqual(
            'cmp1', db.compute_node_get_by_nodename(
                self.context, selection.nodename).host)


class TestClaimsAndTimeouts(gpu_hosts.GpuHostsTestCase):
    """A claim is for one build attempt; a late one is given back."""

    def setUp(self):
        super().setUp()
        self.context = self.admin
        self.hosts.add_host('cmp1')
        self.instance = gpu_hosts.create_instance(self.context, 2)
        self.uuid = self.instance.uuid
        db.instance_build_lease_take(self.context, self.uuid, OWNER,
                                     timeutils.utcnow(), any_unowned=True)

    def _select(self, before_claim=lambda uuid: None, owner=OWNER):
        self.reportclient = _LateReportClient(self.conf, before_claim)
        scheduler = manager.SchedulerManager(self.conf, self.reportclient)
        try:
            return scheduler.select_destination(self.context, self.uuid,
                                                [], owner)
        except oslo_messaging.ExpectedException as wrapped:
            raise wrapped.exc_info[1]

    def test_other_owner_claims_nothing(self):
        error = self.assertRaises(exception.BuildLeaseLost, self._select,
                                  owner='conductor-2:old')
        self.assertIn('conductor-1:test drives it now', error.message)
        self.assertEqual(0, self.reportclient.claims)
        self.assertEqual({}, self.hosts.allocations(self.uuid))

    def test_failed_build_claims_nothing(self):
        db.instance_update(self.context, self.uuid,
                           {'vm_state': 'error', 'task_state': None})
        error = self.assertRaises(exception.BuildLeaseLost, self._select)
        self.assertIn('it is error/None', error.message)
        self.assertEqual({}, self.hosts.allocations(self.uuid))

    def test_claim_after_the_conductor_timed_out_is_given_back(self):
        def conductor_times_out(uuid):
            # What the conductor does when its call times out: ERROR,
            # then free (nothing is claimed yet).
            db.instance_update(self.context, uuid, {
                'vm_state': 'error', 'task_state': None,
                'fault_message': 'MessagingTimeout'},
                expected={'build_owner': OWNER})
            self.reportclient.delete_allocation_for_instance(uuid)

        error = self.assertRaises(exception.BuildLeaseLost, self._select,
                                  conductor_times_out)
        self.assertEqual(1, self.reportclient.claims)
        self.assertIn('not waiting to be scheduled', error.message)
        self.assertEqual({}, self.hosts.allocations(self.uuid))

    def test_claim_for_a_deleted_instance_is_given_back(self):
        def deleted(uuid):
            db.instance_update(self.context, uuid,
                               {'task_state': 'deleting'})
            self.reportclient.delete_allocation_for_instance(uuid)
            db.instance_destroy(self.context, uuid)

        self.assertRaises(exception.BuildLeaseLost, self._select, deleted)
        self.assertEqual(1, self.reportclient.claims)
        self.assertEqual({}, self.hosts.allocations(self.uuid))

    def test_claim_for_a_taken_over_build_is_left_to_its_owner(self):
        def taken_over(uuid):
            db.instance_update(self.context, uuid,
                               {'build_owner': 'conductor-2:new'})

        self.assertRaises(exception.BuildLeaseLost, self._select,
                          taken_over)
        # Freeing here could free the new owner's claim; it frees this
        # one before it schedules.
        self.assertEqual(1, self.reportclient.claims)
        self.assertIn(frozenset(self.hosts.gpus_of(
            'cmp1', self.hosts.allocations(self.uuid))), gpu_hosts.PAIRS)
