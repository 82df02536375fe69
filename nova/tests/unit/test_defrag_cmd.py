"""How nova-manage pci defrag apply finds and authenticates to the
Compute API ([nova], nova.conf.nova_api)."""

from keystoneauth1 import loading as ks_loading

from nova import exception
from nova import test
from nova.cmd import defrag


class TestComputeApiAdapter(test.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = test.make_conf()

    def test_noauth2_api_of_this_configuration(self):
        self.conf.set_override('listen_port', 18774, group='api')
        api = defrag.compute_api_adapter(self.conf)
        # Every interface ([api]listen 0.0.0.0) is reached locally.
        self.assertEqual('http://127.0.0.1:18774/v2.1',
                         api.get_endpoint())
        self.assertEqual({'X-Auth-Token': 'admin'},
                         api.session.get_auth_headers(api.auth))
        self.assertEqual(defrag.MICROVERSION, api.default_microversion)

    def test_the_options_of_nova_win(self):
        self.conf.register_opts(
            ks_loading.get_auth_plugin_conf_options('admin_token'),
            group='nova')
        self.conf.set_override('auth_type', 'admin_token', group='nova')
        self.conf.set_override('endpoint', 'http://api.example:8774/v2.1',
                               group='nova')
        self.conf.set_override('token', 't', group='nova')
        api = defrag.compute_api_adapter(self.conf)
        self.assertEqual('http://api.example:8774/v2.1', api.get_endpoint())
        self.assertEqual({'X-Auth-Token': 't'},
                         api.session.get_auth_headers(api.auth))

    def test_keystone_needs_the_options_of_nova(self):
        self.conf.set_override('auth_strategy', 'keystone', group='api')
        err = self.assertRaises(exception.InvalidConfiguration,
                                defrag.compute_api_adapter, self.conf)
        self.assertIn('[nova]auth_type is not set', str(err))
        self.assertIn('auth_strategy is keystone', str(err))
