"""The os-hypervisors API per microversion, on a real test database."""

from nova.db import api as db
from nova.tests.unit.api import fakes


class HypervisorsTest(fakes.APITestCase):

    def setUp(self):
        super().setUp()
        ctx = self.admin_context
        self.nodes = []
        for host in ('hgx-1', 'hgx-2'):
            service = db.service_create(ctx, {
                'host': host, 'binary': 'nova-compute', 'topic': 'compute'})
            db.service_report(ctx, host, 'nova-compute')
            self.nodes.append(db.compute_node_create(ctx, {
                'host': host, 'hypervisor_hostname': host, 'vcpus': 224,
                'memory_mb': 2097152, 'local_gb': 1000,
                'hypervisor_type': 'QEMU', 'service_id': service.id}))
        self.make_flavor(vcpus=8, memory_mb=8192, root_gb=40)
        uuid = self.request('POST', '/v2.1/servers', {'server': {
            'name': 'job', 'flavorRef': 'f1'}}).json['server']['id']
        db.instance_update(ctx, uuid, {'host': 'hgx-1', 'node': 'hgx-1',
                                       'vm_state': 'active',
                                       'task_state': None})
        self.server = uuid
        db.pci_device_create(ctx, {
            'compute_node_id': self.nodes[0].id,
            'address': '0000:18:00.0', 'vendor_id': '10de',
            'product_id': '2335', 'dev_type': 'type-PCI', 'numa_node': 0,
            'status': 'allocated', 'instance_uuid': uuid,
            'group_path': 'nvl8/nvl4-a/nvl2-a'})

    def get(self, path, version=None, token=fakes.ADMIN):
        return self.request('GET', '/v2.1/os-hypervisors' + path,
                            version=version, token=token)

    def test_admin_only(self):
        for path in ('', '/detail', '/statistics'):
            self.assertFault(self.get(path, token=fakes.MEMBER), 403,
                             'forbidden', 'os-hypervisors')

    def test_list_and_detail_before_2_53(self):
        listed = self.get('').json['hypervisors']
        self.assertEqual([{'id': self.nodes[0].id,
                           'hypervisor_hostname': 'hgx-1', 'state': 'up',
                           'status': 'enabled'},
                          {'id': self.nodes[1].id,
                           'hypervisor_hostname': 'hgx-2', 'state': 'up',
                           'status': 'enabled'}], listed)
        detail = self.get('/detail').json['hypervisors'][0]
        self.assertEqual((8, 8192, 40, 1, 224 * 0 + 216, 2097152 - 8192),
                         (detail['vcpus_used'], detail['memory_mb_used'],
                          detail['local_gb_used'], detail['running_vms'],
                          detail['vcpus'] - detail['vcpus_used'],
                          detail['free_ram_mb']))
        self.assertEqual('{}', detail['cpu_info'])
        self.assertEqual({}, self.get('/detail', '2.28')
                         .json['hypervisors'][0]['cpu_info'])
        shown = self.get('/%d' % self.nodes[0].id).json['hypervisor']
        self.assertEqual(detail, shown)
        [found] = self.get('/hgx-2/search').json['hypervisors']
        self.assertEqual('hgx-2', found['hypervisor_hostname'])
        [with_servers] = self.get('/hgx-1/servers').json['hypervisors']
        self.assertEqual([{'name': 'job', 'uuid': self.server}],
                         with_servers['servers'])
        self.assertFault(self.get('/nohost/search'), 404, 'itemNotFound',
                         "'nohost'")

    def test_uuids_pattern_and_servers_from_2_53(self):
        uuid = self.nodes[0].uuid
        listed = self.get('?hypervisor_hostname_pattern=hgx-1'
                          '&with_servers=true', '2.53').json['hypervisors']
        self.assertEqual([(uuid, [{'name': 'job', 'uuid': self.server}])],
                         [(h['id'], h['servers']) for h in listed])
        shown = self.get('/' + uuid, '2.53').json['hypervisor']
        self.assertEqual(self.nodes[0].uuid, shown['id'])
        self.assertFault(self.get('/%d' % self.nodes[0].id, '2.53'), 400,
                         'badRequest', 'hypervisor uuid')
        self.assertFault(self.get('/hgx-1/search', '2.53'), 404,
                         'itemNotFound', '2.53')
        page = self.get('?limit=1&marker=' + uuid, '2.53').json
        self.assertEqual([self.nodes[1].uuid],
                         [h['id'] for h in page['hypervisors']])

    def test_statistics_and_uptime_until_2_88(self):
        stats = self.get('/statistics').json['hypervisor_statistics']
        self.assertEqual((2, 448, 8, 1, 2000, 40), (
            stats['count'], stats['vcpus'], stats['vcpus_used'],
            stats['running_vms'], stats['local_gb'], stats['local_gb_used']))
        self.assertFault(self.get('/statistics', '2.88'), 404,
                         'itemNotFound', '2.88')
        self.assertFault(self.get('/%d/uptime' % self.nodes[0].id), 501,
                         'notImplemented', 'does not implement uptime')
        detail = self.get('/detail', '2.88').json['hypervisors'][0]
        self.assertNotIn('vcpus_used', detail)
        self.assertIn('uptime', detail)

    def test_pci_devices_of_a_node(self):
        devices = self.get('/%s/pci-devices' % self.nodes[0].uuid,
                           '2.53').json['pci_devices']
        self.assertEqual([('0000:18:00.0', self.server, 'nvl8/nvl4-a/nvl2-a',
                           'healthy')],
                         [(d['address'], d['instance_uuid'], d['group'],
                           d['health']) for d in devices])
        empty = self.get('/%d/pci-devices' % self.nodes[1].id)
        self.assertEqual([], empty.json['pci_devices'])
