"""ConductorManager.build_instance over in-process RPC.

The scheduler is the real SchedulerManager behind a real RPC server, with
a real Placement and database; each compute host is a small RPC endpoint
that records the build and then succeeds or fails as told (the real
compute manager is tested on its own).
"""

import threading


from nova.conductor import manager
from nova.db import api as db
from nova import exception
from nova.scheduler import manager as scheduler_manager
from nova.tests.fixtures import rpc as rpc_fixture
from nova.tests.unit.scheduler import fakes


class FakeCompute:
    """Compute-side endpoint of one host."""

    def __init__(self, host, hosts, reschedule=None, error=None):
        self.host = host
        self.hosts = hosts
        self.reschedule = reschedule
        self.error = error
        self.builds = []
        self.lock = threading.Lock()

    def build_and_run_instance(self, context, instance_uuid, mappings):
        instance = db.instance_get_by_uuid(context, instance_uuid)
        with self.lock:
            self.builds.append({
                'host_recorded': instance['host'],
                'mappings': mappings,
                'allocations': self.hosts.allocations(instance_uuid)})
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

    def select_destination(self, context, instance_uuid, excluded_hosts):
        selection = super().select_destination(context, instance_uuid,
                                               excluded_hosts)
        db.instance_update(context, instance_uuid,
                           {'task_state': 'deleting'})
        return selection


class TestBuildInstance(fakes.GpuHostsTestCase):

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
        instance = fakes.create_instance(self.context, gpus)
        self.conductor.build_instance(self.context, instance['uuid'])
        return db.instance_get_by_uuid(self.context, instance['uuid'])

    def test_success_on_first_host(self):
        cmp1 = self._add_compute('cmp1')
        self._start()

        instance = self._build()

        self.assertEqual('active', instance['vm_state'])
        self.assertEqual(('cmp1', 'cmp1'), (instance['host'],
                                            instance['node']))
        self.assertEqual(1, len(cmp1.builds))
        build = cmp1.builds[0]
        # The host was recorded and the allocation claimed before the
        # compute was called; the mappings name the claimed devices.
        self.assertEqual('cmp1', build['host_recorded'])
        gpus = self.hosts.gpus_of('cmp1', build['allocations'])
        self.assertIn(frozenset(gpus), fakes.PAIRS)
        mapped = {rps[0] for rps in build['mappings'].values()}
        self.assertEqual(gpus, self.hosts.gpus_of('cmp1', mapped))
        self.assertEqual(build['allocations'],
                         self.hosts.allocations(instance['uuid']))

    def test_reschedules_to_another_host(self):
        cmp1 = self._add_compute('cmp1')
        cmp2 = self._add_compute('cmp2', reschedule='libvirt said no')
        self.hosts.use('cmp2', [1])    # the scheduler prefers cmp2
        self._start()

        instance = self._build()

        self.assertEqual(1, len(cmp2.builds))
        self.assertEqual(1, len(cmp1.builds))
        self.assertEqual('active', instance['vm_state'])
        self.assertEqual('cmp1', instance['host'])
        allocations = self.hosts.allocations(instance['uuid'])
        self.assertIn(self.hosts.roots['cmp1'], allocations)
        self.assertEqual(set(), self.hosts.gpus_of('cmp2', allocations))
        self.assertIn(frozenset(self.hosts.gpus_of('cmp1', allocations)),
                      fakes.PAIRS)

    def test_final_failure_frees_allocation_and_records_fault(self):
        self._add_compute('cmp1', reschedule='GPU fell off the bus')
        self._add_compute('cmp2', reschedule='libvirt said no')
        self._start()

        instance = self._build()

        for compute in self.computes.values():
            self.assertEqual(1, len(compute.builds))
        self.assertEqual('error', instance['vm_state'])
        self.assertIsNone(instance['task_state'])
        self.assertIsNone(instance['host'])
        self.assertTrue(instance['fault_message'].startswith(
            'No valid host was found. There are not enough hosts '
            'available'), instance['fault_message'])
        self.assertIn('already tried', instance['fault_message'])
        self.assertIn('cmp1: GPU fell off the bus', instance['fault_message'])
        self.assertIn('cmp2: libvirt said no', instance['fault_message'])
        self.assertEqual({}, self.hosts.allocations(instance['uuid']))

    def test_max_attempts_bounds_the_reschedules(self):
        self.conf.set_override('max_attempts', 1, group='scheduler')
        for host in ('cmp1', 'cmp2'):
            self._add_compute(host, reschedule='broken %s' % host)
        self._start()

        instance = self._build()

        self.assertEqual(1, sum(len(c.builds)
                                for c in self.computes.values()))
        self.assertEqual('error', instance['vm_state'])
        self.assertIn('failed on every host tried ([scheduler]max_attempts '
                      '= 1). Earlier attempts: cmp', instance['fault_message'])
        self.assertEqual({}, self.hosts.allocations(instance['uuid']))

    def test_no_valid_host(self):
        self._add_compute('cmp1')
        self._start()
        self.hosts.use('cmp1', [1])

        instance = self._build(gpus=8)

        self.assertEqual([], self.computes['cmp1'].builds)
        self.assertEqual('error', instance['vm_state'])
        self.assertEqual(
            'No valid host was found. There are not enough hosts '
            'available: no host can provide 4 VCPU, 4096 MEMORY_MB and a '
            'free nvlink group of 8 x PGPU', instance['fault_message'])
        self.assertEqual({}, self.hosts.allocations(instance['uuid']))

    def test_unexpected_compute_error_is_not_rescheduled(self):
        cmp1 = self._add_compute('cmp1', error='disk full')
        cmp2 = self._add_compute('cmp2')
        self.hosts.use('cmp1', [1])    # the scheduler prefers cmp1
        self._start()

        instance = self._build()

        self.assertEqual(1, len(cmp1.builds))
        self.assertEqual([], cmp2.builds)
        self.assertEqual('error', instance['vm_state'])
        self.assertIn('disk full', instance['fault_message'])
        self.assertIn('InstanceSpawnFailed', instance['fault_details'])
        # The host stays recorded so a delete reaches that compute.
        self.assertEqual('cmp1', instance['host'])
        self.assertEqual({}, self.hosts.allocations(instance['uuid']))

    def test_delete_during_scheduling_frees_the_claim(self):
        cmp1 = self._add_compute('cmp1')
        self._start(_DeletingScheduler)

        instance = self._build()

        self.assertEqual([], cmp1.builds)
        self.assertEqual('deleting', instance['task_state'])
        self.assertEqual('building', instance['vm_state'])
        self.assertIsNone(instance['host'])
        self.assertEqual({}, self.hosts.allocations(instance['uuid']))
