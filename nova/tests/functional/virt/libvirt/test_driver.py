"""LibvirtDriver and Host against libvirt's real test:/// driver."""

import dataclasses
import os
import shutil
import threading
from unittest import mock

import fixtures
import libvirt

from nova import test
from nova import exception
from nova.pci import device as pci_device
from nova.tests.fixtures import fabric_manager as fake_fm
from nova.tests.fixtures import libvirt_faults
from nova.virt import driver as virt_driver
from nova.virt import hardware
from nova.virt import hugepages
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import config
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import fabric_manager
from nova.virt.libvirt import host as libvirt_host
from nova.virt.libvirt import nvlink

GPUS = ['0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0',
        '0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0']
UUID1 = '0b0e8a6c-3f7e-4b8e-9a51-6f1c2d3e4a01'
UUID2 = '0b0e8a6c-3f7e-4b8e-9a51-6f1c2d3e4a02'


class _LibvirtTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.uri = self.write_host(fakehost.hgx_h200_node_xml())
        self.driver = libvirt_driver.LibvirtDriver(self.uri)
        self.driver.init_host('cmp1')

    def write_host(self, xml, name='node.xml'):
        return fakehost.write_node_xml(os.path.join(self.tmp, name), xml)

    def gpus(self, *indexes):
        by_address = {d.address: d for d in self.driver.get_pci_devices()}
        return [pci_device.Passthrough(by_address[GPUS[i]].address)
                for i in indexes]

    def domain(self, instance_uuid):
        return self.driver.host.lookup_domain(instance_uuid)


class DiscoveryTest(_LibvirtTestCase):

    def test_pci_devices(self):
        devices = self.driver.get_pci_devices()
        self.assertEqual(sorted(GPUS + ['0000:4b:00.0', '0000:c1:00.0']),
                         [d.address for d in devices])
        gpus = [d for d in devices if d.address in GPUS]
        for index, dev in enumerate(gpus):
            self.assertEqual(pci_device.HostDevice(
                address=GPUS[index], vendor_id='10de', product_id='2335',
                dev_type='type-PCI', parent_addr=None,
                numa_node=0 if index < 4 else 1, iommu_group=20 + index,
                # The test driver does not keep <driver> of node devices.
                driver=None, pci_class='030200',
            ), dev)
        nic = devices[3]
        self.assertEqual(('0000:4b:00.0', '15b3', '1021', 'type-PF'),
                         (nic.address, nic.vendor_id,
                          nic.product_id, nic.dev_type))

    def test_vpd_serial_numbers_vfs_inherit_their_pfs(self):
        nic = fakehost.NIC_ADDRESS
        devices = fakehost.hgx_h200_devices(num_gpus=0)
        devices[0] = dataclasses.replace(devices[0],
                                         card_serial_number='PF-SN')
        devices += [fakehost.NodeDevice(
            address='0000:4b:00.%d' % fn, vendor_id='15b3',
            product_id='101e', dev_type='type-VF', parent_addr=nic,
            numa_node=0, card_serial_number=serial)
            for fn, serial in ((2, None), (3, 'VF'))]
        driver = libvirt_driver.LibvirtDriver(self.write_host(
            fakehost.node_xml_from_devices(devices), 'vpd.xml'))
        driver.init_host('cmp3')
        serials = {d.address: d.card_serial_number
                   for d in driver.get_pci_devices()}
        self.assertEqual({nic: 'PF-SN', '0000:4b:00.2': 'PF-SN',
                          '0000:4b:00.3': 'VF', fakehost.NVME_ADDRESS: None},
                         serials)

    def test_host_without_a_gpu(self):
        devices = fakehost.hgx_h200_devices()
        del devices[5]
        driver = libvirt_driver.LibvirtDriver(self.write_host(
            fakehost.node_xml_from_devices(devices), 'other.xml'))
        driver.init_host('cmp2')
        addresses = [d.address for d in driver.get_pci_devices()]
        self.assertEqual(9, len(addresses))
        self.assertNotIn(GPUS[5], addresses)

    def test_available_resource(self):
        self.assertEqual({
            'vcpus': 224, 'memory_mb': 2097152, 'local_gb': 0,
            'hypervisor_type': 'TEST', 'hypervisor_hostname': 'cmp1',
            'numa_nodes': 2,
        }, self.driver.get_available_resource())

    def test_available_resource_custom(self):
        driver = libvirt_driver.LibvirtDriver(self.write_host(
            fakehost.node_xml_from_devices(
                [], memory_mb=8192, numa_nodes=1, cores_per_socket=4),
            'small.xml'), instances_path=os.path.join(self.tmp, 'inst'))
        driver.init_host('small')
        res = driver.get_available_resource()
        # The disk is the filesystem holding instances_path, whole GiB.
        local_gb = shutil.disk_usage(self.tmp).total // 1024 ** 3
        self.assertGreater(local_gb, 0)
        self.assertTrue(os.path.isdir(os.path.join(self.tmp, 'inst')))
        self.assertEqual((8, 8192, local_gb, 1, 'small'),
                         (res['vcpus'], res['memory_mb'], res['local_gb'],
                          res['numa_nodes'], res['hypervisor_hostname']))
        self.assertEqual([], driver.get_pci_devices())

    def test_init_host_bad_name(self):
        driver = libvirt_driver.LibvirtDriver(self.uri)
        self.assertRaises(exception.InvalidConfiguration, driver.init_host,
                          '')


class SpawnDestroyTest(_LibvirtTestCase):

    def test_spawn_two_gpus(self):
        devices = self.gpus(0, 2)
        devices[1] = dataclasses.replace(devices[1], managed=False)
        self.driver.spawn(virt_driver.GuestSpec(
            UUID1, 'vm1', 16, 65536, devices))
        domain = self.domain(UUID1)
        self.assertTrue(domain.isActive())
        self.assertEqual(libvirt.VIR_DOMAIN_RUNNING, domain.state()[0])
        self.assertEqual('instance-' + UUID1, domain.name())
        self.assertEqual(16, domain.info()[3])
        self.assertEqual(65536 * 1024, domain.maxMemory())
        self.assertEqual(
            [pci_device.Passthrough('0000:18:00.0', managed=True),
             pci_device.Passthrough('0000:3a:00.0', managed=False)],
            config.parse_guest_hostdevs(domain.XMLDesc(0)))
        self.assertEqual([UUID1], self.driver.list_instance_uuids())

    def test_spawn_without_devices(self):
        self.driver.spawn(virt_driver.GuestSpec(UUID1, 'vm1', 1, 512, []))
        self.assertEqual(
            [], config.parse_guest_hostdevs(self.domain(UUID1).XMLDesc(0)))

    def test_destroy(self):
        self.driver.spawn(virt_driver.GuestSpec(
            UUID1, 'vm1', 2, 1024, self.gpus(4)))
        self.driver.spawn(virt_driver.GuestSpec(
            UUID2, 'vm2', 2, 1024, self.gpus(5)))
        self.assertEqual(sorted([UUID1, UUID2]),
                         self.driver.list_instance_uuids())
        self.driver.destroy(UUID1)
        self.assertIsNone(self.domain(UUID1))
        self.assertEqual([UUID2], self.driver.list_instance_uuids())
        self.driver.destroy(UUID1)
        self.assertEqual([UUID2], self.driver.list_instance_uuids())

    def test_destroy_unknown(self):
        self.driver.destroy(UUID1)
        self.assertEqual([], self.driver.list_instance_uuids())

    def test_destroy_bad_uuid(self):
        self.assertRaises(exception.Invalid, self.driver.destroy, 'x')

    def test_duplicate_uuid_keeps_existing_guest(self):
        self.driver.spawn(virt_driver.GuestSpec(
            UUID1, 'vm1', 2, 1024, self.gpus(0, 2)))
        exc = self.assertRaises(
            exception.InstanceExists, self.driver.spawn,
            virt_driver.GuestSpec(UUID1, 'vm1', 4, 2048, self.gpus(1)))
        self.assertIn(UUID1, str(exc))
        domain = self.domain(UUID1)
        self.assertTrue(domain.isActive())
        self.assertEqual(
            ['0000:18:00.0', '0000:3a:00.0'],
            [h.address for h in config.parse_guest_hostdevs(
                domain.XMLDesc(0))])

    def test_same_display_name_boots_twice(self):
        self.driver.spawn(virt_driver.GuestSpec(UUID1, 'vm1', 1, 512, []))
        self.driver.spawn(virt_driver.GuestSpec(UUID2, 'vm1', 1, 512, []))
        self.assertEqual(sorted([UUID1, UUID2]),
                         self.driver.list_instance_uuids())
        for uuid in (UUID1, UUID2):
            self.assertTrue(self.domain(uuid).isActive())
            self.assertEqual('instance-' + uuid, self.domain(uuid).name())

    def test_domains_not_named_by_nova_are_not_instances(self):
        conn = self.driver.host.get_connection()
        conn.defineXML(
            "<domain type='test'><name>%s</name><uuid>%s</uuid>"
            "<memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type>hvm"
            "</type></os></domain>" % ('operator-vm', UUID2))
        self.driver.spawn(virt_driver.GuestSpec(UUID1, 'vm1', 1, 512, []))
        self.assertEqual([UUID1], self.driver.list_instance_uuids())

    def test_start_failure_leaves_no_domain(self):
        faults = self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.driver.host, 'create', message='device busy'))
        exc = self.assertRaises(
            exception.InstanceSpawnFailed, self.driver.spawn,
            virt_driver.GuestSpec(UUID1, 'vm1', 2, 1024, self.gpus(0, 2)))
        self.assertIn('device busy', str(exc))
        self.assertIn(UUID1, str(exc))
        self.assertEqual(['create'], faults.triggered)
        self.assertEqual([], self.driver.list_instance_uuids())

    def test_non_libvirt_start_failure_is_reraised(self):
        real_define = self.driver.host.get_connection().defineXML

        def define(xml):
            domain = real_define(xml)
            self.useFixture(fixtures.MockPatchObject(
                domain, 'create', side_effect=KeyError('boom')))
            return domain

        self.useFixture(fixtures.MockPatchObject(
            self.driver.host.get_connection(), 'defineXML',
            side_effect=define))
        self.assertRaises(KeyError, self.driver.spawn,
                          virt_driver.GuestSpec(UUID1, 'vm1', 1, 512, []))
        self.assertEqual([], self.driver.list_instance_uuids())

    def test_define_failure(self):
        faults = self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.driver.host, 'defineXML'))
        self.assertRaises(
            exception.InstanceSpawnFailed, self.driver.spawn,
            virt_driver.GuestSpec(UUID1, 'vm1', 1, 512, self.gpus(0)))
        self.assertEqual(['defineXML'], faults.triggered)
        self.assertEqual([], self.driver.list_instance_uuids())

    def test_invalid_request_defines_nothing(self):
        self.assertRaises(exception.Invalid, self.driver.spawn,
                          virt_driver.GuestSpec(UUID1, 'vm1', 0, 512, []))
        self.assertRaises(exception.Invalid, self.driver.spawn,
                          virt_driver.GuestSpec('nope', 'vm1', 1, 512, []))
        self.assertEqual([], self.driver.list_instance_uuids())

    def test_state_survives_new_host_calls(self):
        # Every call goes through the one connection, so the guest the
        # test driver keeps in memory is still there.
        self.driver.spawn(virt_driver.GuestSpec(UUID1, 'vm1', 1, 512, []))
        self.driver.get_pci_devices()
        self.driver.get_available_resource()
        self.assertEqual([UUID1], self.driver.list_instance_uuids())


class PowerActionsTest(_LibvirtTestCase):
    """Stop, start, reboot and rebuild on the test driver's domains."""

    def setUp(self):
        super().setUp()
        self.driver.spawn(virt_driver.GuestSpec(
            UUID1, 'vm1', 2, 1024, self.gpus(0, 2)))

    def hostdevs(self):
        return [h.address for h in
                config.parse_guest_hostdevs(self.domain(UUID1).XMLDesc())]

    def test_power_off_keeps_the_defined_guest_and_power_on_starts_it(self):
        self.assertEqual(virt_driver.RUNNING,
                         self.driver.get_power_state(UUID1))
        self.driver.power_off(UUID1)
        self.assertEqual(virt_driver.SHUTDOWN,
                         self.driver.get_power_state(UUID1))
        self.assertEqual([GPUS[0], GPUS[2]], self.hostdevs())
        self.driver.power_off(UUID1)    # already off: nothing to do
        self.driver.power_on(UUID1)
        self.assertTrue(self.domain(UUID1).isActive())
        self.driver.power_on(UUID1)     # already on: nothing to do
        self.assertTrue(self.domain(UUID1).isActive())

    def test_reboots_leave_it_running(self):
        for hard in (False, True):
            self.driver.reboot(UUID1, hard)
            self.assertTrue(self.domain(UUID1).isActive())
        self.driver.power_off(UUID1)
        self.driver.reboot(UUID1, hard=True)
        self.assertTrue(self.domain(UUID1).isActive())

    def test_refused_soft_reboot_falls_back_to_hard(self):
        faults = self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.driver.host, 'reboot'))
        self.driver.reboot(UUID1, hard=False)
        self.assertEqual(['reboot'], faults.triggered)
        self.assertTrue(self.domain(UUID1).isActive())

    def test_missing_guest_names_the_action(self):
        self.driver.destroy(UUID1)
        self.assertEqual(virt_driver.NOSTATE,
                         self.driver.get_power_state(UUID1))
        exc = self.assertRaises(exception.InstancePowerActionFailed,
                                self.driver.power_on, UUID1)
        self.assertIn('power on', exc.message)
        self.assertIn('no domain', exc.message)
        # A guest that is gone is off already: powering it off is done.
        self.driver.power_off(UUID1)
        self.assertEqual(virt_driver.NOSTATE,
                         self.driver.get_power_state(UUID1))

    def test_start_failure_is_reported(self):
        self.driver.power_off(UUID1)
        self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.driver.host, 'create', message='device busy'))
        exc = self.assertRaises(exception.InstancePowerActionFailed,
                                self.driver.power_on, UUID1)
        self.assertIn('device busy', exc.message)

    def test_rebuild_redefines_with_the_same_devices(self):
        self.driver.rebuild(virt_driver.GuestSpec(
            UUID1, 'renamed', 2, 1024, self.gpus(0, 2)), power_on=True)
        self.assertEqual([GPUS[0], GPUS[2]], self.hostdevs())
        self.assertIn('<title>renamed</title>',
                      self.domain(UUID1).XMLDesc())
        self.assertTrue(self.domain(UUID1).isActive())
        self.driver.rebuild(virt_driver.GuestSpec(
            UUID1, 'renamed', 2, 1024, self.gpus(0, 2)), power_on=False)
        self.assertFalse(self.domain(UUID1).isActive())
        # A rebuild cut short after the undefine is finished by another.
        self.driver.destroy(UUID1)
        self.driver.rebuild(virt_driver.GuestSpec(
            UUID1, 'vm1', 2, 1024, self.gpus(0, 2)), power_on=True)
        self.assertEqual([GPUS[0], GPUS[2]], self.hostdevs())
        self.assertEqual([UUID1], self.driver.list_instance_uuids())


class UndefineTest(_LibvirtTestCase):
    """What a guest's undefine does with its NVRAM, and what a delete
    frees, on a host with instance files and NVLink partitions.

    The flags every undefine asks for are recorded: QEMU refuses to
    undefine a UEFI guest with an NVRAM file unless told to remove or
    keep it (``nova.tests.functional.test_real_uefi_guest`` proves that
    on the real libvirtd), while the test driver keeps no NVRAM and
    refuses those flags, so the driver undefines without them there.
    """

    def setUp(self):
        super().setUp()
        fm = self.useFixture(fake_fm.FabricManagerFixture(
            fakehost.H200_MODULE_IDS)).fm
        self.fm = fm
        self.instances = os.path.join(self.tmp, 'instances')
        self.driver = libvirt_driver.LibvirtDriver(
            self.uri, self.instances, nvlink=nvlink.NVLinkPartitions(
                fabric_manager.FabricManagerClient(fm.fmpm_path),
                fm.nvidia_smi_path, {}, os.path.join(self.tmp, 'nvlink')))
        self.driver.init_host('cmp1')
        self.undefines = []
        real = libvirt.virDomain.undefineFlags

        def record(domain, flags=0):
            self.undefines.append(flags)
            return real(domain, flags)
        self.useFixture(fixtures.MockPatchObject(
            libvirt.virDomain, 'undefineFlags', autospec=True,
            side_effect=record))
        self.useFixture(fixtures.MockPatchObject(
            libvirt.virDomain, 'undefine', side_effect=AssertionError(
                'undefine without flags refuses a UEFI guest')))
        self.driver.spawn(virt_driver.GuestSpec(
            UUID1, 'vm1', 2, 1024, self.gpus(0)))
        self.directory = os.path.join(self.instances, UUID1)

    def asked(self, *expected):
        """The first undefine asked for exactly the ``expected`` NVRAM
        flag (and the managed save image's removal); the test driver's
        refusal of it was followed by an undefine without it."""
        nvram_flags = (libvirt.VIR_DOMAIN_UNDEFINE_NVRAM |
                       libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM)
        self.assertEqual(2, len(self.undefines), self.undefines)
        first, retry = self.undefines
        self.assertEqual(set(expected), {
            flag for flag in (libvirt.VIR_DOMAIN_UNDEFINE_NVRAM,
                              libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM)
            if first & flag})
        self.assertTrue(first & libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)
        self.assertEqual(first & ~nvram_flags, retry)
        del self.undefines[:]

    def test_delete_removes_the_nvram_and_frees_everything(self):
        self.assertEqual({UUID1}, set(self.driver.nvlink.holders().values()))
        self.driver.destroy(UUID1)
        self.asked(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        self.assertIsNone(self.domain(UUID1))
        self.assertFalse(os.path.exists(self.directory))
        self.assertEqual({}, self.driver.nvlink.holders())
        self.assertEqual(set(), self.fm.active())

    def test_failed_spawn_removes_the_nvram(self):
        self.driver.destroy(UUID1)
        del self.undefines[:]
        self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.driver.host, 'create', message='device busy'))
        self.assertRaises(
            exception.InstanceSpawnFailed, self.driver.spawn,
            virt_driver.GuestSpec(UUID1, 'vm1', 2, 1024, self.gpus(0)))
        self.asked(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        self.assertEqual([], self.driver.list_instance_uuids())

    def test_rebuild_keeps_the_nvram_with_the_disk(self):
        # A new root disk from the image: a new NVRAM from the template.
        self.driver.rebuild(virt_driver.GuestSpec(
            UUID1, 'vm1', 2, 1024, self.gpus(0)), power_on=True)
        self.asked(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        self.driver.rebuild(virt_driver.GuestSpec(
            UUID1, 'vm1', 2, 1024,
            self.gpus(0)), power_on=True, keep_disk=True)
        self.asked(libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM)
        self.assertTrue(self.domain(UUID1).isActive())

    def test_failed_undefine_still_frees_files_and_partition(self):
        faults = self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.driver.host, 'undefineFlags'))
        exc = self.assertRaises(exception.InstanceDestroyFailed,
                                self.driver.destroy, UUID1)
        self.assertIn(UUID1, str(exc))
        self.assertEqual(['undefineFlags'], faults.triggered)
        # The guest is stopped: nothing of it may stay held.
        self.assertFalse(self.domain(UUID1).isActive())
        self.assertFalse(os.path.exists(self.directory))
        self.assertEqual({}, self.driver.nvlink.holders())
        self.assertEqual(set(), self.fm.active())
        # The delete tried again (libvirt answering again) finishes.
        faults.methods.clear()
        self.driver.destroy(UUID1)
        self.assertIsNone(self.domain(UUID1))

    def test_guest_that_cannot_be_stopped_keeps_files_and_partition(self):
        holders = self.driver.nvlink.holders()
        self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.driver.host, 'destroy'))
        self.assertRaises(exception.InstanceDestroyFailed,
                          self.driver.destroy, UUID1)
        # It may still run on its GPUs.
        self.assertTrue(self.domain(UUID1).isActive())
        self.assertTrue(os.path.isdir(self.directory))
        self.assertEqual(holders, self.driver.nvlink.holders())
        self.assertEqual([], self.undefines)


class NUMATest(_LibvirtTestCase):

    def test_topology_derived_from_the_node_file(self):
        # The test driver lists no cells for a custom node file: one
        # socket per node here, so each node has a known socket.
        topo = self.driver.get_numa_topology()
        self.assertEqual([(0, 0, 112, 1048576), (1, 1, 112, 1048576)],
                         [(c.id, c.socket, len(c.cpus), c.memory_mb)
                          for c in topo.cells])
        self.assertEqual(tuple(range(112, 224)), topo.cells[1].cpus)
        self.assertTrue(topo.sockets_known)

    def test_two_sockets_per_node_leave_the_socket_unknown(self):
        driver = libvirt_driver.LibvirtDriver(self.write_host(
            fakehost.node_xml_from_devices(
                [], numa_nodes=2, sockets_per_node=2, cores_per_socket=2),
            'snc.xml'))
        topo = driver.get_numa_topology()
        self.assertEqual([None, None], [c.socket for c in topo.cells])
        self.assertEqual((8, 9, 10, 11, 12, 13, 14, 15), topo.cells[1].cpus)
        self.assertFalse(topo.sockets_known)

    def test_topology_from_capabilities_cells(self):
        # test:///default lists real <cells> with socket_id per CPU.
        topo = libvirt_host.Host('test:///default').get_numa_topology()
        self.assertEqual([(0, 0, tuple(range(8)), 2048),
                          (1, 1, tuple(range(8, 16)), 4096)],
                         [(c.id, c.socket, c.cpus, c.memory_mb)
                          for c in topo.cells])

    def test_cells_spanning_sockets(self):
        caps = """<capabilities><host><topology><cells num='2'>
          <cell id='0'><memory unit='KiB'>1048576</memory><cpus num='2'>
            <cpu id='0' socket_id='0' core_id='0' siblings='0'/>
            <cpu id='1' socket_id='0' core_id='1' siblings='1'/></cpus></cell>
          <cell id='1'><memory unit='KiB'>2097152</memory><cpus num='2'>
            <cpu id='2' socket_id='0' core_id='0' siblings='2'/>
            <cpu id='3' socket_id='1' core_id='1' siblings='3'/></cpus></cell>
          </cells></topology></host></capabilities>"""
        cells = libvirt_host.parse_numa_cells(caps)
        self.assertEqual([(0, 0, 1024), (1, None, 2048)],
                         [(c.id, c.socket, c.memory_mb) for c in cells])

    def test_hugepage_pools_from_capabilities_cells(self):
        # test:///default lists 4 KiB (the base page), 2 MiB and 1 GiB
        # pools per cell; the base page is no hugepage pool.
        topo = libvirt_host.Host('test:///default').get_numa_topology()
        self.assertEqual(
            [hardware.PagePool(2048, 0), hardware.PagePool(1048576, 0)],
            list(topo.cells[0].pages))
        caps = """<capabilities><host><topology><cells num='1'>
          <cell id='0'><memory unit='KiB'>4194304</memory>
            <pages unit='KiB' size='4'>262144</pages>
            <pages unit='KiB' size='1048576'>3</pages>
            <pages unit='KiB' size='2048'>16</pages>
            <cpus num='1'><cpu id='0' socket_id='0'/></cpus></cell>
          </cells></topology></host></capabilities>"""
        cell = libvirt_host.parse_numa_cells(caps)[0]
        self.assertEqual(3, cell.pool(1048576))
        self.assertEqual(16, cell.pool(2048))
        self.assertEqual(0, cell.pool(4))

    def test_generated_host_declares_1g_pools(self):
        # The test driver reports no pools for a node file: the generated
        # host's, 7/8 of each 1 TiB node in 1 GiB pages.
        self.assertEqual((), self.driver.get_numa_topology().cells[0].pages)
        driver = libvirt_driver.LibvirtDriver(
            self.uri, page_pools=fakehost.hugepage_pools)
        self.assertEqual([896, 896], [
            c.pool(1048576) for c in driver.get_numa_topology().cells])

    def test_guest_hugepages_read_from_the_domains(self):
        self.driver.spawn(virt_driver.GuestSpec(
            UUID1, 'vm1', 4, 4096, numa_nodes=(1,),
            page_size_kib=1048576))
        self.driver.spawn(virt_driver.GuestSpec(UUID2, 'vm2', 4, 4096))
        self.assertEqual(
            {UUID1: hugepages.GuestPages(1048576, (1,), (4096,))},
            self.driver.get_guest_hugepages())
        # A stopped guest still holds its pages.
        self.driver.power_off(UUID1)
        self.assertEqual([UUID1], list(self.driver.get_guest_hugepages()))
        self.driver.destroy(UUID1)
        self.assertEqual({}, self.driver.get_guest_hugepages())

    def test_spawn_confined_to_a_node(self):
        self.driver.spawn(virt_driver.GuestSpec(
            UUID1, 'vm1', 4, 4096, self.gpus(5), (1,)))
        self.assertEqual({'nodeset': '1', 'cpuset': '112-223', 'cells': 1},
                         config.parse_guest_numa(self.domain(
                             UUID1).XMLDesc()))
        self.driver.spawn(virt_driver.GuestSpec(
            UUID2, 'vm2', 4, 4096, self.gpus(0)))
        self.assertEqual({'nodeset': None, 'cpuset': None, 'cells': 0},
                         config.parse_guest_numa(self.domain(
                             UUID2).XMLDesc()))


class HostTest(_LibvirtTestCase):

    def test_unreachable_uri(self):
        uri = 'test://' + os.path.join(self.tmp, 'missing.xml')
        driver = libvirt_driver.LibvirtDriver(uri)
        exc = self.assertRaises(exception.HypervisorUnavailable,
                                driver.init_host, 'cmp1')
        self.assertIn(uri, str(exc))

    def test_connection_is_lazy(self):
        with mock.patch.object(libvirt, 'open') as open_:
            host = libvirt_host.Host(self.uri)
            open_.assert_not_called()
            host.get_connection()
        open_.assert_called_once_with(self.uri)

    def test_one_connection_across_threads(self):
        host = libvirt_host.Host(self.uri)
        results = []
        with mock.patch.object(libvirt, 'open', wraps=libvirt.open) as open_:
            threads = [threading.Thread(
                target=lambda: results.append(host.get_connection()))
                for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        self.assertEqual(1, open_.call_count)
        self.assertEqual(8, len(results))
        self.assertEqual(1, len({id(conn) for conn in results}))

    def test_dead_connection_is_reopened(self):
        dead = mock.Mock()
        dead.isAlive.return_value = False
        live = libvirt.open(self.uri)
        self.addCleanup(live.close)
        host = libvirt_host.Host(self.uri)
        with mock.patch.object(libvirt, 'open', side_effect=[dead, live]):
            self.assertIs(dead, host.get_connection())
            self.assertIs(live, host.get_connection())
            self.assertIs(live, host.get_connection())

    def test_query_failure(self):
        self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.driver.host, ['getInfo', 'listAllDevices',
                               'listAllDomains']))
        for call in (self.driver.get_available_resource,
                     self.driver.get_pci_devices,
                     self.driver.list_instance_uuids):
            exc = self.assertRaises(exception.HypervisorUnavailable, call)
            self.assertIn(self.uri, str(exc))
            self.assertIn('injected libvirt fault', str(exc))
