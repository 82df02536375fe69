"""nova-compute drives NVIDIA Fabric Manager (the fake FM, its real fmpm).

Real Placement, database and messaging; computes on libvirt's test driver
with [libvirt]nvlink_partitions = fabric_manager against a fake Fabric
Manager per host that the compute reaches only through the ``fmpm`` and
``nvidia-smi`` executables.
"""

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import time
from unittest import mock

import fixtures

from nova import context as nova_context
from nova.db import api as db
from nova import exception
from nova import test
from nova.cmd import manage
from nova.tests.fixtures import fabric_manager as fake_fm
from nova.tests.functional.lib import base
from nova.tests.functional import test_boot_gpu_groups as boot
from nova.virt.fake import fabric_manager as fake
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import gpu_modules
from nova.virt.libvirt import nvlink

GPUS = base.GPUS
# The generated H200 board's module map (not PCI order); the generated
# nova.conf declares its partitions.
H200_MAP = fakehost.H200_MODULE_IDS
BY_MODULE = {module: address for address, module in H200_MAP.items()}
H100_MAP = fake.H100_WP12736_MAP


def h100_devices():
    """The H200 host's devices moved to the published H100 addresses."""
    return [dataclasses.replace(dev, address=address) for dev, address in
            zip(fakehost.hgx_h200_devices(extra_devices=False),
                sorted(H100_MAP))]


class NVLinkTestBase(boot.BootTestBase):

    module_map = H200_MAP

    def setUp(self):
        super().setUp()
        self.flags('libvirt', nvlink_partitions='fabric_manager')
        self.fms = {}

    def fm_for(self, host):
        if host not in self.fms:
            self.fms[host] = self.useFixture(
                fake_fm.FabricManagerFixture(self.module_map)).fm
        return self.fms[host]

    def nvlink_partitions(self, host):
        """What a nova-compute process knows of FM when it starts: the
        records and module map kept under its state path, nothing else."""
        fm = self.fm_for(host)
        return nvlink.NVLinkPartitions(
            nvlink.fabric_manager.FabricManagerClient(fm.fmpm_path),
            fm.nvidia_smi_path, {}, os.path.join(self.tmpdir, 'nvlink'))

    def make_driver(self, host, devices=None):
        return libvirt_driver.LibvirtDriver(
            self.node_uri(host, devices), self.conf.instances_path,
            nvlink=self.nvlink_partitions(host))

    def partition_of(self, server):
        """(partition ID, FM state) of the FM partition of the server's
        GPUs, by the module map the fake holds."""
        host = server['OS-EXT-SRV-ATTR:host']
        compute = self.computes[host]
        addresses = {d.address for d in compute.rt.pci_tracker.pci_devs
                     if d.instance_uuid == server['id']}
        modules = frozenset(self.module_map[a] for a in addresses)
        for pid, members in fake.H100_PARTITIONS.items():
            if frozenset(members) == modules:
                return pid
        self.fail('GPUs %s of %s are no FM partition' % (addresses,
                                                         server['name']))

    def assert_active(self, host, servers):
        """FM has exactly the servers' partitions active, nova agrees."""
        expected = {self.partition_of(s): s['id'] for s in servers}
        self.assertEqual(set(expected), self.fms[host].active())
        self.assertEqual(expected,
                         self.computes[host].driver.nvlink.holders())


class TestPartitionLifecycle(NVLinkTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()

    def test_every_partition_activated_and_released(self):
        self.start_services()
        flavors = self.gpu_flavors()
        for size, expected in ((2, {3, 4, 5, 6}), (4, {1, 2}), (8, {0}),
                               (1, set(range(7, 15)))):
            servers = [self.boot(flavors[size], 's%d-%d' % (size, i))
                       for i in range(8 // size)]
            self.assertEqual(expected, self.fms['cmp1'].active())
            self.assertEqual(expected,
                             {self.partition_of(s) for s in servers})
            self.assert_active('cmp1', servers)
            for server in servers:
                self.delete(server['id'])
            self.assertEqual(set(), self.fms['cmp1'].active())
            self.assertEqual({}, self.computes['cmp1'].driver.nvlink
                             .holders())

    def test_activation_failure_faults_and_frees(self):
        self.start_services()
        flavors = self.gpu_flavors()
        fm = self.fm_for('cmp1')
        # An error that says nothing about the partition (an NVLink
        # error quarantines it instead: test_nvlink_offer).
        fm.inject_fault('activate', fake.GENERIC_ERROR)
        server = self.boot(flavors[2], 'doomed', status='ERROR')
        message = server['fault']['message']
        self.assertIn('NVLink partition', message)
        self.assertIn('fmReturn: -2', message)
        self.assert_nothing_held(server['id'])
        self.assertEqual(set(), fm.active())
        # The one attempt (the only host is not retried) activated a pair
        # and nothing else.
        [(op, pid, code)] = fm.calls()
        self.assertEqual(('activate', -2), (op, code))
        self.assertIn(pid, (3, 4, 5, 6))
        # The host works again once FM does.
        self.assert_active('cmp1', [self.boot(flavors[2], 'ok')])

    def test_activation_failure_reschedules(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        flavors = self.gpu_flavors()
        first = self.boot(flavors[1], 'first')
        bad = first['OS-EXT-SRV-ATTR:host']
        good = ({'cmp1', 'cmp2'} - {bad}).pop()
        self.fms[bad].stop()
        server = self.boot(flavors[2], 'moved')
        self.assertEqual(good, server['OS-EXT-SRV-ATTR:host'])
        self.assert_active(good, [server])
        self.assertEqual([], [d for d in self.computes[bad].rt.pci_tracker
                              .pci_devs if d.instance_uuid ==
                              server['id']])

    def test_partition_activated_behind_novas_back_fails_the_build(self):
        self.start_services()
        flavors = self.gpu_flavors()
        fm = self.fm_for('cmp1')
        # Another client holds the whole board: every pair is IN_USE.
        fm.call('activate', 0)
        server = self.boot(flavors[2], 'blocked', status='ERROR')
        self.assertIn('fmReturn: -7', server['fault']['message'])
        self.assert_nothing_held(server['id'])
        self.assertEqual({0}, fm.active())

    def test_restarted_compute_repairs_partitions(self):
        self.start_services()
        flavors = self.gpu_flavors()
        keep = self.boot(flavors[2], 'keep')
        gone = self.boot(flavors[2], 'gone')
        fm = self.fms['cmp1']
        # While the compute was down: keep's partition was lost and
        # gone's guest vanished with its partition still active.
        fm.call('deactivate', self.partition_of(keep))
        compute = self.computes['cmp1']
        compute.driver.host.lookup_domain(gone['id']).destroy()
        compute.driver.host.lookup_domain(gone['id']).undefine()
        # A new process: its FM view starts from what is on disk; the
        # hypervisor (libvirt) keeps its guests across the restart.
        compute.driver.nvlink = self.nvlink_partitions('cmp1')
        compute.init_host()
        # gone's guest is defined again, powered off (the server is
        # SHUTOFF), and holds its partition as any stopped guest does.
        self.assertEqual('stopped', db.instance_get_by_uuid(
            nova_context.get_admin_context(), gone['id']).vm_state)
        expected = {self.partition_of(keep): keep['id'],
                    self.partition_of(gone): gone['id']}
        self.assertEqual(set(expected), fm.active())
        self.assertEqual(expected, compute.driver.nvlink.holders())

    def test_periodic_repair_replays_fm_restart(self):
        self.start_services()
        flavors = self.gpu_flavors()
        servers = [self.boot(flavors[4], 'q'), self.boot(flavors[1], 's')]
        fm = self.fms['cmp1']
        fm.stop()
        fm.start(restart=True)
        self.computes['cmp1'].repair_nvlink_partitions()
        self.assertEqual('ready', fm.read()['daemon'])
        self.assert_active('cmp1', servers)
        self.assertEqual('set', fm.calls()[-1][0])

    def test_periodic_task_replays_within_fm_window(self):
        self.flags('libvirt', nvlink_repair_interval=1)
        self.start_services()
        server = self.boot(self.gpu_flavors()[2], 'pair')
        fm = self.fms['cmp1']
        fm.stop()
        fm.start(restart=True)
        # The compute's own periodic task must answer FM's 60 s window.
        deadline = time.monotonic() + boot.TIMEOUT
        while fm.read()['daemon'] != 'ready' and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual('ready', fm.read()['daemon'])
        self.assert_active('cmp1', [server])

    def test_instance_whose_partition_cannot_come_back_is_faulted(self):
        self.start_services()
        server = self.boot(self.gpu_flavors()[2], 'pair')
        pid = self.partition_of(server)
        fm = self.fms['cmp1']
        fm.call('deactivate', pid)
        fm.inject_fault('activate', fake.NVLINK_ERROR)
        self.computes['cmp1'].repair_nvlink_partitions()
        server = self.api('GET', '/servers/%s' % server['id'])['server']
        self.assertEqual('ERROR', server['status'])
        self.assertIn('NVLink partition %d' % pid, server['fault']['message'])
        self.assertIn('fmReturn: -10', server['fault']['message'])

    def test_foreign_partition_withholds_its_groups_until_cleared(self):
        self.start_services()
        flavors = self.gpu_flavors()
        fm = self.fms['cmp1']
        compute = self.computes['cmp1']
        fm.call('activate', 4)                  # pair-a2, not by nova
        compute.repair_nvlink_partitions()
        self.assertEqual({4}, fm.active())
        compute.update_available_resource()
        # pair-a2's GPUs are someone else's: reserved, so neither they
        # nor the groups holding them (quad-a, board) can be allocated.
        self.assertEqual(7, len(compute.rt.group_tree.groups()))
        self.assertEqual({BY_MODULE[2], BY_MODULE[4]},
                         set(compute.rt.withheld.devices))
        self.assertEqual(2, self.partition_of(self.boot(flavors[4], 'q1')))
        self.boot(flavors[4], 'no-more-quads', status='ERROR')
        fm.call('deactivate', 4)
        compute.update_available_resource()
        self.assertEqual(7, len(compute.rt.group_tree.groups()))
        self.assertEqual(1, self.partition_of(self.boot(flavors[4], 'q2')))


class TestGroupsAgainstFabricManager(NVLinkTestBase):

    def test_declared_group_fm_does_not_have_is_refused(self):
        self.enable_h200_groups()
        # Modules 1 and 2 are no partition.
        wrong = sorted((BY_MODULE[1], BY_MODULE[2]))
        bad = ['{"name": "wrong", "type": "nvlink", "addresses": '
               '["%s", "%s"]}' % tuple(wrong)]
        self.flags('pci', device_group=bad)
        err = self.assertRaises(exception.PciGroupConfigInvalid,
                                self.start_compute, 'cmp1',
                                driver=self.make_driver('cmp1'))
        message = str(err)
        for part in ('group wrong', wrong[0], wrong[1], 'module IDs %s' %
                     ','.join(str(H200_MAP[a]) for a in wrong),
                     '3 (modules 1,3', '0 (modules 1,2,3,4,5,6,7,8'):
            self.assertIn(part, message)

    def tree_shape(self, tree):
        """Each group as (its devices, its members' device sets)."""
        return {(frozenset(g.addresses),
                 frozenset(frozenset(m.addresses) for m in g.members))
                for g in tree.groups()}

    def test_discovery_gives_the_documented_tree(self):
        self.enable_h200_groups()
        documented = self.start_compute(
            'cmp1', driver=self.make_driver('cmp1'))
        self.flags('pci', device_group=[],
                   device_group_source='fabric_manager')
        discovered = self.start_compute(
            'cmp2', driver=self.make_driver('cmp2'))
        self.assertEqual(7, len(discovered.rt.group_tree.groups()))
        self.assertEqual(self.tree_shape(documented.rt.group_tree),
                         self.tree_shape(discovered.rt.group_tree))
        # Placement sees the same structure: every device provider has the
        # same member-index traits on both hosts.
        shapes = []
        for host in ('cmp1', 'cmp2'):
            view = self.provider_view(host)
            shapes.append({name.split('_', 1)[1]: rp['traits']
                           for name, rp in view.items()
                           if rp['inventory'].get('PGPU')})
        self.assertEqual(8, len(shapes[0]))
        self.assertEqual(shapes[0], shapes[1])

    def test_unmapped_gpu_loses_its_groups_but_stays_usable(self):
        self.enable_h200_groups()
        fm = self.fm_for('cmp1')
        fm.bind(GPUS[0], 'vfio-pci')
        compute = self.start_compute('cmp1',
                                     driver=self.make_driver('cmp1'))
        names = {g.name for g in compute.rt.group_tree.groups()}
        # GPU 1 is in one pair of quad-a, in quad-a and in the board.
        [its_pair] = [name for name, gpus in
                      fakehost.H200_NVLINK_PAIRS.items() if 1 in gpus]
        self.assertEqual(set(fakehost.H200_NVLINK_PAIRS) - {its_pair} |
                         {'quad-b'}, names)
        self.assertEqual({GPUS[0]: 'has no module ID'},
                         compute.driver.nvlink.unmapped)


class TestH100ModuleMap(NVLinkTestBase):
    """Module IDs not in PCI order (the published H100 map)."""

    module_map = H100_MAP

    def setUp(self):
        super().setUp()
        self.flags('pci', report_in_placement=True,
                   device_spec=base.H200_CONFIG['device_spec'],
                   alias=base.H200_CONFIG['alias'],
                   device_group_source='fabric_manager')
        self.flags('filter_scheduler', pci_in_placement=True)

    def test_guests_get_exactly_one_partition(self):
        self.start_services(devices=h100_devices())
        flavors = self.gpu_flavors()
        pairs = [self.boot(flavors[2], 'p%d' % i) for i in range(4)]
        self.assertEqual({3, 4, 5, 6}, {self.partition_of(p) for p in pairs})
        by_modules = {frozenset(H100_MAP[a] for a in pair)
                      for pair in ({'0000:86:00.0', '0000:87:00.0'},
                                   {'0000:b8:00.0', '0000:bb:00.0'},
                                   {'0000:0f:00.0', '0000:10:00.0'},
                                   {'0000:41:00.0', '0000:44:00.0'})}
        self.assertEqual({frozenset(m) for p, m in
                          fake.H100_PARTITIONS.items() if p in
                          (3, 4, 5, 6)}, by_modules)
        self.assert_active('cmp1', pairs)
        for pair in pairs:
            self.delete(pair['id'])
        quads = [self.boot(flavors[4], 'q%d' % i) for i in range(2)]
        self.assert_active('cmp1', quads)
        self.assertEqual({1, 2}, {self.partition_of(q) for q in quads})


class TestAllInOneGeneratedHost(NVLinkTestBase):
    """nova-all's generated hosts (no connection_uri) and their tools."""

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()

    def test_configured_tools_are_used(self):
        # An operator (or an independent fake) set both tool paths: the
        # generated host gets them, not nova-all's own fake.
        fm = self.fm_for('cmp1')
        self.flags('libvirt', fmpm_path=fm.fmpm_path,
                   nvidia_smi_path=fm.nvidia_smi_path)
        self.start_allinone(['cmp1'])
        nvlink_parts = self.computes['cmp1'].driver.nvlink
        self.assertEqual(fm.fmpm_path, nvlink_parts.client.fmpm_path)
        self.assertEqual(fm.nvidia_smi_path, nvlink_parts.nvidia_smi_path)
        server = self.boot(self.gpu_flavors()[2], 'pair')
        self.assert_active('cmp1', [server])
        self.assertFalse(os.path.exists(
            os.path.join(self.tmpdir, 'fabric-manager')))

    def test_one_configured_path_is_honoured_too(self):
        # A configured fmpm is never paired with nova-all's fake
        # nvidia-smi: the other tool is the configured (default) one.
        fm = self.fm_for('cmp1')
        self.flags('libvirt', fmpm_path=fm.fmpm_path)
        self.start_allinone(['cmp1'])
        nvlink_parts = self.computes['cmp1'].driver.nvlink
        self.assertEqual(fm.fmpm_path, nvlink_parts.client.fmpm_path)
        self.assertEqual(self.conf.libvirt.nvidia_smi_path,
                         nvlink_parts.nvidia_smi_path)

    def test_unset_paths_give_the_generated_fake(self):
        self.start_allinone(['cmp1'])
        generated = os.path.join(self.tmpdir, 'fabric-manager', 'cmp1')
        nvlink_parts = self.computes['cmp1'].driver.nvlink
        self.assertEqual(os.path.join(generated, 'fmpm'),
                         nvlink_parts.client.fmpm_path)
        server = self.boot(self.gpu_flavors()[2], 'pair')
        self.assertEqual([['activate', self.partition_of(server), 0]],
                         fake.FakeFabricManager(generated).calls())


class TestDeclaredGroupsAgainstModuleMap(boot.BootTestBase):
    """Without nova driving Fabric Manager, declared nvlink groups are
    checked against the board's fixed partitions by the module map the
    compute can read, and a mismatch is warned about at start."""

    # The example of the old docs: pairs in PCI order ({1,3} by position),
    # which on the generated board are no NVLink partition.
    PCI_ORDER_PAIRS = {'pair-a1': (GPUS[0], GPUS[2]),
                       'pair-a2': (GPUS[1], GPUS[3]),
                       'pair-b1': (GPUS[4], GPUS[6]),
                       'pair-b2': (GPUS[5], GPUS[7])}

    def declare(self, pairs):
        self.enable_h200_groups()
        groups = ['{"name": "%s", "type": "nvlink", "addresses": '
                  '["%s", "%s"]}' % (name, first, second)
                  for name, (first, second) in pairs.items()]
        self.flags('pci', device_group=groups + [
            g for g in base.H200_CONFIG['device_group'] if 'members' in g])

    def start(self):
        """A compute with the driver nova-compute loads from config."""
        self.flags('libvirt', connection_uri=self.node_uri('cmp1'))
        return self.start_compute(
            'cmp1', driver=libvirt_driver.LibvirtDriver.from_config(self.conf))

    def warnings(self):
        return [line for line in self.logger.output.splitlines()
                if 'is not an NVLink partition' in line]

    def test_pci_order_pairs_warned_with_operator_map(self):
        self.flags('libvirt', nvlink_partitions='none', gpu_module_map=(
            json.dumps(fakehost.H200_MODULE_IDS)))
        self.declare(self.PCI_ORDER_PAIRS)
        self.start()
        warnings = self.warnings()
        # Each pair is wrong; its quad and the board are right.
        self.assertEqual(4, len(warnings), warnings)
        [pair_a1] = [w for w in warnings if 'group pair-a1 ' in w]
        modules = [fakehost.H200_MODULE_IDS[a] for a in
                   self.PCI_ORDER_PAIRS['pair-a1']]
        for part in ('%s, %s' % self.PCI_ORDER_PAIRS['pair-a1'],
                     'module IDs %d,%d' % tuple(modules),
                     '3 (modules 1,3: %s, %s); ' % tuple(
                         sorted((BY_MODULE[1], BY_MODULE[3]))),
                     '4 (modules 2,4: %s, %s); ' % tuple(
                         sorted((BY_MODULE[2], BY_MODULE[4]))),
                     '5 (modules 5,7', '6 (modules 6,8',
                     '1 (modules 1,2,3,4', '2 (modules 5,6,7,8',
                     '0 (modules 1,2,3,4,5,6,7,8',
                     'nvlink_partitions = none'):
            self.assertIn(part, pair_a1)

    def test_nova_all_generated_host_warns(self):
        self.flags('libvirt', nvlink_partitions='none', gpu_module_map=(
            json.dumps(fakehost.H200_MODULE_IDS)))
        self.declare(self.PCI_ORDER_PAIRS)
        self.start_allinone(['cmp1'])
        self.assertEqual(4, len(self.warnings()))

    def test_nvidia_smi_map_in_hook_mode(self):
        fm = self.useFixture(fake_fm.FabricManagerFixture(
            fakehost.H200_MODULE_IDS)).fm
        self.flags('libvirt', nvlink_partitions='libvirt_hook',
                   nvidia_smi_path=fm.nvidia_smi_path)
        self.declare(self.PCI_ORDER_PAIRS)
        self.start()
        self.assertEqual(4, len(self.warnings()))

    def test_saved_map_is_read(self):
        # A map an earlier fabric_manager-mode compute saved.
        os.makedirs(os.path.join(self.tmpdir, 'nvlink'))
        with open(os.path.join(self.tmpdir, 'nvlink',
                               'cmp1-gpu-modules.json'), 'w') as out:
            json.dump(fakehost.H200_MODULE_IDS, out)
        self.flags('libvirt', nvlink_partitions='none')
        self.declare(self.PCI_ORDER_PAIRS)
        self.start()
        self.assertEqual(4, len(self.warnings()))

    def test_generated_groups_match_the_generated_board(self):
        self.flags('libvirt', nvlink_partitions='none', gpu_module_map=(
            json.dumps(fakehost.H200_MODULE_IDS)))
        self.enable_h200_groups()
        compute = self.start()
        self.assertEqual([], self.warnings())
        self.assertEqual(7, len(compute.rt.group_tree.groups()))

    def test_no_module_map_no_warning(self):
        self.flags('libvirt', nvlink_partitions='none',
                   nvidia_smi_path=os.path.join(self.tmpdir, 'absent'))
        self.declare(self.PCI_ORDER_PAIRS)
        self.start()
        self.assertEqual([], self.warnings())

    # A real 4-GPU A100 SXM4 80GB board (nvidia-smi -q of driver 555): its
    # GPUs, in PCI order, print module IDs 3, 7, 5 and 6. It has no
    # NVSwitch, so the HGX 8-GPU partition table says nothing about it.
    A100_GPUS = ('0000:07:00.0', '0000:0f:00.0', '0000:47:00.0',
                 '0000:4e:00.0')
    A100_MODULES = dict(zip(A100_GPUS, (3, 7, 5, 6)))

    def start_a100_board(self):
        """A compute on the 4-GPU A100 board, its GPUs declared as two
        pairs in a quad (each group joined by NVLink on that board)."""
        devices = [dataclasses.replace(dev, address=address,
                                       product_id='20b2')
                   for dev, address in zip(fakehost.hgx_h200_devices(
                       4, extra_devices=False), self.A100_GPUS)]
        pairs = {'pair-1': self.A100_GPUS[:2], 'pair-2': self.A100_GPUS[2:]}
        self.flags('libvirt', nvlink_partitions='none',
                   gpu_module_map=json.dumps(self.A100_MODULES))
        groups = [{'name': name, 'type': 'nvlink',
                   'addresses': list(addresses)}
                  for name, addresses in pairs.items()]
        groups.append({'name': 'quad', 'type': 'nvlink',
                       'members': sorted(pairs)})
        self.flags('pci', report_in_placement=True,
                   device_spec=[json.dumps({
                       'vendor_id': '10de', 'product_id': '20b2',
                       'resource_class': 'PGPU'})],
                   alias=[json.dumps({'name': 'a100',
                                      'resource_class': 'PGPU',
                                      'group_type': 'nvlink'})],
                   device_group=[json.dumps(group) for group in groups])
        self.flags('filter_scheduler', pci_in_placement=True)
        self.flags('libvirt', connection_uri=self.node_uri('cmp1', devices))
        return self.start_compute(
            'cmp1', driver=libvirt_driver.LibvirtDriver.from_config(self.conf))

    def test_4gpu_a100_board_gets_no_hgx_table(self):
        compute = self.start_a100_board()
        # Before: pairs {3,7}, {5,6} and the quad were "not an NVLink
        # partition", and GPUs 2 and 3 (modules 7 and 5) "partition 5".
        self.assertEqual([], self.warnings())
        self.assertIsNone(compute.driver.observe_host().fabric.known)
        self.assertEqual(3, len(compute.rt.group_tree.groups()))
        said = [line for line in self.logger.output.splitlines()
                if 'HGX' in line and 'cmp1' in line]
        self.assertEqual(1, len(said), said)
        for part in ('4 GPUs of product 10de:20b2',
                     'module IDs 3,5,6,7', 'only for 8 GPUs of one of',
                     '10de:2335 (H200 SXM 141GB)',
                     'No NVLink partitions are derived'):
            self.assertIn(part, said[0])
        # Once per host: a resource update says nothing more.
        compute.update_available_resource()
        self.assertEqual(said, [line for line in
                                self.logger.output.splitlines()
                                if 'HGX' in line and 'cmp1' in line])

    def test_8gpu_h200_board_still_gets_the_table(self):
        self.flags('libvirt', nvlink_partitions='none', gpu_module_map=(
            json.dumps(fakehost.H200_MODULE_IDS)))
        self.enable_h200_groups()
        compute = self.start()
        known = compute.driver.observe_host().fabric.known
        self.assertEqual(set(gpu_modules.HGX_PARTITIONS),
                         {p.id for p in known.partitions})
        self.assertEqual(tuple(sorted((BY_MODULE[5], BY_MODULE[7]))),
                         {p.id: p for p in known.partitions}[5].addresses)
        self.assertNotIn('No NVLink partitions are derived',
                         self.logger.output)


class TestManagePartitions(NVLinkTestBase):

    def test_lists_fm_state_holders_and_differences(self):
        self.enable_h200_groups()
        self.start_services()
        fm = self.fms['cmp1']
        self.flags('libvirt', fmpm_path=fm.fmpm_path)
        server = self.boot(self.gpu_flavors()[2], 'pair')
        pid = self.partition_of(server)
        stray = ({3, 4, 5, 6} - {pid}).pop()
        fm.call('activate', stray)
        out = io.StringIO()
        with mock.patch('sys.stdout', out):
            self.assertEqual(0, manage.pci_partitions(self.conf, 'cmp1'))
        rows = {int(cells[0]): cells for cells in (
            [c.strip() for c in line.strip('|').split('|')]
            for line in out.getvalue().splitlines()
            if line.startswith('|') and line[2].isdigit())}
        self.assertEqual(list(range(15)), sorted(rows))
        addresses = ' '.join(sorted(
            BY_MODULE[m] for m in fake.H100_PARTITIONS[pid]))
        self.assertEqual([str(pid), ','.join(
            map(str, fake.H100_PARTITIONS[pid])), addresses, 'active',
            server['id'], server['id'], '-'], rows[pid])
        self.assertEqual('ACTIVE in FM, no instance holds it in nova',
                         rows[stray][6])
        self.assertEqual('inactive', rows[0][3])

    def test_refuses_without_fabric_manager_mode(self):
        self.flags('libvirt', nvlink_partitions='none')
        err = io.StringIO()
        with mock.patch('sys.stderr', err):
            self.assertEqual(1, manage.pci_partitions(self.conf, 'cmp1'))
        self.assertIn('nvlink_partitions is none', err.getvalue())


class TestDemo(test.TestCase):

    TIMEOUT = 600

    def test_demo_shows_only_servers_partitions_active(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        proc = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), 'nova-all'),
             '--demo'], cwd=tmp, capture_output=True, text=True,
            timeout=500)
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
        self.assertIn('active in Fabric Manager, and nothing else is '
                      'active', proc.stdout)
        self.assertIn('FM partition 0 (modules 1,2,3,4,5,6,7,8) ACTIVE',
                      proc.stdout)
        self.assertNotIn('WRONG', proc.stdout)
        # The servers booted from the image the demo uploaded to Glance.
        self.assertRegex(proc.stdout, r'Image: demo-image \(\S+, \d+ '
                         r'bytes\) uploaded to Glance')
        # The boards as a picture, next to the log, name the servers.
        [picture] = re.findall(r'the boards as a picture: (\S+)\)',
                               proc.stdout)
        with open(picture, encoding='utf-8') as f:
            page = f.read()
        for name in ('pair-1', 'solo-1', 'solo-2', 'train-b', 'pair-3'):
            self.assertIn('>%s</text>' % name, page)
