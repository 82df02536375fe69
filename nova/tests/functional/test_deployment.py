"""The separate-process deployment under load and faults.

nova-api, nova-conductor, two nova-schedulers and two nova-computes run as
their own processes from config files, as an operator starts them, with a
standalone Placement, on MariaDB and a private RabbitMQ vhost (see
:mod:`nova.tests.functional.lib.deployment`). Each test fires concurrent
mixed 1/2/4/8-GPU boots, injects its fault (SIGKILL of a service,
Placement down), lets things settle and then checks the invariants: no
server left in BUILD, every ACTIVE server on one valid partition,
allocations equal to what servers hold, no device held twice, no 5xx;
then deletes everything at once and checks nothing leaked. Skipped when
RabbitMQ (with rabbitmqctl) or MariaDB is not there.

The service processes themselves die with the process that started
them (no test run leaves nova-* processes behind).
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import fixtures
import requests
import testtools

from nova.db import records
from nova import test
from nova.tests.functional.lib import deployment
from nova.tests.functional.lib import invariants
from nova.tests.functional.lib import workload
from nova.virt.fake import host as fakehost

# Placement stays down this long in the outage test (the soak: 30 s).
PLACEMENT_OUTAGE = 10
# Bound on waiting for a burst to reach the point a fault is injected at.
FAULT_WAIT = 60
# [DEFAULT]graceful_shutdown_timeout of the deployment's services.
GRACE = 90


class DeploymentTestCase(test.TestCase):

    TIMEOUT = 420
    # Whether the services serve Prometheus metrics (Deployment).
    METRICS = False
    # Hosts per compute process (Deployment).
    HOSTS_PER_PROCESS = 1

    def setUp(self):
        super().setUp()
        self.deployment = deployment.deployment_or_skip(self, extra_conf={
            'DEFAULT': {'graceful_shutdown_timeout': GRACE}},
            metrics=self.METRICS, hosts_per_process=self.HOSTS_PER_PROCESS)
        self.addOnException(self._attach_logs)
        self.useFixture(self.deployment)
        self.client = workload.ComputeClient(self.deployment.api_url)
        self.client.ensure_flavors()

    def _attach_logs(self, exc_info) -> None:
        for name, text in self.deployment.logs().items():
            self.addDetail(name, testtools.content.text_content(text))

    def assertSettledAndSound(self, fault_free: bool = False) -> None:
        """Once no server builds: the invariants hold and every user
        answer was sound."""
        checks = workload.check(self.client, self.deployment.placement_url,
                                fault_free)
        self.assertEqual([], [v for found in checks.values() for v in found],
                         workload.describe(self.client.servers(),
                                           self.client))

    def assertDeleteAllLeavesNothing(self) -> None:
        """Deleting every server at once frees every device and
        allocation."""
        self.client = workload.ComputeClient(self.deployment.api_url)
        self.assertEqual([], self.client.delete_all())
        self.assertSettledAndSound(fault_free=True)
        placement = invariants.placement_adapter(
            self.deployment.placement_url)
        consumers = set()
        for rp in placement.get('/resource_providers').json()[
                'resource_providers']:
            consumers |= set(placement.get(
                '/resource_providers/%s/allocations' % rp['uuid']).json()[
                'allocations'])
        self.assertEqual(set(), consumers)
        self.assertEqual({host: {1: 8, 2: 4, 4: 2, 8: 1}
                          for host in self.deployment.hosts},
                         workload.free_partitions())

    def burst_in_background(self, count: int,
                            accepted: list | None = None
                            ) -> threading.Thread:
        """Fire ``count`` concurrent creates from another thread; the ids
        of the servers the API accepted go to ``accepted``."""
        accepted = [] if accepted is None else accepted
        thread = threading.Thread(target=lambda: accepted.extend(
            self.client.create_servers(count)))
        thread.start()
        self.addCleanup(thread.join)
        return thread

    def wait_for_instance(self, match=lambda instance: True
                          ) -> records.Instance:
        """An instance row ``match`` accepts (fails after FAULT_WAIT)."""
        instance = workload.wait_for_instance(match, FAULT_WAIT)
        self.assertIsNotNone(instance, 'no instance as awaited after %ss' %
                             FAULT_WAIT)
        return instance


class TestDeployment(DeploymentTestCase):

    def test_boot_and_delete_across_processes(self):
        # The caller's request id, which every service's log and Placement
        # (its request log) must show for this boot.
        global_id = 'req-%s' % uuid.uuid4()
        resp = requests.post(
            self.deployment.api_url + '/servers',
            headers={'X-Auth-Token': workload.TOKEN,
                     'X-OpenStack-Request-ID': global_id},
            json={'server': {'name': 'traced',
                             'flavorRef': self.client.ensure_flavors()[2],
                             'imageRef': 'none'}},
            timeout=workload.REQUEST_TIMEOUT)
        self.assertEqual(202, resp.status_code, resp.text)
        server_id = resp.json()['server']['id']
        self.client.wait_settled()
        server = self.client.servers()[0]
        self.assertEqual((server_id, 'ACTIVE'),
                         (server['id'], server['status']), server)
        self.assertIn(server['OS-EXT-SRV-ATTR:host'], self.deployment.hosts)
        logs = self.deployment.logs()
        schedulers = '\n'.join(text for name, text in logs.items()
                               if name.startswith('nova-scheduler-'))
        for name, text in (
                ('nova-conductor', logs['nova-conductor']),
                ('nova-scheduler-*', schedulers),
                ('compute', logs['nova-compute-%s' %
                                 server['OS-EXT-SRV-ATTR:host']]),
                ('placement', logs['placement'])):
            self.assertIn(global_id, text, name)
        placement = invariants.placement_adapter(
            self.deployment.placement_url)
        allocations = placement.get('/allocations/%s' % server_id).json()[
            'allocations']
        names = {rp['uuid']: rp['name'] for rp in placement.get(
            '/resource_providers').json()['resource_providers']}
        gpus = {fakehost.H200_GPU_ADDRESSES.index(
                    names[rp].split('_', 1)[1].lower()) + 1
                for rp, alloc in allocations.items()
                if 'PGPU' in alloc['resources']}
        self.assertIn(gpus, [set(p) for p in
                             fakehost.H200_NVLINK_PAIRS.values()])
        self.assertSettledAndSound()
        self.assertDeleteAllLeavesNothing()

    def test_concurrent_burst_then_delete_all(self):
        # 30 mixed creates on 16 GPUs, two schedulers claiming at once:
        # what fits is ACTIVE on one partition, the rest ERROR saying why.
        accepted = self.client.create_servers(30)
        self.assertEqual(30, len(accepted), self.client.statuses)
        self.assertSettledAndSound(fault_free=True)
        self.assertDeleteAllLeavesNothing()


class TestComputePack(DeploymentTestCase):
    """Both hosts' computes in one process (``compute_pack``), as the
    boots benchmark runs a few hundred hosts."""

    HOSTS_PER_PROCESS = 2

    def test_pack_serves_every_host_it_runs(self):
        names = set(self.deployment.processes)
        self.assertIn('nova-computes-hgx-1', names)
        self.assertEqual(set(), {name for name in names
                                 if name.startswith('nova-compute-')})
        # 20 mixed boots ask for 75 GPUs of 16, five of them for a whole
        # board: a host left wholly free would fail the checks.
        self.client.create_servers(20)
        self.assertSettledAndSound(fault_free=True)
        hosts = {server['OS-EXT-SRV-ATTR:host']
                 for server in self.client.servers()
                 if server['status'] == 'ACTIVE'}
        self.assertEqual(set(self.deployment.hosts), hosts)
        self.assertDeleteAllLeavesNothing()


class TestDeploymentFaults(DeploymentTestCase):

    BURST = 16

    def test_compute_killed_with_builds_in_flight(self):
        self.client.create_servers(self.BURST)
        host = self.wait_for_instance(workload.handed_to_compute).host
        self.deployment.restart('nova-compute-%s' % host)
        self.assertSettledAndSound()
        self.assertDeleteAllLeavesNothing()

    def test_scheduler_and_conductor_killed_mid_burst(self):
        self.burst_in_background(self.BURST)
        # The conductor is working on builds (and holds those it fetched).
        self.wait_for_instance(workload.handed_to_compute)
        for name in ('nova-scheduler-1', 'nova-conductor'):
            self.deployment.kill(name)
        for name in ('nova-scheduler-1', 'nova-conductor'):
            self.deployment.start(name)
        self.assertSettledAndSound()
        self.assertDeleteAllLeavesNothing()

    def test_placement_down_during_burst(self):
        self.burst_in_background(self.BURST)
        self.wait_for_instance(workload.handed_to_compute)
        self.deployment.kill('placement')
        time.sleep(PLACEMENT_OUTAGE)
        self.deployment.start('placement')
        self.assertSettledAndSound()
        self.assertDeleteAllLeavesNothing()

    def test_boot_burst_after_placement_outage_fills_every_pair(self):
        # A quad taken: six pairs left on the two hosts. Placement goes
        # away and comes back, then eight 2-GPU boots race through two
        # schedulers: every free pair gets a server, only the two that
        # cannot fit are refused, and for lack of a pair, not a race.
        [quad] = self.client.create_servers(1, prefix='quad', sizes=(4,))
        self.assertEqual(['ACTIVE'], [s['status'] for s in
                                      self.client.wait_settled()])
        self.deployment.kill('placement')
        time.sleep(PLACEMENT_OUTAGE)
        self.deployment.start('placement')
        accepted = self.client.create_servers(8, prefix='pair', sizes=(2,))
        self.assertEqual(8, len(accepted), self.client.statuses)
        servers = {s['id']: s for s in self.client.wait_settled()}
        statuses = sorted(servers[sid]['status'] for sid in accepted)
        self.assertEqual(['ACTIVE'] * 6 + ['ERROR'] * 2, statuses,
                         workload.describe(list(servers.values()),
                                           self.client))
        for sid in accepted:
            if servers[sid]['status'] == 'ERROR':
                fault = servers[sid]['fault']['message']
                self.assertNotIn('taken concurrently', fault)
                self.assertIn('No valid host', fault)
        self.assertSettledAndSound()
        self.assertDeleteAllLeavesNothing()

    def test_api_killed_mid_request(self):
        burst = self.burst_in_background(self.BURST)
        # The first server is recorded: the others' requests are in flight.
        self.wait_for_instance()
        self.deployment.kill('nova-api')
        burst.join()
        self.deployment.start('nova-api')
        self.assertSettledAndSound()
        self.assertDeleteAllLeavesNothing()

    def test_services_stopped_mid_burst_finish_their_work(self):
        # SIGTERM to a service of each kind with builds in flight, in the
        # order work flows through them, as an operator stopping a
        # controller and a compute does: each stops taking work, finishes
        # what it had and exits 0.
        accepted = []
        burst = self.burst_in_background(self.BURST, accepted)
        host = self.wait_for_instance(workload.handed_to_compute).host
        codes = {}
        for name in ('nova-api', 'nova-conductor', 'nova-scheduler-1',
                     'nova-compute-%s' % host):
            process = self.deployment.processes[name]
            process.terminate()
            codes[name] = process.popen.wait(timeout=GRACE + 30)
            # The WSGI server's master says so for the API.
            self.assertIn(deployment.WSGI_SIGTERM_LOGGED
                          if name in deployment.WSGI_SERVICES
                          else 'SIGTERM received',
                          process.log(since_start=True))
        burst.join()
        self.assertEqual(dict.fromkeys(codes, 0), codes)
        for name in codes:
            self.deployment.start(name)
        # No create was cut off: each server recorded was answered 202.
        self.assertEqual(sorted(accepted),
                         sorted(s['id'] for s in self.client.servers()))
        self.assertSettledAndSound()
        self.assertDeleteAllLeavesNothing()


# Starts a service process (a sleeper) the way the fixtures do, says its
# pid, and waits to be killed.
_PARENT = textwrap.dedent('''
    import sys, time
    from nova.tests.functional.lib import deployment
    child = deployment.ServiceProcess(
        "sleeper", [sys.executable, "-c", "import time; time.sleep(600)"],
        sys.argv[1], lambda proc: True)
    child.start()
    print(child.popen.pid, flush=True)
    time.sleep(600)
''')


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not)."""
    try:
        with open('/proc/%d/stat' % pid) as stat:
            return stat.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


class TestServiceProcessDiesWithParent(test.TestCase):

    def test_killed_parent_takes_its_service_processes_along(self):
        log = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'sleeper.log')
        parent = subprocess.Popen([sys.executable, '-c', _PARENT, log],
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(parent.kill)
        child = int(parent.stdout.readline())
        self.addCleanup(
            lambda: _alive(child) and os.kill(child, signal.SIGKILL))
        self.assertTrue(_alive(child))
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + FAULT_WAIT
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertFalse(_alive(child), 'service process %d outlived its '
                         'parent' % child)
