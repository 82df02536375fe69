"""Evacuation of GPU servers from a compute that is down.

A compute "goes down" by stopping its service and dating its heartbeat
back past ``[DEFAULT]service_down_time``; it comes back on the same
libvirt host, where the evacuated server's guest, device claims and
source allocation still are until its start-up cleanup.
"""

from nova.tests.functional import test_nvlink_partitions
from nova.tests.functional import test_resize

PAIRS = test_resize.PAIRS
QUADS = test_resize.QUADS


class TestEvacuate(test_resize.MoveTestBase):

    def test_evacuate_then_the_old_compute_cleans_up(self):
        self.start()
        server = self.boot(self.flavors[4], 'refugee')
        source = server['OS-EXT-SRV-ATTR:host']
        quad = self.gpus_of(server)
        target = ({'cmp1', 'cmp2'} - {source}).pop()

        # Refused while the source compute is up.
        resp = self.evacuate(server['id'], expect=(400,))
        self.assertIn('still up', resp.text)
        self.assertEqual([], self.migrations(server['id']))

        self.stop_compute(source)
        self.evacuate(server['id'])
        moved = self.wait_settled(server['id'], 'ACTIVE')
        self.assertEqual(target, moved['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(moved, QUADS)
        migration = self.migrations(server['id'])[0]
        self.assertEqual(('evacuation', 'done'), (
            migration.migration_type, migration.status))
        # The dead source still holds the old quad: its rows, the guest
        # in its hypervisor, the allocation (by the migration).
        self.assertEqual(quad, self.gpus_on(source, server['id']))
        self.assertEqual(quad, self.allocated_gpus(migration.uuid,
                                                   source))
        self.assertIn(server['id'],
                      self.computes[source].driver.list_instance_uuids())
        violations = test_resize.invariants.check(
            self.allinone.api_url, 'admin', self.placement.api, self.ctx,
            settled=True)
        self.assertEqual([], violations)

        with self.assertLogs('nova.compute.repair', 'WARNING') as logs:
            self.restart_compute(source)
        self.assertIn('was evacuated to %s' % target, '\n'.join(logs.output))
        self.assertEqual(frozenset(), self.gpus_on(source, server['id']))
        self.assertEqual({}, self.placement_get(
            '/allocations/%s' % migration.uuid)['allocations'])
        self.assertNotIn(server['id'],
                         self.computes[source].driver.list_instance_uuids())
        self.assertEqual('completed',
                         self.migrations(server['id'])[0].status)
        self.assert_server_holds(
            self.api('GET', '/servers/%s' % server['id'])['server'], QUADS)
        self.assert_consistent()
        # The freed quad serves a new server.
        self.assert_server_holds(self.boot(self.flavors[4], 'next'), QUADS)
        self.assert_consistent()

    def test_evacuate_bodies_by_microversion_and_target_host(self):
        self.start()
        server = self.boot(self.flavors[2], 'named')
        source = server['OS-EXT-SRV-ATTR:host']
        target = ({'cmp1', 'cmp2'} - {source}).pop()
        self.stop_compute(source)
        # Before 2.14 onSharedStorage is required; from 2.14 it is gone.
        resp = self.evacuate(server['id'], version='2.1', expect=(400,))
        self.assertIn('onSharedStorage', resp.text)
        resp = self.evacuate(server['id'], {'onSharedStorage': False},
                             expect=(400,))
        self.assertIn('onSharedStorage', resp.text)
        resp = self.evacuate(server['id'], {'host': source}, expect=(400,))
        self.assertIn('evacuated from', resp.text)
        answer = self.evacuate(server['id'], {
            'onSharedStorage': False, 'host': target}, version='2.1')
        self.assertIn('adminPass', answer.json())
        moved = self.wait_settled(server['id'], 'ACTIVE')
        self.assertEqual(target, moved['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(moved, PAIRS)

    def test_no_valid_host_leaves_the_server_on_its_dead_host(self):
        self.start()
        server = self.boot(self.flavors[8], 'whole-board')
        source = server['OS-EXT-SRV-ATTR:host']
        other = ({'cmp1', 'cmp2'} - {source}).pop()
        self.boot(self.flavors[1], 'breaks-the-other-board')
        self.stop_compute(source)
        self.evacuate(server['id'])
        stays = self.wait_settled(server['id'], 'ACTIVE')
        self.assertEqual(source, stays['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('failed', self.migrations(server['id'])[0].status)
        self.assertEqual(frozenset(), self.gpus_on(other, server['id']))
        self.assertEqual(frozenset(range(1, 9)), self.placement_gpus(stays))
        violations = test_resize.invariants.check(
            self.allinone.api_url, 'admin', self.placement.api, self.ctx,
            settled=True)
        self.assertEqual([], violations)


class TestMovesWithFabricManager(test_nvlink_partitions.NVLinkTestBase,
                                 test_resize.MoveTestBase):
    """With [libvirt]nvlink_partitions = fabric_manager, each host's
    active NVLink partitions follow the server through its moves."""

    def test_resize_then_evacuate_move_the_partition(self):
        self.start()
        server = self.boot(self.flavors[2], 'linked')
        first = server['OS-EXT-SRV-ATTR:host']
        self.assert_active(first, [server])

        resized = self.resize(server['id'], self.flavors[4])
        second = resized['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(first, second)
        # The source guest is stopped, so its pair is no longer live; the
        # quad on the destination is.
        self.assertEqual(set(), self.fms[first].active())
        self.assert_active(second, [resized])
        reverted = self.revert(server['id'])
        self.assert_active(first, [reverted])
        self.assertEqual(set(), self.fms[second].active())
        moved = self.confirm(self.resize(server['id'],
                                         self.flavors[4])['id'])
        self.assert_active(second, [moved])
        self.assertEqual(set(), self.fms[first].active())

        # The quad's host dies; the partition stays live there until its
        # compute comes back and cleans up the evacuated server.
        self.stop_compute(second)
        self.evacuate(server['id'])
        evacuated = self.wait_settled(server['id'], 'ACTIVE')
        self.assertEqual(first, evacuated['OS-EXT-SRV-ATTR:host'])
        self.assert_active(first, [evacuated])
        self.assertEqual(1, len(self.fms[second].active()))
        self.restart_compute(second)
        self.assertEqual(set(), self.fms[second].active())
        self.assertEqual({}, self.computes[second].driver.nvlink.holders())
        self.assert_active(first, [evacuated])
        self.assert_consistent()


class TestMovesOfStoppedServers(test_resize.MoveTestBase):
    """SHUTOFF servers move as upstream lets them: they stay powered off
    on the destination, confirm and revert leave them SHUTOFF, and an
    evacuation from microversion 2.95 leaves any server stopped."""

    def stop(self, server_id):
        self.action(server_id, {'os-stop': None})
        return self.wait_settled(server_id, 'SHUTOFF')

    def assert_sound(self):
        """The invariants (the dead source still has its guest)."""
        violations = test_resize.invariants.check(
            self.allinone.api_url, 'admin', self.placement.api, self.ctx,
            settled=True)
        self.assertEqual([], violations)

    def power_state(self, host, server_id):
        return self.computes[host].driver.get_power_state(server_id)

    def test_resize_of_a_stopped_server_then_confirm(self):
        self.start()
        server = self.boot(self.flavors[2], 'off')
        self.stop(server['id'])
        resized = self.resize(server['id'], self.flavors[4])
        dest = resized['OS-EXT-SRV-ATTR:host']
        self.assertEqual(4, resized['OS-EXT-STS:power_state'])
        self.assertEqual(4, self.power_state(dest, server['id']))
        self.assert_server_holds(resized, QUADS)
        self.assert_consistent()
        self.action(server['id'], {'confirmResize': None})
        confirmed = self.wait_settled(server['id'], 'SHUTOFF')
        self.assertEqual(dest, confirmed['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(confirmed, QUADS)
        self.assert_consistent()
        self.action(server['id'], {'os-start': None})
        self.assert_server_holds(
            self.wait_settled(server['id'], 'ACTIVE'), QUADS)

    def test_migrate_of_a_stopped_server_then_revert(self):
        self.start()
        server = self.boot(self.flavors[2], 'off')
        source = server['OS-EXT-SRV-ATTR:host']
        pair = self.gpus_of(server)
        self.stop(server['id'])
        self.action(server['id'], {'migrate': None})
        migrated = self.wait_settled(server['id'], 'VERIFY_RESIZE')
        self.assertNotEqual(source, migrated['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(4, migrated['OS-EXT-STS:power_state'])
        self.action(server['id'], {'revertResize': None})
        reverted = self.wait_settled(server['id'], 'SHUTOFF')
        self.assertEqual(source, reverted['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(pair, self.assert_server_holds(reverted, PAIRS))
        self.assertEqual(4, self.power_state(source, server['id']))
        self.assert_consistent()

    def test_stopped_server_on_a_dead_host_is_evacuated(self):
        self.start()
        server = self.boot(self.flavors[4], 'rescued')
        source = server['OS-EXT-SRV-ATTR:host']
        self.stop(server['id'])
        self.stop_compute(source)
        self.evacuate(server['id'])
        moved = self.wait_settled(server['id'], 'SHUTOFF')
        self.assertNotEqual(source, moved['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(moved, QUADS)
        self.assertEqual(4, self.power_state(
            moved['OS-EXT-SRV-ATTR:host'], server['id']))
        self.assert_sound()

    def test_evacuated_server_is_stopped_from_2_95(self):
        self.start()
        server = self.boot(self.flavors[2], 'running')
        source = server['OS-EXT-SRV-ATTR:host']
        self.stop_compute(source)
        self.evacuate(server['id'], version='2.95')
        moved = self.wait_settled(server['id'], 'SHUTOFF')
        target = moved['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, target)
        self.assertEqual(4, self.power_state(target, server['id']))
        self.assert_server_holds(moved, PAIRS)
        self.assert_sound()
        self.action(server['id'], {'os-start': None})
        self.assert_server_holds(
            self.wait_settled(server['id'], 'ACTIVE'), PAIRS)
