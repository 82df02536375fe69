"""nova-all's Glance behind a real Keystone: with ``[api]auth_strategy =
keystone`` Glance validates tokens with nova's ``[keystone_authtoken]``
settings and nova reaches it with the credentials of ``[glance]``."""

import os

import fixtures
from keystoneauth1 import loading as ks_loading
from keystonemiddleware import auth_token
import requests
from testtools import content

from nova import exception
from nova import test
from nova.image import glance
from nova.cmd import glance_service
from nova.tests.fixtures import glance as glance_fixture
from nova.tests.fixtures import keystone


class KeystoneGlanceTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.keystone = self.useFixture(keystone.KeystoneFixture())
        self.keystone.add_user('nova', 'nova-pw', 'service')
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.conf = test.make_conf()
        for group, opts in auth_token.list_opts():
            self.conf.register_opts(opts, group=group)
        self.conf.register_opts(
            ks_loading.get_auth_plugin_conf_options('password'),
            group='keystone_authtoken')
        self.conf.register_opts(
            ks_loading.get_auth_plugin_conf_options('password'),
            group='glance')
        credentials = dict(
            auth_type='password', auth_url=self.keystone.url,
            username='nova', password='nova-pw', project_name='service',
            user_domain_id='default', project_domain_id='default')
        for name, value in credentials.items():
            self.conf.set_override(name, value, group='keystone_authtoken')
            self.conf.set_override(name, value, group='glance')
        self.conf.set_override('www_authenticate_uri', self.keystone.url,
                               group='keystone_authtoken')
        # The test Keystone has public endpoints only.
        self.conf.set_override('interface', 'public',
                               group='keystone_authtoken')
        self.conf.set_override('auth_strategy', 'keystone', group='api')
        self.conf.set_override('state_path', self.tmp)
        self.service = glance_service.GlanceService.for_nova_all(
            self.conf, port=0)
        self.service.start()
        self.addCleanup(self.service.stop)
        self.addOnException(self._attach_log)
        self.service.configure_nova(self.conf)

    def _attach_log(self, exc_info) -> None:
        with open(os.path.join(self.service.state_dir,
                               'glance-api.log')) as f:
            self.addDetail('glance-api.log',
                           content.text_content(f.read()[-20000:]))

    def test_tokens_are_required_and_nova_has_one(self):
        self.assertEqual(os.path.join(self.tmp, 'glance'),
                         self.service.state_dir)
        resp = requests.get(self.service.url + '/v2/images', timeout=30)
        self.assertEqual(401, resp.status_code)
        client = glance.GlanceClient(self.conf)
        path = glance_fixture.blank_qcow2(os.path.join(self.tmp, 'i.qcow2'))
        image = client.upload(client.create('tiny').id, path)
        self.assertEqual('active', client.show(image.id).status)
        target = os.path.join(self.tmp, 'copy')
        client.download(image.id, target)
        self.assertEqual(os.path.getsize(path), os.path.getsize(target))

    def test_wrong_credentials_are_a_clear_error(self):
        self.conf.set_override('password', 'wrong', group='glance')
        err = self.assertRaises(exception.ImageServiceError,
                                glance.GlanceClient(self.conf).show, 'x')
        self.assertIn('401', err.message)
