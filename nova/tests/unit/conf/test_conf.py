"""Tests that every option group registers and lists cleanly."""

from oslo_config import cfg

from nova import test
import nova.conf
from nova.conf import opts
from nova.conf import placement as placement_conf


class TestOptionRegistration(test.TestCase):

    def _fresh_conf(self) -> cfg.ConfigOpts:
        conf = cfg.ConfigOpts()
        nova.conf.register_all(conf)
        conf([], project='nova')
        return conf

    def test_pci_defaults(self):
        conf = self._fresh_conf()
        self.assertEqual([], conf.pci.device_spec)
        self.assertEqual([], conf.pci.device_group)
        self.assertEqual([], conf.pci.alias)
        self.assertFalse(conf.pci.report_in_placement)
        self.assertFalse(conf.filter_scheduler.pci_in_placement)

    def test_database_defaults_to_sqlite_under_state_path(self):
        conf = self._fresh_conf()
        conf.set_override('state_path', '/srv/nova')
        self.assertEqual('sqlite:////srv/nova/nova.sqlite',
                         conf.database.connection)

    def test_placement_has_keystoneauth_options(self):
        conf = self._fresh_conf()
        self.assertEqual('placement', conf.placement.service_type)
        self.assertIn('endpoint_override', conf.placement)
        self.assertIn('auth_type', conf.placement)

    def test_noauth_placement_is_reached_with_the_admin_token(self):
        # nova-all, nova-manage and the tools point [placement] at a
        # noauth2 Placement this way.
        conf = self._fresh_conf()
        placement_conf.use_noauth_placement(conf, 'http://127.0.0.1:8778')
        self.assertEqual('admin_token', conf.placement.auth_type)
        self.assertEqual('http://127.0.0.1:8778', conf.placement.endpoint)
        self.assertEqual(placement_conf.NOAUTH_TOKEN, conf.placement.token)

    def test_deprecated_whitelist_name_is_accepted(self):
        conf = cfg.ConfigOpts()
        nova.conf.register_all(conf)
        conf(['--config-file', self._write_config(
            '[pci]\npassthrough_whitelist = {"vendor_id": "10de"}\n')],
            project='nova')
        self.assertEqual(['{"vendor_id": "10de"}'], conf.pci.device_spec)

    def _write_config(self, text: str) -> str:
        import fixtures
        tmp = self.useFixture(fixtures.TempDir()).path
        path = tmp + '/nova.conf'
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_list_opts_covers_every_group_once(self):
        names = [group.name if isinstance(group, cfg.OptGroup) else group
                 for group, _ in opts.list_opts()]
        self.assertEqual(len(names), len(set(names)))
        for expected in ('DEFAULT', 'pci', 'placement', 'database',
                         'filter_scheduler', 'scheduler', 'libvirt'):
            self.assertIn(expected, names)

    def test_overrides_do_not_leak_between_config_objects(self):
        first = self._fresh_conf()
        first.set_override('report_in_placement', True, group='pci')
        first.set_override('endpoint_override', 'http://x', group='placement')
        second = self._fresh_conf()
        self.assertFalse(second.pci.report_in_placement)
        self.assertIsNone(second.placement.endpoint_override)
