"""Servers whose guests the hypervisor lost, across a real restart.

``nova-all`` runs as its own process (AllInOne) on libvirt's test driver,
which keeps no guest across a process restart, as a real host with
transient domains loses them on reboot, with NVLink partitions made live
through the (fake) Fabric Manager. After the restart the compute defines
each lost guest of an ACTIVE or SHUTOFF server again on the devices the
server holds; SHUTOFF servers stay off, ACTIVE ones are started again
only with ``[DEFAULT]resume_guests_state_on_host_boot`` and otherwise go
to SHUTOFF with an instance action saying why. Stop, start and shelve
then work, and devices, allocations and partitions stay consistent.
"""

import os
import time

import testtools

from nova import context as nova_context
from nova import test
from nova.tests.functional.lib import deployment
from nova.tests.functional.lib import invariants
from nova.tests.functional.lib import workload
from nova.virt.fake import fabric_manager as fake
from nova.virt.fake import host as fakehost

SETTLE = 120


class PowerStateAfterRestartBase(test.TestCase):

    TIMEOUT = 420
    resume = False

    def setUp(self):
        super().setUp()
        self.nova_all = deployment.AllInOne(computes=1, extra_conf={
            'DEFAULT': {'resume_guests_state_on_host_boot':
                        str(self.resume).lower()},
            'libvirt': {'nvlink_partitions': 'fabric_manager'}})
        self.addOnException(self._attach_log)
        self.useFixture(self.nova_all)
        self.client = workload.ComputeClient(self.nova_all.api_url)
        self.flavors = self.client.ensure_flavors()
        self.fm = fake.FakeFabricManager(os.path.join(
            self.nova_all.workdir, 'fabric-manager', 'hgx-1'))

    def _attach_log(self, exc_info) -> None:
        for name, text in self.nova_all.logs().items():
            self.addDetail(name, testtools.content.text_content(text))

    def boot(self, name: str, size: int = 2) -> str:
        server = self.client._ok('POST', '/servers', {'server': {
            'name': name, 'flavorRef': self.flavors[size],
            'imageRef': 'none'}})['server']
        self.wait_for(server['id'], 'ACTIVE')
        return server['id']

    def action(self, server_id: str, body: dict, expect: int = 202):
        resp = self.client.request('POST', '/servers/%s/action' % server_id,
                                   body)
        self.assertEqual(expect, resp.status_code, resp.text)
        return resp

    def server(self, server_id: str) -> dict:
        return self.client._ok('GET', '/servers/%s' % server_id)['server']

    def wait_for(self, server_id: str, status: str) -> dict:
        """The server once it is ``status`` with no task in flight."""
        deadline = time.monotonic() + SETTLE
        server = None
        while time.monotonic() < deadline:
            server = self.server(server_id)
            if server['OS-EXT-STS:task_state'] is None and \
                    server['status'] == status:
                return server
            time.sleep(0.2)
        self.fail('server %s never became %s: %s' % (server_id, status,
                                                     server))

    def actions(self, server_id: str) -> list[dict]:
        """The server's actions, newest first, with their events."""
        path = '/servers/%s/os-instance-actions' % server_id
        listed = self.client._ok('GET', path)['instanceActions']
        return [self.client._ok('GET', path + '/' + a['request_id'])[
            'instanceAction'] for a in listed]

    def restart(self) -> None:
        """SIGKILL nova-all and start it again: the test driver's guests
        are gone, the database, Placement and Fabric Manager keep their
        state."""
        self.nova_all.restart('nova-all')

    def active_partitions(self) -> set[int]:
        return self.fm.active()

    def partition_of(self, server_id: str) -> int:
        """The FM partition of exactly the GPUs the server holds."""
        context = nova_context.get_admin_context()
        rows = [row for row in invariants._device_rows(context)
                if row['instance_uuid'] == server_id]
        modules = frozenset(fakehost.H200_MODULE_IDS[row['address']]
                            for row in rows)
        for pid, members in fake.H100_PARTITIONS.items():
            if frozenset(members) == modules:
                return pid
        self.fail('server %s holds no partition: %s' % (server_id, rows))

    def assertSound(self) -> None:
        violations = invariants.check(
            self.nova_all.api_url, 'admin', self.nova_all.placement_url,
            nova_context.get_admin_context(), settled=True)
        self.assertEqual([], violations, invariants.summary(violations))


class TestLostGuestsAfterRestart(PowerStateAfterRestartBase):
    """The default, as upstream: servers whose guests did not survive the
    restart are not started behind their owners' backs."""

    def test_active_and_shutoff_servers_after_restart(self):
        running = self.boot('running')
        stopped = self.boot('stopped')
        self.action(stopped, {'os-stop': None})
        self.wait_for(stopped, 'SHUTOFF')
        partitions = {self.partition_of(running),
                      self.partition_of(stopped)}
        self.assertEqual(partitions, self.active_partitions())

        self.restart()

        # The ACTIVE server is SHUTOFF now, with an action saying why.
        was_running = self.wait_for(running, 'SHUTOFF')
        self.assertEqual(4, was_running['OS-EXT-STS:power_state'])
        newest = self.actions(running)[0]
        self.assertEqual('stop', newest['action'])
        self.assertEqual(['compute_init_host'],
                         [e['event'] for e in newest['events']])
        self.assertIn('resume_guests_state_on_host_boot',
                      newest['events'][0]['traceback'])
        self.assertEqual('SHUTOFF', self.server(stopped)['status'])
        # Both keep their devices, allocations and partitions while off.
        self.assertSound()
        self.assertEqual(partitions, self.active_partitions())

        # Both start again, on the devices they hold.
        for server_id in (running, stopped):
            self.action(server_id, {'os-start': None})
            self.assertEqual(1, self.wait_for(server_id, 'ACTIVE')[
                'OS-EXT-STS:power_state'])
        self.assertSound()
        self.assertEqual(partitions, self.active_partitions())
        # And stop and shelve work as before the restart.
        self.action(stopped, {'os-stop': None})
        self.wait_for(stopped, 'SHUTOFF')
        self.action(running, {'shelve': None})
        self.wait_for(running, 'SHELVED_OFFLOADED')
        self.assertEqual({self.partition_of(stopped)},
                         self.active_partitions())
        self.assertSound()


class TestResumeGuestsAfterRestart(PowerStateAfterRestartBase):
    """With resume_guests_state_on_host_boot the ACTIVE servers run
    again after the restart; a stop then powers them off for real."""

    resume = True

    def test_active_server_runs_again_and_stops(self):
        running = self.boot('running')
        stopped = self.boot('stopped', size=4)
        self.action(stopped, {'os-stop': None})
        self.wait_for(stopped, 'SHUTOFF')

        self.restart()

        self.assertEqual(1, self.wait_for(running, 'ACTIVE')[
            'OS-EXT-STS:power_state'])
        self.assertEqual('SHUTOFF', self.server(stopped)['status'])
        self.assertEqual({self.partition_of(running),
                          self.partition_of(stopped)},
                         self.active_partitions())
        self.action(running, {'os-stop': None})
        self.assertEqual(4, self.wait_for(running, 'SHUTOFF')[
            'OS-EXT-STS:power_state'])
        self.assertEqual('stop', self.actions(running)[0]['action'])
        self.assertEqual('Success', self.actions(running)[0]['events'][0][
            'result'])
        self.action(stopped, {'os-start': None})
        self.wait_for(stopped, 'ACTIVE')
        self.assertSound()
