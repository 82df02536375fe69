"""Tests of how a console script ends when its start fails."""

import io
import os
from unittest import mock

import fixtures
from oslo_config import cfg

from nova import cmd
from nova import conf as nova_conf
from nova import exception
from nova import test


class TestRunService(test.TestCase):

    def run_failing(self, error: Exception) -> tuple[int, str]:
        conf = cfg.ConfigOpts()
        nova_conf.register_all(conf)
        state = self.useFixture(fixtures.TempDir()).path
        config = os.path.join(state, 'nova.conf')
        with open(config, 'w') as f:
            f.write('[DEFAULT]\nstate_path = %s\n' % state)
        stderr = io.StringIO()

        def serve(_conf):
            raise error
        # The database is set up once per process; not what is tested.
        with mock.patch('sys.stderr', stderr), \
                mock.patch.object(cmd.db, 'configure'):
            code = cmd.run_service(
                'nova-compute', serve,
                ['--config-file', config], conf=conf,
                runs_control_plane=False)
        return code, stderr.getvalue()

    def test_pci_config_placement_cannot_take_is_one_line(self):
        # E.g. a new [pci]device_group splitting what a server holds.
        code, stderr = self.run_failing(exception.PlacementPciException(
            error='instance vm1 holds devices a, b together,\nwhich are '
                  'not exactly one group'))
        self.assertEqual(1, code)
        self.assertEqual(
            'nova-compute: PCI devices could not be reported to Placement: '
            'instance vm1 holds devices a, b together, which are not '
            'exactly one group\n', stderr)

    def test_other_errors_propagate(self):
        self.assertRaises(exception.PlacementAPIConnectFailure,
                          self.run_failing,
                          exception.PlacementAPIConnectFailure(
                              url='http://placement', error='refused'))


class TestApiListenAddress(test.TestCase):
    """Where the Compute API listens (``[api]listen``) by auth strategy."""

    def address(self, **api) -> str:
        conf = cfg.ConfigOpts()
        nova_conf.register_all(conf)
        conf([], default_config_files=[], default_config_dirs=[])
        for name, value in api.items():
            conf.set_override(name, value, group='api')
        return cmd.api_listen_address(conf)

    def test_unset_is_loopback_without_auth_and_everywhere_with(self):
        self.assertEqual('127.0.0.1', self.address())
        self.assertEqual('0.0.0.0', self.address(auth_strategy='keystone'))

    def test_loopback_addresses_and_names_are_taken(self):
        for host in ('127.0.0.1', '127.0.0.5', '::1', 'localhost'):
            self.assertEqual(host, self.address(listen=host))

    def test_network_address_without_auth_is_refused(self):
        for host in ('0.0.0.0', '::', '192.0.2.10', 'no-such-host.invalid'):
            err = self.assertRaises(exception.InvalidConfiguration,
                                    self.address, listen=host)
            self.assertIn('[api]listen = %s is not a loopback address'
                          % host, str(err))
            self.assertIn('[api]allow_remote_noauth2 = true', str(err))

    def test_network_address_allowed_explicitly_or_with_keystone(self):
        self.assertEqual('0.0.0.0', self.address(
            listen='0.0.0.0', allow_remote_noauth2=True))
        self.assertEqual('192.0.2.10', self.address(
            listen='192.0.2.10', auth_strategy='keystone'))
