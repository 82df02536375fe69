"""A compute's config file layered on the process-wide configuration."""

import os

import fixtures
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova import test
import nova.conf
from nova import exception
from nova.cmd import all as nova_all
from nova.conf import per_compute


class LayeredTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.shared = cfg.ConfigOpts()
        nova.conf.register_all(self.shared)
        self.shared([], default_config_files=[], default_config_dirs=[])
        self.shared.set_override('alias', ['{"name": "h200"}'], group='pci')
        self.shared.set_override('update_resources_interval', 5)

    def write(self, text, name='c.conf'):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_file_wins_and_the_rest_is_shared(self):
        conf = per_compute.layered(self.shared, self.write(
            '[DEFAULT]\nreserved_host_disk_mb = 2048\n'
            '[libvirt]\nconnection_uri = test:///n.xml\n'
            '[pci]\ndevice_spec = {"vendor_id": "10de"}\n'))
        self.assertEqual(2048, conf.reserved_host_disk_mb)
        self.assertEqual('test:///n.xml', conf.libvirt.connection_uri)
        self.assertEqual(['{"vendor_id": "10de"}'], conf.pci.device_spec)
        self.assertEqual(['{"name": "h200"}'], conf.pci.alias)
        self.assertEqual(5, conf.update_resources_interval)
        self.assertEqual(self.shared.state_path, conf.state_path)
        # The shared configuration is untouched.
        self.assertEqual('', self.shared.libvirt.connection_uri)
        self.assertEqual(0, self.shared.reserved_host_disk_mb)

    def test_process_wide_options_are_refused(self):
        path = self.write('[DEFAULT]\nhost = x\n'
                          '[database]\nconnection = sqlite://\n')
        exc = self.assertRaises(exception.InvalidConfiguration,
                                per_compute.layered, self.shared, path)
        self.assertIn(path, str(exc))
        self.assertIn('[DEFAULT]host, [database]connection', str(exc))
        self.assertIn('[pci] and [libvirt]', str(exc))

    def test_options_registered_later_come_from_the_shared_files(self):
        # keystoneauth registers the options of [glance]auth_type's plugin
        # only when a compute loads it; their values are in nova.conf.
        shared = cfg.ConfigOpts()
        nova.conf.register_all(shared)
        shared(['--config-file', self.write(
            '[glance]\nauth_type = password\nauth_url = http://ks/v3\n'
            'username = nova\n[pci]\nreport_in_placement = true\n'
            'alias = {"name": "a"}\n',
            'nova.conf')], default_config_files=[], default_config_dirs=[])
        conf = per_compute.layered(shared, self.write(
            '[pci]\nreport_in_placement = false\nalias = {"name": "b"}\n'))
        conf.register_opts(
            ks_loading.get_auth_plugin_conf_options('password'),
            group='glance')
        self.assertEqual('password', conf.glance.auth_type)
        self.assertEqual('http://ks/v3', conf.glance.auth_url)
        self.assertEqual('nova', conf.glance.username)
        # The compute's own file still wins over the shared one, for a
        # multi-valued option too (not merged with the shared entries).
        self.assertFalse(conf.pci.report_in_placement)
        self.assertEqual(['{"name": "b"}'], conf.pci.alias)

    def test_bad_value_names_the_file(self):
        path = self.write('[DEFAULT]\nreserved_host_disk_mb = -1\n')
        exc = self.assertRaises(exception.InvalidConfiguration,
                                per_compute.layered, self.shared, path)
        self.assertIn(path, str(exc))
        self.assertIn('reserved_host_disk_mb', str(exc))


class ComputeArgumentsTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.conf_file = os.path.join(self.tmp, 'a.conf')
        open(self.conf_file, 'w').close()

    def files(self, *argv):
        return nova_all._compute_files(nova_all._parser().parse_args(argv))

    def test_named_computes(self):
        self.assertEqual({'a': self.conf_file, 'b': self.conf_file},
                         self.files('--compute', 'a=' + self.conf_file,
                                    '--compute', 'b=' + self.conf_file))
        self.assertEqual({}, self.files('--computes', '3'))

    def test_bad_arguments(self):
        for argv, needle in (
                (('--compute', 'a'), "'a' is not allowed"),
                (('--compute', '=x'), 'NAME=CONFIG_FILE'),
                (('--compute', 'a=/nonexistent.conf'),
                 '/nonexistent.conf does not exist'),
                (('--compute', 'a=' + self.conf_file,
                  '--compute', 'a=' + self.conf_file), 'a is given twice'),
                (('--compute', 'a=' + self.conf_file, '--computes', '2'),
                 'exclude each other'),
                (('--computes', '0'), 'at least 1, got 0')):
            exc = self.assertRaises(ValueError, self.files, *argv)
            self.assertIn(needle, str(exc))
