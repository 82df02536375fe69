"""Server actions on GPU servers, through the REST API with every service
real: reboot, stop, start, rebuild, shelve, shelve offload, unshelve, the
instance actions that record them, and the compute start-up repair of
actions a crash cut short.

After every action the deployment is checked as a whole
(:meth:`ServerActionsBase.assert_consistent`): each server holds exactly
one declared partition of its flavor's size, Placement allocations equal
what the servers hold, no device row has two holders, and every libvirt
domain belongs to a server that holds its host (running exactly when the
server is ACTIVE).
"""

import datetime
import threading
import time

from oslo_utils import timeutils

from nova.compute import vm_states
from nova.conductor import manager as conductor_manager
from nova import context as nova_context
from nova.db import api as db
from nova.tests.fixtures import libvirt_faults
from nova.tests.functional.lib import invariants
from nova.tests.functional import test_boot_gpu_groups as boot
from nova.tests.functional import test_nvlink_partitions
from nova.tests.functional import test_pci_numa_affinity
from nova.virt import driver as virt_driver

PAIRS = boot.PAIRS
QUADS = boot.QUADS
TIMEOUT = boot.TIMEOUT


class ServerActionsBase(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.ctx = nova_context.get_admin_context()

    def act(self, server_id, body, expect=(202,)):
        return self.api('POST', '/servers/%s/action' % server_id, body,
                        expect=expect)

    def wait_status(self, server_id, status):
        """Wait until the server shows ``status`` with no task state."""
        deadline = time.monotonic() + TIMEOUT
        server = None
        while time.monotonic() < deadline:
            server = self.api('GET', '/servers/%s' % server_id)['server']
            if server['status'] == status and \
                    server['OS-EXT-STS:task_state'] is None:
                return server
            time.sleep(0.05)
        self.fail('server %s never reached %s: %s' % (
            server_id, status, server))

    def actions(self, server_id, version='2.51'):
        return self.session.get(
            self.allinone.api_url + '/servers/%s/os-instance-actions' %
            server_id,
            headers={'X-OpenStack-Nova-API-Version': version}).json()

    def action_detail(self, server_id, request_id, version='2.51',
                      token='admin'):
        resp = self.session.get(
            self.allinone.api_url + '/servers/%s/os-instance-actions/%s' %
            (server_id, request_id),
            headers={'X-OpenStack-Nova-API-Version': version,
                     'X-Auth-Token': token})
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()['instanceAction']

    def last_action(self, server_id):
        """The newest action of the server, with its events."""
        newest = self.actions(server_id)['instanceActions'][0]
        return self.action_detail(server_id, newest['request_id'])

    def assert_consistent(self):
        """Every invariant of the deployment holds, and every libvirt
        domain belongs to a server holding its host."""
        violations = invariants.check(self.allinone.api_url, 'admin',
                                      self.placement.api, self.ctx,
                                      settled=True)
        self.assertEqual([], violations, invariants.summary(violations))
        instances = {i.uuid: i for i in db.instance_get_all(self.ctx)}
        for host, compute in self.computes.items():
            for uuid in compute.driver.list_instance_uuids():
                instance = instances.get(uuid)
                self.assertIsNotNone(instance, 'domain %s on %s has no '
                                     'server' % (uuid, host))
                self.assertEqual(host, instance.host, instance)
                self.assertIn(instance.vm_state, (
                    vm_states.ACTIVE, vm_states.STOPPED, vm_states.SHELVED),
                    instance)
                running = compute.driver.get_power_state(uuid) == \
                    virt_driver.RUNNING
                self.assertEqual(instance.vm_state == vm_states.ACTIVE,
                                 running, instance)

    def assert_holds_stopped(self, server, gpus):
        """A SHUTOFF/SHELVED server keeps its devices, allocation and its
        (inactive) domain with the same hostdevs."""
        self.assertEqual(gpus, self.gpus_of(server))
        self.assertEqual(gpus, self.placement_gpus(server))
        compute = self.computes[server['OS-EXT-SRV-ATTR:host']]
        domain = compute.driver.host.lookup_domain(server['id'])
        self.assertIsNotNone(domain)
        self.assertFalse(domain.isActive())


class TestPowerActions(ServerActionsBase):

    def test_stop_start_reboot_rebuild_keep_the_same_pair(self):
        self.start_services()
        flavors = self.gpu_flavors()
        server = self.boot(flavors[2], 'vm')
        gpus = self.assert_server_holds(server, PAIRS)
        uuid = server['id']

        self.act(uuid, {'os-stop': None})
        stopped = self.wait_status(uuid, 'SHUTOFF')
        self.assertEqual(virt_driver.SHUTDOWN,
                         stopped['OS-EXT-STS:power_state'])
        self.assert_holds_stopped(stopped, gpus)
        self.assert_consistent()

        self.act(uuid, {'os-start': None})
        started = self.wait_status(uuid, 'ACTIVE')
        self.assertEqual(virt_driver.RUNNING,
                         started['OS-EXT-STS:power_state'])
        self.assertEqual(gpus, self.assert_server_holds(started, PAIRS))
        self.assert_consistent()

        for kind in ('SOFT', 'HARD'):
            self.act(uuid, {'reboot': {'type': kind}})
            rebooted = self.wait_status(uuid, 'ACTIVE')
            self.assertEqual(gpus, self.assert_server_holds(rebooted,
                                                            PAIRS))
            self.assert_consistent()

        body = self.act(uuid, {'rebuild': {'imageRef': 'none',
                                           'name': 'renamed'}})
        self.assertEqual('REBUILD', body['server']['status'])
        self.assertEqual('renamed', body['server']['name'])
        rebuilt = self.wait_status(uuid, 'ACTIVE')
        self.assertEqual(gpus, self.assert_server_holds(rebuilt, PAIRS))
        domain = self.computes['cmp1'].driver.host.lookup_domain(uuid)
        self.assertIn('<title>renamed</title>', domain.XMLDesc())
        self.assert_consistent()

        # A stopped server is rebuilt stopped, on the same devices.
        self.act(uuid, {'os-stop': None})
        self.wait_status(uuid, 'SHUTOFF')
        self.act(uuid, {'rebuild': {'imageRef': 'none'}})
        self.assert_holds_stopped(self.wait_status(uuid, 'SHUTOFF'), gpus)
        # A hard reboot starts a stopped server, as upstream.
        self.act(uuid, {'reboot': {'type': 'HARD'}})
        self.assertEqual(gpus, self.assert_server_holds(
            self.wait_status(uuid, 'ACTIVE'), PAIRS))
        self.assert_consistent()

        listed = self.actions(uuid)['instanceActions']
        self.assertEqual(['reboot', 'rebuild', 'stop', 'rebuild', 'reboot',
                          'reboot', 'start', 'stop', 'create'],
                         [a['action'] for a in listed])
        for action in listed:
            self.assertIsNone(action['message'], action)
            detail = self.action_detail(uuid, action['request_id'])
            self.assertTrue(detail['events'], detail)
            self.assertEqual({'Success'},
                             {e['result'] for e in detail['events']})

    def test_actions_in_the_wrong_state_are_409(self):
        self.start_services()
        flavors = self.gpu_flavors()
        server = self.boot(flavors[2], 'vm')
        uuid = server['id']
        gpus = self.gpus_of(server)
        for body, action in (({'os-start': None}, 'start'),
                             ({'shelveOffload': None}, 'shelveOffload'),
                             ({'unshelve': None}, 'unshelve')):
            fault = self.act(uuid, body, expect=(409,))
            self.assertEqual(
                "Cannot '%s' instance %s while it is in vm_state active" % (
                    action, uuid),
                fault['conflictingRequest']['message'])
        self.act(uuid, {'os-stop': None})
        self.wait_status(uuid, 'SHUTOFF')
        for body in ({'os-stop': None}, {'reboot': {'type': 'SOFT'}}):
            fault = self.act(uuid, body, expect=(409,))
            self.assertIn('vm_state stopped',
                          fault['conflictingRequest']['message'])
        # A server busy with another action refuses a second one.
        db.instance_update(self.ctx, uuid, {'task_state': 'powering-on'})
        fault = self.act(uuid, {'rebuild': {'imageRef': 'none'}},
                         expect=(409,))
        self.assertIn('task_state powering-on',
                      fault['conflictingRequest']['message'])
        db.instance_update(self.ctx, uuid, {'task_state': None})
        # Refused actions changed nothing and were not recorded.
        self.assert_holds_stopped(
            self.api('GET', '/servers/%s' % uuid)['server'], gpus)
        self.assertEqual(['stop', 'create'], [
            a['action'] for a in self.actions(uuid)['instanceActions']])
        self.assert_consistent()

    def test_bad_bodies_name_the_bad_value(self):
        self.start_services()
        server = self.boot(self.gpu_flavors()[1], 'vm')
        fault = self.act(server['id'], {'reboot': {'type': 'MEDIUM'}},
                         expect=(400,))
        self.assertIn('MEDIUM', fault['badRequest']['message'])
        fault = self.act(server['id'], {'hibernate': None}, expect=(400,))
        self.assertIn('hibernate', fault['badRequest']['message'])
        self.assertIn('os-stop', fault['badRequest']['message'])
        fault = self.act(server['id'], {'rebuild': {}}, expect=(400,))
        self.assertIn('imageRef', fault['badRequest']['message'])
        self.act('00000000-0000-0000-0000-000000000000', {'os-stop': None},
                 expect=(404,))
        self.assertEqual('ACTIVE', self.wait_status(server['id'],
                                                    'ACTIVE')['status'])

    def test_concurrent_stops_accept_exactly_one(self):
        self.start_services()
        server = self.boot(self.gpu_flavors()[2], 'vm')
        results = []
        barrier = threading.Barrier(4)

        def stop():
            barrier.wait()
            resp = self.session.post(
                self.allinone.api_url + '/servers/%s/action' % server['id'],
                json={'os-stop': None})
            results.append(resp.status_code)
        threads = [threading.Thread(target=stop) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
        self.assertEqual([202, 409, 409, 409], sorted(results))
        self.wait_status(server['id'], 'SHUTOFF')
        self.assertEqual(['stop', 'create'], [
            a['action'] for a in
            self.actions(server['id'])['instanceActions']])
        self.assert_consistent()

    def vanish(self, server) -> None:
        """The guest vanishes behind nova's back (``virsh undefine``)."""
        domain = self.computes['cmp1'].driver.host.lookup_domain(
            server['id'])
        domain.destroy()
        domain.undefine()

    def test_stop_and_start_of_a_vanished_guest(self):
        self.start_services()
        server = self.boot(self.gpu_flavors()[2], 'vm')
        gpus = self.gpus_of(server)
        self.vanish(server)
        # A guest that is gone is off: the stop is done.
        self.act(server['id'], {'os-stop': None})
        self.wait_status(server['id'], 'SHUTOFF')
        action = self.last_action(server['id'])
        self.assertEqual(('stop', None), (action['action'],
                                          action['message']))
        self.assertEqual(gpus, self.gpus_of(server))
        self.assert_consistent()
        # The start defines it again on the devices it holds.
        self.act(server['id'], {'os-start': None})
        self.assertEqual(gpus, self.assert_server_holds(
            self.wait_status(server['id'], 'ACTIVE'), PAIRS))
        self.assertIsNotNone(self.computes['cmp1'].driver.host.lookup_domain(
            server['id']))
        # So does a hard reboot.
        self.vanish(server)
        self.act(server['id'], {'reboot': {'type': 'HARD'}})
        self.assertEqual(gpus, self.assert_server_holds(
            self.wait_status(server['id'], 'ACTIVE'), PAIRS))
        self.assert_consistent()

    def test_failed_action_is_recorded_and_clears_the_task(self):
        self.start_services()
        server = self.boot(self.gpu_flavors()[2], 'vm')
        self.act(server['id'], {'os-stop': None})
        self.wait_status(server['id'], 'SHUTOFF')
        self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.computes['cmp1'].driver.host, 'create',
            message='device busy'))
        self.act(server['id'], {'os-start': None})
        deadline = time.monotonic() + TIMEOUT
        while db.instance_get_by_uuid(
                self.ctx, server['id']).task_state is not None:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        self.assertEqual('SHUTOFF', self.api(
            'GET', '/servers/%s' % server['id'])['server']['status'])
        action = self.last_action(server['id'])
        self.assertEqual('start', action['action'])
        self.assertEqual('Error', action['message'])
        [event] = action['events']
        self.assertEqual(('compute_start_instance', 'Error'),
                         (event['event'], event['result']))
        self.assertIn('device busy', event['traceback'])
        self.assert_consistent()

    def test_periodic_sync_stops_a_server_whose_guest_vanished(self):
        self.start_services()
        server = self.boot(self.gpu_flavors()[2], 'vm')
        gpus = self.gpus_of(server)
        self.vanish(server)
        self.computes['cmp1'].sync_power_states()
        stopped = self.wait_status(server['id'], 'SHUTOFF')
        self.assertEqual(0, stopped['OS-EXT-STS:power_state'])
        action = self.last_action(server['id'])
        self.assertEqual('stop', action['action'])
        [event] = action['events']
        self.assertEqual(('compute_sync_power_state', 'Error'),
                         (event['event'], event['result']))
        self.assertIn('gone from the hypervisor', event['traceback'])
        self.assertEqual(gpus, self.gpus_of(server))
        self.act(server['id'], {'os-start': None})
        self.assertEqual(gpus, self.assert_server_holds(
            self.wait_status(server['id'], 'ACTIVE'), PAIRS))
        self.assert_consistent()


class TestInstanceActionsAPI(ServerActionsBase):

    def test_bodies_as_upstream(self):
        self.start_services()
        server = self.boot(self.gpu_flavors()[1], 'vm')
        self.act(server['id'], {'os-stop': None})
        self.wait_status(server['id'], 'SHUTOFF')
        listed = self.actions(server['id'], version='2.58')
        self.assertEqual({'action', 'instance_uuid', 'message', 'project_id',
                          'request_id', 'start_time', 'user_id',
                          'updated_at'},
                         set(listed['instanceActions'][0]))
        self.assertNotIn('updated_at',
                         self.actions(server['id'])['instanceActions'][0])
        stop = listed['instanceActions'][0]
        self.assertTrue(stop['request_id'].startswith('req-'))
        detail = self.action_detail(server['id'], stop['request_id'],
                                    version='2.62')
        [event] = detail['events']
        self.assertEqual('compute_stop_instance', event['event'])
        self.assertEqual('cmp1', event['host'])
        self.assertTrue(event['hostId'])
        self.assertIn('traceback', event)
        self.assertIsNotNone(event['finish_time'])
        # Before 2.51 only callers allowed the events policy see events.
        self.assertIn('events', self.action_detail(
            server['id'], stop['request_id'], version='2.1'))
        resp = self.session.get(
            self.allinone.api_url + '/servers/%s/os-instance-actions/%s' % (
                server['id'], 'req-unknown'))
        self.assertEqual(404, resp.status_code)
        self.assertIn('req-unknown', resp.text)
        # From 2.21 the actions of a deleted server stay visible.
        self.delete(server['id'])
        self.assertEqual(404, self.session.get(
            self.allinone.api_url + '/servers/%s/os-instance-actions' %
            server['id']).status_code)
        self.assertEqual(['delete', 'stop', 'create'], [
            a['action'] for a in
            self.actions(server['id'], '2.21')['instanceActions']])


class TestShelve(ServerActionsBase):

    def test_shelve_then_offload_then_unshelve(self):
        self.flags(shelved_offload_time=-1)
        self.start_services(hosts=('cmp1', 'cmp2'))
        flavors = self.gpu_flavors()
        server = self.boot(flavors[4], 'vm')
        gpus = self.assert_server_holds(server, QUADS)
        uuid = server['id']

        self.act(uuid, {'shelve': None})
        shelved = self.wait_status(uuid, 'SHELVED')
        self.assert_holds_stopped(shelved, gpus)
        self.assert_consistent()

        self.act(uuid, {'shelveOffload': None})
        offloaded = self.wait_status(uuid, 'SHELVED_OFFLOADED')
        self.assertIsNone(offloaded['OS-EXT-SRV-ATTR:host'])
        self.assert_nothing_held(uuid)
        self.assert_consistent()

        self.act(uuid, {'unshelve': None})
        unshelved = self.wait_status(uuid, 'ACTIVE')
        self.assert_server_holds(unshelved, QUADS)
        self.assert_consistent()
        self.assertEqual(['unshelve', 'shelveOffload', 'shelve', 'create'], [
            a['action'] for a in self.actions(uuid)['instanceActions']])
        events = {e['event']: e['result'] for e in
                  self.last_action(uuid)['events']}
        self.assertEqual({'conductor_unshelve_instance': 'Success',
                          'compute_unshelve_instance': 'Success'}, events)

    def test_offload_while_placement_is_down(self):
        """The offload finishes; the allocation it could not free is
        the allocation audit's once Placement is back."""
        self.flags(shelved_offload_time=-1)
        self.start_services()
        server = self.boot(self.gpu_flavors()[2], 'vm')
        self.act(server['id'], {'shelve': None})
        self.wait_status(server['id'], 'SHELVED')
        self.placement.stop_server()
        self.addCleanup(self.placement.start_server)
        self.act(server['id'], {'shelveOffload': None})
        self.wait_status(server['id'], 'SHELVED_OFFLOADED')
        self.placement.start_server()
        self.assertNotEqual({}, self.placement_get(
            '/allocations/%s' % server['id'])['allocations'])
        self.computes['cmp1'].audit_allocations()
        self.assert_nothing_held(server['id'])
        self.assert_consistent()

    def test_unshelve_of_a_shelved_server_powers_it_on_in_place(self):
        self.flags(shelved_offload_time=-1)
        self.start_services()
        server = self.boot(self.gpu_flavors()[2], 'vm')
        gpus = self.gpus_of(server)
        self.act(server['id'], {'shelve': None})
        self.wait_status(server['id'], 'SHELVED')
        self.act(server['id'], {'unshelve': None})
        self.assertEqual(gpus, self.assert_server_holds(
            self.wait_status(server['id'], 'ACTIVE'), PAIRS))
        self.assert_consistent()

    def test_default_offload_time_offloads_at_once(self):
        self.assertEqual(0, self.conf.shelved_offload_time)
        self.start_services()
        flavors = self.gpu_flavors()
        server = self.boot(flavors[8], 'board')
        self.act(server['id'], {'shelve': None})
        self.wait_status(server['id'], 'SHELVED_OFFLOADED')
        self.assert_nothing_held(server['id'])
        self.assert_consistent()
        # The whole board is free for another server meanwhile.
        other = self.boot(flavors[8], 'other')
        self.assert_server_holds(other, {boot.BOARD})

    def test_periodic_offload_after_offload_time(self):
        self.flags(shelved_offload_time=1)
        self.start_services()
        server = self.boot(self.gpu_flavors()[2], 'vm')
        self.act(server['id'], {'shelve': None})
        self.wait_status(server['id'], 'SHELVED')
        compute = self.computes['cmp1']
        compute.offload_shelved_instances()
        self.assertEqual('shelved', db.instance_get_by_uuid(
            self.ctx, server['id']).vm_state)
        # Two seconds later, the 1 s offload time has passed.
        timeutils.set_time_override(
            timeutils.utcnow() + datetime.timedelta(seconds=2))
        self.addCleanup(timeutils.clear_time_override)
        compute.offload_shelved_instances()
        self.wait_status(server['id'], 'SHELVED_OFFLOADED')
        self.assert_nothing_held(server['id'])
        self.assert_consistent()

    def test_unshelve_without_a_valid_host_stays_offloaded(self):
        self.start_services()
        flavors = self.gpu_flavors()
        server = self.boot(flavors[4], 'vm')
        self.act(server['id'], {'shelve': None})
        self.wait_status(server['id'], 'SHELVED_OFFLOADED')
        fillers = [self.boot(flavors[4], 'fill%d' % i) for i in range(2)]

        self.act(server['id'], {'unshelve': None})
        deadline = time.monotonic() + TIMEOUT
        while db.instance_get_by_uuid(
                self.ctx, server['id']).task_state is not None:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        instance = db.instance_get_by_uuid(self.ctx, server['id'])
        self.assertEqual(('shelved_offloaded', None, None), (
            instance.vm_state, instance.task_state, instance.host))
        self.assertIn('No valid host', instance.fault_message)
        self.assertEqual('SHELVED_OFFLOADED', self.api(
            'GET', '/servers/%s' % server['id'])['server']['status'])
        self.assert_nothing_held(server['id'])
        self.assert_consistent()
        action = self.last_action(server['id'])
        self.assertEqual(('unshelve', 'Error'),
                         (action['action'], action['message']))
        [event] = action['events']
        self.assertEqual('conductor_unshelve_instance', event['event'])
        self.assertIn('nvlink group of 4', event['traceback'])

        # Once a quad is free again, unshelving works.
        self.delete(fillers[0]['id'])
        self.act(server['id'], {'unshelve': None})
        self.assert_server_holds(self.wait_status(server['id'], 'ACTIVE'),
                                 QUADS)
        self.assert_consistent()

    def test_concurrent_unshelves_land_on_distinct_pairs(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        flavors = self.gpu_flavors()
        servers = [self.boot(flavors[2], 'p%d' % i) for i in range(6)]
        for server in servers:
            self.act(server['id'], {'shelve': None})
        for server in servers:
            self.wait_status(server['id'], 'SHELVED_OFFLOADED')
        self.assert_consistent()
        # Meanwhile another server takes some of the freed pairs.
        squatter = self.boot(flavors[8], 'board')

        barrier = threading.Barrier(len(servers))
        codes = []

        def unshelve(server_id):
            barrier.wait()
            codes.append(self.session.post(
                self.allinone.api_url + '/servers/%s/action' % server_id,
                json={'unshelve': None}).status_code)
        threads = [threading.Thread(target=unshelve, args=(s['id'],))
                   for s in servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
        self.assertEqual([202] * len(servers), codes)

        # Four pairs remain: four servers unshelve, two stay offloaded.
        final = []
        for server in servers:
            deadline = time.monotonic() + TIMEOUT
            while True:
                instance = db.instance_get_by_uuid(self.ctx, server['id'])
                if instance.task_state is None:
                    break
                self.assertLess(time.monotonic(), deadline, instance)
                time.sleep(0.05)
            final.append(instance.vm_state)
        self.assertEqual(4, final.count('active'), final)
        self.assertEqual(2, final.count('shelved_offloaded'), final)
        taken = set()
        for server, state in zip(servers, final):
            if state == 'active':
                view = self.api('GET', '/servers/%s' % server['id'])[
                    'server']
                gpus = self.assert_server_holds(view, PAIRS)
                taken.add((view['OS-EXT-SRV-ATTR:host'], gpus))
            else:
                self.assert_nothing_held(server['id'])
        self.assertEqual(4, len(taken))
        self.assert_server_holds(squatter, {boot.BOARD})
        self.assert_consistent()


class TestStartUpRepair(ServerActionsBase):
    """A compute restarted after a crash finishes the actions it was
    running; nothing stays held by nobody."""

    def _repair_log(self):
        return [line for line in self.logger.output.splitlines()
                if 'start-up repair' in line]

    def test_restart_finishes_cut_short_actions(self):
        self.flags(shelved_offload_time=-1)
        self.start_services()
        flavors = self.gpu_flavors()
        compute = self.computes['cmp1']
        stopping = self.boot(flavors[2], 'stopping')
        rebooting = self.boot(flavors[2], 'rebooting')
        offloading = self.boot(flavors[2], 'offloading')
        rebuilding = self.boot(flavors[1], 'rebuilding')
        kept = {s['id']: self.gpus_of(s) for s in
                (stopping, rebooting, rebuilding)}
        self.act(offloading['id'], {'shelve': None})
        self.wait_status(offloading['id'], 'SHELVED')
        # What a compute killed mid-action leaves: the task states nova-api
        # set, the guests as far as the compute got with them.
        db.instance_update(self.ctx, stopping['id'],
                           {'task_state': 'powering-off'})
        db.instance_update(self.ctx, rebooting['id'],
                           {'task_state': 'rebooting_hard'})
        compute.driver.power_off(rebooting['id'])
        db.instance_update(self.ctx, offloading['id'],
                           {'task_state': 'shelving_offloading'})
        compute.driver.destroy(offloading['id'])
        db.instance_update(self.ctx, rebuilding['id'],
                           {'task_state': 'rebuilding'})
        domain = compute.driver.host.lookup_domain(rebuilding['id'])
        domain.destroy()
        domain.undefine()

        self.start_compute('cmp1', driver=compute.driver)

        self.assertEqual(kept[stopping['id']], self.gpus_of(
            self.wait_status(stopping['id'], 'SHUTOFF')))
        for server in (rebooting, rebuilding):
            self.assertEqual(kept[server['id']], self.assert_server_holds(
                self.wait_status(server['id'], 'ACTIVE'),
                PAIRS | {frozenset({g}) for g in range(1, 9)}))
        self.wait_status(offloading['id'], 'SHELVED_OFFLOADED')
        self.assert_nothing_held(offloading['id'])
        self.assert_consistent()
        log = '\n'.join(self._repair_log())
        self.assertEqual(4, len(self._repair_log()), log)
        for server, state in ((stopping, 'stopped'), (rebooting, 'active'),
                              (offloading, 'shelved_offloaded'),
                              (rebuilding, 'active')):
            self.assertIn('instance %s, cut short by the restart, '
                          'finished: now %s' % (server['id'], state), log)

    def test_restart_rolls_back_an_unshelve_it_was_spawning(self):
        self.start_services()
        flavors = self.gpu_flavors()
        server = self.boot(flavors[2], 'vm')
        self.act(server['id'], {'shelve': None})
        self.wait_status(server['id'], 'SHELVED_OFFLOADED')
        compute = self.computes['cmp1']
        real_spawn = compute.driver.spawn
        spawned, frozen = threading.Event(), threading.Event()
        self.addCleanup(frozen.set)

        def spawn_then_freeze(*args, **kwargs):
            real_spawn(*args, **kwargs)
            spawned.set()
            frozen.wait(TIMEOUT)    # the process died here
            raise RuntimeError('nova-compute was killed')
        self.useFixture(boot.fixtures.MockPatchObject(
            compute.driver, 'spawn', side_effect=spawn_then_freeze))
        self.act(server['id'], {'unshelve': None})
        self.assertTrue(spawned.wait(TIMEOUT))

        self.start_compute('cmp1', driver=compute.driver)

        instance = db.instance_get_by_uuid(self.ctx, server['id'])
        self.assertEqual(('shelved_offloaded', None, None), (
            instance.vm_state, instance.task_state, instance.host))
        self.assertIn('unshelve again', instance.fault_message)
        self.assert_nothing_held(server['id'])
        self.assertIn('interrupted unshelve of instance %s rolled back' %
                      server['id'], '\n'.join(self._repair_log()))
        # The conductor's call to the dead compute ends at last: it finds
        # the unshelve rolled back and stops without taking anything.
        conductor = self.allinone.services[0].manager
        self.assertIn(server['id'], conductor._builds)
        frozen.set()
        deadline = time.monotonic() + TIMEOUT
        while server['id'] in conductor._builds:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        instance = db.instance_get_by_uuid(self.ctx, server['id'])
        self.assertEqual(('shelved_offloaded', None, None), (
            instance.vm_state, instance.task_state, instance.host))
        self.assert_nothing_held(server['id'])
        self.assert_consistent()


class TestFabricManagerPartitions(ServerActionsBase,
                                  test_nvlink_partitions.NVLinkTestBase):
    """With Fabric Manager, a server keeps its NVLink partition active
    while it is stopped, rebooted or rebuilt (its GPUs are still its own);
    offloading releases it and unshelving activates the new one."""

    def test_partition_follows_the_server_through_its_actions(self):
        self.start_services()
        flavors = self.gpu_flavors()
        server = self.boot(flavors[2], 'vm')
        other = self.boot(flavors[4], 'other')
        self.assert_active('cmp1', [server, other])
        uuid = server['id']
        for body, status in (({'os-stop': None}, 'SHUTOFF'),
                             ({'os-start': None}, 'ACTIVE'),
                             ({'reboot': {'type': 'HARD'}}, 'ACTIVE'),
                             ({'reboot': {'type': 'SOFT'}}, 'ACTIVE'),
                             ({'rebuild': {'imageRef': 'none'}}, 'ACTIVE')):
            self.act(uuid, body)
            current = self.wait_status(uuid, status)
            self.assert_active('cmp1', [current, other])
            self.assert_consistent()

        self.act(uuid, {'shelve': None})
        self.wait_status(uuid, 'SHELVED_OFFLOADED')
        self.assert_active('cmp1', [other])
        self.assert_consistent()

        self.act(uuid, {'unshelve': None})
        unshelved = self.wait_status(uuid, 'ACTIVE')
        self.assert_server_holds(unshelved, PAIRS)
        self.assert_active('cmp1', [unshelved, other])
        self.assert_consistent()


class TestOrphanedUnshelve(ServerActionsBase):
    """An unshelve whose conductor died, or whose hand-over to the
    conductors was lost, is taken over like an orphaned build."""

    def test_another_conductor_drives_orphaned_unshelves(self):
        self.start_services()
        flavors = self.gpu_flavors()
        servers = [self.boot(flavors[2], name) for name in ('lost', 'dead')]
        for server in servers:
            self.act(server['id'], {'shelve': None})
            self.wait_status(server['id'], 'SHELVED_OFFLOADED')
        two_minutes_ago = timeutils.utcnow() - datetime.timedelta(
            seconds=120)
        lost, dead = (s['id'] for s in servers)
        # Accepted by nova-api, never taken by a conductor.
        db.instance_update(self.ctx, lost, {
            'task_state': 'unshelving', 'build_owner': None,
            'build_heartbeat': two_minutes_ago})
        # Taken by a conductor that died.
        db.instance_update(self.ctx, dead, {
            'task_state': 'unshelving', 'build_owner': 'conductor-0:dead',
            'build_heartbeat': two_minutes_ago})
        # An unshelve accepted just now is its conductor's, not orphaned.
        fresh = self.boot(flavors[1], 'fresh')
        self.act(fresh['id'], {'shelve': None})
        self.wait_status(fresh['id'], 'SHELVED_OFFLOADED')
        db.instance_update(self.ctx, fresh['id'], {
            'task_state': 'unshelving', 'build_owner': None,
            'build_heartbeat': timeutils.utcnow()})

        conductor = conductor_manager.ConductorManager(self.conf)
        for thread in conductor.redrive_orphaned_builds():
            thread.join(TIMEOUT)

        taken = {self.assert_server_holds(self.wait_status(uuid, 'ACTIVE'),
                                          PAIRS) for uuid in (lost, dead)}
        self.assertEqual(2, len(taken))
        for uuid in (lost, dead):
            self.assertEqual(conductor.owner, db.instance_get_by_uuid(
                self.ctx, uuid).build_owner)
        self.assertEqual(('unshelving', None), tuple(
            getattr(db.instance_get_by_uuid(self.ctx, fresh['id']), key)
            for key in ('task_state', 'build_owner')))
        db.instance_update(self.ctx, fresh['id'], {'task_state': None})
        self.assert_consistent()


class TestNUMAConfinement(ServerActionsBase,
                          test_pci_numa_affinity.NumaTestBase):
    """A guest confined to its GPUs' NUMA node stays confined when it is
    rebuilt, stopped and started, and when it is unshelved elsewhere."""

    def test_rebuild_and_unshelve_keep_the_guest_on_its_gpus_node(self):
        self.start_services()
        flavor = self.numa_flavor('pair.req', 'h200:2', 'required')
        server = self.boot(flavor, 'vm')
        (node,) = test_pci_numa_affinity.node_of(
            self.assert_server_holds(server, PAIRS))
        self.assert_confined(server, node)
        for body, status in (({'rebuild': {'imageRef': 'none'}}, 'ACTIVE'),
                             ({'os-stop': None}, 'SHUTOFF'),
                             ({'os-start': None}, 'ACTIVE')):
            self.act(server['id'], body)
            self.assert_confined(self.wait_status(server['id'], status),
                                 node)
        self.act(server['id'], {'shelve': None})
        self.wait_status(server['id'], 'SHELVED_OFFLOADED')
        self.act(server['id'], {'unshelve': None})
        unshelved = self.wait_status(server['id'], 'ACTIVE')
        (node,) = test_pci_numa_affinity.node_of(
            self.assert_server_holds(unshelved, PAIRS))
        self.assert_confined(unshelved, node)
        self.assert_consistent()
