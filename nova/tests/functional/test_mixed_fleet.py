"""nova-all with per-compute configuration: HGX boards beside NVL pairs.

Each compute gets its own config file (``--compute NAME=FILE``) with its
own ``[libvirt]connection_uri`` and ``[pci]`` groups, written by
``fakehost.write_compute_config`` for two generated host kinds: the 8-GPU
HGX H200 board and the 4-GPU H200 NVL server with two NVLink pairs.
"""

import os

from nova.conf import per_compute
from nova.tests.functional import test_boot_gpu_groups as boot
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import config as libvirt_config

KINDS = {'hgx-a': 'hgx-h200', 'hgx-b': 'hgx-h200',
         'nvl-a': 'h200-nvl', 'nvl-b': 'h200-nvl'}


def _partitions(addresses, groups):
    return {frozenset(addresses[g - 1] for g in gpus) for gpus in groups}


HGX = fakehost.H200_GPU_ADDRESSES
VALID = {
    'hgx-h200': {
        2: _partitions(HGX, fakehost.H200_NVLINK_PAIRS.values()),
        4: _partitions(HGX, ((1, 2, 3, 4), (5, 6, 7, 8))),
        8: {frozenset(HGX)}},
    'h200-nvl': {2: _partitions(fakehost.H200_NVL_GPU_ADDRESSES,
                                fakehost.H200_NVL_NVLINK_PAIRS.values())},
}


class TestMixedFleet(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        # The shared config serves the API and scheduler: the alias only.
        self.flags('pci', alias=fakehost.h200_pci_config()['alias'])
        self.flags('filter_scheduler', pci_in_placement=True)
        hosts_dir = os.path.join(self.tmpdir, 'hosts')
        confs = {host: per_compute.layered(
            self.conf, fakehost.write_compute_config(kind, host, hosts_dir))
            for host, kind in KINDS.items()}
        self.start_allinone(KINDS, compute_confs=confs)

    def held(self, server):
        """Addresses the compute and the libvirt domain give the server."""
        compute = self.computes[server['OS-EXT-SRV-ATTR:host']]
        tracked = frozenset(d.address for d in
                            compute.rt.pci_tracker.pci_devs
                            if d.instance_uuid == server['id'])
        domain = compute.driver.host.lookup_domain(server['id'])
        self.assertEqual(tracked, frozenset(
            h.address for h in
            libvirt_config.parse_guest_hostdevs(domain.XMLDesc())))
        return tracked

    def assert_partition(self, server, size):
        kind = KINDS[server['OS-EXT-SRV-ATTR:host']]
        self.assertIn(size, VALID[kind], '%d GPUs on %s' % (size, kind))
        self.assertIn(self.held(server), VALID[kind][size], server)
        return kind

    def test_each_compute_reports_its_own_host(self):
        self.assertEqual(
            {'hgx-a': 8, 'hgx-b': 8, 'nvl-a': 4, 'nvl-b': 4},
            {host: len(c.rt.pci_tracker.pci_devs)
             for host, c in self.computes.items()})
        view = self.provider_view('nvl-a')
        self.assertEqual({'nvl-a', 'nvl-a_pair-1', 'nvl-a_pair-2'} | {
            'nvl-a_' + a.upper() for a in fakehost.H200_NVL_GPU_ADDRESSES},
            set(view))
        # Both GPUs of the pair sit on NUMA node 0.
        self.assertEqual({'CUSTOM_PCI_GROUP_NVLINK',
                          'CUSTOM_PCI_GROUP_NVLINK_2',
                          'CUSTOM_PCI_NUMA_LOCAL', 'CUSTOM_PCI_SOCKET_LOCAL'},
                         view['nvl-a_pair-1']['traits'])
        self.assertEqual(128, view['nvl-a']['inventory']['VCPU'])
        self.assertIn('hgx-a_board', self.provider_view('hgx-a'))

    def test_large_servers_only_on_boards_pairs_anywhere(self):
        flavors = self.gpu_flavors()
        # Packing fills the smaller NVL hosts first; then pairs go to a
        # board, the only place left for them.
        pairs = [self.boot(flavors[2], 'p%d' % i) for i in range(5)]
        self.assertEqual(['h200-nvl'] * 4 + ['hgx-h200'],
                         [self.assert_partition(p, 2) for p in pairs])
        quad = self.boot(flavors[4], 'q')
        self.assertEqual('hgx-h200', self.assert_partition(quad, 4))
        self.assertEqual(pairs[4]['OS-EXT-SRV-ATTR:host'],
                         quad['OS-EXT-SRV-ATTR:host'])
        board = self.boot(flavors[8], 'b')
        self.assertEqual('hgx-h200', self.assert_partition(board, 8))
        # One free pair is left on the first board: no quad anywhere.
        failed = self.boot(flavors[4], 'q2', status='ERROR')
        self.assertIn('No valid host', failed['fault']['message'])
        self.assertIn('only 2 PGPU devices free, 4 needed',
                      failed['fault']['message'])
        self.assert_nothing_held(failed['id'])
        last = self.boot(flavors[2], 'p5')
        self.assertEqual('hgx-h200', self.assert_partition(last, 2))
        failed = self.boot(flavors[2], 'p6', status='ERROR')
        self.assertIn('no PGPU device is free on any host',
                      failed['fault']['message'])
