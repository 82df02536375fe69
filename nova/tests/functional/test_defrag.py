"""nova-manage pci defrag plan and apply on real services: API,
conductor, scheduler and two HGX H200 computes on libvirt's test driver,
real Placement and database."""

import io
from unittest import mock

from keystoneauth1 import loading as ks_loading

from nova.cmd import defrag as defrag_cmd
from nova.cmd import manage
from nova.db import api as db
from nova.tests.fixtures import libvirt_faults
from nova.tests.functional import test_resize

ALLOW = {'pci_defrag': 'allow'}
SINGLES = {frozenset([gpu]) for gpu in range(1, 9)}


class DefragTestBase(test_resize.MoveTestBase):

    def setUp(self):
        super().setUp()
        self.start()

    def boot_on(self, host, flavor, name, metadata=None):
        """Boot a server on ``host`` (the other compute disabled)."""
        others = [h for h in self.hosts if h != host]
        self._disable(others, True)
        try:
            server = self.api('POST', '/servers', {'server': {
                'name': name, 'flavorRef': flavor, 'imageRef': 'none',
                'metadata': metadata or {}}})['server']
            server = self.wait_for(server['id'], 'ACTIVE')
        finally:
            self._disable(others, False)
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        return server

    def _disable(self, hosts, disabled):
        for host in hosts:
            service = db.service_get_by_host_and_binary(
                self.ctx, host, 'nova-compute')
            db.service_update(self.ctx, service.id,
                              {'disabled': disabled})

    def manage(self, *argv):
        """nova-manage in this process; apply reaches the API over REST
        as [nova] says (as an operator's command does)."""
        if 'endpoint' not in self.conf.nova:
            self.conf.register_opts(
                ks_loading.get_auth_plugin_conf_options('admin_token'),
                group='nova')
        self.flags('nova', auth_type='admin_token', token='admin',
                   endpoint=self.allinone.api_url)
        out, err = io.StringIO(), io.StringIO()
        # This process's database is the test's (test_nova_manage_commands
        # runs nova-manage on a service's own).
        with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err), \
                mock.patch('nova.cmd.parse_args', return_value=self.conf), \
                mock.patch.object(manage, '_open_database',
                                  return_value=True):
            code = manage.main(['pci', 'defrag'] + list(argv))
        return code, out.getvalue(), err.getvalue()

    def server(self, server_id):
        return self.api('GET', '/servers/%s' % server_id)['server']


class TestDefrag(DefragTestBase):

    def test_plan_and_apply_free_a_board(self):
        one = self.boot_on('cmp1', self.flavors[1], 'one', ALLOW)
        pair = self.boot_on('cmp2', self.flavors[2], 'pair', ALLOW)

        code, out, err = self.manage('plan', '--size', '8')
        self.assertEqual(0, code, err)
        lines = out.splitlines()
        self.assertEqual(2, len(lines), out)
        self.assertTrue(lines[0].startswith('1. one (1 device): cmp1 '),
                        out)
        self.assertIn('-> cmp2 ', lines[0])
        self.assertEqual('frees cmp1 board (8 devices) with 1 move(s), 1 '
                         'device(s) moved', lines[1])

        code, out, err = self.manage('apply', '--size', '8',
                                     '--timeout', '60')
        self.assertEqual(0, code, err)
        self.assertIn('cmp1 board is wholly free (8 device(s)) after 1 '
                      'move(s)', out)
        moved = self.server(one['id'])
        self.assertEqual(('ACTIVE', 'cmp2'), (
            moved['status'], moved['OS-EXT-SRV-ATTR:host']))
        # Beside the pair, breaking no free group of cmp2.
        self.assertNotIn(self.assert_server_holds(moved, SINGLES),
                         {frozenset([g]) for g in self.gpus_of(pair)})
        self.assertEqual(frozenset(), self.gpus_on('cmp1', one['id']))
        self.assertEqual(['confirmed'], [
            m.status for m in self.migrations(one['id'])])
        actions = [a['action'] for a in self.instance_actions(one['id'])]
        self.assertEqual(['confirmResize', 'migrate', 'create'], actions)
        # The board freed takes an 8-GPU server.
        big = self.boot(self.flavors[8], 'big')
        self.assertEqual('cmp1', big['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(big, {test_resize.BOARD})
        self.assert_consistent()

    def test_apply_makes_several_moves_one_at_a_time(self):
        first = self.boot_on('cmp1', self.flavors[1], 'first', ALLOW)
        second = self.boot_on('cmp1', self.flavors[1], 'second', ALLOW)
        self.boot_on('cmp2', self.flavors[2], 'pair')
        code, _out, err = self.manage('plan', '--size', '8',
                                      '--max-moves', '1')
        self.assertEqual(defrag_cmd.NO_PLAN, code)
        self.assertIn('at most 1 move(s)', err)
        code, out, err = self.manage('apply', '--size', '8',
                                     '--timeout', '60')
        self.assertEqual(0, code, err)
        self.assertEqual(2, out.count('Moving '), out)
        self.assertIn('cmp1 board is wholly free (8 device(s)) after 2 '
                      'move(s)', out)
        held = set()
        for server in (first, second):
            moved = self.server(server['id'])
            self.assertEqual('cmp2', moved['OS-EXT-SRV-ATTR:host'])
            held.add(self.assert_server_holds(moved, SINGLES))
        self.assertEqual(2, len(held))
        self.assert_consistent()

    def test_no_plan_without_the_operators_consent(self):
        one = self.boot_on('cmp1', self.flavors[1], 'one')
        self.boot_on('cmp2', self.flavors[2], 'pair')
        for argv in (['plan', '--size', '8'],
                     ['apply', '--size', '8']):
            code, out, err = self.manage(*argv)
            self.assertEqual(defrag_cmd.NO_PLAN, code, out)
            self.assertIn('No plan of at most 3 move(s) frees a group of 8 '
                          'devices', err)
            self.assertIn('pci_defrag=allow', err)
        # Allowed, but not within 0 moves; a free pair needs none.
        self.api('PUT', '/servers/%s/metadata/pci_defrag' % one['id'],
                 {'meta': ALLOW})
        code, _out, err = self.manage('plan', '--size', '8',
                                      '--max-moves', '0')
        self.assertEqual(defrag_cmd.NO_PLAN, code)
        code, out, _err = self.manage('plan', '--size', '2')
        self.assertEqual(0, code)
        self.assertIn('with 0 move(s)', out)
        code, out, _err = self.manage('plan', '--size', '8', '--host',
                                      'cmp2')
        self.assertEqual(defrag_cmd.NO_PLAN, code)
        self.assertEqual([], self.migrations(one['id']))
        self.assert_consistent()

    def test_apply_stops_at_a_failing_destination(self):
        one = self.boot_on('cmp1', self.flavors[1], 'one', ALLOW)
        self.boot_on('cmp2', self.flavors[2], 'pair')
        gpu = self.gpus_of(one)
        faults = self.useFixture(libvirt_faults.LibvirtFaultFixture(
            self.computes['cmp2'].driver.host,
            ['create', 'createWithFlags']))
        code, out, err = self.manage('apply', '--size', '8',
                                     '--timeout', '60')
        self.assertEqual(defrag_cmd.MOVE_FAILED, code, out + err)
        self.assertTrue(faults.triggered)
        self.assertIn('Stopped after 0 move(s)', err)
        stays = self.wait_settled(one['id'], 'ACTIVE')
        self.assertEqual(('cmp1', gpu), (stays['OS-EXT-SRV-ATTR:host'],
                                         self.assert_server_holds(
                                             stays, SINGLES)))
        self.assertEqual(frozenset(), self.gpus_on('cmp2', one['id']))
        self.assertEqual(['error'], [
            m.status for m in self.migrations(one['id'])])
        self.assert_consistent()


class TestAutomaticDefrag(DefragTestBase):
    """The conductor's automatic mode ([scheduler]defrag_max_moves)."""

    def test_refused_build_gets_a_board_after_a_move(self):
        self.flags('scheduler', defrag_max_moves=2)
        one = self.boot_on('cmp1', self.flavors[1], 'one', ALLOW)
        self.boot_on('cmp2', self.flavors[2], 'pair')
        big = self.boot(self.flavors[8], 'big')
        self.assertEqual('cmp1', big['OS-EXT-SRV-ATTR:host'])
        self.assert_server_holds(big, {test_resize.BOARD})
        moved = self.server(one['id'])
        self.assertEqual(('ACTIVE', 'cmp2'), (
            moved['status'], moved['OS-EXT-SRV-ATTR:host']))
        self.assert_server_holds(moved, SINGLES)
        self.assertEqual(['confirmResize', 'migrate', 'create'], [
            a['action'] for a in self.instance_actions(one['id'])])
        self.assert_consistent()

    def test_off_by_default_and_never_without_consent(self):
        one = self.boot_on('cmp1', self.flavors[1], 'one', ALLOW)
        self.boot_on('cmp2', self.flavors[2], 'pair')
        refused = self.boot(self.flavors[8], 'big', status='ERROR')
        self.assertIn('fragmentation', refused['fault']['message'])
        self.flags('scheduler', defrag_max_moves=2)
        self.api('DELETE', '/servers/%s/metadata/pci_defrag' % one['id'])
        refused = self.boot(self.flavors[8], 'big', status='ERROR')
        self.assertIn('fragmentation', refused['fault']['message'])
        self.assertEqual([], self.migrations(one['id']))
        self.assertEqual('cmp1',
                         self.server(one['id'])['OS-EXT-SRV-ATTR:host'])
        self.assert_consistent()
