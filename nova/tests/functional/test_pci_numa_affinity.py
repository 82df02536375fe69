"""PCI NUMA affinity policies, booted through the REST API.

The HGX H200 test host has GPUs 1-4 on NUMA node 0 (socket 0, CPUs
0-111) and GPUs 5-8 on node 1 (socket 1, CPUs 112-223): its NVLink pairs
and quads sit on one node, the 8-GPU board spans both.
"""

import json
import threading
import xml.etree.ElementTree as ET

from nova.tests.functional import test_boot_gpu_groups as boot
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import config as libvirt_config

GPUS = boot.GPUS
NODE_CPUS = {0: '0-111', 1: '112-223'}
PLAIN_ALIAS = '{"name": "gpu", "resource_class": "PGPU"}'


def node_of(gpus) -> set[int]:
    return {0 if gpu <= 4 else 1 for gpu in gpus}


class NumaTestBase(boot.BootTestBase):

    def numa_flavor(self, name, alias_value, policy=None):
        flavor = self.flavor(name, alias_value)
        if policy:
            self.api('POST', '/flavors/%s/os-extra_specs' % flavor,
                     {'extra_specs': {
                         'hw:pci_numa_affinity_policy': policy}})
        return flavor

    def guest_numa(self, server) -> dict:
        host = self.computes[server['OS-EXT-SRV-ATTR:host']].driver.host
        return libvirt_config.parse_guest_numa(
            host.lookup_domain(server['id']).XMLDesc())

    def assert_confined(self, server, node):
        self.assertEqual({'nodeset': str(node), 'cpuset': NODE_CPUS[node],
                          'cells': 1}, self.guest_numa(server))

    def assert_unconfined(self, server):
        self.assertEqual({'nodeset': None, 'cpuset': None, 'cells': 0},
                         self.guest_numa(server))

    def block(self, gpus):
        """Another consumer holds ``gpus`` (1-based) in Placement and in
        the PCI tracker of cmp1."""
        view = self.provider_view('cmp1')
        blocker = '44444444-2222-3333-4444-555555555555'
        addresses = [GPUS[gpu - 1] for gpu in gpus]
        resp = self.placement.api.put('/allocations/%s' % blocker, json={
            'allocations': {view['cmp1_' + a.upper()]['uuid']:
                            {'resources': {'PGPU': 1}} for a in addresses},
            'project_id': 'p', 'user_id': 'u', 'consumer_generation': None,
            'consumer_type': 'INSTANCE'})
        self.assertEqual(204, resp.status_code, resp.text)
        self.computes['cmp1'].rt.pci_tracker.claim(blocker, 'r', addresses)


class TestGroupAffinity(NumaTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()

    def test_required_pair_is_confined_to_its_node(self):
        self.start_services()
        flavor = self.numa_flavor('pair.req', 'h200:2', 'required')
        for index in range(2):
            server = self.boot(flavor, 'p%d' % index)
            gpus = self.assert_server_holds(server, boot.PAIRS)
            (node,) = node_of(gpus)
            self.assert_confined(server, node)

    def test_rebuild_and_resize_keep_the_guest_on_its_devices_node(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        pair = self.numa_flavor('pair.req', 'h200:2', 'required')
        quad = self.numa_flavor('quad.req', 'h200:4', 'required')
        server = self.boot(pair, 'moving')
        (node,) = node_of(self.assert_server_holds(server, boot.PAIRS))
        server = self.settle(server['id'], {'rebuild': {'imageRef': 'none'}},
                             'ACTIVE')
        self.assert_confined(server, node)
        # The resize lands on the other host: the new guest is confined
        # to the node of its quartet there.
        server = self.settle(server['id'], {'resize': {'flavorRef': quad}},
                             'VERIFY_RESIZE')
        (node,) = node_of(self.assert_server_holds(server, boot.QUADS))
        self.assert_confined(server, node)
        server = self.settle(server['id'], {'confirmResize': None},
                             'ACTIVE')
        self.assert_confined(server, node)

    def test_required_board_is_refused_with_the_reason(self):
        self.start_services()
        flavor = self.numa_flavor('board.req', 'h200:8', 'required')
        failed = self.boot(flavor, 'board', status='ERROR')
        message = failed['fault']['message']
        self.assertIn('No valid host', message)
        self.assertIn('NUMA affinity policy required needs a nvlink group '
                      'of 8 devices all on one NUMA node', message)
        self.assertIn('only used with policy preferred or legacy', message)
        self.assert_nothing_held(failed['id'])

    def test_required_board_with_two_guest_numa_nodes(self):
        self.start_services()
        flavor = self.numa_flavor('board.req2', 'h200:8', 'required')
        self.api('POST', '/flavors/%s/os-extra_specs' % flavor,
                 {'extra_specs': {'hw:numa_nodes': '2'}})
        server = self.boot(flavor, 'board')
        self.assertEqual(boot.BOARD,
                         self.assert_server_holds(server, {boot.BOARD}))
        self.assertEqual({'nodeset': '0-1', 'cpuset': '0-223', 'cells': 2},
                         self.guest_numa(server))
        host = self.computes['cmp1'].driver.host
        root = ET.fromstring(host.lookup_domain(server['id']).XMLDesc())
        memnodes = {m.get('cellid'): m.get('nodeset')
                    for m in root.findall('numatune/memnode')}
        self.assertEqual({'0': '0', '1': '1'}, memnodes)
        controllers = {c.get('index'): c for c in root.findall(
            "devices/controller[@type='pci']")}
        for hostdev in root.findall('devices/hostdev'):
            port = controllers[str(int(hostdev.find('address').get('bus'),
                                       16))]
            expander = controllers[str(int(port.find('address').get('bus'),
                                           16))]
            gpu = GPUS.index('%04x:%02x:%02x.%x' % tuple(
                int(hostdev.find('source/address').get(f), 16)
                for f in ('domain', 'bus', 'slot', 'function'))) + 1
            # The GPU's guest cell is bound to the GPU's host node.
            self.assertEqual(node_of([gpu]), {int(memnodes[
                expander.findtext('target/node')])})

    def test_spanning_board_still_works_with_preferred_and_legacy(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        for host, policy in zip(('cmp1', 'cmp2'), ('preferred', 'legacy')):
            flavor = self.numa_flavor('board.' + policy, 'h200:8', policy)
            server = self.boot(flavor, policy)
            self.assertEqual(boot.BOARD,
                             self.assert_server_holds(server, {boot.BOARD}))
            # Its devices span both nodes, so the guest is not confined.
            self.assert_unconfined(server)

    def test_alias_numa_policy_required(self):
        alias = dict(fakehost.H200_ALIAS, numa_policy='required')
        self.flags('pci', alias=[json.dumps(alias)])
        self.start_services()
        failed = self.boot(self.numa_flavor('board', 'h200:8'), 'board',
                           status='ERROR')
        self.assertIn('all on one NUMA node', failed['fault']['message'])
        # The flavor's policy overrides the alias'.
        board = self.boot(self.numa_flavor('board.pref', 'h200:8',
                                           'preferred'), 'board2')
        self.assert_unconfined(board)
        self.delete(board['id'])
        quad = self.boot(self.numa_flavor('quad', 'h200:4'), 'quad')
        self.assert_confined(quad, node_of(self.assert_server_holds(
            quad, boot.QUADS)).pop())

    def test_socket_policy_on_a_host_reporting_the_trait(self):
        self.start_services()
        self.assertIn('COMPUTE_SOCKET_PCI_NUMA_AFFINITY',
                      self.provider_view('cmp1')['cmp1']['traits'])
        failed = self.boot(self.numa_flavor('board.socket', 'h200:8',
                                            'socket'), 'b', status='ERROR')
        self.assertIn('NUMA affinity policy socket needs a nvlink group of '
                      '8 devices all on one socket',
                      failed['fault']['message'])
        flavor = self.numa_flavor('pair.socket', 'h200:2', 'socket')
        server = self.boot(flavor, 'sock')
        gpus = self.assert_server_holds(server, boot.PAIRS)
        self.assert_confined(server, node_of(gpus).pop())

    def test_concurrent_required_pairs_each_get_one_node(self):
        self.start_services()
        flavor = self.numa_flavor('pair.req', 'h200:2', 'required')
        servers, errors = [], []

        def boot_one(index):
            try:
                servers.append(self.boot(flavor, 'c%d' % index))
            except Exception as exc:    # reported below, not lost
                errors.append(exc)

        threads = [threading.Thread(target=boot_one, args=(i,))
                   for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([], errors)
        held = [self.assert_server_holds(s, boot.PAIRS) for s in servers]
        self.assertEqual(boot.PAIRS, set(held))
        for server, gpus in zip(servers, held):
            self.assert_confined(server, node_of(gpus).pop())


class TestSocketTrait(NumaTestBase):

    def test_host_without_one_socket_per_node_gets_no_socket_request(self):
        self.enable_h200_groups()
        xml = fakehost.node_xml_from_devices(
            fakehost.hgx_h200_devices(), sockets_per_node=2,
            cores_per_socket=28)
        self.node_uri = lambda host, devices=None: fakehost.write_node_xml(
            '%s/%s.xml' % (self.tmpdir, host), xml)
        self.start_services()
        self.assertNotIn('COMPUTE_SOCKET_PCI_NUMA_AFFINITY',
                         self.provider_view('cmp1')['cmp1']['traits'])
        failed = self.boot(self.numa_flavor('pair.socket', 'h200:2',
                                            'socket'), 's', status='ERROR')
        self.assertIn('no compute has the required trait '
                      'COMPUTE_SOCKET_PCI_NUMA_AFFINITY',
                      failed['fault']['message'])
        # Required only needs NUMA nodes, which this host knows.
        server = self.boot(self.numa_flavor('pair.req', 'h200:2',
                                            'required'), 'r')
        self.assertEqual(1, self.guest_numa(server)['cells'])


class TestPlainAffinity(NumaTestBase):
    """An alias without groups: devices of one request may come from any
    device provider, so the scheduler checks their nodes together."""

    def setUp(self):
        super().setUp()
        self.enable_h200_groups(groups=False)
        self.flags('pci', alias=[PLAIN_ALIAS])

    def test_required_refuses_devices_on_two_nodes(self):
        self.start_services()
        self.block([1, 2, 3, 5, 6, 7])     # one free GPU per node
        failed = self.boot(self.numa_flavor('two.req', 'gpu:2',
                                            'required'), 'r', status='ERROR')
        message = failed['fault']['message']
        self.assertIn('meets the PCI NUMA affinity policy', message)
        self.assertIn('PCI request gpu:2 with NUMA affinity policy required',
                      message)
        self.assertIn('sit on NUMA nodes 0, 1', message)
        self.assert_nothing_held(failed['id'])
        server = self.boot(self.numa_flavor('two.pref', 'gpu:2',
                                            'preferred'), 'p')
        self.assertEqual({4, 8}, self.gpus_of(server))
        self.assert_unconfined(server)

    def test_required_and_preferred_pick_one_node(self):
        self.start_services()
        self.block([1, 2, 3])     # GPU 4 alone on node 0, 5-8 on node 1
        for policy in ('required', 'preferred'):
            server = self.boot(self.numa_flavor('two.' + policy, 'gpu:2',
                                                policy), policy)
            gpus = self.gpus_of(server)
            self.assertEqual({1}, node_of(gpus), policy)
            self.assertEqual(gpus, self.placement_gpus(server))
            self.assert_confined(server, 1)
            self.delete(server['id'])

    def test_two_required_requests_share_the_node(self):
        self.flags('pci', alias=[PLAIN_ALIAS, json.dumps(
            {'name': 'gpu2', 'resource_class': 'PGPU',
             'numa_policy': 'required'})])
        self.start_services()
        self.block([1, 2, 5])    # 3, 4 on node 0; 6, 7, 8 on node 1
        server = self.boot(self.numa_flavor('mix', 'gpu:1,gpu2:2',
                                            'required'), 'mix')
        gpus = self.gpus_of(server)
        self.assertEqual(3, len(gpus))
        self.assertEqual({1}, node_of(gpus))
        self.assert_confined(server, 1)

    def test_compute_refuses_devices_placement_misplaced(self):
        """Placement's traits are stale (an operator edited them): the
        compute checks the devices it claimed itself and gives the build
        back rather than start a guest whose devices break the policy."""
        self.start_services()
        self.block([1, 2, 3, 6, 7, 8])     # GPU 4 on node 0, GPU 5 on 1
        rp = self.provider_view('cmp1')['cmp1_' + GPUS[4].upper()]
        generation = self.placement_get(
            '/resource_providers/%s' % rp['uuid'])['generation']
        traits = (rp['traits'] - {'CUSTOM_PCI_NUMA_NODE_1'}) | {
            'CUSTOM_PCI_NUMA_NODE_0'}
        resp = self.placement.api.put(
            '/resource_providers/%s/traits' % rp['uuid'],
            json={'traits': sorted(traits),
                  'resource_provider_generation': generation})
        self.assertEqual(200, resp.status_code, resp.text)
        failed = self.boot(self.numa_flavor('two.req', 'gpu:2',
                                            'required'), 'r', status='ERROR')
        self.assertIn('No valid host', failed['fault']['message'])
        self.assertIn('PCI request gpu:2 with NUMA affinity policy required '
                      'cannot be met: its devices sit on NUMA nodes 0, 1',
                      self.logger.output)
        self.assert_nothing_held(failed['id'])
        self.assertEqual({4, 5}, set(
            gpu for gpu in range(1, 9) if self.computes['cmp1'].rt
            .pci_tracker.get_by_address(GPUS[gpu - 1]).status ==
            'available'))
