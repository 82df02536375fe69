"""ConductorManager.build_instance over in-process RPC.

The scheduler is the real SchedulerManager behind a real RPC server, with
a real Placement and database; each compute host is a small RPC endpoint
that records the build and then succeeds or fails as told (the real
compute manager is tested on its own).
"""

import datetime
import threading
from unittest import mock

import fixtures
from oslo_utils import timeutils

from nova.compute import instance_actions
from nova.compute import rpcapi as compute_rpcapi
from nova.conductor import defrag
from nova.conductor import manager
from nova.db import api as db
from nova import exception
from nova import rpc
from nova.scheduler.client import report
from nova.scheduler import manager as scheduler_manager
from nova.scheduler import rpcapi as scheduler_rpcapi
from nova.tests.fixtures import rpc as rpc_fixture
from nova.tests.functional.lib import gpu_hosts

WAIT = 30    # bound of every wait for another thread, in seconds


def _ago(seconds):
    return timeutils.utcnow() - datetime.timedelta(seconds=seconds)


def _wait_until(check, what):
    """Poll ``check`` (bounded); AssertionError naming ``what``."""
    stop = threading.Event()
    for _ in range(WAIT * 20):
        if check():
            return
        stop.wait(0.05)
    raise AssertionError('timed out waiting for %s' % what)


class FakeCompute:
    """Compute-side endpoint of one host."""

    target = rpc.endpoint_target(compute_rpcapi.VERSION)

    def __init__(self, host, hosts, reschedule=None, error=None,
                 during=None):
        self.host = host
        self.hosts = hosts
        self.reschedule = reschedule
        self.error = error
        self.during = during    # called with the instance uuid, if set
        self.builds = []
        self.lock = threading.Lock()

    def build_and_run_instance(self, context, instance_uuid, pci_providers):
        instance = db.instance_get_by_uuid(context, instance_uuid)
        with self.lock:
            self.builds.append({
                'host_recorded': instance.host,
                'pci_providers': pci_providers,
                'allocations': self.hosts.allocations(instance_uuid)})
        if self.during:
            self.during(instance_uuid)
        if self.reschedule:
            # A real compute frees its devices before answering.
            raise exception.RescheduledException(
                instance_uuid=instance_uuid, reason=self.reschedule)
        if self.error:
            raise exception.InstanceSpawnFailed(
                uuid=instance_uuid, uri='test:///default', error=self.error)
        db.instance_update(context, instance_uuid,
                           {'vm_state': 'active', 'task_state': None})


class _DeletingScheduler(scheduler_manager.SchedulerManager):
    """Claims, then the user deletes the server before the conductor
    records the host."""

    def select_destination(self, context, instance_uuid, excluded_hosts,
                           build_owner, **kwargs):
        selection = super().select_destination(context, instance_uuid,
                                               excluded_hosts, build_owner,
                                               **kwargs)
        db.instance_update(context, instance_uuid,
                           {'task_state': 'deleting'})
        return selection


class BuildTestBase(gpu_hosts.GpuHostsTestCase):
    """A conductor, a real scheduler over RPC and fake computes."""

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture())
        self.context = self.admin
        self.computes = {}

    def _start(self, scheduler_cls=scheduler_manager.SchedulerManager):
        self.rpc.start_server('scheduler', 'sched1',
                              [scheduler_cls(self.conf)])
        self.conductor = manager.ConductorManager(self.conf)

    def _add_compute(self, host, **behaviour):
        self.hosts.add_host(host)
        compute = FakeCompute(host, self.hosts, **behaviour)
        self.rpc.start_server('compute', host, [compute])
        self.computes[host] = compute
        return compute

    def _build(self, gpus=2):
        instance = gpu_hosts.create_instance(self.context, gpus)
        self.conductor.build_instance(self.context, instance.uuid)
        return db.instance_get_by_uuid(self.context, instance.uuid)


class TestBuildInstance(BuildTestBase):

    def test_success_on_first_host(self):
        cmp1 = self._add_compute('cmp1')
        self._start()

        instance = self._build()

        self.assertEqual('active', instance.vm_state)
        self.assertEqual(('cmp1', 'cmp1'), (instance.host,
                                            instance.node))
        self.assertEqual(1, len(cmp1.builds))
        build = cmp1.builds[0]
        # The host was recorded and the allocation claimed before the
        # compute was called; its providers name the claimed devices.
        self.assertEqual('cmp1', build['host_recorded'])
        gpus = self.hosts.gpus_of('cmp1', build['allocations'])
        self.assertIn(frozenset(gpus), gpu_hosts.PAIRS)
        mapped = {rp for rps in build['pci_providers'].values() for rp in rps}
        self.assertEqual(gpus, self.hosts.gpus_of('cmp1', mapped))
        self.assertEqual(build['allocations'],
                         self.hosts.allocations(instance.uuid))

    def test_reschedules_to_another_host(self):
        cmp1 = self._add_compute('cmp1')
        cmp2 = self._add_compute('cmp2', reschedule='libvirt said no')
        self.hosts.use('cmp2', [1])    # the scheduler prefers cmp2
        self._start()

        instance = self._build()

        self.assertEqual(1, len(cmp2.builds))
        self.assertEqual(1, len(cmp1.builds))
        self.assertEqual('active', instance.vm_state)
        self.assertEqual('cmp1', instance.host)
        allocations = self.hosts.allocations(instance.uuid)
        self.assertIn(self.hosts.roots['cmp1'], allocations)
        self.assertEqual(set(), self.hosts.gpus_of('cmp2', allocations))
        self.assertIn(frozenset(self.hosts.gpus_of('cmp1', allocations)),
                      gpu_hosts.PAIRS)

    def test_final_failure_frees_allocation_and_records_fault(self):
        self._add_compute('cmp1', reschedule='GPU fell off the bus')
        self._add_compute('cmp2', reschedule='libvirt said no')
        self._start()

        instance = self._build()

        for compute in self.computes.values():
            self.assertEqual(1, len(compute.builds))
        self.assertEqual('error', instance.vm_state)
        self.assertIsNone(instance.task_state)
        self.assertIsNone(instance.host)
        self.assertTrue(instance.fault_message.startswith(
            'No valid host was found. There are not enough hosts '
            'available'), instance.fault_message)
        self.assertIn('already tried', instance.fault_message)
        self.assertIn('cmp1: GPU fell off the bus', instance.fault_message)
        self.assertIn('cmp2: libvirt said no', instance.fault_message)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))

    def test_max_attempts_bounds_the_reschedules(self):
        self.conf.set_override('max_attempts', 1, group='scheduler')
        for host in ('cmp1', 'cmp2'):
            self._add_compute(host, reschedule='broken %s' % host)
        self._start()

        instance = self._build()

        self.assertEqual(1, sum(len(c.builds)
                                for c in self.computes.values()))
        self.assertEqual('error', instance.vm_state)
        self.assertIn('failed on every host tried ([scheduler]max_attempts '
                      '= 1). Earlier attempts: cmp', instance.fault_message)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))

    def test_no_valid_host(self):
        self._add_compute('cmp1')
        self._start()
        self.hosts.use('cmp1', [1])

        instance = self._build(gpus=8)

        self.assertEqual([], self.computes['cmp1'].builds)
        self.assertEqual('error', instance.vm_state)
        self.assertEqual(
            'No valid host was found. There are not enough hosts '
            'available: no host can provide 4 VCPU, 4096 MEMORY_MB and a '
            'free nvlink group of 8 x PGPU: only 7 PGPU devices free, 8 '
            'needed', instance.fault_message)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))

    def test_unexpected_compute_error_is_not_rescheduled(self):
        cmp1 = self._add_compute('cmp1', error='disk full')
        cmp2 = self._add_compute('cmp2')
        self.hosts.use('cmp1', [1])    # the scheduler prefers cmp1
        self._start()

        instance = self._build()

        self.assertEqual(1, len(cmp1.builds))
        self.assertEqual([], cmp2.builds)
        self.assertEqual('error', instance.vm_state)
        self.assertIn('disk full', instance.fault_message)
        self.assertIn('InstanceSpawnFailed', instance.fault_details)
        # The host stays recorded so a delete reaches that compute.
        self.assertEqual('cmp1', instance.host)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))

    def test_delete_during_scheduling_frees_the_claim(self):
        cmp1 = self._add_compute('cmp1')
        self._start(_DeletingScheduler)

        instance = self._build()

        self.assertEqual([], cmp1.builds)
        self.assertEqual('deleting', instance.task_state)
        self.assertEqual('building', instance.vm_state)
        self.assertIsNone(instance.host)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))


class _SlowScheduler(scheduler_manager.SchedulerManager):
    """Answers only after the conductor gave up waiting: its claim waits
    until the conductor has failed the build and freed."""

    def __init__(self, conf, conductor_freed):
        super().__init__(conf, _WaitingReportClient(conf, conductor_freed))
        self.done = threading.Event()

    def select_destination(self, *args, **kwargs):
        try:
            return super().select_destination(*args, **kwargs)
        finally:
            self.done.set()


class _WaitingReportClient(report.SchedulerReportClient):

    def __init__(self, conf, event):
        super().__init__(conf)
        self.event = event
        self.claimed = False

    def claim_resources(self, *args):
        if not self.event.wait(WAIT):
            raise AssertionError('the conductor never freed')
        self.claimed = super().claim_resources(*args)
        return self.claimed


class _SignallingReportClient(report.SchedulerReportClient):

    def __init__(self, conf):
        super().__init__(conf)
        self.freed = threading.Event()

    def delete_allocation_for_instance(self, consumer_uuid):
        super().delete_allocation_for_instance(consumer_uuid)
        self.freed.set()


class TestBuildLeases(BuildTestBase):
    """Claims vs. timeouts, replays and re-driving orphaned builds."""

    def _orphan(self, gpus=2, age=120, **values):
        """A build whose conductor died ``age`` seconds ago (or, without
        an owner, whose nova-api died before handing it over)."""
        timeutils.set_time_override(_ago(age))
        try:
            instance = gpu_hosts.create_instance(self.context, gpus)
            if values:
                db.instance_update(self.context, instance.uuid, {
                    'build_heartbeat': timeutils.utcnow(), **values})
        finally:
            timeutils.clear_time_override()
        return instance.uuid

    def _redrive(self, conductor=None):
        for thread in (conductor or self.conductor).redrive_orphaned_builds():
            thread.join(WAIT)
            self.assertFalse(thread.is_alive())

    def test_scheduler_answering_after_the_timeout_leaks_nothing(self):
        self._add_compute('cmp1')
        # A scheduler that stopped answering after 1 s (RabbitMQ's call
        # monitor does this for a dead one).
        self.useFixture(fixtures.MockPatchObject(
            scheduler_rpcapi, 'SELECT_TIMEOUT', 1))
        reportclient = _SignallingReportClient(self.conf)
        scheduler = _SlowScheduler(self.conf, reportclient.freed)
        self.rpc.start_server('scheduler', 'sched1', [scheduler])
        self.conductor = manager.ConductorManager(self.conf, reportclient)

        instance = self._build()

        self.assertEqual('error', instance.vm_state)
        self.assertIn('MessagingTimeout', instance.fault_details)
        self.assertTrue(scheduler.done.wait(WAIT))
        # The scheduler did claim, after the conductor freed, and gave
        # the claim back itself.
        self.assertTrue(scheduler.reportclient.claimed)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))
        self.assertEqual([], self.computes['cmp1'].builds)

    def test_replayed_build_request_is_ignored(self):
        cmp1 = self._add_compute('cmp1')
        self._start()
        instance = self._build()
        allocations = self.hosts.allocations(instance.uuid)

        self.conductor.build_instance(self.context, instance.uuid)
        manager.ConductorManager(self.conf).build_instance(
            self.context, instance.uuid)

        self.assertEqual(1, len(cmp1.builds))
        self.assertEqual(instance, db.instance_get_by_uuid(
            self.context, instance.uuid))
        self.assertEqual(allocations,
                         self.hosts.allocations(instance.uuid))

    def test_build_of_a_dead_conductor_is_redriven(self):
        cmp1 = self._add_compute('cmp1')
        self._start()
        uuid = self._orphan(build_owner='conductor-0:dead', host='cmp1',
                            node='cmp1')
        # What the dead conductor's scheduler had claimed: the board.
        self.hosts.use('cmp1', range(1, 9), consumer=uuid)

        self._redrive()

        instance = db.instance_get_by_uuid(self.context, uuid)
        self.assertEqual('active', instance.vm_state)
        self.assertEqual(self.conductor.owner, instance.build_owner)
        self.assertEqual(1, len(cmp1.builds))
        # The old claim was freed and exactly one pair claimed anew.
        allocations = self.hosts.allocations(uuid)
        self.assertIn(frozenset(self.hosts.gpus_of('cmp1', allocations)),
                      gpu_hosts.PAIRS)
        self.assertEqual(cmp1.builds[0]['allocations'], allocations)

    def test_build_nova_api_never_handed_over_is_driven(self):
        cmp1 = self._add_compute('cmp1')
        self._start()
        lost = self._orphan()
        on_its_way = gpu_hosts.create_instance(self.context, 2).uuid

        self.conductor.init_host()    # a conductor (re)starting
        _wait_until(lambda: db.instance_get_by_uuid(
            self.context, lost).vm_state == 'active', 'the re-drive')

        self.assertEqual(1, len(cmp1.builds))
        self.assertEqual('scheduling', db.instance_get_by_uuid(
            self.context, on_its_way).task_state)
        self.assertEqual({}, self.hosts.allocations(on_its_way))

    def test_several_conductors_redrive_a_build_once(self):
        cmp1 = self._add_compute('cmp1')
        self._start()
        uuid = self._orphan(build_owner='conductor-0:dead')
        conductors = [manager.ConductorManager(self.conf) for _ in range(4)]
        barrier = threading.Barrier(len(conductors))
        threads = []

        def redrive(conductor):
            barrier.wait(WAIT)
            threads.extend(conductor.redrive_orphaned_builds())

        racers = [threading.Thread(target=redrive, args=(c,))
                  for c in conductors]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(WAIT)
        for thread in list(threads):
            thread.join(WAIT)

        self.assertEqual(1, len(threads))
        self.assertEqual(1, len(cmp1.builds))
        instance = db.instance_get_by_uuid(self.context, uuid)
        self.assertEqual('active', instance.vm_state)
        self.assertIn(instance.build_owner,
                      [c.owner for c in conductors])
        self.assertIn(frozenset(self.hosts.gpus_of(
            'cmp1', self.hosts.allocations(uuid))), gpu_hosts.PAIRS)

    def test_live_builds_renew_their_lease(self):
        seen = {}

        def during(uuid):
            seen['driving'] = set(self.conductor._builds)
            timeutils.set_time_override(_ago(-3600))
            try:
                self.conductor.renew_build_leases()
            finally:
                timeutils.clear_time_override()
            seen['heartbeat'] = db.instance_get_by_uuid(
                self.context, uuid).build_heartbeat

        self._add_compute('cmp1', during=during)
        self._start()
        instance = self._build()

        self.assertEqual({instance.uuid}, seen['driving'])
        self.assertGreater(seen['heartbeat'], _ago(-3000))
        self.assertEqual(set(), set(self.conductor._builds))
        # Nothing is orphaned an hour later while it is renewed.
        self.assertEqual([], db.instance_get_orphaned_builds(
            self.context, _ago(60)))

    def test_conductor_that_lost_the_build_frees_nothing(self):
        def taken_over(uuid):
            db.instance_update(self.context, uuid,
                               {'build_owner': 'conductor-2:new'})

        cmp1 = self._add_compute('cmp1', reschedule='libvirt said no',
                                 during=taken_over)
        self._start()

        instance = self._build()

        # Not failed, not rescheduled: no longer this conductor's build.
        self.assertEqual('building', instance.vm_state)
        self.assertEqual('conductor-2:new', instance.build_owner)
        self.assertEqual(1, len(cmp1.builds))
        # The claim is the new owner's to free (it frees on taking over).
        self.assertNotEqual({}, self.hosts.allocations(instance.uuid))

    def _compute_never_answers(self, meanwhile):
        """cmp1 runs ``meanwhile`` and never answers; cmp2 works."""
        self.useFixture(fixtures.MockPatchObject(
            compute_rpcapi, 'BUILD_TIMEOUT', 1))
        conductor_moved_on = threading.Event()
        self.addCleanup(conductor_moved_on.set)

        def hang(uuid):
            meanwhile(uuid)
            conductor_moved_on.wait(WAIT)

        cmp1 = self._add_compute('cmp1', during=hang)
        cmp2 = self._add_compute('cmp2')
        self.hosts.use('cmp1', [1])    # the scheduler prefers cmp1
        self._start()

        instance = self._build()
        conductor_moved_on.set()

        self.assertEqual(1, len(cmp1.builds))
        self.assertEqual(1, len(cmp2.builds))
        self.assertEqual(('active', 'cmp2'), (instance.vm_state,
                                              instance.host))
        self.assertEqual(set(), self.hosts.gpus_of(
            'cmp1', self.hosts.allocations(instance.uuid)))
        return instance

    def test_compute_that_handed_back_while_the_call_timed_out(self):
        def restarted(uuid):
            # A restarted compute tore the build down and handed it back.
            db.instance_update(self.context, uuid,
                               {'task_state': 'scheduling', 'host': None,
                                'node': None})

        instance = self._compute_never_answers(restarted)
        self.assertIn('cmp1, rescheduling: the compute did not answer',
                      self.logger.output)
        self.assertEqual('cmp2', instance.node)

    def test_compute_silent_before_spawning_is_rescheduled(self):
        instance = self._compute_never_answers(lambda uuid: None)
        self.assertIn('cmp1, rescheduling: the compute did not answer',
                      self.logger.output)
        self.assertEqual('cmp2', instance.node)

    def test_compute_that_stopped_answering_while_spawning_fails(self):
        self.useFixture(fixtures.MockPatchObject(
            compute_rpcapi, 'BUILD_TIMEOUT', 1))
        conductor_moved_on = threading.Event()
        self.addCleanup(conductor_moved_on.set)

        def spawning(uuid):
            db.instance_update(self.context, uuid,
                               {'task_state': 'spawning'})
            conductor_moved_on.wait(WAIT)

        self._add_compute('cmp1', during=spawning)
        cmp2 = self._add_compute('cmp2')
        self.hosts.use('cmp1', [1])    # the scheduler prefers cmp1
        self._start()

        instance = self._build()
        conductor_moved_on.set()

        # It may run there: not rescheduled, failed and freed; the
        # compute tears it down when it is back (see the compute).
        self.assertEqual([], cmp2.builds)
        self.assertEqual(('error', 'cmp1'), (instance.vm_state,
                                             instance.host))
        self.assertIn('MessagingTimeout', instance.fault_details)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))


class TestAutomaticDefrag(BuildTestBase):
    """A build refused for fragmentation with [scheduler]defrag_max_moves
    set: the moves run in a task of their own, then the build is driven
    again. The moves themselves (``defrag.free_group``) are the test's:
    test_defrag runs real ones."""

    def setUp(self):
        super().setUp()
        self.conf.set_override('defrag_max_moves', 2, group='scheduler')
        self._add_compute('cmp1')
        self._add_compute('cmp2')
        # One GPU used on each board: 14 free, no group of 8.
        self.blocker = self.hosts.use('cmp1', [1])
        self.hosts.use('cmp2', [1])
        self._start()
        self.moving = threading.Event()
        self.moves_done = threading.Event()

    def _moves(self, frees):
        """Moves that start, wait for the test, then free cmp1's board
        if ``frees``."""
        def free_group(context, conf, mover, size, host, max_moves,
                       report):
            self.moving.set()
            if not self.moves_done.wait(WAIT):
                raise AssertionError('the test never let the moves end')
            if not frees:
                return defrag.Outcome(None, 0, 'no plan')
            self.hosts.builder.call('delete',
                                    '/allocations/%s' % self.blocker)
            return defrag.Outcome(mock.sentinel.board, moved=1)
        return self.useFixture(fixtures.MockPatch(
            'nova.conductor.defrag.free_group',
            side_effect=free_group)).mock

    def _start_build(self):
        """An 8-GPU build handed to the conductor in a thread (as its
        RPC server would); the instance and that thread."""
        instance = gpu_hosts.create_instance(self.context, 8)
        instance_actions.start(self.context, instance.uuid,
                               instance_actions.CREATE)
        thread = threading.Thread(target=self.conductor.build_instance,
                                  args=(self.context, instance.uuid),
                                  daemon=True)
        thread.start()
        return instance.uuid, thread

    def _defragment_step(self, uuid):
        action = db.action_get_by_request_id(self.context, uuid,
                                             self.context.request_id)
        return [e for e in db.action_events_get(self.context, action['id'])
                if e['event'] == 'conductor_defragment']

    def test_the_build_thread_does_not_wait_for_the_moves(self):
        free_group = self._moves(frees=True)
        uuid, build = self._start_build()

        self.assertTrue(self.moving.wait(WAIT))
        build.join(WAIT / 3)
        # The build's RPC thread is free while servers move.
        self.assertFalse(build.is_alive())
        waiting = db.instance_get_by_uuid(self.context, uuid)
        self.assertEqual(
            ('building', 'scheduling', None, self.conductor.owner),
            (waiting.vm_state, waiting.task_state, waiting.host,
             waiting.build_owner))
        # Its lease is renewed meanwhile: no other conductor re-drives it.
        self.assertEqual({uuid}, set(self.conductor._builds))
        self.assertEqual(8, free_group.call_args.args[3])

        self.moves_done.set()
        _wait_until(lambda: db.instance_get_by_uuid(
            self.context, uuid).vm_state == 'active',
            'the build driven again after the moves')
        self.assertEqual(1, len(self.computes['cmp1'].builds))
        self.assertEqual([], self.computes['cmp2'].builds)
        self.assertEqual('cmp1',
                         db.instance_get_by_uuid(self.context, uuid).host)
        _wait_until(lambda: not self.conductor._builds, 'the lease let go')
        [step] = self._defragment_step(uuid)
        self.assertEqual(instance_actions.SUCCESS, step['result'])

    def test_a_build_no_move_serves_still_fails(self):
        self._moves(frees=False)
        uuid, build = self._start_build()
        self.assertTrue(self.moving.wait(WAIT))
        build.join(WAIT / 3)
        self.assertFalse(build.is_alive())

        self.moves_done.set()
        _wait_until(lambda: db.instance_get_by_uuid(
            self.context, uuid).vm_state == 'error',
            'the build failed after the moves')
        instance = db.instance_get_by_uuid(self.context, uuid)
        self.assertTrue(instance.fault_message.startswith(
            'No valid host was found'), instance.fault_message)
        self.assertIn('fragmentation', instance.fault_message)
        self.assertEqual([], self.computes['cmp1'].builds)
        self.assertEqual({}, self.hosts.allocations(uuid))
        _wait_until(lambda: not self.conductor._builds, 'the lease let go')
        [step] = self._defragment_step(uuid)
        self.assertEqual(instance_actions.ERROR, step['result'])
        self.assertIn('fragmentation', step['traceback'])
