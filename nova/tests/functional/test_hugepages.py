"""Hugepage guests booted through the REST API on generated HGX hosts.

Each of the two NUMA nodes of the test host has 896 pages of 1 GiB
(nova.virt.fake.host.hugepage_pools); the compute counts the pages its
guests hold on each node and refuses a guest whose pages do not fit.
"""

import xml.etree.ElementTree as ET

from nova.tests.functional import test_boot_gpu_groups as boot
from nova.virt import hugepages

GIB_KIB = 1048576


class TestHugepages(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.start_services()
        self.compute = self.computes['cmp1']

    def page_flavor(self, name, ram_mb, vcpus=4, **specs):
        flavor = self.api('POST', '/flavors', {'flavor': {
            'name': name, 'vcpus': vcpus, 'ram': ram_mb,
            'disk': 0}})['flavor']['id']
        self.api('POST', '/flavors/%s/os-extra_specs' % flavor,
                 {'extra_specs': dict(specs, **{
                     'hw:mem_page_size': '1GB'})})
        return flavor

    def domain(self, server):
        return ET.fromstring(self.compute.driver.host.lookup_domain(
            server['id']).XMLDesc())

    def backing(self, server):
        """(page size, guest cells) of the domain's hugepages and the
        host node of each guest cell."""
        root = self.domain(server)
        page = root.find('memoryBacking/hugepages/page')
        return ((page.get('size'), page.get('nodeset')),
                [(m.get('cellid'), m.get('mode'), m.get('nodeset'))
                 for m in root.findall('numatune/memnode')])

    def used(self):
        return {node: count for (node, size), count in
                self.compute.hugepages.used().items()}

    def test_guest_backed_by_1g_pages_on_its_node(self):
        server = self.boot(self.page_flavor('huge.small', 4096), 'vm')
        self.assertEqual(
            ((str(GIB_KIB), '0'), [('0', 'strict', '0')]),
            self.backing(server))
        # Its vCPUs run on the node its memory is on.
        self.assertEqual('0-111', self.domain(server).find('vcpu')
                         .get('cpuset'))
        self.assertEqual({0: 4}, self.used())
        self.delete(server['id'])
        self.assertEqual({}, self.used())

    def test_second_guest_lands_on_the_other_node_third_refused(self):
        flavor = self.page_flavor('huge.600g', 600 * 1024)
        first = self.boot(flavor, 'first')
        second = self.boot(flavor, 'second')
        self.assertEqual([('0', 'strict', '0')], self.backing(first)[1])
        self.assertEqual([('0', 'strict', '1')], self.backing(second)[1])
        # Placement has memory for a third (2 TiB); the nodes have 296
        # free pages each.
        third = self.boot(flavor, 'third', status='ERROR')
        message = third['fault']['message']
        self.assertIn('Not enough free hugepages', message)
        self.assertIn('node 0: 296 of 896 free, node 1: 296 of 896 free',
                      message)
        self.assert_nothing_held(third['id'])
        self.assertEqual({0: 600, 1: 600}, self.used())
        # A restarted compute counts the pages from its guests' domains.
        self.stop_compute('cmp1', seconds_ago=0)
        self.compute = self.restart_compute('cmp1')
        self.assertEqual({0: 600, 1: 600}, self.used())
        # Delete frees the pages: the next guest takes them.
        self.delete(first['id'])
        self.assertEqual({1: 600}, self.used())
        fourth = self.boot(flavor, 'fourth')
        self.assertEqual([('0', 'strict', '0')], self.backing(fourth)[1])

    def test_guest_of_1_75_tib_in_two_cells_takes_both_nodes(self):
        flavor = self.page_flavor('huge.board', 1792 * 1024, vcpus=192,
                                  **{'hw:numa_nodes': '2'})
        server = self.boot(flavor, 'big')
        self.assertEqual(
            ((str(GIB_KIB), '0-1'),
             [('0', 'strict', '0'), ('1', 'strict', '1')]),
            self.backing(server))
        self.assertEqual({0: 896, 1: 896}, self.used())
        self.assertEqual(
            {server['id']: hugepages.GuestPages(
                GIB_KIB, (0, 1), (917504, 917504))},
            self.compute.driver.get_guest_hugepages())
        small = self.boot(self.page_flavor('huge.small', 1024), 'small',
                          status='ERROR')
        self.assertIn('hugepages', small['fault']['message'])
        self.assert_nothing_held(small['id'])


class TestHugepageGuestsMoveAndFollowDevices(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.start_services(hosts=('cmp1', 'cmp2'))

    page_flavor = TestHugepages.page_flavor

    def used(self, host):
        return {node: count for (node, size), count in
                self.computes[host].hugepages.used().items()}

    def test_pages_on_the_node_of_the_required_devices(self):
        flavor = self.page_flavor('pair.huge', 8192, **{
            'pci_passthrough:alias': 'h200:2',
            'hw:pci_numa_affinity_policy': 'required'})
        # Two pairs: the second may sit on node 1, its pages with it.
        for name in ('a', 'b', 'c'):
            server = self.boot(flavor, name)
            host = server['OS-EXT-SRV-ATTR:host']
            (node,) = {0 if gpu <= 4 else 1
                       for gpu in self.gpus_of(server)}
            root = ET.fromstring(self.computes[host].driver.host
                                 .lookup_domain(server['id']).XMLDesc())
            self.assertEqual([('0', str(node))], [
                (m.get('cellid'), m.get('nodeset'))
                for m in root.findall('numatune/memnode')])
            self.assertEqual(
                hugepages.GuestPages(GIB_KIB, (node,), (8192,)),
                self.computes[host].hugepages.held(server['id']))

    def test_resize_holds_pages_on_both_ends_until_settled(self):
        small = self.page_flavor('huge.4g', 4096)
        big = self.page_flavor('huge.8g', 8192)
        server = self.boot(small, 'mover')
        source = server['OS-EXT-SRV-ATTR:host']
        dest = ({'cmp1', 'cmp2'} - {source}).pop()
        server = self.settle(server['id'], {'resize': {'flavorRef': big}},
                             'VERIFY_RESIZE')
        self.assertEqual(dest, server['OS-EXT-SRV-ATTR:host'])
        # The source keeps its pages for a revert.
        self.assertEqual(({0: 4}, {0: 8}),
                         (self.used(source), self.used(dest)))
        self.settle(server['id'], {'revertResize': None}, 'ACTIVE')
        self.assertEqual(({0: 4}, {}), (self.used(source), self.used(dest)))
        server = self.settle(server['id'], {'resize': {'flavorRef': big}},
                             'VERIFY_RESIZE')
        self.settle(server['id'], {'confirmResize': None}, 'ACTIVE')
        self.assertEqual(({}, {0: 8}), (self.used(source), self.used(dest)))
        self.delete(server['id'])
        self.assertEqual({}, self.used(dest))
