"""Upstream device_spec tags as they show in real Placement.

``one_time_use`` and ``live_migratable`` traits, the one-time-use
reservation, and operator-set ``reserved`` values nova must keep.
"""

import dataclasses
import json
import os

import fixtures

from nova import exception
from nova.pci import devspec
from nova.tests.functional.lib import base
from nova.tests.functional import test_boot_gpu_groups as boot
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import config as libvirt_config

GPUS = base.GPUS
NIC = fakehost.NIC_ADDRESS
VF = '0000:4b:00.2'


def vf(address: str, pf: str) -> fakehost.NodeDevice:
    """A ConnectX-7 VF of ``pf``."""
    return fakehost.NodeDevice(address=address, vendor_id='15b3',
                               product_id='101e', dev_type='type-VF',
                               parent_addr=pf, numa_node=0)


def gpu_spec(address, **tags) -> str:
    return json.dumps(dict({'vendor_id': '10de', 'product_id': '2335',
                            'resource_class': 'PGPU', 'address': address},
                           **tags))


class PlacementReads:
    """Placement reads shared by the tests below (needs a test case with
    ``placement_get`` and ``provider_view``)."""

    def rp_uuid(self, host: str, address: str) -> str:
        return self.provider_view(host)['%s_%s' % (
            host, address.upper())]['uuid']

    def inventory(self, rp_uuid: str) -> dict:
        return self.placement_get(
            '/resource_providers/%s/inventories/PGPU' % rp_uuid)

    def set_reserved(self, rp_uuid: str, reserved: int) -> None:
        """What an operator does with ``openstack resource provider
        inventory set``."""
        record = self.inventory(rp_uuid)
        record['reserved'] = reserved
        resp = self.placement.api.put(
            '/resource_providers/%s/inventories/PGPU' % rp_uuid,
            json=record)
        self.assertEqual(200, resp.status_code, resp.text)


class TestTagTraits(PlacementReads, base.FunctionalTestCase):

    def test_one_time_use_and_live_migratable_traits(self):
        self.flags('pci', report_in_placement=True, device_spec=[
            gpu_spec(GPUS[0], one_time_use=True),
            gpu_spec(GPUS[1], live_migratable='yes'),
            gpu_spec(GPUS[2], live_migratable=False, one_time_use='false'),
        ])
        self.start_compute('cmp1')
        view = self.provider_view('cmp1')
        traits = {address: view['cmp1_' + address.upper()]['traits']
                  for address in GPUS[:3]}
        # GPUs 1-3 sit on NUMA node 0, socket 0.
        managed = {'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA',
                   'CUSTOM_PCI_NUMA_NODE_0', 'CUSTOM_PCI_SOCKET_0'}
        self.assertEqual({GPUS[0]: managed | {'HW_PCI_ONE_TIME_USE'},
                          GPUS[1]: managed | {'HW_PCI_LIVE_MIGRATABLE'},
                          GPUS[2]: managed}, traits)
        # An unused one-time-use device is not reserved.
        self.assertEqual(0, self.inventory(
            self.rp_uuid('cmp1', GPUS[0]))['reserved'])

    def test_one_time_use_on_vfs_is_refused_at_start(self):
        devices = fakehost.hgx_h200_devices(num_gpus=1) + [vf(VF, NIC)]
        self.flags('pci', report_in_placement=True, device_spec=[
            json.dumps({'vendor_id': '15b3', 'product_id': '101e',
                        'one_time_use': False})])
        err = self.assertRaises(exception.PlacementPciException,
                                self.start_compute, 'cmp1', devices)
        self.assertIn('one_time_use', str(err))
        self.assertIn(VF, str(err))


class TestSpecForms(base.FunctionalTestCase):

    def nic_with_vfs(self) -> list[fakehost.NodeDevice]:
        """The H200 host's ConnectX-7 PF (0000:4b:00.0) with 2 VFs, and a
        sysfs that says it is an SR-IOV PF."""
        sysfs = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MonkeyPatch(
            'nova.pci.devspec.SYSFS_ROOT', sysfs))
        pf_dir = os.path.join(sysfs, 'bus', 'pci', 'devices', NIC)
        os.makedirs(pf_dir)
        with open(os.path.join(pf_dir, 'sriov_totalvfs'), 'w') as f:
            f.write('16\n')
        self.assertTrue(devspec.is_sriov_pf(NIC))
        return fakehost.hgx_h200_devices(num_gpus=1) + [
            vf('0000:4b:00.%d' % fn, NIC) for fn in (2, 3)]

    def test_exact_regex_dict_naming_a_pf_reports_its_vfs(self):
        devices = self.nic_with_vfs()
        for address in (NIC, {'domain': '0000', 'bus': '4b', 'slot': '00',
                              'function': '0'}):
            self.flags('pci', report_in_placement=True, device_spec=[
                json.dumps({'vendor_id': '15b3', 'product_id': '101e',
                            'address': address,
                            'resource_class': 'CUSTOM_VF'})])
            self.start_compute('cmp1', devices)
            view = self.provider_view('cmp1')
            self.assertEqual({'CUSTOM_VF': 2},
                             view['cmp1_' + NIC.upper()]['inventory'],
                             address)

    def test_pf_and_its_vfs_in_one_class_stop_the_compute(self):
        # Upstream refuses it; before, the PF's provider got 3 units.
        devices = fakehost.hgx_h200_devices(num_gpus=1) + [
            vf('0000:4b:00.%d' % fn, NIC) for fn in (2, 3)]
        self.flags('pci', report_in_placement=True, device_spec=[
            json.dumps({'vendor_id': '15b3', 'resource_class': 'CUSTOM_NIC'})])
        err = self.assertRaises(exception.PlacementPciException,
                                self.start_compute, 'cmp1', devices)
        self.assertIn('PF %s (resource class CUSTOM_NIC) and its VFs '
                      '0000:4b:00.2, 0000:4b:00.3 (resource class '
                      'CUSTOM_NIC)' % NIC, str(err))
        self.assertEqual([], self.placement_get(
            '/resource_providers?name=cmp1_%s' % NIC.upper())[
                'resource_providers'])

    def test_non_string_resource_class_stops_the_compute(self):
        self.flags('pci', report_in_placement=True, device_spec=[
            '{"vendor_id": "10de", "resource_class": 2335}'])
        err = self.assertRaises(exception.PciConfigInvalidSpec,
                                self.start_compute, 'cmp1')
        self.assertIn('resource_class (2335) must be a string', str(err))


class TestOperatorReserved(PlacementReads, base.FunctionalTestCase):

    def test_operator_reserved_survives_updates_and_restarts(self):
        self.flags('pci', report_in_placement=True,
                   device_spec=[gpu_spec(GPUS[1])])
        compute = self.start_compute('cmp1')
        gpu = self.rp_uuid('cmp1', GPUS[1])
        self.set_reserved(gpu, 1)
        compute.update_available_resource()
        self.assertEqual(1, self.inventory(gpu)['reserved'])
        # A restart with new traits rewrites the provider's traits but
        # not the operator's reservation.
        self.flags('pci', device_spec=[gpu_spec(GPUS[1], traits='fast')])
        self.start_compute('cmp1')
        self.assertEqual(1, self.inventory(gpu)['reserved'])
        self.assertIn('CUSTOM_FAST', self.provider_view('cmp1')[
            'cmp1_' + GPUS[1].upper()]['traits'])
        # The operator clears it; nova keeps it cleared.
        self.set_reserved(gpu, 0)
        compute.update_available_resource()
        self.assertEqual(0, self.inventory(gpu)['reserved'])


class TestOneTimeUseBoot(PlacementReads, boot.BootTestBase):

    def test_used_device_is_not_handed_out_again_until_cleared(self):
        self.flags('pci', report_in_placement=True,
                   device_spec=[gpu_spec(GPUS[0], one_time_use=True)],
                   alias=['{"name": "gpu", "resource_class": "PGPU"}'])
        self.flags('filter_scheduler', pci_in_placement=True)
        self.start_services()
        gpu = self.rp_uuid('cmp1', GPUS[0])
        flavor = self.flavor('gpu.1x', 'gpu:1')
        first = self.boot(flavor, 'first')
        self.assertEqual(frozenset({1}), self.gpus_of(first))
        # Reserved as soon as it is claimed, not at the next periodic.
        self.assertEqual(1, self.inventory(gpu)['reserved'])
        self.delete(first['id'])
        self.assert_nothing_held(first['id'])
        self.computes['cmp1'].update_available_resource()
        self.assertEqual(1, self.inventory(gpu)['reserved'])
        self.boot(flavor, 'second', status='ERROR')
        # The operator has cleaned the device and releases it.
        self.set_reserved(gpu, 0)
        third = self.boot(flavor, 'third')
        self.assertEqual(frozenset({1}), self.gpus_of(third))
        self.assertEqual(1, self.inventory(gpu)['reserved'])


class TestRemoteManaged(base.FunctionalTestCase):
    """remote_managed VFs need a VPD card serial number, which the libvirt
    driver reads from the node device XML (on the VF or its PF)."""

    BARE_PF = '0000:5e:00.0'

    def setUp(self):
        super().setUp()
        self.sysfs = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MonkeyPatch(
            'nova.pci.devspec.SYSFS_ROOT', self.sysfs))
        for pf in (NIC, self.BARE_PF):
            path = os.path.join(self.sysfs, 'bus', 'pci', 'devices', pf)
            os.makedirs(path)
            for name, value in (('sriov_totalvfs', '16'),
                                ('vendor', '0x15b3'), ('device', '0x1021'),
                                ('sriov_vf_device', '101e')):
                with open(os.path.join(path, name), 'w') as f:
                    f.write(value + '\n')

    def devices(self) -> list[fakehost.NodeDevice]:
        """The H200 host's ConnectX-7 with a VPD serial number and two
        VFs, and a second ConnectX-7 without VPD, also with two VFs."""
        devices = fakehost.hgx_h200_devices(num_gpus=1)
        index = next(i for i, d in enumerate(devices) if d.address == NIC)
        nic = devices[index] = dataclasses.replace(
            devices[index], card_serial_number='MT2243X0117')
        devices.append(dataclasses.replace(
            nic, address=self.BARE_PF, iommu_group=42,
            card_serial_number=None))
        for pf in (NIC, self.BARE_PF):
            devices += [vf(pf[:-1] + str(fn), pf) for fn in (2, 3)]
        return devices

    def test_only_vfs_with_a_serial_number_are_tracked(self):
        self.flags('pci', report_in_placement=True, device_spec=[
            json.dumps({'vendor_id': '15b3', 'product_id': '101e',
                        'remote_managed': 'true'}),
            gpu_spec(GPUS[0])])
        compute = self.start_compute('cmp1', self.devices())
        tracked = {d.address: d.extra_info
                   for d in compute.rt.pci_tracker.pci_devs}
        self.assertEqual({GPUS[0], '0000:4b:00.2', '0000:4b:00.3'},
                         set(tracked))
        self.assertEqual('MT2243X0117',
                         tracked['0000:4b:00.2']['card_serial_number'])
        self.assertEqual('true', tracked['0000:4b:00.3']['remote_managed'])
        # They serve Neutron remote-managed ports only, never flavor
        # aliases (as upstream): no Placement provider.
        self.assertEqual({'cmp1', 'cmp1_' + GPUS[0].upper()},
                         set(self.provider_view('cmp1')))

    def test_pf_address_stops_the_compute(self):
        self.flags('pci', report_in_placement=True, device_spec=[
            json.dumps({'address': NIC, 'remote_managed': True})])
        err = self.assertRaises(exception.PciConfigInvalidSpec,
                                self.start_compute, 'cmp1', self.devices())
        self.assertIn('remote_managed=true is not supported for PFs', str(err))
        self.assertIn(NIC, str(err))

    def test_pf_address_with_the_vf_product_selects_vfs(self):
        self.flags('pci', report_in_placement=True, device_spec=[
            json.dumps({'address': NIC, 'product_id': '101e',
                        'remote_managed': True})])
        compute = self.start_compute('cmp1', self.devices())
        self.assertEqual(['0000:4b:00.2', '0000:4b:00.3'],
                         [d.address for d in
                          compute.rt.pci_tracker.pci_devs])

    def test_missing_devname_stops_the_compute(self):
        self.flags('pci', device_spec=[
            json.dumps({'devname': 'enp75s0f0v9', 'remote_managed': 'yes'})])
        err = self.assertRaises(exception.PciConfigInvalidSpec,
                                self.start_compute, 'cmp1', self.devices())
        self.assertIn("network interface 'enp75s0f0v9' does not exist",
                      str(err))


class TestVFClaims(boot.BootTestBase):
    """A request for N VFs of a PF's provider gets N VFs, not all of
    them (upstream takes exactly the allocated count from each pool)."""

    VFS = tuple('0000:4b:00.%d' % fn for fn in (2, 3, 4, 5))

    def setUp(self):
        super().setUp()
        # The PF itself is not in device_spec: its 4 VFs are 4 units of
        # one provider.
        self.flags('pci', report_in_placement=True,
                   device_spec=[json.dumps({'vendor_id': '15b3',
                                            'product_id': '101e',
                                            'resource_class': 'CUSTOM_VF'})],
                   alias=[json.dumps({'name': 'vf', 'device_type': 'type-VF',
                                      'resource_class': 'CUSTOM_VF'})])
        self.flags('filter_scheduler', pci_in_placement=True)
        self.start_services(devices=fakehost.hgx_h200_devices(num_gpus=0) + [
            vf(address, NIC) for address in self.VFS])
        self.pf_rp = self.provider_view('cmp1')['cmp1_' + NIC.upper()]

    def held(self, server):
        """(tracked VFs, domain hostdevs, Placement units) of a server."""
        compute = self.computes['cmp1']
        tracked = {d.address for d in compute.rt.pci_tracker.pci_devs
                   if d.instance_uuid == server['id']}
        domain = compute.driver.host.lookup_domain(server['id'])
        hostdevs = {h.address for h in libvirt_config.parse_guest_hostdevs(
            domain.XMLDesc())}
        allocations = self.placement_get(
            '/allocations/%s' % server['id'])['allocations']
        units = allocations[self.pf_rp['uuid']]['resources']['CUSTOM_VF']
        return tracked, hostdevs, units

    def test_one_and_two_vfs_from_one_provider(self):
        self.assertEqual({'CUSTOM_VF': 4}, self.pf_rp['inventory'])
        one = self.boot(self.flavor('vf.1x', 'vf:1'), 'one')
        tracked, hostdevs, units = self.held(one)
        # Before: the 1-VF server got all four VFs.
        self.assertEqual((1, 1), (len(tracked), units))
        self.assertEqual(tracked, hostdevs)
        two = self.boot(self.flavor('vf.2x', 'vf:2'), 'two')
        tracked2, hostdevs2, units2 = self.held(two)
        self.assertEqual((2, 2), (len(tracked2), units2))
        self.assertEqual(tracked2, hostdevs2)
        self.assertEqual(set(), tracked & tracked2)
        # The last free VF still serves a 1-VF request; a third 2-VF
        # request finds no room.
        last = self.boot(self.flavor('vf.1y', 'vf:1'), 'last')
        self.assertEqual(set(self.VFS), tracked | tracked2 |
                         self.held(last)[0])
        self.boot(self.flavor('vf.2y', 'vf:2'), 'full', status='ERROR')
        self.delete(two['id'])
        again = self.boot(self.flavor('vf.2z', 'vf:2'), 'again')
        self.assertEqual(tracked2, self.held(again)[0])

    def test_builds_at_once_take_different_vfs(self):
        flavor = self.flavor('vf.1x', 'vf:1')
        ids = [self.api('POST', '/servers', {'server': {
            'name': 'vm%d' % n, 'flavorRef': flavor,
            'imageRef': 'none'}})['server']['id'] for n in range(4)]
        held = [self.held(self.wait_for(server_id, 'ACTIVE'))[0]
                for server_id in ids]
        self.assertEqual(set(self.VFS), set().union(*held))

    def test_two_requests_on_one_provider_take_different_vfs(self):
        # One PCI request per alias item, both given a unit of the PF's
        # provider: each takes its own VF.
        server = self.boot(self.flavor('vf.1+1', 'vf:1,vf:1'))
        tracked, hostdevs, units = self.held(server)
        self.assertEqual((2, 2), (len(tracked), units))
        self.assertEqual(tracked, hostdevs)
