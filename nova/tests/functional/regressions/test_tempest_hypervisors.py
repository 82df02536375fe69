"""os-hypervisors, which was missing.

Found by Tempest's admin hypervisor tests (list, detail, show,
statistics, uptime, search, servers): every path was a 404. The shapes
change at 2.28 (cpu_info an object), 2.53 (uuids, query parameters
instead of the search and servers paths) and 2.88 (usage, statistics and
uptime gone). ``/os-hypervisors/{id}/pci-devices`` is this fork's: the
node's devices and who holds them.
"""

from nova.tests.functional import test_boot_gpu_groups as boot


class TempestHypervisorsTest(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()

    def get(self, path, version, expect=(200,)):
        resp = self.session.get(
            self.allinone.api_url + path,
            headers={'X-OpenStack-Nova-API-Version': version})
        self.assertIn(resp.status_code, expect, resp.text)
        return resp.json()

    def test_hypervisors_through_the_microversions(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        server = self.boot(self.gpu_flavors()[2], name='pair-job')
        host = server['OS-EXT-SRV-ATTR:host']

        listed = self.get('/os-hypervisors', '2.1')['hypervisors']
        self.assertEqual(['cmp1', 'cmp2'],
                         [h['hypervisor_hostname'] for h in listed])
        self.assertTrue(all(isinstance(h['id'], int) for h in listed))
        self.assertEqual({'up'}, {h['state'] for h in listed})
        detail = {h['hypervisor_hostname']: h for h in self.get(
            '/os-hypervisors/detail', '2.27')['hypervisors']}
        self.assertEqual(1, detail[host]['running_vms'])
        self.assertEqual(4, detail[host]['vcpus_used'])
        self.assertEqual(4096, detail[host]['memory_mb_used'])
        self.assertIsInstance(detail[host]['cpu_info'], str)
        stats = self.get('/os-hypervisors/statistics',
                         '2.1')['hypervisor_statistics']
        self.assertEqual((2, 1, 4), (stats['count'], stats['running_vms'],
                                     stats['vcpus_used']))
        found = self.get('/os-hypervisors/%s/servers' % host,
                         '2.1')['hypervisors']
        self.assertEqual([[server['id']]],
                         [[s['uuid'] for s in h['servers']] for h in found])
        self.get('/os-hypervisors/no-such/search', '2.1', expect=(404,))

        # 2.53: uuids, and the query parameters instead of the paths.
        uuid_of = {h['hypervisor_hostname']: h['id'] for h in self.get(
            '/os-hypervisors', '2.53')['hypervisors']}
        shown = self.get('/os-hypervisors/%s?with_servers=true'
                         % uuid_of[host], '2.53')['hypervisor']
        self.assertEqual([server['id']],
                         [s['uuid'] for s in shown['servers']])
        self.assertIsInstance(shown['cpu_info'], dict)
        matched = self.get('/os-hypervisors?hypervisor_hostname_pattern=%s'
                           % host, '2.53')['hypervisors']
        self.assertEqual([uuid_of[host]], [h['id'] for h in matched])
        self.get('/os-hypervisors/%s/servers' % host, '2.53', expect=(404,))
        self.get('/os-hypervisors/42', '2.53', expect=(400,))

        # 2.88: no usage, no statistics, no uptime path.
        shown = self.get('/os-hypervisors/%s' % uuid_of[host],
                         '2.88')['hypervisor']
        self.assertNotIn('vcpus_used', shown)
        self.assertIn('uptime', shown)
        self.get('/os-hypervisors/statistics', '2.88', expect=(404,))
        self.get('/os-hypervisors/%s/uptime' % uuid_of[host], '2.88',
                 expect=(404,))

        devices = self.get('/os-hypervisors/%s/pci-devices' % uuid_of[host],
                           '2.53')['pci_devices']
        held = sorted(d['address'] for d in devices
                      if d['instance_uuid'] == server['id'])
        self.assertEqual(sorted(boot.GPUS[n - 1]
                                for n in self.gpus_of(server)), held)
        self.assertEqual(1, len({d['group'] for d in devices
                                 if d['instance_uuid'] == server['id']}))

        member = self.session.get(
            self.allinone.api_url + '/os-hypervisors',
            headers={'X-Auth-Token': 'alice:proj-a'})
        self.assertEqual(403, member.status_code, member.text)
