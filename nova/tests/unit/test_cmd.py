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
