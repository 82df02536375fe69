"""Base for functional tests: real Placement, real DB, libvirt test driver.

``start_compute`` runs a real nova-compute manager on a libvirt
``test:///`` host generated from device dicts (the HGX H200 board by
default), so tests see exactly what an operator would in Placement.
"""

import os

import fixtures

from nova import service
from nova import test
from nova.pci import placement_names
from nova.compute import manager as compute_manager
from nova.scheduler.client import report
from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import placement as placement_fixture
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import driver as libvirt_driver

H200_CONFIG = fakehost.h200_pci_config()
GPUS = fakehost.H200_GPU_ADDRESSES


def pair_of(gpu: int) -> tuple[int, int]:
    """GPU numbers (1-based, PCI order) of the declared NVLink pair of the
    generated board that holds GPU ``gpu``: its module map decides."""
    return next(pair for pair in fakehost.H200_NVLINK_PAIRS.values()
                if gpu in pair)


def not_a_pair(gpu: int) -> tuple[int, int]:
    """GPU ``gpu`` and the first GPU of its quad outside its pair."""
    quad = range(1, 5) if gpu <= 4 else range(5, 9)
    return gpu, next(n for n in quad if n not in pair_of(gpu))


class FunctionalTestCase(test.TestCase):
    """Real Placement and database per test; computes started on demand."""

    def setUp(self):
        super().setUp()
        self.conf = test.make_conf()
        self.tmpdir = self.useFixture(fixtures.TempDir()).path
        self.conf.set_override('state_path', self.tmpdir)
        self.useFixture(db_fixture.Database())
        self.placement = self.useFixture(placement_fixture.PlacementFixture())
        self.placement.configure_nova(self.conf)
        self.reportclient = report.SchedulerReportClient(self.conf)
        self.computes: dict[str, compute_manager.ComputeManager] = {}
        self._compute_services: dict[str, service.Service] = {}

    def flags(self, group: str | None = None, **overrides) -> None:
        for name, value in overrides.items():
            self.conf.set_override(name, value, group=group)

    def enable_h200_groups(self, groups: bool = True) -> None:
        """The operator's [pci] config for the HGX H200 host."""
        self.flags('pci', report_in_placement=True,
                   device_spec=H200_CONFIG['device_spec'],
                   alias=H200_CONFIG['alias'],
                   device_group=H200_CONFIG['device_group'] if groups
                   else [])
        self.flags('filter_scheduler', pci_in_placement=True)

    def node_uri(self, host: str,
                 devices: list[fakehost.NodeDevice] | None = None) -> str:
        xml = fakehost.node_xml_from_devices(
            devices if devices is not None else fakehost.hgx_h200_devices())
        return fakehost.write_node_xml(
            os.path.join(self.tmpdir, '%s.xml' % host), xml)

    def start_compute(self, host: str = 'cmp1',
                      devices: list[fakehost.NodeDevice] | None = None,
                      driver=None) -> compute_manager.ComputeManager:
        """Start (or restart, keeping the hypervisor) a compute on ``host``.

        A restart with ``devices`` simulates changed hardware.
        """
        old = self.computes.get(host)
        if driver is None:
            if old is not None and devices is None:
                driver = old.driver
            else:
                driver = libvirt_driver.LibvirtDriver(
                    self.node_uri(host, devices),
                    bar_reader=fakehost.bar_sizes,
                    page_pools=fakehost.hugepage_pools)
        manager = compute_manager.ComputeManager(
            self.conf, driver, self.reportclient, host=host)
        if host in self._compute_services:
            self._compute_services.pop(host).stop()
        # As nova-compute starts it (services row, heartbeats, init_host,
        # periodic tasks), without RPC.
        svc = service.Service(manager)
        svc.start()
        self.addCleanup(svc.stop)
        self._compute_services[host] = svc
        self.computes[host] = manager
        return manager

    # Placement views -------------------------------------------------------

    def placement_get(self, path: str) -> dict:
        resp = self.placement.api.get(path)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()

    def provider_view(self, host: str) -> dict[str, dict]:
        """name -> {parent, inventory totals, traits} for a host's tree.

        Traits leave out the host's shard traits, which every provider
        of a compute carries (test_pci_placement_tree checks them)."""
        root = self.placement_get('/resource_providers?name=%s' % host)
        self.assertEqual(1, len(root['resource_providers']), root)
        root_uuid = root['resource_providers'][0]['uuid']
        rps = self.placement_get(
            '/resource_providers?in_tree=%s' % root_uuid)
        names = {rp['uuid']: rp['name'] for rp in rps['resource_providers']}
        view = {}
        for rp in rps['resource_providers']:
            inventory = self.placement_get(
                '/resource_providers/%s/inventories' % rp['uuid'])
            traits = self.placement_get(
                '/resource_providers/%s/traits' % rp['uuid'])
            view[rp['name']] = {
                'uuid': rp['uuid'],
                'parent': names.get(rp['parent_provider_uuid']),
                'inventory': {rc: rec['total'] for rc, rec in
                              inventory['inventories'].items()},
                'traits': {trait for trait in traits['traits']
                           if not placement_names.is_shard_trait(trait)}}
        return view

    def usages(self, rp_uuid: str) -> dict[str, int]:
        return self.placement_get(
            '/resource_providers/%s/usages' % rp_uuid)['usages']
