"""What a Fabric Manager host offers: devices and partitions nova cannot
activate are withheld (reserved in Placement) and come back when they can.

Real Placement, database and messaging; one compute on libvirt's test
driver against the fake Fabric Manager, reached only through its ``fmpm``
and ``nvidia-smi`` executables.
"""

import io
import time
from unittest import mock

from nova.cmd import manage
from nova.tests.functional import test_boot_gpu_groups as boot
from nova.tests.functional import test_nvlink_partitions as nvlink_tests
from nova.virt.fake import fabric_manager as fake

GPUS = nvlink_tests.GPUS
BY_MODULE = nvlink_tests.BY_MODULE


class OfferTestBase(nvlink_tests.NVLinkTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()

    def reserved(self, host='cmp1'):
        """Address -> reserved PGPU units of each device provider."""
        result = {}
        for name, rp in self.provider_view(host).items():
            if 'PGPU' not in rp['inventory']:
                continue
            inventory = self.placement_get(
                '/resource_providers/%s/inventories' % rp['uuid'])
            result[name.split("_", 1)[1].lower()] = \
                inventory['inventories']['PGPU']['reserved']
        return result

    def manage_output(self, command):
        out = io.StringIO()
        with mock.patch('sys.stdout', out):
            self.assertEqual(0, command('cmp1'))
        return out.getvalue()

    def wait_until(self, predicate, what):
        deadline = time.monotonic() + boot.TIMEOUT
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        self.fail('timed out waiting until %s' % what)


class TestUnplaceableGPU(OfferTestBase):

    def test_gpu_without_module_id_is_reserved_not_booted_on(self):
        fm = self.fm_for('cmp1')
        fm.bind(GPUS[0], 'vfio-pci')        # nvidia-smi cannot see it
        # Its single-GPU partition (the singles are 6 + module ID).
        own = 6 + nvlink_tests.H200_MAP[GPUS[0]]
        self.start_services()
        self.assertEqual(1, self.reserved()[GPUS[0]])
        self.assertEqual({0}, set(v for a, v in self.reserved().items()
                                  if a != GPUS[0]))
        listing = self.manage_output(manage.pci_list)
        row = next(line for line in listing.splitlines()
                   if GPUS[0] in line)
        self.assertIn('has no module ID', row)
        self.assertIn('withheld', self.manage_output(manage.pci_board))
        single = self.gpu_flavors()[1]
        servers = [self.boot(single, 's%d' % i) for i in range(7)]
        self.assertNotIn(GPUS[0], {a for s in servers
                                   for a in self.addresses(s)})
        self.assertEqual(set(range(7, 15)) - {own},
                         self.fms['cmp1'].active())
        # Nothing was tried on the unplaceable GPU.
        self.assertEqual([], [c for c in fm.calls() if c[2] != 0])
        self.boot(single, 'none-left', status='ERROR')
        # Once nvidia-smi shows it, the restarted compute offers it again.
        fm.bind(GPUS[0], 'nvidia')
        self.computes['cmp1'].init_host()
        self.assertEqual(0, self.reserved()[GPUS[0]])
        self.assertEqual(own, self.partition_of(self.boot(single, 'last')))

    def test_gpu_without_own_partition_is_offered_only_in_groups(self):
        fm = self.fm_for('cmp1')
        table = {str(pid): list(modules) for pid, modules in
                 fake.H100_PARTITIONS.items() if pid != 7}
        fm.update(partitions=table)         # module 1 has no single
        self.start_services()
        flavors = self.gpu_flavors()
        self.assertIn('no Fabric Manager partition of its own',
                      self.manage_output(manage.pci_list))
        servers = [self.boot(flavors[1], 's%d' % i) for i in range(7)]
        self.assertNotIn(BY_MODULE[1], {a for s in servers
                                        for a in self.addresses(s)})
        self.boot(flavors[1], 'none-left', status='ERROR')
        for server in servers:
            self.delete(server['id'])
        # Its groups still are partitions nova can activate.
        self.assertEqual(0, self.partition_of(self.boot(flavors[8], 'b')))

    def addresses(self, server):
        compute = self.computes[server['OS-EXT-SRV-ATTR:host']]
        return {d.address for d in compute.rt.pci_tracker.pci_devs
                if d.instance_uuid == server['id']}


class TestQuarantine(OfferTestBase):

    def test_failed_partition_is_skipped_and_quarantined(self):
        self.start_services()
        flavors = self.gpu_flavors()
        fm = self.fms['cmp1']
        first = self.boot(flavors[2], 'first')
        bad = self.partition_of(first)
        self.delete(first['id'])
        fm.inject_fault('activate', fake.NVLINK_ERROR, count=100,
                        partition=bad)
        pairs = [self.boot(flavors[2], 'p%d' % i) for i in range(3)]
        self.assertEqual({3, 4, 5, 6} - {bad},
                         {self.partition_of(p) for p in pairs})
        # Tried once, then kept out of the offer.
        failed = [c for c in fm.calls() if c[2] != 0]
        self.assertEqual([['activate', bad, fake.NVLINK_ERROR]], failed)
        members = [BY_MODULE[m] for m in fake.H100_PARTITIONS[bad]]
        self.assertEqual({1}, {self.reserved()[a] for a in members})
        self.assertIn('quarantined', self.manage_output(manage.pci_list))
        self.boot(flavors[2], 'no-pair-left', status='ERROR')
        # A re-probe while the links still fail keeps it out ...
        compute = self.computes['cmp1']
        compute.repair_nvlink_partitions()
        self.assertEqual({1}, {self.reserved()[a] for a in members})
        # ... and one that passes offers it again.
        fm.clear_faults()
        compute.repair_nvlink_partitions()
        self.assertEqual({0}, {self.reserved()[a] for a in members})
        self.assertEqual({3, 4, 5, 6} - {bad}, fm.active())
        self.assertEqual(bad, self.partition_of(
            self.boot(flavors[2], 'back')))

    def test_transient_fm_error_does_not_quarantine(self):
        self.start_services()
        fm = self.fms['cmp1']
        fm.inject_fault('activate', fake.GENERIC_ERROR)
        self.boot(self.gpu_flavors()[2], 'doomed', status='ERROR')
        self.assertEqual({0}, set(self.reserved().values()))
        self.assertNotIn('quarantined', self.manage_output(manage.pci_list))


class TestForeignPartitionFromRepair(OfferTestBase):

    def test_repair_withholds_and_reoffers_without_resource_updates(self):
        self.flags(update_resources_interval=0)
        self.flags('libvirt', nvlink_repair_interval=1)
        self.start_services()
        flavors = self.gpu_flavors()
        fm = self.fms['cmp1']
        pair_a2 = [BY_MODULE[2], BY_MODULE[4]]      # partition 4
        fm.call('activate', 4)              # not by nova
        self.wait_until(lambda: {self.reserved()[a] for a in pair_a2} ==
                        {1}, 'the foreign partition is withheld')
        self.assertEqual(2, self.partition_of(self.boot(flavors[4], 'q1')))
        self.boot(flavors[4], 'no-more-quads', status='ERROR')
        fm.call('deactivate', 4)
        self.wait_until(lambda: {self.reserved()[a] for a in pair_a2} ==
                        {0}, 'the cleared partition is offered again')
        self.assertEqual(1, self.partition_of(self.boot(flavors[4], 'q2')))
