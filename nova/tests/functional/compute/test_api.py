"""Tests for nova.compute.api: validation, the instance record, delete."""

import queue
import threading

import fixtures

from nova.compute import api as compute_api
from nova.compute import rpcapi as compute_rpcapi
from nova import context as nova_context
from nova.db import api as db
from nova.db import records
from nova import exception
from nova import rpc
from nova.scheduler import request_builder
from nova.tests.fixtures import rpc as rpc_fixture
from nova.tests.functional.lib import gpu_hosts


class FakeConductor:
    def __init__(self):
        self.builds = []
        self.called = threading.Event()

    def build_instance(self, context, instance_uuid):
        self.builds.append((context.project_id, instance_uuid))
        self.called.set()


class FakeCompute:
    def __init__(self):
        self.terminated = []

    def terminate_instance(self, context, instance_uuid):
        self.terminated.append(instance_uuid)


class TestComputeAPI(gpu_hosts.GpuHostsTestCase):

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture())
        self.conductor = FakeConductor()
        self.rpc.start_server('conductor', 'cond1', [self.conductor])
        self.compute = FakeCompute()
        self.rpc.start_server('compute', 'cmp1', [self.compute])
        self.context = nova_context.RequestContext(
            user_id='alice', project_id='proj')
        self.api = compute_api.API(self.conf)

    def _flavor(self, flavorid='gpu2', extra_specs=None, **values):
        specs = {'pci_passthrough:alias': 'h200:2'} \
            if extra_specs is None else extra_specs
        return db.flavor_create(self.admin, dict(
            {'flavorid': flavorid, 'name': flavorid, 'vcpus': 4,
             'memory_mb': 4096, 'root_gb': 10}, **values), specs)

    def _create(self, flavorid='gpu2'):
        [instance] = self.api.create(self.context, 'vm1', flavorid, 'none',
                                     {'k': 'v'})
        return instance

    def test_create_writes_the_instance_and_casts_the_build(self):
        flavor = self._flavor()

        instance = self._create()

        stored = db.instance_get_by_uuid(self.admin, instance.uuid)
        self.assertEqual(instance.uuid, stored.uuid)
        self.assertEqual(('vm1', 'proj', 'alice'), (
            stored.display_name, stored.project_id,
            stored.user_id))
        self.assertEqual(('building', 'scheduling'),
                         (stored.vm_state, stored.task_state))
        self.assertIsNone(stored.host)
        self.assertEqual(flavor.id, stored.flavor_id)
        self.assertEqual(records.FlavorSnapshot(
            id=flavor.id, flavorid='gpu2', name='gpu2', vcpus=4,
            memory_mb=4096, root_gb=10,
            extra_specs={'pci_passthrough:alias': 'h200:2'}), stored.flavor)
        [pci] = stored.pci_requests
        self.assertEqual(
            {'alias_name': 'h200', 'count': 2, 'group_type': 'nvlink',
             'resource_class': 'PGPU', 'traits': set(),
             'numa_policy': 'legacy'},
            {key: getattr(pci, key)
             for key in ('alias_name', 'count', 'group_type',
                         'resource_class', 'traits', 'numa_policy')})
        self.assertEqual(36, len(pci.request_id))
        self.assertTrue(self.conductor.called.wait(10))
        self.assertEqual([('proj', instance.uuid)], self.conductor.builds)

    def test_stored_pci_requests_decode_for_the_scheduler(self):
        self._flavor()
        instance = self._create()
        [request] = db.instance_get_by_uuid(self.admin,
                                            instance.uuid).pci_requests
        self.assertEqual(('h200', 2, 'nvlink', 'PGPU', set()), (
            request.alias_name, request.count, request.group_type,
            request.resource_class, request.traits))

    def _assert_rejected(self, exc_class, flavorid, *fragments):
        error = self.assertRaises(exc_class, self._create, flavorid)
        self.assertEqual(400, error.code)
        for fragment in fragments:
            self.assertIn(fragment, error.message)
        self.assertEqual([], db.instance_get_all(self.admin))
        self.assertEqual([], self.conductor.builds)

    def test_unknown_flavor(self):
        self._assert_rejected(exception.APIValidationError, 'nope',
                              'flavorRef', "'nope' does not exist")

    def test_disabled_flavor(self):
        self._flavor(disabled=True)
        self._assert_rejected(exception.APIValidationError, 'gpu2',
                              'flavorRef', "'gpu2' is disabled")

    def test_undefined_alias(self):
        self._flavor(extra_specs={'pci_passthrough:alias': 'a100:2'})
        self._assert_rejected(exception.PciRequestAliasNotDefined, 'gpu2',
                              "'a100'", 'defined aliases: h200')

    def test_malformed_alias_request(self):
        self._flavor(extra_specs={'pci_passthrough:alias': 'h200:two'})
        self._assert_rejected(exception.PciInvalidFlavorRequest, 'gpu2',
                              "'two'", 'positive integer')

    def test_bad_extra_spec(self):
        self._flavor(extra_specs={'trait:nonsense': 'required'})
        self._assert_rejected(exception.FlavorExtraSpecInvalid, 'gpu2',
                              'trait:nonsense')

    def test_pci_resource_class_in_flavor_resources(self):
        # PGPU is the class the h200 alias requests: as a flavor resource
        # Placement would allocate a GPU the compute never attaches.
        self._flavor(extra_specs={'resources:PGPU': '1'})
        self._assert_rejected(exception.FlavorExtraSpecInvalid, 'gpu2',
                              'resources:PGPU', "'1'",
                              'PCI device resource class',
                              'pci_passthrough:alias=<alias>:<count>')

    def test_extra_specs_checked_without_building_a_request(self):
        # Create and resize validate through the check `flavor set` uses;
        # the Placement query is the scheduler's to build.
        checked = []
        check = request_builder.check_extra_specs

        def recording_check(extra_specs, pci_resource_classes=()):
            checked.append(dict(extra_specs))
            return check(extra_specs, pci_resource_classes)

        def build(*args, **kwargs):
            raise AssertionError('the API built a resource request')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_builder.check_extra_specs',
            recording_check))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_builder.build_resource_request', build))
        self._flavor()
        instance = self._create()
        self._flavor(flavorid='bad', extra_specs={'resources:PGPU': '1'})
        error = self.assertRaises(
            exception.FlavorExtraSpecInvalid, self.api.resize, self.context,
            instance, 'bad')
        self.assertIn('PCI device resource class', error.message)
        self.assertEqual([{'pci_passthrough:alias': 'h200:2'},
                          {'resources:PGPU': '1'}], checked)

    def test_get_and_get_all(self):
        self._flavor()
        first = self._create()
        second = self._create()
        self.assertEqual(first.uuid,
                         self.api.get(self.context, first.uuid).uuid)
        self.assertEqual([first.uuid, second.uuid],
                         [i.uuid for i in self.api.get_all(self.context)])
        self.assertRaises(exception.InstanceNotFound, self.api.get,
                          self.context, 'c0ffee00-0000-4000-8000-000000000000')

    def test_delete_before_a_host_frees_the_allocation(self):
        self._flavor()
        instance = self._create()
        self.hosts.add_host('cmp1')
        # As if the scheduler had claimed already.
        self.hosts.allocate(instance.uuid, {
            self.hosts.roots['cmp1']: {'VCPU': 4, 'MEMORY_MB': 4096}})

        self.api.delete(self.context, instance.uuid)

        self.assertEqual({}, self.hosts.allocations(instance.uuid))
        self.assertRaises(exception.InstanceNotFound, self.api.get,
                          self.context, instance.uuid)
        self.assertEqual('deleting', db.instance_get_by_uuid(
            self.admin, instance.uuid, read_deleted=True).task_state)
        self.assertEqual([], self.compute.terminated)

    def test_delete_on_a_host_calls_its_compute(self):
        self._flavor()
        instance = self._create()
        self.hosts.add_host('cmp1')      # its service just registered: up
        db.instance_update(self.admin, instance.uuid,
                           {'host': 'cmp1', 'node': 'cmp1'})

        self.api.delete(self.context, instance.uuid)

        self.assertEqual([instance.uuid], self.compute.terminated)
        # The compute owns the teardown, record included.
        self.assertEqual('deleting', self.api.get(
            self.context, instance.uuid).task_state)

    def test_delete_unknown_instance(self):
        self.assertRaises(exception.InstanceNotFound, self.api.delete,
                          self.context, 'c0ffee00-0000-4000-8000-000000000000')

    def _on_host(self, host='cmp1', last_seen_ago=None):
        """An instance placed on ``host`` holding an allocation there;
        the host's compute last reported ``last_seen_ago`` seconds ago."""
        self._flavor()
        instance = self._create()
        self.hosts.add_host(host)
        if last_seen_ago is not None:
            self.hosts.last_seen(host, last_seen_ago)
        self.hosts.allocate(instance.uuid, {
            self.hosts.roots[host]: {'VCPU': 4, 'MEMORY_MB': 4096}})
        db.instance_update(self.admin, instance.uuid,
                           {'host': host, 'node': host})
        return instance

    def test_delete_on_a_down_compute_deletes_locally(self):
        instance = self._on_host(last_seen_ago=600)

        self.api.delete(self.context, instance.uuid)

        self.assertEqual([], self.compute.terminated)
        self.assertEqual({}, self.hosts.allocations(instance.uuid))
        self.assertRaises(exception.InstanceNotFound, self.api.get,
                          self.context, instance.uuid)
        self.assertIn('cmp1 is down (last seen 6', self.logger.output)

    def test_delete_on_a_compute_that_does_not_answer(self):
        # Reported up, but no compute serves cmp2 any more.
        self.rpc.conf.set_override('rpc_response_timeout', 1)
        instance = self._on_host('cmp2')

        self.api.delete(self.context, instance.uuid)

        self.assertEqual({}, self.hosts.allocations(instance.uuid))
        self.assertRaises(exception.InstanceNotFound, self.api.get,
                          self.context, instance.uuid)
        self.assertIn('cmp2 did not answer the delete', self.logger.output)

    def test_delete_while_placement_is_down_still_deletes(self):
        instance = self._on_host(last_seen_ago=600)
        self.placement.stop_server()
        self.addCleanup(self.placement.start_server)

        self.api.delete(self.context, instance.uuid)

        self.assertRaises(exception.InstanceNotFound, self.api.get,
                          self.context, instance.uuid)
        self.assertIn('freed when Placement answers again',
                      self.logger.output)
        # Recorded for the compute of cmp1 to free when Placement is back.
        self.assertEqual([(instance.uuid, 'cmp1')], [
            (row['consumer_uuid'], row['host'])
            for row in db.pending_free_get_all(self.context)])
        self.placement.start_server()
        # Still there until that compute's next update (or the audit).
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 4096},
                         self.hosts.allocations(instance.uuid)[
                             self.hosts.roots['cmp1']])


class RecordingCompute:
    """Compute endpoint double for the action casts: records each call."""

    # Serves the compute API's (and, as the conductor double, the
    # conductor API's) current version.
    target = rpc.endpoint_target(compute_rpcapi.VERSION)

    def __init__(self):
        self.calls = queue.Queue()

    def _record(self, method, **kwargs):
        self.calls.put((method, kwargs))

    def reboot_instance(self, context, **kwargs):
        self._record('reboot_instance', **kwargs)

    def stop_instance(self, context, **kwargs):
        self._record('stop_instance', **kwargs)

    def unshelve_instance(self, context, **kwargs):
        self._record('unshelve_instance', **kwargs)


class TestServerActions(gpu_hosts.GpuHostsTestCase):
    """Accepting actions: the state check and task state in one statement,
    the action record, the cast to the right service."""

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture())
        self.compute = RecordingCompute()
        self.rpc.start_server('compute', 'cmp1', [self.compute])
        self.conductor = RecordingCompute()
        self.conductor.unshelve_instance = (
            lambda context, **kw: self.conductor._record('conductor', **kw))
        self.rpc.start_server('conductor', 'cond1', [self.conductor])
        self.context = nova_context.RequestContext(
            user_id='alice', project_id='proj', request_id='req-1')
        self.api = compute_api.API(self.conf)

    def _instance(self, vm_state='active', task_state=None):
        return db.instance_create(self.admin, {
            'vm_state': vm_state, 'task_state': task_state, 'host': 'cmp1',
            'project_id': 'proj'}).uuid

    def test_accepted_action_sets_task_state_records_and_casts(self):
        uuid = self._instance()
        self.api.reboot(self.context, uuid, hard=True)
        self.assertEqual(('reboot_instance',
                          {'instance_uuid': uuid, 'hard': True}),
                         self.compute.calls.get(timeout=10))
        self.assertEqual('rebooting_hard', db.instance_get_by_uuid(
            self.admin, uuid).task_state)
        action = db.action_get_by_request_id(self.admin, uuid, 'req-1')
        self.assertEqual(('reboot', 'alice', 'proj', None), (
            action['action'], action['user_id'], action['project_id'],
            action['message']))

    def test_wrong_state_is_a_conflict_naming_it(self):
        stopped = self._instance('stopped')
        error = self.assertRaises(exception.InstanceInvalidState,
                                  self.api.stop, self.context, stopped)
        self.assertEqual("Cannot 'stop' instance %s while it is in "
                         "vm_state stopped" % stopped, error.message)
        self.assertEqual(409, error.code)
        busy = self._instance(task_state='rebooting')
        error = self.assertRaises(exception.InstanceInvalidState,
                                  self.api.rebuild, self.context, busy)
        self.assertIn('task_state rebooting', error.message)
        # Nothing changed and nothing was recorded.
        self.assertEqual(('stopped', None), tuple(
            getattr(db.instance_get_by_uuid(self.admin, stopped), key)
            for key in ('vm_state', 'task_state')))
        self.assertEqual([], db.actions_get(self.admin, stopped))
        self.assertTrue(self.compute.calls.empty())

    def test_hard_reboot_supersedes_a_soft_one_but_not_the_reverse(self):
        uuid = self._instance(task_state='rebooting')
        self.assertRaises(exception.InstanceInvalidState, self.api.reboot,
                          self.context, uuid, hard=False)
        self.api.reboot(self.context, uuid, hard=True)
        self.assertEqual('reboot_instance',
                         self.compute.calls.get(timeout=10)[0])

    def test_unshelve_goes_to_the_compute_or_the_conductor(self):
        shelved = self._instance('shelved')
        offloaded = self._instance('shelved_offloaded')
        self.api.unshelve(self.context, shelved)
        self.assertEqual(('unshelve_instance', {'instance_uuid': shelved}),
                         self.compute.calls.get(timeout=10))
        self.api.unshelve(self.context, offloaded)
        self.assertEqual(('conductor', {'instance_uuid': offloaded}),
                         self.conductor.calls.get(timeout=10))
        for uuid in (shelved, offloaded):
            self.assertEqual('unshelving', db.instance_get_by_uuid(
                self.admin, uuid).task_state)

    def test_concurrent_actions_accept_exactly_one(self):
        uuid = self._instance()
        outcomes = queue.Queue()

        def stop():
            try:
                self.api.stop(self.context, uuid)
                outcomes.put('accepted')
            except exception.InstanceInvalidState:
                outcomes.put('refused')
        threads = [threading.Thread(target=stop) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        results = sorted(outcomes.get() for _ in threads)
        self.assertEqual(['accepted'] + ['refused'] * 4, results)
        self.assertEqual(1, len(db.actions_get(self.admin, uuid)))
