"""The flavors of the operator guide boot, and claim real local disk.

The flavor commands are read from doc/source/admin/pci-groups.rst at test
time and run with python-openstackclient against the all-in-one services;
each flavor's ``--disk`` is claimed as DISK_GB from the compute node,
whose DISK_GB inventory is the filesystem of ``[DEFAULT]instances_path``.
"""

import math
import os
import shlex
import shutil
import subprocess
import sys

from nova.tests.functional.lib import doc_commands
from nova.tests.functional import test_boot_gpu_groups as boot

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')
GIB = 1024 ** 3


class TestDocumentedFlavors(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.disk_gb = shutil.disk_usage(self.tmpdir).total // GIB
        # The guide's largest flavor asks 800 GB; a test machine's disk
        # may be smaller, so overcommit it as an operator of such a host
        # would (upstream's disk_allocation_ratio).
        self.ratio = max(1, math.ceil(800 / (self.disk_gb - 2)))
        self.flags(reserved_host_disk_mb=1500, disk_allocation_ratio=float(
            self.ratio))
        self.start_services(hosts=('cmp1', 'cmp2'))
        root = self.allinone.api_server.url
        self.env = dict(os.environ, OS_AUTH_TYPE='admin_token',
                        OS_ENDPOINT=self.allinone.api_url, OS_TOKEN='admin',
                        OS_IDENTITY_ENDPOINT_OVERRIDE=root + '/identity/v3')

    def run_documented(self, command: str) -> None:
        argv = shlex.split(command)
        self.assertEqual('openstack', argv[0], command)
        result = subprocess.run([OPENSTACK, *argv[1:]], env=self.env,
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(0, result.returncode, (command, result.stderr))

    def test_documented_flavors_boot_and_claim_disk(self):
        flavor_commands = [c for c in doc_commands.commands(
            doc_commands.PCI_GROUPS_GUIDE) if c.startswith(
            'openstack flavor ')]
        self.assertEqual(8, len(flavor_commands), flavor_commands)
        for command in flavor_commands:
            self.run_documented(command)
        flavors = {f['name']: f for f in
                   self.api('GET', '/flavors/detail')['flavors']}
        self.assertEqual({'gpu.1x', 'gpu.2x', 'gpu.4x', 'gpu.8x'},
                         set(flavors))

        root = self.provider_view('cmp1')['cmp1']
        disk = self.placement_get('/resource_providers/%s/inventories' %
                                  root['uuid'])['inventories']['DISK_GB']
        self.assertEqual((self.disk_gb, 2, float(self.ratio)),
                         (disk['total'], disk['reserved'],
                          disk['allocation_ratio']))

        valid = {8: {boot.BOARD}, 4: boot.QUADS, 2: boot.PAIRS,
                 1: {frozenset({g}) for g in range(1, 9)}}
        used: dict[str, int] = {}
        for size in (8, 4, 2, 1):
            flavor = flavors['gpu.%dx' % size]
            server = self.boot(flavor['id'], 'doc-%d' % size)
            self.assert_server_holds(server, valid[size])
            allocations = self.placement_get(
                '/allocations/%s' % server['id'])['allocations']
            claimed = sum(a['resources'].get('DISK_GB', 0)
                          for a in allocations.values())
            self.assertEqual(flavor['disk'], claimed)
            host = server['OS-EXT-SRV-ATTR:host']
            used[host] = used.get(host, 0) + flavor['disk']
        for host, disk_used in used.items():
            uuid = self.provider_view(host)[host]['uuid']
            self.assertEqual(disk_used, self.usages(uuid)['DISK_GB'])
        self.assertEqual(1500, sum(used.values()))

    def test_flavor_larger_than_the_disk_finds_no_host(self):
        capacity = (self.disk_gb - 2) * self.ratio
        flavor = self.api('POST', '/flavors', {'flavor': {
            'name': 'huge', 'vcpus': 1, 'ram': 1024,
            'disk': capacity + 1}})['flavor']
        failed = self.boot(flavor['id'], 'huge', status='ERROR')
        self.assertIn('No valid host', failed['fault']['message'])
        self.assertIn('no host has %d DISK_GB free' % (capacity + 1),
                      failed['fault']['message'])
        self.assert_nothing_held(failed['id'])
