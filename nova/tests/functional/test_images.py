"""Servers from images of a real Glance (the ``glance`` package).

Every nova service is nova-all's, in-process, on libvirt's test driver;
Glance runs as nova-all runs it (a child process, file store, SQLite).
The image is checked before scheduling, downloaded once per compute into
its image cache, and each guest boots from a qcow2 overlay of it.
"""

import json
import os
import subprocess
import threading
import time

from nova import context as nova_context
from nova import exception
from nova.db import api as db
from nova.tests.fixtures import glance as glance_fixture
from nova.tests.functional import test_boot_gpu_groups as boot
from nova.virt.libvirt import guest_files
from nova.virt.libvirt import imagecache

MiB = 1024 ** 2


class ImageTestBase(boot.BootTestBase):

    # [upgrade_levels]compute of the services, if any.
    compute_rpc_cap = None
    hosts = ('cmp1',)

    def setUp(self):
        super().setUp()
        self.glance = self.useFixture(glance_fixture.GlanceFixture())
        self.glance.configure_nova(self.conf)
        self.enable_h200_groups()
        if self.compute_rpc_cap:
            self.flags('upgrade_levels', compute=self.compute_rpc_cap)
        self.start_services(hosts=self.hosts)
        self.tmp = self.useFixture(boot.fixtures.TempDir()).path
        self.flavor_id = self.sized_flavor('small', disk=1, ram=4096)

    def make_driver(self, host, devices=None):
        """The test driver, its downloads counted (``self.downloads``)."""
        driver = super().make_driver(host, devices)
        client = glance_fixture.CountingClient(self.conf)
        self.downloads = client.downloads
        driver.instances_path = self.instances_path_of(host)
        driver.image_cache = imagecache.ImageCache(
            os.path.join(driver.instances_path, '_base'), lambda: client)
        return driver

    def instances_path_of(self, host):
        """The instances_path of ``host``'s driver."""
        return self.conf.instances_path

    def sized_flavor(self, name, disk, ram, alias=None):
        flavor = self.api('POST', '/flavors', {'flavor': {
            'name': name, 'vcpus': 2, 'ram': ram, 'disk': disk}})['flavor']
        if alias:
            self.api('POST', '/flavors/%s/os-extra_specs' % flavor['id'],
                     {'extra_specs': {'pci_passthrough:alias': alias}})
        return flavor['id']

    def qcow2(self, name, size='1M', fmt='qcow2'):
        path = os.path.join(self.tmp, name)
        subprocess.run(['qemu-img', 'create', '-q', '-f', fmt, path,
                        size], check=True)
        return path

    def create(self, image, flavor=None, expect=(202,)):
        return self.api('POST', '/servers', {'server': {
            'name': 'vm', 'flavorRef': flavor or self.flavor_id,
            'imageRef': image}}, expect=expect)

    def disk_backing(self, server_id):
        disk = guest_files.GuestFiles.of(self.conf.instances_path,
                                         server_id).disk
        info = json.loads(subprocess.run(
            ['qemu-img', 'info', '--output=json', '-U', disk],
            check=True, capture_output=True, text=True).stdout)
        return info['format'], info.get('backing-filename')

    def base_dir(self):
        return os.path.join(self.conf.instances_path, '_base')

    def cached(self):
        """What the image cache directory holds."""
        base = self.base_dir()
        return os.listdir(base) if os.path.isdir(base) else []


class BootFromImageTest(ImageTestBase):

    def test_boots_from_an_overlay_of_the_cached_image(self):
        image = self.glance.upload('cuda', self.qcow2('cuda'))
        server = self.boot(self.flavor_id, image=image.id)
        self.assertEqual(image.id, server['image']['id'])
        self.assertEqual(('qcow2', os.path.join(self.base_dir(), image.id)),
                         self.disk_backing(server['id']))

    def test_refused_before_scheduling_naming_image_and_reason(self):
        queued = self.glance.client.create('empty')
        vmdk = self.glance.upload('vmdk', self.qcow2('v', fmt='vmdk'),
                                  disk_format='vmdk')
        big = self.glance.upload('big', self.qcow2('big', '2G'))
        min_disk = self.glance.upload('min-disk', min_disk=5)
        min_ram = self.glance.upload('min-ram', min_ram=8192)
        deleted = self.glance.upload('deleted')
        self.glance.client.delete(deleted.id)
        for image, reason in (
                ('no-such-image', 'could not be found'),
                (deleted.id, 'could not be found'),
                (queued.id, 'is not active'),
                (vmdk.id, "disk_format 'vmdk' is not supported"),
                (big.id, 'smaller than the image'),
                (min_disk.id, 'min_disk 5 GB'),
                (min_ram.id, 'min_ram 8192 MB')):
            body = self.create(image, expect=(400,))
            message = body['badRequest']['message']
            self.assertIn(image, message)
            self.assertIn(reason, message)
        self.assertEqual([], self.api('GET', '/servers')['servers'])

    def test_glance_down_is_a_clear_503(self):
        image = self.glance.upload('cuda')
        self.glance.stop()
        body = self.create(image.id, expect=(503,))
        self.assertIn('Glance', json.dumps(body))
        self.assertIn(self.glance.url, json.dumps(body))
        self.assertEqual([], self.api('GET', '/servers')['servers'])

    def test_image_properties_shape_the_guest(self):
        pc = self.glance.upload('pc', hw_machine_type='pc')
        server = self.boot(self.flavor_id, image=pc.id)
        self.assertIn("machine='pc'", self.domain_xml(server['id']))
        image = self.glance.upload(
            'q35-uefi', hw_machine_type='q35', hw_firmware_type='uefi',
            hw_pci_numa_affinity_policy='required')
        flavor = self.sized_flavor('gpu', disk=1, ram=4096, alias='h200:1')
        server = self.boot(flavor, image=image.id)
        xml = self.domain_xml(server['id'])
        self.assertIn("machine='q35'", xml)
        self.assertIn("firmware='efi'", xml)
        instance = db.instance_get_by_uuid(
            nova_context.get_admin_context(), server['id'])
        self.assertEqual(['required'], [
            req.numa_policy for req in instance.pci_requests])

    def domain_xml(self, server_id):
        return self.computes['cmp1'].driver.host.lookup_domain(
            server_id).XMLDesc()

    def test_image_policy_may_not_override_the_flavors(self):
        image = self.glance.upload('req',
                                   hw_pci_numa_affinity_policy='required')
        flavor = self.sized_flavor('gpu', disk=1, ram=4096, alias='h200:1')
        self.api('POST', '/flavors/%s/os-extra_specs' % flavor, {
            'extra_specs': {'hw:pci_numa_affinity_policy': 'preferred'}})
        body = self.create(image.id, flavor=flavor, expect=(400,))
        self.assertIn('hw_pci_numa_affinity_policy',
                      body['badRequest']['message'])

    def test_image_page_size_only_where_the_flavor_lets_it_choose(self):
        image = self.glance.upload('huge', hw_mem_page_size='1GB')
        # A flavor without hw:mem_page_size: the image may not ask.
        body = self.create(image.id, expect=(400,))
        self.assertIn('hw_mem_page_size=1GB is not allowed with flavor '
                      'hw:mem_page_size=<unset>',
                      body['badRequest']['message'])
        flavor = self.sized_flavor('any', disk=1, ram=4096)
        self.api('POST', '/flavors/%s/os-extra_specs' % flavor, {
            'extra_specs': {'hw:mem_page_size': 'any'}})
        server = self.boot(flavor, image=image.id)
        self.assertIn('<page size=\'1048576\' unit=\'KiB\' nodeset=\'0\'/>',
                      self.domain_xml(server['id']))
        # Nor may a resize drop the flavor's leave for the image.
        body = self.api('POST', '/servers/%s/action' % server['id'], {
            'resize': {'flavorRef': self.flavor_id}}, expect=(400,))
        self.assertIn('hw_mem_page_size=1GB is not allowed',
                      body['badRequest']['message'])
        # 2 MiB pages, which the generated host has none of: the image's
        # size is what the compute claims, not the flavor's "any".
        small = self.glance.upload('small-pages', hw_mem_page_size='2MB')
        failed = self.boot(flavor, image=small.id, status='ERROR')
        self.assertIn('2048 KiB pages', failed['fault']['message'])

    def test_20_concurrent_boots_download_once(self):
        image = self.glance.upload('cuda', self.qcow2('cuda'))
        ids = []

        def create():
            ids.append(self.create(image.id)['server']['id'])
        threads = [threading.Thread(target=create) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(20, len(ids))
        for server_id in ids:
            self.wait_for(server_id, 'ACTIVE')
        self.assertEqual([image.id], self.downloads)
        self.assertEqual([image.id], os.listdir(self.base_dir()))

    def test_deleting_an_image_in_use_keeps_its_servers(self):
        image = self.glance.upload('cuda')
        server = self.boot(self.flavor_id, image=image.id)
        self.glance.client.delete(image.id)
        self.api('POST', '/servers/%s/action' % server['id'],
                 {'os-stop': None})
        self.wait_for_status(server['id'], 'SHUTOFF')
        self.api('POST', '/servers/%s/action' % server['id'],
                 {'os-start': None})
        self.wait_for_status(server['id'], 'ACTIVE')
        self.assertEqual(('qcow2', os.path.join(self.base_dir(), image.id)),
                         self.disk_backing(server['id']))
        # The cache manager keeps the base of a guest in use.
        self.assertEqual([], self.computes['cmp1'].driver.manage_image_cache(
            True, 0))

    def wait_for_status(self, server_id, status):
        deadline = time.monotonic() + boot.TIMEOUT
        while time.monotonic() < deadline:
            server = self.api('GET', '/servers/%s' % server_id)['server']
            if server['status'] == status:
                return server
            time.sleep(0.05)
        self.fail('server %s never reached %s' % (server_id, status))


class ImageFaultsTest(ImageTestBase):

    def test_download_cut_short_fails_the_build_without_a_partial(self):
        image = self.glance.upload('cuda', self.qcow2('cuda', '4M'))
        stored = os.path.join(self.glance.state_dir, 'images', image.id)
        with open(stored, 'r+b') as f:
            f.truncate(os.path.getsize(stored) // 2)
        server = self.boot(self.flavor_id, image=image.id, status='ERROR')
        self.assertIn(image.id, server['fault']['message'])
        self.assertEqual([], self.cached())

    def test_glance_stopped_during_download(self):
        raw = os.path.join(self.tmp, 'big.raw')
        with open(raw, 'wb') as f:
            f.truncate(900 * MiB)
        image = self.glance.upload('big', raw, disk_format='raw')
        server_id = self.create(image.id)['server']['id']
        deadline = time.monotonic() + boot.TIMEOUT
        while time.monotonic() < deadline and not any(
                imagecache.PARTIAL_MARK in name for name in self.cached()):
            time.sleep(0.005)
        self.glance.stop()
        server = self.wait_for(server_id, 'ERROR')
        self.assertIn(image.id, server['fault']['message'])
        self.assertEqual([], self.cached())

    def test_glance_down_at_build_is_a_clear_fault(self):
        image = self.glance.upload('cuda')
        cache = self.computes['cmp1'].driver.image_cache
        # The API checks the image while Glance is up; the compute, held
        # until Glance is down, then cannot fetch it.
        with cache._lock(image.id):
            server_id = self.create(image.id)['server']['id']
            self.glance.stop()
        server = self.wait_for(server_id, 'ERROR')
        self.assertIn('could not be reached', server['fault']['message'])
        self.assertIn(self.glance.url, server['fault']['message'])
        self.assertEqual([], self.cached())


class RebuildAndSnapshotTest(ImageTestBase):

    def action(self, server_id, body, expect=(202,), version=None):
        headers = {'OpenStack-API-Version': 'compute %s' % version} \
            if version else {}
        resp = self.session.post(
            '%s/servers/%s/action' % (self.allinone.api_url, server_id),
            data=json.dumps(body), headers=headers)
        self.assertIn(resp.status_code, expect, resp.text)
        return resp

    def wait_image_active(self, image_id):
        deadline = time.monotonic() + boot.TIMEOUT
        while time.monotonic() < deadline:
            image = self.glance.client.show(image_id)
            if image.status == 'active':
                return image
            time.sleep(0.05)
        self.fail('image %s never became active' % image_id)

    def wait_settled(self, server_id, status):
        """The server once its task is done, in ``status``."""
        deadline = time.monotonic() + boot.TIMEOUT
        while time.monotonic() < deadline:
            server = self.api('GET', '/servers/%s' % server_id)['server']
            if server['OS-EXT-STS:task_state'] is None and \
                    server['status'] == status:
                return server
            time.sleep(0.05)
        self.fail('server %s never settled in %s' % (server_id, status))

    def test_rebuild_with_a_new_image_keeps_gpus_and_allocation(self):
        first = self.glance.upload('first')
        second = self.glance.upload('second', hw_machine_type='q35')
        flavor = self.sized_flavor('gpu.2x', disk=1, ram=4096,
                                   alias='h200:2')
        server = self.boot(flavor, image=first.id)
        gpus = self.assert_server_holds(server, boot.PAIRS)
        allocation = self.placement_get('/allocations/%s' % server['id'])
        self.action(server['id'], {'rebuild': {'imageRef': second.id}})
        server = self.wait_settled(server['id'], 'ACTIVE')
        self.assertEqual(second.id, server['image']['id'])
        self.assertEqual(gpus, self.assert_server_holds(server, boot.PAIRS))
        self.assertEqual(allocation['allocations'], self.placement_get(
            '/allocations/%s' % server['id'])['allocations'])
        self.assertEqual(('qcow2', os.path.join(self.base_dir(), second.id)),
                         self.disk_backing(server['id']))

    def test_rebuild_with_a_bad_image_changes_nothing(self):
        image = self.glance.upload('first')
        server = self.boot(self.flavor_id, image=image.id)
        resp = self.action(server['id'], {'rebuild': {'imageRef': 'nope'}},
                           expect=(400,))
        self.assertIn('nope', resp.text)
        server = self.wait_settled(server['id'], 'ACTIVE')
        self.assertEqual(image.id, server['image']['id'])

    def test_snapshot_of_active_and_shutoff_servers_boots_again(self):
        image = self.glance.upload('base', self.qcow2('base'),
                                   hw_firmware_type='bios', **{
                                       'owner_specified.openstack.md5': 'x'})
        server = self.boot(self.flavor_id, image=image.id)
        # From 2.45 the image id is in the body.
        resp = self.action(server['id'], {'createImage': {
            'name': 'snap-active', 'metadata': {'purpose': 'test'}}},
            version='2.45')
        active_snap = resp.json()['image_id']
        self.assertNotIn('Location', resp.headers)
        snap = self.wait_image_active(active_snap)
        self.assertEqual(('snap-active', 'qcow2'),
                         (snap.name, snap.disk_format))
        self.assertEqual(
            {'purpose': 'test', 'instance_uuid': server['id'],
             'image_type': 'snapshot', 'base_image_ref': image.id,
             'hw_firmware_type': 'bios'},
            {key: snap.properties.get(key) for key in (
                'purpose', 'instance_uuid', 'image_type', 'base_image_ref',
                'hw_firmware_type')})
        # The uploader's checksum was of the base image's data.
        self.assertNotIn('owner_specified.openstack.md5', snap.properties)
        self.wait_settled(server['id'], 'ACTIVE')
        # Before 2.45 it is in the Location header; a stopped server
        # stays stopped.
        self.action(server['id'], {'os-stop': None})
        self.wait_settled(server['id'], 'SHUTOFF')
        resp = self.action(server['id'], {'createImage': {
            'name': 'snap-shutoff'}}, version='2.44')
        location = resp.headers['Location']
        self.assertTrue(location.startswith(self.glance.url + '/v2/images/'),
                        location)
        shutoff_snap = location.rsplit('/', 1)[1]
        self.wait_image_active(shutoff_snap)
        self.wait_settled(server['id'], 'SHUTOFF')
        for snap_id in (active_snap, shutoff_snap):
            again = self.boot(self.flavor_id, name='again', image=snap_id)
            fmt, backing = self.disk_backing(again['id'])
            self.assertEqual(os.path.join(self.base_dir(), snap_id),
                             backing)

    def test_backup_keeps_the_newest_of_its_type(self):
        image = self.glance.upload('base', self.qcow2('base'))
        server = self.boot(self.flavor_id, image=image.id)
        made = []
        for n, backup_type in enumerate(('daily', 'daily', 'weekly',
                                         'daily')):
            if made:
                # Glance orders by created_at, to the second.
                time.sleep(1.1)
            resp = self.action(server['id'], {'createBackup': {
                'name': 'backup-%d' % n, 'backup_type': backup_type,
                'rotation': '2', 'metadata': {'n': str(n)}}},
                version='2.45')
            made.append(resp.json()['image_id'])
            self.wait_settled(server['id'], 'ACTIVE')
        kept = {i.id: i for i in self.glance.client.list(
            instance_uuid=server['id'])}
        # The oldest daily backup was rotated out; the weekly one is of
        # another type.
        self.assertEqual(set(made[1:]), set(kept))
        self.assertEqual(('backup', 'weekly', '2'), tuple(
            kept[made[2]].properties.get(key)
            for key in ('image_type', 'backup_type', 'n')))
        self.assertEqual('active', kept[made[3]].status)
        # Before 2.45 the image is in the Location header; with a
        # rotation of 0 every backup of the type goes, the new one too.
        resp = self.action(server['id'], {'createBackup': {
            'name': 'gone', 'backup_type': 'daily', 'rotation': 0}})
        self.assertNotIn('Location', resp.headers)
        self.wait_settled(server['id'], 'ACTIVE')
        self.assertEqual([made[2]], [i.id for i in self.glance.client.list(
            instance_uuid=server['id'])])
        resp = self.action(server['id'], {'createBackup': {
            'name': 'b', 'backup_type': 'daily', 'rotation': -1}},
            expect=(400,))
        self.assertIn('rotation', resp.text)
        self.assertEqual(['createBackup'] * 5 + ['create'], [
            a['action'] for a in self.api(
                'GET', '/servers/%s/os-instance-actions' % server['id'])[
                    'instanceActions']])

    def test_snapshot_refused_without_disk_or_glance(self):
        server = self.boot(self.flavor_id)
        resp = self.action(server['id'], {'createImage': {'name': 's'}},
                           expect=(400,))
        self.assertIn('no root disk', resp.text)
        image = self.glance.upload('base')
        server = self.boot(self.flavor_id, name='vm2', image=image.id)
        self.glance.stop()
        resp = self.action(server['id'], {'createImage': {'name': 's'}},
                           expect=(503,))
        self.assertIn('could not be reached', resp.text)
        self.wait_settled(server['id'], 'ACTIVE')

    def test_failed_snapshot_deletes_its_image_and_keeps_the_server(self):
        image = self.glance.upload('base')
        server = self.boot(self.flavor_id, image=image.id)
        # The disk is gone: the compute cannot copy it.
        os.unlink(guest_files.GuestFiles.of(self.conf.instances_path,
                                            server['id']).disk)
        snap = self.action(server['id'], {'createImage': {'name': 's'}},
                           version='2.45').json()['image_id']
        self.wait_settled(server['id'], 'ACTIVE')
        instance = db.instance_get_by_uuid(
            nova_context.get_admin_context(), server['id'])
        self.assertIn('no root disk', instance.fault_message)
        self.assertRaises(exception.ImageNotFound, self.glance.client.show,
                          snap)


class SnapshotUnderRPCCapTest(ImageTestBase):

    compute_rpc_cap = '1.4'

    def test_refused_and_nothing_left(self):
        image = self.glance.upload('base')
        server = self.boot(self.flavor_id, image=image.id)
        resp = self.session.post(
            '%s/servers/%s/action' % (self.allinone.api_url, server['id']),
            data=json.dumps({'createImage': {'name': 'snap'}}))
        self.assertEqual(409, resp.status_code, resp.text)
        self.assertIn('1.5', resp.text)
        resp = self.session.post(
            '%s/servers/%s/action' % (self.allinone.api_url, server['id']),
            data=json.dumps({'createBackup': {
                'name': 'b', 'backup_type': 'daily', 'rotation': 1}}))
        self.assertEqual(409, resp.status_code, resp.text)
        self.assertIn('1.6', resp.text)
        server = self.api('GET', '/servers/%s' % server['id'])['server']
        self.assertEqual(('ACTIVE', None), (
            server['status'], server['OS-EXT-STS:task_state']))
        self.assertEqual([image.id],
                         [i.id for i in self.glance.client.list()])


class MoveWithImageTest(ImageTestBase):
    """Two computes, each with an instances_path (and image cache) of its
    own, as on two machines."""

    hosts = ('cmp1', 'cmp2')

    def instances_path_of(self, host):
        return os.path.join(self.tmpdir, host, 'instances')

    def host_disk_backing(self, server):
        driver = self.computes[server['OS-EXT-SRV-ATTR:host']].driver
        disk = guest_files.GuestFiles.of(driver.instances_path,
                                         server['id']).disk
        info = json.loads(subprocess.run(
            ['qemu-img', 'info', '--output=json', '-U', disk],
            check=True, capture_output=True, text=True).stdout)
        return info.get('backing-filename')

    def test_cold_migration_remakes_the_disk_from_the_image(self):
        image = self.glance.upload('cuda')
        flavor = self.sized_flavor('gpu.2x', disk=1, ram=4096,
                                   alias='h200:2')
        server = self.boot(flavor, image=image.id)
        source = server['OS-EXT-SRV-ATTR:host']
        self.api('POST', '/servers/%s/action' % server['id'],
                 {'migrate': None})
        deadline = time.monotonic() + boot.TIMEOUT
        while self.api('GET', '/servers/%s' % server['id'])['server'][
                'status'] != 'VERIFY_RESIZE':
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        self.api('POST', '/servers/%s/action' % server['id'],
                 {'confirmResize': None})
        server = self.wait_for(server['id'], 'ACTIVE')
        self.assertNotEqual(source, server['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(server, boot.PAIRS)
        # The destination downloaded the image into its own cache.
        destination = self.computes[server['OS-EXT-SRV-ATTR:host']].driver
        self.assertEqual(destination.image_cache.path(image.id),
                         self.host_disk_backing(server))
        self.assertEqual(image.id, server['image']['id'])
