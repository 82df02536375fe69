"""Tests of nova.compute.repair: what a compute settles when it starts
again, and the periodic power state sync, on the compute manager with a
fake hypervisor and Placement (``fakes``) and a real database."""

import inspect

import oslo_messaging

from nova import rpc
from nova.compute import health
from nova.compute import instance_actions
from nova.compute import moves
from nova.compute import repair
from nova.compute import task_states
from nova.compute import vm_states
from nova.db import api as db
from nova.tests.fixtures import rpc as rpc_fixture
from nova.tests.unit.compute import test_manager
from nova.virt import driver as virt_driver

GPUS = test_manager.GPUS
HOST = test_manager.HOST


class TestStartUpRepair(test_manager.ComputeManagerTestCase):

    def test_half_built_instance_is_torn_down_and_handed_back(self):
        instance = self.create_instance()
        self.build(instance)
        # The service died while spawning.
        db.instance_update(self.context, instance.uuid, {
            'vm_state': vm_states.BUILDING,
            'task_state': task_states.SPAWNING})

        self.compute = self.make_compute()

        self.assertEqual({}, self.driver.guests)
        self.assertEqual({GPUS[0]: None, GPUS[1]: None}, self.holders())
        stored = self.get(instance)
        self.assertEqual((task_states.SCHEDULING, None),
                         (stored.task_state, stored.host))

    def test_guest_and_devices_of_a_deleted_instance_are_freed(self):
        instance = self.create_instance()
        self.build(instance)
        kept = self.create_instance()
        self.build(kept, [GPUS[1]])
        # Deleted through the API while this compute was down.
        db.instance_destroy(self.context, instance.uuid)

        self.compute = self.make_compute()

        self.assertEqual([kept.uuid], self.driver.list_instance_uuids())
        self.assertEqual({GPUS[0]: None, GPUS[1]: kept.uuid},
                         self.holders())
        self.assertIn('guest of instance %s destroyed' % instance.uuid,
                      self.logger.output)

    def test_interrupted_power_off_is_finished(self):
        instance = self.create_instance()
        self.build(instance)
        db.instance_update(self.context, instance.uuid,
                           {'task_state': task_states.POWERING_OFF})

        self.compute = self.make_compute()

        stored = self.get(instance)
        self.assertEqual((vm_states.STOPPED, None, virt_driver.SHUTDOWN),
                         (stored.vm_state, stored.task_state,
                          stored.power_state))
        self.assertEqual(virt_driver.SHUTDOWN,
                         self.driver.guests[instance.uuid])

    def test_nothing_to_repair_touches_nothing(self):
        instance = self.create_instance()
        self.build(instance)
        calls = len(self.driver.calls)

        self.compute = self.make_compute()

        self.assertEqual([('init_host', HOST)], self.driver.calls[calls:])
        self.assertEqual(vm_states.ACTIVE, self.get(instance).vm_state)
        self.assertIn('nothing to repair', self.logger.output)


class TestPowerState(test_manager.ComputeManagerTestCase):
    """Servers matched to their guests at start and periodically."""

    def setUp(self):
        super().setUp()
        self.instance = self.create_instance()
        self.build(self.instance)
        self.uuid = self.instance.uuid

    def stop_action(self) -> tuple:
        """(event, result, traceback) of the server's newest action, which
        must be a stop."""
        [action] = [a for a in db.actions_get(self.context, self.uuid)
                    if a['action'] == instance_actions.STOP]
        [event] = db.action_events_get(self.context, action['id'])
        return event['event'], event['result'], event['traceback']

    def assert_state(self, vm_state: str, power_state: int) -> None:
        stored = self.get(self.instance)
        self.assertEqual((vm_state, None, power_state),
                         (stored.vm_state, stored.task_state,
                          stored.power_state))
        self.assertEqual(power_state, self.driver.guests[self.uuid])
        # Whatever happened, the server keeps its device.
        self.assertEqual(self.uuid, self.holders()[GPUS[0]])

    def test_lost_guest_of_active_server_is_stopped_at_start(self):
        del self.driver.guests[self.uuid]

        self.compute = self.make_compute()

        self.assertIn(('rebuild', self.uuid), self.driver.calls)
        self.assert_state(vm_states.STOPPED, virt_driver.SHUTDOWN)
        event, result, why = self.stop_action()
        self.assertEqual(('compute_init_host', 'Error'), (event, result))
        self.assertIn('resume_guests_state_on_host_boot is False', why)

    def test_lost_guest_of_active_server_resumed_when_asked(self):
        self.conf.set_override('resume_guests_state_on_host_boot', True)
        del self.driver.guests[self.uuid]

        self.compute = self.make_compute()

        self.assert_state(vm_states.ACTIVE, virt_driver.RUNNING)
        self.assertEqual([], db.actions_get(self.context, self.uuid))

    def test_shut_down_guest_of_active_server_resumed_when_asked(self):
        self.conf.set_override('resume_guests_state_on_host_boot', True)
        self.driver.guests[self.uuid] = virt_driver.SHUTDOWN

        self.compute = self.make_compute()

        self.assertIn(('power_on', self.uuid), self.driver.calls)
        self.assert_state(vm_states.ACTIVE, virt_driver.RUNNING)

    def test_lost_guest_of_shutoff_server_defined_powered_off(self):
        db.instance_update(self.context, self.uuid, {
            'vm_state': vm_states.STOPPED,
            'power_state': virt_driver.SHUTDOWN})
        del self.driver.guests[self.uuid]

        self.compute = self.make_compute()

        self.assert_state(vm_states.STOPPED, virt_driver.SHUTDOWN)
        self.assertIn('defined again, powered off', self.logger.output)

    def test_sync_stops_active_server_whose_guest_is_gone(self):
        del self.driver.guests[self.uuid]

        self.compute.sync_power_states()

        stored = self.get(self.instance)
        self.assertEqual((vm_states.STOPPED, virt_driver.NOSTATE),
                         (stored.vm_state, stored.power_state))
        event, result, why = self.stop_action()
        self.assertEqual(('compute_sync_power_state', 'Error'),
                         (event, result))
        self.assertIn('gone from the hypervisor', why)
        self.assertEqual(self.uuid, self.holders()[GPUS[0]])

    def test_sync_powers_off_guest_of_shutoff_server(self):
        db.instance_update(self.context, self.uuid,
                           {'vm_state': vm_states.STOPPED})

        self.compute.sync_power_states()

        self.assert_state(vm_states.STOPPED, virt_driver.SHUTDOWN)
        self.assertIn('found running', self.stop_action()[2])

    def test_sync_leaves_servers_with_a_task_alone(self):
        self.driver.guests[self.uuid] = virt_driver.SHUTDOWN
        db.instance_update(self.context, self.uuid,
                           {'task_state': task_states.POWERING_ON})

        self.compute.sync_power_states()

        stored = self.get(self.instance)
        self.assertEqual((vm_states.ACTIVE, task_states.POWERING_ON),
                         (stored.vm_state, stored.task_state))
        self.assertEqual([], db.actions_get(self.context, self.uuid))

    def test_sync_is_a_periodic_task_with_its_interval(self):
        self.conf.set_override('sync_power_state_interval', 42)
        self.assertIn(('sync_power_states', self.compute.sync_power_states,
                       42), self.compute.periodic_tasks())


class TestComputeSeam(test_manager.ComputeManagerTestCase):
    """repair.Compute, moves.Compute and health.Compute are all those
    modules use of the compute manager."""

    SEAMS = (repair.Compute, moves.Compute, health.Compute)

    def steps(self) -> list[tuple[type, str]]:
        """(protocol, method) for each method a seam lists."""
        return [(seam, name) for seam in self.SEAMS
                for name, member in vars(seam).items()
                if callable(member) and not name.startswith('_')]

    def test_the_manager_provides_what_its_seams_need(self):
        for seam in self.SEAMS:
            for name in seam.__annotations__:
                self.assertTrue(hasattr(self.compute, name), name)
        steps = self.steps()
        self.assertIn((repair.Compute, 'tear_down'), steps)
        self.assertIn((moves.Compute, 'claim_devices'), steps)
        self.assertIn((health.Compute, 'finish_action'), steps)
        for seam, name in steps:
            # Each step takes the arguments the module passes, by the
            # same names; any further parameter of the manager's is
            # optional.
            wanted = list(inspect.signature(
                getattr(seam, name)).parameters)[1:]
            provided = list(inspect.signature(
                getattr(self.compute, name)).parameters.values())
            self.assertEqual(wanted, [p.name for p in provided][
                :len(wanted)], name)
            self.assertEqual([], [p.name for p in provided[len(wanted):]
                                  if p.default is inspect.Parameter.empty],
                             name)

    def test_the_steps_are_no_part_of_the_rpc_api(self):
        # Public for the seams, not for any sender on the message bus.
        self.useFixture(rpc_fixture.RPCFixture()).start_server(
            'compute', HOST, [self.compute])
        client = rpc.get_client('compute', server=HOST, timeout=30)
        for name in sorted({name for _, name in self.steps()}):
            error = self.assertRaises(
                (oslo_messaging.NoSuchMethod, oslo_messaging.RemoteError),
                client.call, self.context, name)
            self.assertIn('Endpoint does not support RPC method %s' % name,
                          str(error))
