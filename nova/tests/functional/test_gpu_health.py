"""GPUs fail: broken GPUs and NVSwitches leave service, the partitions that
do not touch them stay offered, and their holders are told.

Real Placement, database and messaging; one compute on libvirt's test
driver against the fake Fabric Manager and fake ``nvidia-smi``, reached
only through their executables. Health is observed at each resource
update, which these tests run by hand (``update_resources_interval`` is
0).
"""

import concurrent.futures
import dataclasses
import io
import os
import subprocess
import time
from unittest import mock

import fixtures
import requests
import testtools

from nova import context as nova_context
from nova import test
from nova.cmd import manage
from nova.db import api as db
from nova.pci import manager as pci_manager
from nova.pci import placement_names as names
from nova.scheduler import metrics as scheduler_metrics
from nova.scheduler import refusal
from nova.tests.functional.lib import deployment
from nova.tests.functional.lib import invariants
from nova.tests.functional import test_defrag
from nova.tests.functional import test_nvlink_offer as offer
from nova.tests.functional.lib import workload
from nova.virt.fake import fabric_manager as fake
from nova.virt.fake import host as fakehost

BY_MODULE = offer.BY_MODULE
SWITCH = '0000:05:00.0'


def modules(*numbers):
    return {BY_MODULE[m] for m in numbers}


def _refusals(code: str) -> float:
    """How many refusals the scheduler counted for reason ``code``."""
    return scheduler_metrics.REGISTRY.get_sample_value(
        'nova_scheduler_refusals_total', {'reason': code}) or 0


class HealthTestBase(offer.OfferTestBase):

    def nvlink_partitions(self, host):
        parts = super().nvlink_partitions(host)
        parts.quarantine_failures = \
            self.conf.pci.partition_quarantine_failures
        return parts

    def setUp(self):
        super().setUp()
        self.ctx = nova_context.get_admin_context()

    def start(self):
        self.start_services()
        self.fm = self.fms['cmp1']
        self.flavors = self.gpu_flavors()
        self.compute = self.computes['cmp1']

    def update(self):
        self.computes['cmp1'].update_available_resource()

    def counted_update(self) -> tuple[int, dict[str, int]]:
        """One resource update: how many times it observed the host
        (``observe_host``) and asked Fabric Manager for its partition
        list and its NVLink failed devices."""
        driver = self.compute.rt.driver
        before = self.fm.reads()
        with mock.patch.object(driver, 'observe_host',
                               wraps=driver.observe_host) as observe:
            self.update()
        after = self.fm.reads()
        return observe.call_count, {op: after.get(op, 0) - before.get(op, 0)
                                    for op in ('list', 'failed')}

    def rows(self):
        node = db.compute_node_get_by_nodename(self.ctx, 'cmp1')
        return {row['address']: row for row in
                db.pci_device_get_all_by_node(self.ctx, node.id)}

    def unhealthy(self):
        """Address -> (source, reason) of each unhealthy device."""
        return {a: (r['health_source'], r['health_reason'])
                for a, r in self.rows().items()
                if r['health'] == 'unhealthy'}

    def held(self, server):
        return {a for a, r in self.rows().items()
                if r['instance_uuid'] == server['id']}

    def manage(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        # The command line as typed, against this test's database.
        with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err), \
                mock.patch.object(manage.cmd, 'parse_args',
                                  return_value=self.conf), \
                mock.patch.object(manage, '_open_database',
                                  return_value=True):
            code = manage.main(list(argv))
        return code, out.getvalue() + err.getvalue()

    def history(self, address):
        node = db.compute_node_get_by_nodename(self.ctx, 'cmp1')
        return db.pci_device_health_events_get(self.ctx, node.id,
                                               address)

    def group_traits(self):
        """Group provider name -> its traits."""
        return {name: set(rp['traits'])
                for name, rp in self.provider_view('cmp1').items()
                if not rp['inventory'] and name != 'cmp1'}

    def check_invariants(self):
        violations = invariants.check(self.allinone.api_url, 'admin',
                                      self.placement.api, self.ctx,
                                      settled=True)
        self.assertEqual([], violations, invariants.summary(violations))


class TestObservedHealth(HealthTestBase):

    def test_lost_gpu_keeps_the_partitions_without_it(self):
        self.start()
        broken = BY_MODULE[1]
        self.fm.break_gpu(broken, 'lost')
        self.update()
        self.assertEqual('nvidia-smi', self.unhealthy()[broken][0])
        self.assertIn('GPU is lost', self.unhealthy()[broken][1])
        reserved = self.reserved()
        self.assertEqual(1, reserved.pop(broken))
        self.assertEqual({0}, set(reserved.values()))
        board = self.manage_output(manage.pci_board)
        self.assertIn('1 unhealthy', board)
        self.assertIn('NOT OFFERED: device %s unhealthy (nvidia-smi: '
                      % broken, board)
        # The other quartet, the other pair of its quartet and single
        # GPUs are still offered.
        quad = self.boot(self.flavors[4], 'quad')
        self.assertEqual(modules(5, 6, 7, 8), self.held(quad))
        pair = self.boot(self.flavors[2], 'pair')
        self.assertEqual(modules(2, 4), self.held(pair))
        single = self.boot(self.flavors[1], 'single')
        self.assertEqual(modules(3), self.held(single))
        refused = self.boot(self.flavors[1], 'none-left', status='ERROR')
        self.assertIn('1 unhealthy device not counted',
                      refused['fault']['message'])
        self.check_invariants()
        # Recovery: the GPU answers again, everything comes back.
        self.delete(single['id'])
        self.fm.repair_gpu(broken)
        self.update()
        self.assertEqual({}, self.unhealthy())
        self.assertEqual(0, self.reserved()[broken])
        self.assertEqual(modules(1, 3),
                         self.held(self.boot(self.flavors[2], 'back')))
        self.assertEqual(['unhealthy', 'healthy'],
                         [e['health'] for e in self.history(broken)])
        self.assertEqual({'nova-compute cmp1'},
                         {e['actor'] for e in self.history(broken)})

    def test_board_of_a_broken_gpu_is_refused_as_withheld(self):
        self.start()
        broken = BY_MODULE[1]
        self.fm.break_gpu(broken, 'lost')
        self.update()
        before = _refusals(refusal.UNHEALTHY)
        refused = self.boot(self.flavors[8], 'board', status='ERROR')
        self.assertEqual(before + 1, _refusals(refusal.UNHEALTHY))
        fault = refused['fault']['message']
        self.assertIn('no nvlink group of 8 is offered: 1 nvlink group(s) '
                      'of 8 withheld for unhealthy devices (cmp1 board: %s '
                      'unhealthy since ' % broken, fault)
        self.assertIn('(nvidia-smi): ', fault)
        self.assertNotIn('fragmentation', fault)
        # A GPU of each quartet broken: no quartet left at all, though 6
        # GPUs are free.
        self.fm.break_gpu(BY_MODULE[5], 'lost')
        self.update()
        fault = self.boot(self.flavors[4], 'quad',
                          status='ERROR')['fault']['message']
        self.assertIn('no nvlink group of 4 is offered: 2 nvlink group(s) '
                      'of 4 withheld for unhealthy devices (cmp1 '
                      'board/quad-a: %s unhealthy since ' % broken, fault)
        self.assertIn('; cmp1 board/quad-b: %s unhealthy since ' %
                      BY_MODULE[5], fault)
        self.check_invariants()

    def test_hypervisor_lists_a_gpu_whose_link_is_down(self):
        broken = BY_MODULE[7]
        devices = [dataclasses.replace(dev, link_down=dev.address == broken)
                   for dev in fakehost.hgx_h200_devices()]
        self.start_services(devices=devices)
        self.fm = self.fms['cmp1']
        self.assertEqual(('hypervisor',
                          'PCIe link down (capable of x16, now x0)'),
                         self.unhealthy()[broken])
        self.assertEqual(1, self.reserved()[broken])
        self.assertEqual(modules(1, 2, 3, 4),
                         self.held(self.boot(self.gpu_flavors()[4], 'q')))

    def test_retired_pages_and_row_remapping(self):
        self.start()
        problems = {BY_MODULE[1]: ('lost', 'GPU is lost'),
                    BY_MODULE[2]: ('retired_pages', 'pending retired pages'),
                    BY_MODULE[5]: ('rows_pending', 'pending row remapping'),
                    BY_MODULE[8]: ('remap_failure', 'row remapping failure')}
        for address, (problem, _words) in problems.items():
            self.fm.break_gpu(address, problem)
        self.update()
        unhealthy = self.unhealthy()
        self.assertEqual(set(problems), set(unhealthy))
        for address, (_problem, words) in problems.items():
            self.assertIn(words, unhealthy[address][1])
        # Every group holds one of them: only the singles are left.
        self.boot(self.flavors[2], 'no-pair', status='ERROR')
        self.assertEqual(1, len(self.held(self.boot(self.flavors[1], 's'))))

    def test_fabric_manager_failed_gpu(self):
        self.start()
        broken = BY_MODULE[6]
        self.fm.fail_nvlinks(gpus=(broken,))
        self.update()
        self.assertEqual('fabric-manager', self.unhealthy()[broken][0])
        self.assertEqual(modules(1, 2, 3, 4),
                         self.held(self.boot(self.flavors[4], 'quad')))
        self.boot(self.flavors[4], 'no-quad', status='ERROR')
        self.fm.repair_nvlinks()
        self.update()
        self.assertEqual({}, self.unhealthy())
        self.assertEqual(modules(5, 6, 7, 8),
                         self.held(self.boot(self.flavors[4], 'quad2')))

    def test_nvswitch_down_leaves_single_gpus(self):
        self.start()
        self.fm.fail_nvlinks(switches=(SWITCH,))
        self.update()
        # No group provider carries a size trait; every GPU stays.
        for traits in self.group_traits().values():
            self.assertEqual([], [t for t in traits
                                  if names.is_group_size_trait(t)])
            self.assertIn(names.WITHHELD_TRAIT, traits)
        self.assertEqual({0}, set(self.reserved().values()))
        self.assertIn('NVSwitch %s is down' % SWITCH,
                      self.manage_output(manage.pci_board))
        self.boot(self.flavors[2], 'no-pair', status='ERROR')
        singles = [self.boot(self.flavors[1], 's%d' % i) for i in range(2)]
        self.assertEqual([1, 1], [len(self.held(s)) for s in singles])
        self.fm.repair_nvlinks()
        self.update()
        self.assertEqual(2, len(self.held(self.boot(self.flavors[2], 'p'))))
        self.check_invariants()


class TestOperatorHealth(HealthTestBase):

    def mark_unhealthy(self, address):
        """``pci device set ADDRESS --unhealthy``; its output."""
        code, out = self.manage('pci', 'device', 'set', address,
                                '--unhealthy', '--reason', 'RMA 4711')
        self.assertEqual(0, code, out)
        self.assertIn('is unhealthy: RMA 4711', out)
        return out

    def test_mark_wins_until_cleared(self):
        self.start()
        address = BY_MODULE[3]
        self.mark_unhealthy(address)
        self.update()
        self.assertEqual(('operator', 'RMA 4711'), self.unhealthy()[address])
        self.assertEqual(1, self.reserved()[address])
        self.assertIn('RMA 4711', self.manage_output(manage.pci_list))
        # Observed healthy does not clear it.
        self.update()
        self.assertIn(address, self.unhealthy())
        code, out = self.manage('pci', 'device', 'set', address,
                                '--healthy')
        self.assertEqual(0, code, out)
        self.update()
        self.assertEqual({}, self.unhealthy())
        self.assertEqual(0, self.reserved()[address])
        code, out = self.manage('pci', 'device', 'history', address)
        self.assertEqual(0, code, out)
        self.assertEqual(2, out.count('| operator |'), out)
        self.assertIn('nova-manage (', out)

    def test_mark_takes_effect_before_the_next_update(self):
        # No resource update runs between the mark and the boots (as with
        # the default update_resources_interval of 60 s).
        self.start()
        address = BY_MODULE[3]
        self.assertIn('Placement no longer offers it or its groups',
                      self.mark_unhealthy(address))
        self.assertEqual(1, self.reserved()[address])
        # The board and the groups holding the GPU are withheld, the
        # other quartet is not.
        withheld = {name for name, traits in self.group_traits().items()
                    if names.WITHHELD_TRAIT in traits}
        self.assertEqual(3, len(withheld), withheld)
        for name in withheld:
            self.assertEqual([], [t for t in self.group_traits()[name]
                                  if names.is_group_size_trait(t)])
        refused = self.boot(self.flavors[8], 'board', status='ERROR')
        self.assertIn('No valid host', refused['fault']['message'])
        self.assert_nothing_held(refused['id'])
        quad = self.boot(self.flavors[4], 'quad')
        self.assertEqual(modules(5, 6, 7, 8), self.held(quad))
        self.check_invariants()

    def test_claim_refuses_a_device_marked_after_placement_offered_it(self):
        # The mark reached the database only (Placement was not told, or
        # a concurrent resource update undid it): Placement still offers
        # the board, the compute's claim refuses it, withholds it at once
        # and the build is rescheduled.
        self.start()
        address = BY_MODULE[3]
        node = db.compute_node_get_by_nodename(self.ctx, 'cmp1')
        pci_manager.set_device_health(self.ctx, node.id, address, True,
                                      'RMA 4711', 'test')
        self.assertEqual(0, self.reserved()[address])
        refused = self.boot(self.flavors[8], 'board', status='ERROR')
        fault = refused['fault']['message']
        self.assertIn('cmp1: PCI devices for', fault)
        self.assertIn('%s is unhealthy since' % address, fault)
        self.assert_nothing_held(refused['id'])
        # Withheld by the refused claim, not by a periodic update.
        self.assertEqual(1, self.reserved()[address])
        self.assertEqual(modules(5, 6, 7, 8),
                         self.held(self.boot(self.flavors[4], 'quad')))
        self.check_invariants()

    def test_bad_input_is_named(self):
        self.start()
        code, out = self.manage('pci', 'device', 'set', BY_MODULE[3],
                                '--unhealthy')
        self.assertEqual(1, code)
        self.assertIn('needs a reason', out)
        code, out = self.manage('pci', 'device', 'set', '0000:77:00.0',
                                '--unhealthy', '--reason', 'x')
        self.assertEqual(1, code)
        self.assertIn('No compute host tracks PCI device 0000:77:00.0', out)
        code, out = self.manage('pci', 'device', 'set', 'nope',
                                '--healthy')
        self.assertEqual(1, code)
        self.assertIn('nope', out)
        self.assertEqual({}, self.unhealthy())


class TestHolderOfABrokenDevice(HealthTestBase):

    def actions(self, server):
        path = '/servers/%s/os-instance-actions' % server['id']
        listed = self.api('GET', path)['instanceActions']
        return {a['action']: self.api(
            'GET', path + '/' + a['request_id'])['instanceAction']
            for a in listed}

    def break_one_gpu_of(self, server):
        broken = sorted(self.held(server))[0]
        self.fm.break_gpu(broken, 'remap_failure')
        self.update()
        return broken

    def test_event_and_fault_then_delete_keeps_it_out(self):
        self.start()
        server = self.boot(self.flavors[2], 'pair')
        broken = self.break_one_gpu_of(server)
        actions = self.actions(server)
        [event] = actions['pciDeviceUnhealthy']['events']
        self.assertEqual(('compute_pci_device_unhealthy', 'Error'),
                         (event['event'], event['result']))
        instance = db.instance_get_by_uuid(self.ctx, server['id'])
        self.assertIn('PCI device %s is unhealthy' % broken,
                      instance.fault_message)
        self.assertEqual('ACTIVE', self.api(
            'GET', '/servers/%s' % server['id'])['server']['status'])
        self.assertEqual(server['id'], self.history(broken)[-1][
            'instance_uuid'])
        self.check_invariants()
        # Deleting the server does not bring the broken GPU back.
        self.delete(server['id'])
        self.update()
        self.assert_nothing_held(server['id'])
        self.assertIn(broken, self.unhealthy())
        self.assertEqual(1, self.reserved()[broken])
        self.check_invariants()

    def test_operator_mark_on_a_held_device_is_told(self):
        self.start()
        server = self.boot(self.flavors[1], 'single')
        [address] = self.held(server)
        self.manage('pci', 'device', 'set', address, '--unhealthy',
                    '--reason', 'fan failure')
        self.update()
        [event] = self.actions(server)['pciDeviceUnhealthy']['events']
        self.assertEqual('Error', event['result'])
        instance = db.instance_get_by_uuid(self.ctx, server['id'])
        self.assertIn('(operator): fan failure', instance.fault_message)
        # Told once, not at every update.
        self.update()
        self.assertEqual(1, len([
            a for a in self.api('GET', '/servers/%s/os-instance-actions' %
                                server['id'])['instanceActions']
            if a['action'] == 'pciDeviceUnhealthy']))

    def test_stop_action(self):
        self.flags('pci', unhealthy_device_action='stop')
        self.start()
        server = self.boot(self.flavors[1], 'single')
        self.break_one_gpu_of(server)
        stopped = self.api('GET', '/servers/%s' % server['id'])['server']
        self.assertEqual('SHUTOFF', stopped['status'])
        actions = self.actions(server)
        self.assertEqual('Success',
                         actions['stop']['events'][0]['result'])
        self.assertIn('pciDeviceUnhealthy', actions)
        self.check_invariants()


class TestQuarantineAndHealth(HealthTestBase):

    def test_configured_failures_then_release_on_health(self):
        self.flags('pci', partition_quarantine_failures=2)
        # Only the updates this test runs read Fabric Manager.
        self.flags('libvirt', nvlink_repair_interval=0)
        self.flags(update_resources_interval=0)
        self.start()
        first = self.boot(self.flavors[2], 'first')
        bad = self.partition_of(first)
        self.delete(first['id'])
        members = [BY_MODULE[m] for m in fake.H100_PARTITIONS[bad]]
        self.fm.inject_fault('activate', fake.NVLINK_ERROR, count=100,
                             partition=bad)
        # The first failure is not enough: the build goes elsewhere (no
        # other host here) and the pair is still offered.
        self.boot(self.flavors[2], 'fails-once', status='ERROR')
        self.assertEqual({0}, {self.reserved()[a] for a in members})
        # The second quarantines it: the build takes another pair of
        # this host at once.
        self.assertNotEqual(bad, self.partition_of(
            self.boot(self.flavors[2], 'fails-twice')))
        self.assertEqual({1}, {self.reserved()[a] for a in members})
        # The broken GPU is found and repaired: the quarantine ends with
        # it, without a re-probe.
        # Each update looks at the host once and takes one Fabric
        # Manager snapshot, also the one that lifts the quarantine.
        once = (1, {'list': 1, 'failed': 1})
        self.fm.fail_nvlinks(gpus=(members[0],))
        self.assertEqual(once, self.counted_update())
        self.assertIn(members[0], self.unhealthy())
        self.fm.clear_faults()
        self.fm.repair_nvlinks()
        self.assertEqual(once, self.counted_update())
        self.assertEqual({}, self.compute.driver.nvlink.quarantined())
        self.assertEqual({0}, {self.reserved()[a] for a in members})
        self.boot(self.flavors[2], 'back')

    def test_transient_errors_never_quarantine(self):
        self.flags('pci', partition_quarantine_failures=1)
        self.start()
        self.fm.inject_fault('activate', fake.TIMEOUT, count=3)
        for i in range(3):
            self.boot(self.flavors[2], 't%d' % i, status='ERROR')
        self.assertEqual({}, self.compute.driver.nvlink.quarantined())
        self.assertEqual({0}, set(self.reserved().values()))


class TestBurstAndRestart(HealthTestBase):

    def test_failure_during_a_burst_of_boots(self):
        self.flags(rpc_response_timeout=300)
        self.start()
        broken = BY_MODULE[4]
        # Broken before the compute looked: the first build on it fails
        # in Fabric Manager and takes it out of the offer at once.
        self.fm.fail_nvlinks(gpus=(broken,))

        def boot(i):
            return requests.post(
                self.allinone.api_url + '/servers', json={'server': {
                    'name': 'b%d' % i, 'flavorRef': self.flavors[1],
                    'imageRef': 'none'}},
                headers={'X-Auth-Token': 'admin'}, timeout=120).json()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            created = list(pool.map(boot, range(8)))
        servers = [self.wait_for_settled(c['server']['id'])
                   for c in created]
        active = [s for s in servers if s['status'] == 'ACTIVE']
        self.assertEqual(7, len(active), [s['status'] for s in servers])
        self.assertNotIn(broken, {a for s in active for a in self.held(s)})
        self.assertIn(broken, self.unhealthy())
        self.check_invariants()
        for server in servers:
            self.delete(server['id'])
            self.assert_nothing_held(server['id'])
        self.assertEqual(set(), self.fm.active())
        self.check_invariants()

    def wait_for_settled(self, server_id):
        self.wait_until(lambda: self.api(
            'GET', '/servers/%s' % server_id)['server']['status'] !=
            'BUILD', 'server %s settles' % server_id)
        return self.api('GET', '/servers/%s' % server_id)['server']

    def test_restart_keeps_health(self):
        self.start()
        server = self.boot(self.flavors[1], 'single')
        observed = sorted(self.held(server))[0]
        self.fm.break_gpu(observed, 'retired_pages')
        marked = BY_MODULE[7] if observed != BY_MODULE[7] else BY_MODULE[8]
        self.manage('pci', 'device', 'set', marked, '--unhealthy',
                    '--reason', 'burnt connector')
        self.update()
        before = self.unhealthy()
        self.assertEqual({observed, marked}, set(before))
        events = len(self.history(observed)) + len(self.history(marked))
        actions = self.api('GET', '/servers/%s/os-instance-actions' %
                           server['id'])['instanceActions']
        self.stop_compute('cmp1')
        self.restart_compute('cmp1').init_host()
        self.assertEqual(before, self.unhealthy())
        self.assertEqual({1}, {self.reserved()[a] for a in before})
        # Nothing changed, so nothing new is recorded or told.
        self.assertEqual(events, len(self.history(observed)) +
                         len(self.history(marked)))
        self.assertEqual(actions, self.api(
            'GET', '/servers/%s/os-instance-actions' %
            server['id'])['instanceActions'])
        self.check_invariants()


class TestMarkAgainstNovaAll(test.TestCase):
    """``nova-manage pci device set --unhealthy`` as an operator runs it: a
    child process with nova-all's config file, from another directory,
    against nova-all running as its own process whose computes update
    their resources once an hour only."""

    TIMEOUT = 300

    def setUp(self):
        super().setUp()
        self.nova_all = deployment.AllInOne(computes=2, extra_conf={
            'DEFAULT': {'update_resources_interval': '3600'}})
        self.addOnException(self._attach_log)
        self.useFixture(self.nova_all)
        self.client = workload.ComputeClient(self.nova_all.api_url)
        self.flavors = self.client.ensure_flavors()
        self.ctx = nova_context.get_admin_context()

    def _attach_log(self, exc_info) -> None:
        for name, text in self.nova_all.logs().items():
            self.addDetail(name, testtools.content.text_content(text))

    def nova_manage(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [os.path.join(deployment.BIN, 'nova-manage'), '--config-file',
             os.path.join(self.nova_all.workdir, 'nova.conf'), *argv],
            cwd=self.useFixture(fixtures.TempDir()).path,
            capture_output=True, text=True, timeout=120)

    def settled(self, server_id: str) -> dict:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            server = self.client._ok('GET', '/servers/%s' %
                                     server_id)['server']
            if server['status'] != 'BUILD':
                return server
            time.sleep(0.2)
        self.fail('server %s never left BUILD' % server_id)

    def test_boot_right_after_the_mark_avoids_the_board(self):
        node = db.compute_node_get_by_nodename(self.ctx, 'hgx-1')
        address = sorted(d.address for d in pci_manager.devices_of_node(
            self.ctx, node.id))[0]
        done = self.nova_manage('pci', 'device', 'set', address, '--host',
                                'hgx-1', '--unhealthy', '--reason',
                                'RMA 4711')
        self.assertEqual(0, done.returncode, done.stdout + done.stderr)
        self.assertIn('Placement no longer offers it or its groups',
                      done.stdout)
        provider = requests.get(
            '%s/resource_providers?name=hgx-1_%s' % (
                self.nova_all.placement_url, address.upper()),
            headers={'X-Auth-Token': deployment.TOKEN,
                     'OpenStack-API-Version': 'placement 1.39'},
            timeout=30).json()['resource_providers'][0]
        self.assertEqual(1, requests.get(
            '%s/resource_providers/%s/inventories' % (
                self.nova_all.placement_url, provider['uuid']),
            headers={'X-Auth-Token': deployment.TOKEN},
            timeout=30).json()['inventories']['PGPU']['reserved'])
        # Right away, long before the computes' next update: one board is
        # left (hgx-2's), the second 8-GPU server finds none.
        servers = []
        for i in range(2):
            created = self.client._ok('POST', '/servers', {'server': {
                'name': 'board-%d' % i, 'flavorRef': self.flavors[8],
                'imageRef': 'none'}})['server']
            servers.append(self.settled(created['id']))
        self.assertEqual(['ACTIVE', 'ERROR'],
                         [s['status'] for s in servers])
        self.assertEqual('hgx-2', servers[0]['OS-EXT-SRV-ATTR:host'])
        self.assertIn('No valid host', servers[1]['fault']['message'])
        self.assertEqual([], [d.address for d in pci_manager.devices_of_node(
            self.ctx, node.id) if d.instance_uuid])


class TestAutomaticDefragAndHealth(test_defrag.DefragTestBase):
    """The conductor's automatic mode moves no server to free a group
    that an unhealthy device withholds: that frees nothing."""

    def test_no_move_frees_a_board_with_a_broken_gpu(self):
        self.flags('scheduler', defrag_max_moves=2)
        one = self.boot_on('cmp1', self.flavors[1], 'one',
                           test_defrag.ALLOW)
        broken = sorted(d.address for d in self.computes['cmp1'].rt.
                        pci_tracker.pci_devs if not d.instance_uuid)[0]
        node = db.compute_node_get_by_nodename(self.ctx, 'cmp1')
        pci_manager.set_device_health(self.ctx, node.id, broken, True,
                                      'RMA 4711', 'test')
        self.computes['cmp1'].update_available_resource()
        # cmp2's board is held by a server that may not move.
        self.boot_on('cmp2', self.flavors[2], 'pair')
        refused = self.boot(self.flavors[8], 'big', status='ERROR')
        fault = refused['fault']['message']
        self.assertIn('fragmentation', fault)
        self.assertIn('1 nvlink group(s) of 8 withheld for unhealthy '
                      'devices (cmp1 board: %s unhealthy since ' % broken,
                      fault)
        self.assertEqual([], self.migrations(one['id']))
        self.assertEqual('cmp1',
                         self.server(one['id'])['OS-EXT-SRV-ATTR:host'])
        self.assert_consistent()
