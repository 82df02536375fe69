"""nova-manage pci list, pci board and placement audit against real
services."""

import datetime
import io
from unittest import mock

from oslo_utils import timeutils

from nova.cmd import manage
from nova import context as nova_context
from nova.db import api as db
from nova.tests.functional.lib import base
from nova.virt.fake import host as fakehost


def _capture(command, host):
    """Exit code, stdout and stderr of ``command(host)``."""
    out = io.StringIO()
    err = io.StringIO()
    with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err):
        code = command(host)
    return code, out.getvalue(), err.getvalue()


class TestPciList(base.FunctionalTestCase):

    def _run(self, host=None):
        return _capture(manage.pci_list, host)

    def test_lists_devices_with_group_path_and_instance(self):
        self.enable_h200_groups()
        compute = self.start_compute('cmp1')
        self.start_compute('cmp2')
        compute.rt.pci_tracker.claim('vm-1', 'req-1', [
            base.GPUS[n - 1] for n in base.pair_of(1)])
        code, out, _ = self._run('cmp1')
        self.assertEqual(0, code)
        rows = [line for line in out.splitlines() if 'cmp1' in line]
        self.assertEqual(8, len(rows))
        first = [c.strip() for c in rows[0].strip('|').split('|')]
        [pair_name] = [name for name, gpus in
                       fakehost.H200_NVLINK_PAIRS.items() if 1 in gpus]
        self.assertEqual(['cmp1', base.GPUS[0], '10de', '2335',
                          'board/quad-a/' + pair_name, 'allocated', 'vm-1',
                          'healthy', '-'],
                         first)
        self.assertNotIn('cmp2', out)
        code, out, _ = self._run()
        self.assertEqual(16, len([line for line in out.splitlines()
                                  if '10de' in line]))

    def test_unknown_host(self):
        self.enable_h200_groups()
        self.start_compute('cmp1')
        code, _, err = self._run('nope')
        self.assertEqual(1, code)
        self.assertIn("'nope'", err)
        self.assertIn('cmp1', err)


class TestPciBoard(base.FunctionalTestCase):

    def _run(self, host=None):
        return _capture(manage.pci_board, host)

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        cmp1 = self.start_compute('cmp1')
        self.start_compute('cmp2')
        # GPU 1 alone, and the other pair of its quad: quad-a is broken,
        # quad-b whole.
        self.holders = {base.GPUS[0]: 'vm-1'}
        self.holders.update({base.GPUS[n - 1]: 'vm-2' for n in
                             base.pair_of(base.not_a_pair(1)[1])})
        for vm in ('vm-1', 'vm-2'):
            cmp1.rt.pci_tracker.claim(vm, 'req-' + vm, [
                a for a, holder in self.holders.items() if holder == vm])

    def test_board_and_fleet_summary(self):
        code, out, _ = self._run()
        self.assertEqual(0, code)
        self.assertIn('cmp1: 8 devices, 5 free', out)
        self.assertIn('cmp2: 8 devices, 8 free', out)
        lines = out.splitlines()
        cmp1 = lines.index('cmp1: 8 devices, 5 free')
        self.assertEqual(['  board', '    quad-a'], lines[cmp1 + 1:cmp1 + 3])
        # Pairs are drawn in address order.
        for offset, name in enumerate(sorted(
                ('pair-a1', 'pair-a2'),
                key=fakehost.H200_NVLINK_PAIRS.get)):
            first, second = (base.GPUS[n - 1] for n in
                             fakehost.H200_NVLINK_PAIRS[name])
            self.assertEqual('      %s [%s %-8s | %s %-8s]' % (
                name, first, self.holders.get(first, 'free'), second,
                self.holders.get(second, 'free')), lines[cmp1 + 3 + offset])
        summary = lines[lines.index('  size  free  hosts') + 1:]
        self.assertEqual(['  1     13    cmp1 5, cmp2 8',
                          '  2     6     cmp1 2, cmp2 4',
                          '  4     3     cmp1 1, cmp2 2',
                          '  8     1     cmp2 1'], summary)

    def test_device_set_command_line(self):
        parser = manage._parser()
        args = parser.parse_args(['pci', 'device', 'set', '0000:18:00.0',
                                  '--unhealthy', '--reason', 'RMA'])
        self.assertEqual(('device', 'set', '0000:18:00.0', True, 'RMA'),
                         (args.action, args.device_action, args.address,
                          args.unhealthy, args.reason))
        err = io.StringIO()
        with mock.patch('sys.stderr', err):
            # --healthy and --unhealthy exclude each other; one is needed.
            for argv in (['--healthy', '--unhealthy'], []):
                self.assertRaises(SystemExit, parser.parse_args,
                                  ['pci', 'device', 'set', 'x'] + argv)
        self.assertIn('--healthy', err.getvalue())

    def test_command_line(self):
        args = manage._parser().parse_args(['pci', 'board', '--host', 'h'])
        self.assertEqual(('pci', 'board', 'h'),
                         (args.category, args.action, args.host))

    def test_one_host(self):
        code, out, _ = self._run('cmp2')
        self.assertEqual(0, code)
        self.assertNotIn('cmp1', out)
        self.assertIn('  8     1     cmp2 1', out)
        code, _, err = self._run('nope')
        self.assertEqual(1, code)
        self.assertIn("No compute host 'nope'; known hosts: cmp1, cmp2",
                      err)


class TestPlacementAudit(base.FunctionalTestCase):
    """nova-manage placement audit on real computes, Placement and DB."""

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.ctx = nova_context.get_admin_context()
        self.compute = self.start_compute('cmp1')
        self.root = self.compute.rt.compute_node.uuid
        self.gpu_rps = {d.address: d.rp_uuid
                        for d in self.compute.rt.pci_tracker.pci_devs}

    def _run(self, *args):
        out = io.StringIO()
        with mock.patch('sys.stdout', out), \
                mock.patch('sys.stderr', out):
            code = manage.placement_audit(
                self.conf, verbose='--verbose' in args,
                delete='--delete' in args,
                resource_provider=(args[args.index('--resource_provider')
                                        + 1]
                                   if '--resource_provider' in args
                                   else None),
                reportclient=self.reportclient)
        return code, out.getvalue()

    def _instance(self, vm_state, gpu, deleted=False):
        """An instance holding GPU number ``gpu`` in Placement and in the
        PCI tracker, as a build on cmp1 leaves it."""
        instance = db.instance_create(self.ctx, {
            'display_name': vm_state, 'vm_state': vm_state, 'host': 'cmp1',
            'node': 'cmp1', 'project_id': 'p', 'user_id': 'u'})
        address = base.GPUS[gpu - 1]
        resp = self.placement.api.put(
            '/allocations/%s' % instance.uuid, json={
                'allocations': {
                    self.root: {'resources': {'VCPU': 1}},
                    self.gpu_rps[address]: {'resources': {'PGPU': 1}}},
                'project_id': 'p', 'user_id': 'u',
                'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        self.assertEqual(204, resp.status_code, resp.text)
        self.compute.rt.pci_tracker.claim(instance.uuid, 'r1', [address])
        if deleted:
            db.instance_destroy(self.ctx, instance.uuid)
        return instance.uuid

    def _holder(self, address):
        return {d['address']: d['instance_uuid'] for d in
                db.pci_device_get_all_by_node(
                    self.ctx, self.compute.rt.compute_node.id)}[address]

    def test_nothing_to_find(self):
        self._instance('active', 1)
        self._instance('building', 2)
        code, out = self._run('--verbose')
        self.assertEqual(0, code, out)
        self.assertIn('Auditing compute node cmp1 (resource provider %s)'
                      % self.root, out)
        self.assertIn('No orphaned allocations or PCI device claims found',
                      out)

    def test_reports_then_deletes_on_a_down_compute(self):
        building = self._instance('building', 1)
        deleted = self._instance('active', 2, deleted=True)
        failed = self._instance('error', 3)

        code, out = self._run('--verbose')

        self.assertEqual(3, code, out)
        self.assertIn('Allocation of consumer %s is orphaned: instance was '
                      'deleted' % deleted, out)
        self.assertIn('Allocation of consumer %s is orphaned: instance is '
                      'in ERROR' % failed, out)
        self.assertIn('PGPU=1 on %s' % self.gpu_rps[base.GPUS[1]], out)
        self.assertIn('PCI device %s on cmp1 is claimed by %s' % (
            base.GPUS[1], deleted), out)
        self.assertNotIn(building, out)
        self.assertIn('run with --delete', out)
        # Only reported.
        self.assertEqual(deleted, self._holder(base.GPUS[1]))

        # The compute dies: the devices can be freed here.
        self._compute_services['cmp1'].stop()
        service = db.service_get_by_host_and_binary(self.ctx, 'cmp1',
                                                    'nova-compute')
        db.service_update(self.ctx, service.id, {
            'last_seen_up': timeutils.utcnow() - datetime.timedelta(
                seconds=3600)})
        code, out = self._run('--delete')

        self.assertEqual(4, code, out)
        self.assertIn('Deleted the allocation of consumer %s' % deleted, out)
        self.assertIn('Freed PCI device %s on cmp1 (compute down: cmp1 is '
                      'down (last seen 36' %
                      base.GPUS[1], out)
        for consumer in (deleted, failed):
            self.assertEqual({}, self.placement_get(
                '/allocations/%s' % consumer)['allocations'])
        self.assertIsNone(self._holder(base.GPUS[1]))
        self.assertIsNone(self._holder(base.GPUS[2]))
        self.assertEqual(building, self._holder(base.GPUS[0]))
        self.assertNotEqual({}, self.placement_get(
            '/allocations/%s' % building)['allocations'])
        self.assertEqual(0, self._run()[0])

    def test_devices_on_a_running_compute_are_left_to_it(self):
        deleted = self._instance('active', 2, deleted=True)

        code, out = self._run('--delete')

        self.assertEqual(3, code, out)
        self.assertIn('Deleted the allocation of consumer %s' % deleted, out)
        self.assertIn('Left PCI device %s on cmp1 to its nova-compute' %
                      base.GPUS[1], out)
        self.assertEqual(deleted, self._holder(base.GPUS[1]))
        # The compute's own audit releases it.
        self.compute.audit_allocations()
        self.assertIsNone(self._holder(base.GPUS[1]))
        self.assertEqual(0, self._run()[0])

    def test_one_resource_provider(self):
        other = self.start_compute('cmp2').rt.compute_node.uuid
        self._instance('active', 1, deleted=True)
        code, out = self._run('--resource_provider', other)
        self.assertEqual(0, code, out)
        code, out = self._run('--resource_provider', self.root)
        self.assertEqual(3, code, out)

    def test_unknown_resource_provider(self):
        code, out = self._run('--resource_provider', 'nope')
        self.assertEqual(127, code)
        self.assertIn('No compute node has resource provider nope', out)

    def test_placement_down_is_an_error(self):
        self.placement.stop_server()
        with mock.patch('sys.argv', ['nova-manage', 'placement', 'audit']):
            out = io.StringIO()
            with mock.patch('sys.stdout', out), \
                    mock.patch('sys.stderr', out), \
                    mock.patch.object(manage.cmd, 'parse_args',
                                      return_value=self.conf), \
                    mock.patch.object(manage, '_open_database',
                                      return_value=True):
                code = manage.main()
        self.assertEqual(1, code)
        self.assertIn('Unable to reach the Placement service', out.getvalue())
