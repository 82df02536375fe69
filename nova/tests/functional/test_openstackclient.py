"""python-openstackclient against the all-in-one services.

What an operator types: create a flavor with the h200 alias, boot with
``openstack server create --flavor gpu.2x``, and the server is ACTIVE on an
NVLink pair.
"""

import json
import os
import subprocess
import sys
import time

from nova import context as nova_context
from nova.db import api as db
from nova.tests.functional import test_boot_gpu_groups as boot
from nova.tests.functional import test_images

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')


class TestOpenStackClient(test_images.ImageTestBase):
    """As the README has it: the Compute API's endpoint for every service
    but the image service, which is Glance's (images are looked up there,
    never through the Compute API's image proxy)."""

    # Each command is a python-openstackclient process.
    TIMEOUT = 300

    def setUp(self):
        super().setUp()
        root = self.allinone.api_server.url
        self.env = dict(os.environ, OS_AUTH_TYPE='admin_token',
                        OS_ENDPOINT=self.allinone.api_url, OS_TOKEN='admin',
                        OS_IDENTITY_ENDPOINT_OVERRIDE=root + '/identity/v3',
                        OS_IMAGE_ENDPOINT_OVERRIDE=self.glance.url,
                        OS_COMPUTE_API_VERSION='2.96')
        self.glance.upload('cirros')

    def osc(self, *args, expect_ok=True):
        result = subprocess.run([OPENSTACK, *args], env=self.env,
                                capture_output=True, text=True, timeout=60)
        if expect_ok:
            self.assertEqual(0, result.returncode, result.stderr)
        return result

    def osc_json(self, *args):
        return json.loads(self.osc(*args, '-f', 'json').stdout)

    def test_server_create_lands_on_a_pair(self):
        self.osc('flavor', 'create', '--vcpus', '8', '--ram', '8192',
                 '--disk', '0', 'gpu.2x')
        self.osc('flavor', 'set', '--property',
                 'pci_passthrough:alias=h200:2', 'gpu.2x')
        bad = self.osc('flavor', 'set', '--property',
                       'pci_passthrough:alias=h100:2', 'gpu.2x',
                       expect_ok=False)
        self.assertNotEqual(0, bad.returncode)
        self.assertIn('h100', bad.stderr)
        server = self.osc_json('server', 'create', '--flavor', 'gpu.2x',
                               '--image', 'cirros', 'vm1')
        deadline = time.monotonic() + boot.TIMEOUT
        while server['status'] == 'BUILD' and time.monotonic() < deadline:
            time.sleep(0.2)
            server = self.osc_json('server', 'show', server['id'])
        self.assertEqual('ACTIVE', server['status'], server)
        rest = self.api('GET', '/servers/%s' % server['id'])['server']
        self.assert_server_holds(rest, boot.PAIRS)
        listed = self.osc_json('server', 'list')
        self.assertEqual(['vm1'], [s['Name'] for s in listed])
        self.osc('server', 'delete', '--wait', server['id'])
        self.assert_nothing_held(server['id'])

    def test_stop_start_shelve_unshelve_and_events(self):
        self.osc('flavor', 'create', '--vcpus', '8', '--ram', '8192',
                 '--disk', '0', '--property',
                 'pci_passthrough:alias=h200:2', 'gpu.2x')
        server = self.osc_json('server', 'create', '--flavor', 'gpu.2x',
                               '--image', 'cirros', '--wait', 'vm1')
        rest = self.api('GET', '/servers/%s' % server['id'])['server']
        gpus = self.assert_server_holds(rest, boot.PAIRS)

        self.osc('server', 'stop', server['id'])
        self.wait_osc_status(server['id'], 'SHUTOFF')
        self.osc('server', 'start', server['id'])
        self.wait_osc_status(server['id'], 'ACTIVE')
        rest = self.api('GET', '/servers/%s' % server['id'])['server']
        self.assertEqual(gpus, self.assert_server_holds(rest, boot.PAIRS))

        self.osc('server', 'shelve', '--wait', server['id'])
        self.wait_osc_status(server['id'], 'SHELVED_OFFLOADED')
        self.assert_nothing_held(server['id'])
        self.osc('server', 'unshelve', '--wait', server['id'])
        rest = self.api('GET', '/servers/%s' % server['id'])['server']
        self.assertEqual('ACTIVE', rest['status'])
        self.assert_server_holds(rest, boot.PAIRS)

        events = self.osc_json('server', 'event', 'list', server['id'])
        self.assertEqual(['unshelve', 'shelve', 'start', 'stop', 'create'],
                         [e['Action'] for e in events])
        detail = self.osc_json('server', 'event', 'show', server['id'],
                               events[0]['Request ID'])
        self.assertIn('conductor_unshelve_instance',
                      [e['event'] for e in detail['events']])

    def test_console_log_show(self):
        self.osc('flavor', 'create', '--vcpus', '1', '--ram', '512',
                 '--disk', '0', 'tiny')
        server = self.osc_json('server', 'create', '--flavor', 'tiny',
                               '--image', 'cirros', '--wait', 'vm1')
        host = self.api('GET', '/servers/%s' % server['id'])['server'][
            'OS-EXT-SRV-ATTR:host']
        # libvirt's test driver runs no guest: write what virtlogd would.
        drv = self.allinone.computes[host].driver
        log = os.path.join(drv.instances_path, server['id'], 'console.log')
        with open(log, 'w') as f:
            f.write('booting\nlogin:\n')
        shown = self.osc('console', 'log', 'show', '--lines', '1',
                         server['id']).stdout
        self.assertEqual('login:', shown.strip())
        self.assertIn('booting', self.osc('console', 'log', 'show',
                                          server['id']).stdout)

    def wait_osc_status(self, server_id, status):
        deadline = time.monotonic() + boot.TIMEOUT
        server = self.osc_json('server', 'show', server_id)
        while (server['status'] != status or server['OS-EXT-STS:task_state']
               ) and time.monotonic() < deadline:
            time.sleep(0.2)
            server = self.osc_json('server', 'show', server_id)
        self.assertEqual(status, server['status'], server)

    def test_server_resize_to_a_quad_and_confirm(self):
        """The issue's "done when": a 2-GPU server resized with
        ``openstack server resize --flavor gpu.4x`` and confirmed with
        ``openstack server resize confirm`` runs on one valid quartet."""
        self.flags(allow_resize_to_same_host=True)
        for size in (2, 4):
            self.osc('flavor', 'create', '--vcpus', '8', '--ram', '8192',
                     '--disk', '0', 'gpu.%dx' % size)
            self.osc('flavor', 'set', '--property',
                     'pci_passthrough:alias=h200:%d' % size,
                     'gpu.%dx' % size)
        server = self.osc_json('server', 'create', '--flavor', 'gpu.2x',
                               '--image', 'cirros', '--wait', 'vm1')
        rest = self.api('GET', '/servers/%s' % server['id'])['server']
        pair = self.assert_server_holds(rest, boot.PAIRS)

        self.osc('server', 'resize', '--flavor', 'gpu.4x', '--wait',
                 server['id'])
        self.assertEqual('VERIFY_RESIZE', self.osc_json(
            'server', 'show', server['id'])['status'])
        self.osc('server', 'resize', 'confirm', server['id'])
        deadline = time.monotonic() + boot.TIMEOUT
        while time.monotonic() < deadline:
            shown = self.osc_json('server', 'show', server['id'])
            if shown['status'] != 'VERIFY_RESIZE':
                break
            time.sleep(0.2)
        self.assertEqual('ACTIVE', shown['status'], shown)
        rest = self.session.get(
            self.allinone.api_url + '/servers/%s' % server['id'],
            headers={'X-OpenStack-Nova-API-Version': '2.47'}).json()[
                'server']
        self.assertEqual('gpu.4x', rest['flavor']['original_name'])
        quad = self.assert_server_holds(rest, boot.QUADS)
        self.assertNotEqual(pair, quad)
        migrations = self.osc_json('server', 'migration', 'list',
                                   '--server', server['id'])
        self.assertEqual(['confirmed'], [m['Status'] for m in migrations])
        self.osc('server', 'delete', '--wait', server['id'])
        self.assert_nothing_held(server['id'])

    def test_compute_service_set_down_and_disable(self):
        def listed():
            return {s['Host']: s for s in self.osc_json(
                'compute', 'service', 'list', '--service', 'nova-compute',
                '--long')}

        service = listed()['cmp1']
        self.assertEqual(('enabled', 'up', False), (
            service['Status'], service['State'], service['Forced Down']))
        self.osc('compute', 'service', 'set', '--down', 'cmp1',
                 'nova-compute')
        self.osc('compute', 'service', 'set', '--disable',
                 '--disable-reason', 'NVSwitch RMA', 'cmp1', 'nova-compute')
        service = listed()['cmp1']
        self.assertEqual(('disabled', 'down', True, 'NVSwitch RMA'), (
            service['Status'], service['State'], service['Forced Down'],
            service['Disabled Reason']))
        self.osc('compute', 'service', 'set', '--up', '--enable', 'cmp1',
                 'nova-compute')
        service = listed()['cmp1']
        self.assertEqual(('enabled', 'up', False, None), (
            service['Status'], service['State'], service['Forced Down'],
            service['Disabled Reason']))

    def test_trait_nova_owns_on_pci_providers_is_refused(self):
        group_trait = 'trait:CUSTOM_PCI_GROUP_NVLINK_2=required'
        self.osc('flavor', 'create', '--vcpus', '8', '--ram', '8192',
                 '--disk', '0', 'gpu.2x')
        for prop in (group_trait, 'trait:CUSTOM_PCI_FREE_PGPU_4=required',
                     'trait:COMPUTE_MANAGED_PCI_DEVICE=forbidden'):
            bad = self.osc('flavor', 'set', '--property', prop, 'gpu.2x',
                           expect_ok=False)
            self.assertNotEqual(0, bad.returncode, prop)
            self.assertIn(prop.split('=')[0][len('trait:'):], bad.stderr)
            self.assertIn('pci_passthrough:alias=<alias>:<count>',
                          bad.stderr)
        self.assertEqual({}, self.osc_json('flavor', 'show', 'gpu.2x')[
            'properties'])
        bad = self.osc('flavor', 'create', '--vcpus', '8', '--ram', '8192',
                       '--disk', '0', '--property', group_trait, 'gpu.bad',
                       expect_ok=False)
        self.assertIn('CUSTOM_PCI_GROUP_NVLINK_2', bad.stderr)
        # A flavor that got the trait before this check: the boot is
        # refused at once, for the same reason.
        flavor = self.osc_json('flavor', 'show', 'gpu.2x')
        db.flavor_extra_specs_update_or_create(
            nova_context.get_admin_context(), flavor['id'],
            {'trait:CUSTOM_PCI_GROUP_NVLINK_2': 'required'})
        resp = self.session.post(
            self.allinone.api_url + '/servers', json={'server': {
                'name': 'vm1', 'flavorRef': flavor['id'],
                'imageRef': 'none'}})
        self.assertEqual(400, resp.status_code, resp.text)
        self.assertIn('CUSTOM_PCI_GROUP_NVLINK_2', resp.text)
        self.assertIn('pci_passthrough:alias=<alias>:<count>', resp.text)
        self.assertEqual([], self.api('GET', '/servers')['servers'])

    def test_server_property_set_and_unset(self):
        """The metadata nova-manage pci defrag reads, as the
        defragmentation guide sets it."""
        self.osc('flavor', 'create', '--vcpus', '1', '--ram', '512',
                 '--disk', '0', 'tiny')
        server = self.osc_json('server', 'create', '--flavor', 'tiny',
                               '--image', 'cirros', '--property', 'team=ml',
                               'vm1')
        self.osc('server', 'set', '--property', 'pci_defrag=allow',
                 server['id'])
        shown = self.osc_json('server', 'show', server['id'])
        self.assertEqual({'team': 'ml', 'pci_defrag': 'allow'},
                         shown['properties'])
        self.osc('server', 'unset', '--property', 'pci_defrag',
                 server['id'])
        self.assertEqual({'team': 'ml'}, self.api(
            'GET', '/servers/%s' % server['id'])['server']['metadata'])

    def test_server_group_create_boot_into_it_and_delete(self):
        """``openstack server group`` and ``server create --hint group=``
        as the scheduling guide shows them; with one host, an
        anti-affinity group takes one server."""
        self.osc('flavor', 'create', '--vcpus', '1', '--ram', '512',
                 '--disk', '0', 'tiny')
        group = self.osc_json('server', 'group', 'create', '--policy',
                              'anti-affinity', '--rule',
                              'max_server_per_host=1', 'job-7')
        self.assertEqual(('anti-affinity', {'max_server_per_host': 1}),
                         (group['policy'], group['rules']))
        listed = self.osc_json('server', 'group', 'list')
        self.assertEqual([group['id']], [g['ID'] for g in listed])
        first = self.osc_json('server', 'create', '--flavor', 'tiny',
                              '--image', 'cirros', '--hint',
                              'group=%s' % group['id'], '--wait', 'r1')
        self.assertEqual('ACTIVE', first['status'], first)
        shown = self.osc_json('server', 'group', 'show', 'job-7')
        self.assertEqual([first['id']], shown['members'])
        second = self.osc('server', 'create', '--flavor', 'tiny',
                          '--image', 'cirros', '--hint',
                          'group=%s' % group['id'], '--wait', 'r2',
                          expect_ok=False)
        self.assertNotEqual(0, second.returncode)
        refused = self.api('GET', '/servers/detail')['servers']
        fault = [s['fault']['message'] for s in refused
                 if s['name'] == 'r2'][0]
        self.assertIn('anti-affinity server group %s' % group['id'], fault)
        self.osc('server', 'group', 'delete', 'job-7')
        self.assertEqual([], self.osc_json('server', 'group', 'list'))

    def test_quota_class_set_show_and_limits(self):
        # Project quotas need Keystone to resolve the project (noauth2
        # serves no /identity/v3/projects); the default class does not.
        self.osc('quota', 'set', '--class', '--cores', '12', '--instances',
                 '5', 'default')
        shown = self.api('GET', '/os-quota-class-sets/default')[
            'quota_class_set']
        self.assertEqual((12, 5), (shown['cores'], shown['instances']))
        limits = {row['Name']: row['Value'] for row in self.osc_json(
            'limits', 'show', '--absolute')}
        # openstacksdk's names for maxTotalCores, maxTotalInstances and
        # totalInstancesUsed.
        self.assertEqual((12, 5, 0), (limits['total_cores'],
                                      limits['instances'],
                                      limits['instances_used']), limits)
