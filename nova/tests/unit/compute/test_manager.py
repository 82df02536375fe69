"""ComputeManager with fakes for the hypervisor, Placement and conductor.

The resource tracker and PCI tracker are the real ones, on the test
database; the virt driver keeps its guests in a dict, the report client
keeps the provider tree it was given, and the conductor RPC API records
its calls.
"""

import datetime
import sys
import uuid as uuidlib

import fixtures
from oslo_config import cfg
import oslo_messaging
from oslo_utils import timeutils

import nova.conf
from nova import context as nova_context
from nova.compute import instance_actions
from nova.compute import manager as compute_manager
from nova.compute import task_states
from nova.compute import vm_states
from nova.db import api as db
from nova.db import records
from nova import exception
from nova.pci import device as pci_device
from nova.pci import request as pci_request
from nova import test
from nova.tests.fixtures import database as db_fixture
from nova.tests.unit.compute import fakes
from nova.virt import driver as virt_driver

HOST = 'cmp1'
GPUS = ('0000:18:00.0', '0000:2a:00.0')
GPU_SPEC = '{"vendor_id": "10de", "product_id": "2335"}'
FLAVOR = records.FlavorSnapshot(id=1, flavorid='gpu', name='gpu', vcpus=4,
                                memory_mb=4096, root_gb=0, extra_specs={})


def gpu(address: str) -> pci_device.HostDevice:
    """An H200 GPU as the libvirt driver reports it."""
    return pci_device.HostDevice(address=address, vendor_id='10de',
                                 product_id='2335', numa_node=0)


class ComputeManagerTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        self.conf = cfg.ConfigOpts()
        nova.conf.register_all(self.conf)
        self.conf([], default_config_files=[], default_config_dirs=[])
        self.conf.set_override('device_spec', [GPU_SPEC], group='pci')
        self.conf.set_override('report_in_placement', True, group='pci')
        self.context = nova_context.get_admin_context()
        db.service_create(self.context, {
            'host': HOST, 'binary': 'nova-compute', 'topic': 'compute'})
        self.driver = fakes.FakeDriver(
            [gpu(address) for address in GPUS],
            {'vcpus': 64, 'memory_mb': 65536, 'local_gb': 100,
             'hypervisor_type': 'fake', 'hypervisor_hostname': HOST})
        self.reportclient = fakes.FakeReportClient()
        self.conductor = fakes.FakeConductorAPI()
        self.compute = self.make_compute()

    def make_compute(self) -> compute_manager.ComputeManager:
        """A compute on HOST with the fakes, started (init_host run)."""
        compute = compute_manager.ComputeManager(
            self.conf, self.driver, reportclient=self.reportclient,
            host=HOST)
        compute._conductor_api = self.conductor
        compute.init_host()
        return compute

    def create_instance(self, gpus: int = 1, **values) -> dict:
        """An instance the conductor placed on HOST, waiting to be built,
        asking for ``gpus`` GPUs in one PCI request."""
        requests = [pci_request.InstancePCIRequest(
            request_id=str(uuidlib.uuid4()), alias_name='h200', count=gpus,
            spec=[{'vendor_id': '10de'}], numa_policy='legacy',
            group_type=None, resource_class='PGPU',
            traits=set())] if gpus else []
        return db.instance_create(self.context, {
            'display_name': 'vm', 'project_id': 'proj', 'user_id': 'user',
            'flavor_id': FLAVOR.id, 'flavor': FLAVOR,
            'vm_state': vm_states.BUILDING,
            'task_state': task_states.SCHEDULING, 'host': HOST,
            'pci_requests': requests, **values})

    def mappings(self, instance: dict, addresses) -> dict:
        """What the scheduler hands the compute for ``instance``: the
        provider Placement allocated to each device of its PCI request."""
        [request] = instance.pci_requests
        rp_by_address = {dev.address: dev.rp_uuid
                         for dev in self.compute.rt.pci_tracker.pci_devs}
        return {request.request_id:
                [rp_by_address[address] for address in addresses]}

    def holders(self) -> dict[str, str | None]:
        """Device address -> instance holding it."""
        return {dev.address: dev.instance_uuid
                for dev in self.compute.rt.pci_tracker.pci_devs}

    def build(self, instance: dict, addresses=(GPUS[0],),
              mappings: dict | None = None) -> None:
        """Build ``instance`` on the devices at ``addresses`` (or with the
        given ``mappings``), raising what a remote caller would get."""
        if mappings is None:
            mappings = self.mappings(instance, addresses)
        try:
            self.compute.build_and_run_instance(
                self.context, instance.uuid, mappings)
        except oslo_messaging.ExpectedException as wrapped:
            # The RPC dispatcher unwraps it for the caller.
            raise wrapped.exc_info[1]

    def get(self, instance: dict) -> dict:
        return db.instance_get_by_uuid(self.context, instance.uuid)


class TestStart(ComputeManagerTestCase):

    def test_reports_the_node_and_a_provider_per_device(self):
        self.assertEqual([('init_host', HOST)], self.driver.calls)
        tree = self.reportclient.placement
        root = tree.data(HOST)
        self.assertEqual(self.compute.rt.compute_node.uuid, root.uuid)
        self.assertEqual(64, root.inventory['VCPU']['total'])
        for dev in self.compute.rt.pci_tracker.pci_devs:
            # Each GPU knows the provider that represents it.
            self.assertEqual(root.uuid,
                             tree.data(dev.rp_uuid).parent_uuid)
        self.assertEqual(set(GPUS), set(self.holders()))


class TestBuild(ComputeManagerTestCase):

    def test_claims_the_allocated_device_and_spawns(self):
        instance = self.create_instance()
        instance_actions.start(self.context, instance.uuid, 'create')

        self.build(instance, [GPUS[1]])

        self.assertEqual([(instance.uuid, [GPUS[1]])],
                         self.driver.spawned)
        self.assertEqual({GPUS[0]: None, GPUS[1]: instance.uuid},
                         self.holders())
        stored = self.get(instance)
        self.assertEqual((vm_states.ACTIVE, None, virt_driver.RUNNING,
                          HOST), (stored.vm_state, stored.task_state,
                                  stored.power_state, stored.node))
        action = db.action_get_by_request_id(
            self.context, instance.uuid, self.context.request_id)
        [event] = db.action_events_get(self.context, action['id'])
        self.assertEqual(('compute_build_instance', 'Success'),
                         (event['event'], event['result']))

    def test_build_from_a_conductor_of_api_1_0(self):
        # Before RPC API 1.3 the providers came as ``mappings``; a compute
        # upgraded first still builds what an older conductor asks.
        instance = self.create_instance()
        self.compute.build_and_run_instance(
            self.context, instance.uuid,
            mappings=self.mappings(instance, [GPUS[1]]))
        self.assertEqual([(instance.uuid, [GPUS[1]])],
                         self.driver.spawned)
        self.assertEqual(vm_states.ACTIVE, self.get(instance).vm_state)

    def test_pci_requests_parsed_only_by_the_database_layer(self):
        # The stored requests are read into InstancePCIRequests when the
        # instance record is read; the build's device claim and guest
        # NUMA nodes use the record's, never parsing them again.
        instance = self.create_instance()
        parse = pci_request.requests_from_primitive
        parsers = []

        def counting_parse(primitive):
            parsers.append(sys._getframe(1).f_globals['__name__'])
            return parse(primitive)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.pci.request.requests_from_primitive', counting_parse))
        self.build(instance, [GPUS[1]])
        self.assertNotEqual([], parsers)
        self.assertEqual({'nova.db.records'}, set(parsers))
        self.assertEqual([(instance.uuid, [GPUS[1]])],
                         self.driver.spawned)

    def test_spawn_failure_cleans_up_and_hands_the_build_back(self):
        instance = self.create_instance()
        self.driver.fail_spawn = exception.NovaException('disk on fire')

        error = self.assertRaises(exception.RescheduledException, self.build,
                                  instance)

        self.assertIn('disk on fire', str(error))
        # The guest spawn left is gone and the device is free again.
        self.assertEqual({}, self.driver.guests)
        self.assertEqual({GPUS[0]: None, GPUS[1]: None}, self.holders())
        stored = self.get(instance)
        self.assertEqual((vm_states.BUILDING, task_states.SCHEDULING, None),
                         (stored.vm_state, stored.task_state,
                          stored.host))
        # The allocation is the conductor's to free.
        self.assertEqual([], self.reportclient.deleted)

    def test_guest_no_host_could_run_aborts_the_build(self):
        instance = self.create_instance()
        self.driver.fail_spawn = exception.GuestHardwareUnsupported(
            reason='machine type pc has no PCIe root ports')

        error = self.assertRaises(exception.BuildAbortException,
                                  self.build, instance)

        self.assertIn('machine type pc has no PCIe root ports', str(error))
        self.assertEqual({}, self.driver.guests)
        self.assertEqual({GPUS[0]: None, GPUS[1]: None}, self.holders())
        self.assertEqual(task_states.SCHEDULING,
                         self.get(instance).task_state)

    def test_provider_holding_no_device_claims_nothing(self):
        instance = self.create_instance()
        [request] = instance.pci_requests
        mappings = {request.request_id:
                    [self.compute.rt.compute_node.uuid] * request.count}

        error = self.assertRaises(exception.RescheduledException,
                                  self.build, instance, mappings=mappings)

        self.assertIn('holds no PCI device', str(error))
        self.assertEqual([], self.driver.spawned)
        self.assertEqual({GPUS[0]: None, GPUS[1]: None}, self.holders())

    def test_build_no_longer_assigned_here_is_refused_untouched(self):
        instance = self.create_instance(host='cmp2')

        self.assertRaises(exception.RescheduledException, self.build,
                          instance)

        self.assertEqual([], self.driver.spawned)
        self.assertEqual('cmp2', self.get(instance).host)
        self.assertEqual({GPUS[0]: None, GPUS[1]: None}, self.holders())

    def test_replayed_build_of_an_active_instance_is_ignored(self):
        instance = self.create_instance()
        self.build(instance)

        self.build(instance)

        self.assertEqual(1, len(self.driver.spawned))
        self.assertEqual(vm_states.ACTIVE, self.get(instance).vm_state)


class TestTerminate(ComputeManagerTestCase):

    def test_destroys_guest_frees_devices_and_allocation(self):
        instance = self.create_instance(gpus=2)
        self.build(instance, GPUS)
        db.instance_update(self.context, instance.uuid,
                           {'task_state': task_states.DELETING})

        self.compute.terminate_instance(self.context, instance.uuid)

        self.assertNotIn(instance.uuid, self.driver.guests)
        self.assertEqual({GPUS[0]: None, GPUS[1]: None}, self.holders())
        self.assertEqual([instance.uuid], self.reportclient.deleted)
        self.assertRaises(exception.InstanceNotFound, self.get, instance)

    def test_terminate_of_an_unbuilt_instance_still_deletes_it(self):
        instance = self.create_instance()

        self.compute.terminate_instance(self.context, instance.uuid)

        self.assertEqual([instance.uuid], self.reportclient.deleted)
        self.assertRaises(exception.InstanceNotFound, self.get, instance)


class TestLifecycle(ComputeManagerTestCase):

    def setUp(self):
        super().setUp()
        self.instance = self.create_instance()
        self.build(self.instance)
        self.uuid = self.instance.uuid

    def accept(self, task_state: str) -> None:
        """What nova-api does before it casts the action."""
        db.instance_update(self.context, self.uuid,
                           {'task_state': task_state})

    def test_stop_then_start(self):
        self.accept(task_states.POWERING_OFF)
        self.compute.stop_instance(self.context, self.uuid)
        stored = self.get(self.instance)
        self.assertEqual((vm_states.STOPPED, None, virt_driver.SHUTDOWN),
                         (stored.vm_state, stored.task_state,
                          stored.power_state))
        # Stopped, it keeps its device.
        self.assertEqual(self.uuid, self.holders()[GPUS[0]])

        self.accept(task_states.POWERING_ON)
        self.compute.start_instance(self.context, self.uuid)
        self.assertEqual(virt_driver.RUNNING, self.driver.guests[self.uuid])
        self.assertEqual(vm_states.ACTIVE,
                         self.get(self.instance).vm_state)

    def test_hard_reboot_of_a_lost_guest_defines_it_again(self):
        del self.driver.guests[self.uuid]
        self.accept(task_states.REBOOTING_HARD)

        self.compute.reboot_instance(self.context, self.uuid, hard=True)

        self.assertIn(('rebuild', self.uuid), self.driver.calls)
        self.assertEqual(virt_driver.RUNNING, self.driver.guests[self.uuid])
        self.assertIsNone(self.get(self.instance).task_state)

    def test_failed_action_records_the_fault_and_clears_the_task(self):
        self.driver.guests[self.uuid] = virt_driver.SHUTDOWN
        self.accept(task_states.POWERING_ON)
        self.useFixture(fixtures.MockPatchObject(
            self.driver, 'power_on',
            side_effect=exception.NovaException('device busy')))

        self.assertRaises(exception.NovaException,
                          self.compute.start_instance, self.context,
                          self.uuid)

        stored = self.get(self.instance)
        self.assertEqual((vm_states.ACTIVE, None, virt_driver.SHUTDOWN),
                         (stored.vm_state, stored.task_state,
                          stored.power_state))
        self.assertIn('device busy', stored.fault_message)

    def test_root_disk_from_the_image_and_flavor(self):
        instance = self.create_instance(gpus=0, image_ref='debian.qcow2')
        self.build(instance, addresses=(), mappings={})
        self.assertEqual(
            (instance.uuid, virt_driver.RootDisk(
                'debian.qcow2', 0), False),
            self.driver.root_disks[-1])

    def test_no_image_no_root_disk(self):
        # setUp built an instance without an image_ref; "none" is none.
        instance = self.create_instance(gpus=0, image_ref='none')
        self.build(instance, addresses=(), mappings={})
        self.assertEqual([(self.uuid, None, False),
                          (instance.uuid, None, False)],
                         self.driver.root_disks)

    def test_rebuild_describes_the_guest_as_its_build_did(self):
        # One GuestSpec per build, rebuild or move end, from the same
        # instance fields: the rebuilt guest is the built one.
        [built] = self.driver.specs
        self.assertEqual((self.uuid, 'vm', 4, 4096, (GPUS[0],)),
                         (built.instance_uuid, built.name, built.vcpus,
                          built.memory_mb, tuple(built.addresses)))
        self.accept(task_states.REBUILDING)
        self.compute.rebuild_instance(self.context, self.uuid)
        self.assertEqual(built, self.driver.specs[-1])

    def test_rebuild_makes_the_disk_again_a_lost_guest_keeps_it(self):
        db.instance_update(self.context, self.uuid, {'image_ref': 'img'})
        self.accept(task_states.REBUILDING)
        self.compute.rebuild_instance(self.context, self.uuid)
        self.assertEqual((self.uuid, virt_driver.RootDisk(
            'img', 0), False),
            self.driver.root_disks[-1])

        del self.driver.guests[self.uuid]
        self.accept(task_states.REBOOTING_HARD)
        self.compute.reboot_instance(self.context, self.uuid, hard=True)
        self.assertTrue(self.driver.root_disks[-1][2])

    def test_console_output_tail(self):
        self.driver.console = 'one\ntwo\nthree\n'
        for tail, expected in ((None, 'one\ntwo\nthree\n'),
                               (2, 'two\nthree\n'), (10, 'one\ntwo\nthree\n'),
                               (0, '')):
            self.assertEqual(expected, self.compute.get_console_output(
                self.context, self.uuid, tail))

    def test_console_output_unsupported_by_the_driver(self):
        self.useFixture(fixtures.MockPatchObject(
            self.driver, 'get_console_output',
            side_effect=NotImplementedError('no log')))
        try:
            self.compute.get_console_output(self.context, self.uuid, None)
        except oslo_messaging.ExpectedException as wrapped:
            err = wrapped.exc_info[1]
        self.assertIsInstance(err, exception.ConsoleOutputNotSupported)
        self.assertEqual(501, err.code)

    def test_stop_of_a_lost_guest_is_done(self):
        del self.driver.guests[self.uuid]
        self.accept(task_states.POWERING_OFF)

        self.compute.stop_instance(self.context, self.uuid)

        stored = self.get(self.instance)
        self.assertEqual((vm_states.STOPPED, None),
                         (stored.vm_state, stored.task_state))
        self.assertEqual(self.uuid, self.holders()[GPUS[0]])

    def test_start_of_a_lost_guest_defines_it_again(self):
        del self.driver.guests[self.uuid]
        db.instance_update(self.context, self.uuid, {
            'vm_state': vm_states.STOPPED,
            'task_state': task_states.POWERING_ON})

        self.compute.start_instance(self.context, self.uuid)

        self.assertIn(('rebuild', self.uuid), self.driver.calls)
        self.assertEqual(virt_driver.RUNNING, self.driver.guests[self.uuid])
        stored = self.get(self.instance)
        self.assertEqual((vm_states.ACTIVE, None, virt_driver.RUNNING),
                         (stored.vm_state, stored.task_state,
                          stored.power_state))
        self.assertEqual(self.uuid, self.holders()[GPUS[0]])

    def test_action_not_accepted_is_ignored(self):
        self.compute.stop_instance(self.context, self.uuid)

        self.assertNotIn(('power_off', self.uuid), self.driver.calls)
        self.assertEqual(virt_driver.RUNNING, self.driver.guests[self.uuid])

    def test_expired_resize_is_handed_to_a_conductor(self):
        self.conf.set_override('resize_confirm_window', 60)
        db.instance_update(self.context, self.uuid,
                           {'vm_state': vm_states.RESIZED})
        migration, fresh = (db.migration_create(self.context, {
            'instance_uuid': self.uuid, 'migration_type': 'resize',
            'status': 'post-migrating', 'source_compute': 'cmp2',
            'dest_compute': HOST}) for _ in range(2))
        # The first finished 61 s ago, longer than the window; the other
        # just now.
        timeutils.set_time_override(
            timeutils.utcnow() - datetime.timedelta(seconds=61))
        self.addCleanup(timeutils.clear_time_override)
        db.migration_update(self.context, migration.uuid,
                            {'status': 'finished'})
        timeutils.clear_time_override()
        db.migration_update(self.context, fresh.uuid,
                            {'status': 'finished'})

        self.assertEqual([migration.uuid],
                         self.compute.confirm_expired_resizes())

        self.assertEqual([(self.uuid, migration.uuid)],
                         self.conductor.confirmed)
        self.assertEqual('confirming', db.migration_get_by_uuid(
            self.context, migration.uuid).status)
