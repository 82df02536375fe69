"""Builds that survive crashes and replays, with every service real.

The Compute API, conductor, scheduler and computes run in-process (as in
``nova-all``) on libvirt's test driver, with real Placement and database.
A crash is what it leaves behind: the database rows, guests, device claims
and allocations of a service that stopped mid-build; a restart is a new
manager over the same database and hypervisor.
"""

import datetime
import threading

import fixtures
from oslo_utils import timeutils

from nova.compute import api as compute_api
from nova.compute import rpcapi as compute_rpcapi
from nova.conductor import manager as conductor_manager
from nova import context as nova_context
from nova.db import api as db
from nova.tests.functional import test_boot_gpu_groups as boot
from nova.virt import driver as virt_driver
from nova.virt.fake import host as fakehost

PAIRS = boot.PAIRS
GPUS = boot.GPUS
WAIT = 60


def _ago(seconds: int) -> datetime.datetime:
    return timeutils.utcnow() - datetime.timedelta(seconds=seconds)


class TestBuildRecovery(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.ctx = nova_context.get_admin_context()

    def _wait_for_db(self, uuid, check, what):
        stop = threading.Event()
        for _ in range(WAIT * 20):
            instance = db.instance_get_by_uuid(self.ctx, uuid)
            if check(instance):
                return instance
            stop.wait(0.05)
        self.fail('timed out waiting for %s: %s' % (what, instance))

    def _repair_log(self):
        return [line for line in self.logger.output.splitlines()
                if 'start-up repair' in line]

    # Domain names ----------------------------------------------------------

    def test_two_servers_of_one_name_on_one_host(self):
        self.start_services()
        flavors = self.gpu_flavors()

        twins = [self.boot(flavors[2], 'twin') for _ in range(2)]

        taken = {self.assert_server_holds(twin, PAIRS) for twin in twins}
        self.assertEqual(2, len(taken))
        host = self.computes['cmp1'].driver.host
        for twin in twins:
            domain = host.lookup_domain(twin['id'])
            self.assertEqual('instance-' + twin['id'], domain.name())
            self.assertIn('<title>twin</title>', domain.XMLDesc())

    # Replayed build messages -----------------------------------------------

    def test_replayed_build_message_leaves_the_server_alone(self):
        self.start_services()
        flavors = self.gpu_flavors()
        active = self.boot(flavors[2], 'active')
        gpus = self.assert_server_holds(active, PAIRS)
        deleting = self.boot(flavors[2], 'deleting')
        deleting_gpus = self.assert_server_holds(deleting, PAIRS)
        # A delete that has started but not reached the compute yet.
        db.instance_update(self.ctx, deleting['id'],
                           {'task_state': 'deleting'})

        for server in (active, deleting):
            compute_rpcapi.ComputeAPI().build_and_run_instance(
                self.ctx, 'cmp1', server['id'], {})

        self.assertEqual(gpus, self.assert_server_holds(active, PAIRS))
        self.assertEqual(deleting_gpus, self.gpus_of(deleting))
        self.assertEqual(deleting_gpus, self.domain_gpus(deleting))
        self.assertEqual('ACTIVE', self.api(
            'GET', '/servers/%s' % active['id'])['server']['status'])
        self.assertEqual(2, sum('Ignoring the build request' in line
                                for line in
                                self.logger.output.splitlines()))

    # A compute killed mid-build ---------------------------------------------

    def test_compute_killed_mid_spawn_then_restarted(self):
        # The conductor gives up on a compute that stopped answering
        # after 1 s (RabbitMQ's call monitor does this for a dead one).
        self.useFixture(fixtures.MockPatchObject(
            compute_rpcapi, 'BUILD_TIMEOUT', 1))
        self.start_services()
        flavors = self.gpu_flavors()
        survivor = self.boot(flavors[2], 'survivor')
        survivor_gpus = self.assert_server_holds(survivor, PAIRS)
        compute = self.computes['cmp1']
        real_spawn = compute.driver.spawn
        frozen = threading.Event()
        self.addCleanup(frozen.set)

        def spawn_then_freeze(*args, **kwargs):
            real_spawn(*args, **kwargs)
            # The process is gone from here on: it never answers.
            frozen.wait(WAIT)
            raise RuntimeError('nova-compute was killed')

        self.useFixture(fixtures.MockPatchObject(
            compute.driver, 'spawn', side_effect=spawn_then_freeze))

        victim = self.api('POST', '/servers', {'server': {
            'name': 'victim', 'flavorRef': flavors[4],
            'imageRef': 'none'}})['server']
        failed = self.wait_for(victim['id'], 'ERROR')
        self.assertIn('MessagingTimeout', failed['fault']['details'])
        # Left behind: the guest and the device claims of the dead build.
        self.assertEqual(4, len(self.gpus_of(failed)))
        self.assertIsNotNone(compute.driver.host.lookup_domain(victim['id']))

        restarted = self.start_compute('cmp1', driver=compute.driver)

        self.assert_nothing_held(victim['id'])
        self.assertEqual([], [d for d in restarted.rt.pci_tracker.pci_devs
                              if d.instance_uuid == victim['id']])
        self.assertEqual('ERROR', self.api(
            'GET', '/servers/%s' % victim['id'])['server']['status'])
        self.assertEqual(survivor_gpus, self.domain_gpus(survivor))
        self.assertEqual(survivor_gpus, self.placement_gpus(survivor))
        self.assertEqual(survivor_gpus, frozenset(
            GPUS.index(d.address) + 1
            for d in restarted.rt.pci_tracker.pci_devs
            if d.instance_uuid == survivor['id']))
        self.assertEqual(1, len(self._repair_log()), self._repair_log())
        self.assertIn('failed build of instance %s torn down' %
                      victim['id'], self._repair_log()[0])

    def test_restart_hands_half_built_instances_back(self):
        self.start_services()
        compute = self.computes['cmp1']
        flavors = self.gpu_flavors()
        survivor = self.boot(flavors[2], 'survivor')
        # What a compute killed mid-spawn leaves: devices claimed, a
        # running guest, the instance spawning on this host.
        half = db.instance_create(self.ctx, {
            'vm_state': 'building', 'task_state': 'spawning',
            'host': 'cmp1', 'node': 'cmp1', 'display_name': 'half'})
        available = {d.address for d in compute.rt.pci_tracker.pci_devs
                     if d.status == 'available'}
        free = [GPUS[gpu - 1] for pair in fakehost.H200_NVLINK_PAIRS
                .values() for gpu in pair
                if {GPUS[g - 1] for g in pair} <= available]
        compute.rt.pci_tracker.claim(half.uuid, 'r1', free[:2])
        compute.driver.spawn(virt_driver.GuestSpec(
            half.uuid, 'half', 1, 512, []))
        # A guest and devices of an instance that was deleted, and a
        # guest of one that lives on another host.
        gone = db.instance_create(self.ctx, {'host': 'cmp1'})
        db.instance_destroy(self.ctx, gone.uuid)
        compute.rt.pci_tracker.claim(gone.uuid, 'r2', free[2:3])
        compute.driver.spawn(virt_driver.GuestSpec(
            gone.uuid, 'gone', 1, 512, []))
        elsewhere = db.instance_create(self.ctx, {'host': 'cmp2',
                                                  'vm_state': 'active'})
        compute.driver.spawn(virt_driver.GuestSpec(
            elsewhere.uuid, 'moved', 1, 512, []))
        # A build assigned here whose request is still queued.
        queued = db.instance_create(self.ctx, {
            'vm_state': 'building', 'task_state': 'scheduling',
            'host': 'cmp1', 'node': 'cmp1'})
        # A domain nova did not create is not nova's to remove.
        compute.driver.host.get_connection().defineXML(
            "<domain type='test'><name>operator-vm</name>"
            "<memory unit='MiB'>64</memory><vcpu>1</vcpu>"
            "<os><type>hvm</type></os></domain>")

        restarted = self.start_compute('cmp1', driver=compute.driver)

        instance = db.instance_get_by_uuid(self.ctx, half.uuid)
        self.assertEqual(('building', 'scheduling', None), (
            instance.vm_state, instance.task_state, instance.host))
        self.assertEqual(('scheduling', 'cmp1'), tuple(
            getattr(db.instance_get_by_uuid(self.ctx, queued.uuid), key)
            for key in ('task_state', 'host')))
        held = {d.instance_uuid for d in restarted.rt.pci_tracker.pci_devs
                if d.instance_uuid}
        self.assertEqual({survivor['id']}, held)
        self.assertEqual([survivor['id']],
                         restarted.driver.list_instance_uuids())
        self.assertIsNotNone(restarted.driver.host.get_connection()
                             .lookupByName('operator-vm'))
        self.assert_server_holds(survivor, PAIRS)
        log = '\n'.join(self._repair_log())
        self.assertEqual(4, len(self._repair_log()), log)
        self.assertIn('half-built instance %s torn down and handed back' %
                      half.uuid, log)
        self.assertIn('guest of instance %s destroyed' % gone.uuid, log)
        self.assertIn('guest of instance %s destroyed' % elsewhere.uuid,
                      log)
        self.assertIn('PCI devices %s freed: instance %s' % (
            free[2], gone.uuid), log)

    # A conductor or nova-api killed mid-burst -------------------------------

    def _orphan(self, flavor_id, name, owner=None):
        """A server recorded two minutes ago whose build request was
        lost (nova-api died before the cast), or, with ``owner``, whose
        conductor died while it drove the build."""
        api = compute_api.API(self.conf)
        self.useFixture(fixtures.MockPatchObject(
            api.conductor_api, 'build_instance'))
        user = nova_context.RequestContext(user_id='user',
                                           project_id='project')
        timeutils.set_time_override(_ago(120))
        try:
            [instance] = api.create(user, name, flavor_id, 'none', {})
            if owner:
                db.instance_update(self.ctx, instance.uuid, {
                    'build_owner': owner,
                    'build_heartbeat': timeutils.utcnow()})
        finally:
            timeutils.clear_time_override()
        return instance.uuid

    def _redrive(self, conductor, expected):
        threads = conductor.redrive_orphaned_builds()
        for thread in threads:
            thread.join(WAIT)
        self.assertEqual(expected, len(threads))

    def test_restarted_conductor_drives_orphaned_builds(self):
        self.start_services()
        flavors = self.gpu_flavors()
        conductor = conductor_manager.ConductorManager(self.conf)
        # One at a time: concurrent claims on the SQLite Placement of
        # these tests are the load work's business, not this test's.
        lost = self._orphan(flavors[2], 'lost')
        self._redrive(conductor, 1)
        lost_gpus = self.gpus_of(self.wait_for(lost, 'ACTIVE'))
        dead = self._orphan(flavors[2], 'dead', owner='conductor-0:dead')
        # The dead conductor's scheduler had claimed the free quad for it.
        quad = GPUS[4:] if max(lost_gpus) <= 4 else GPUS[:4]
        quad = {rp['uuid']: {'resources': {'PGPU': 1}}
                for name, rp in self.provider_view('cmp1').items()
                if name in ['cmp1_' + a.upper() for a in quad]}
        resp = self.placement.api.put('/allocations/%s' % dead, json={
            'allocations': quad, 'project_id': 'p', 'user_id': 'u',
            'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        self.assertEqual(204, resp.status_code, resp.text)
        self._redrive(conductor, 1)

        taken = set()
        for uuid in (lost, dead):
            server = self.wait_for(uuid, 'ACTIVE')
            taken.add(self.assert_server_holds(server, PAIRS))
            self.assertEqual(conductor.owner, db.instance_get_by_uuid(
                self.ctx, uuid).build_owner)
        self.assertEqual(2, len(taken))
        self.assertEqual(1, sum('had no live conductor' in line for line in
                                self.logger.output.splitlines()
                                if dead in line))
