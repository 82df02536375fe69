"""The configuration of nova-all's Glance (nova.cmd.glance_service)."""

from nova.cmd import glance_service
from nova import test


class GlanceConfigTestCase(test.TestCase):

    def test_noauth_state_under_state_dir(self):
        sections = glance_service.config_sections('/s')
        self.assertEqual('sqlite:////s/glance.sqlite',
                         sections['database']['connection'])
        self.assertEqual('/s/images',
                         sections['local']['filesystem_store_datadir'])
        self.assertNotIn('keystone_authtoken', sections)
        self.assertFalse(sections['oslo_policy']['enforce_new_defaults'])

    def test_keystone(self):
        sections = glance_service.config_sections(
            '/s', {'auth_url': 'http://k/v3'})
        self.assertEqual('keystone', sections['paste_deploy']['flavor'])
        self.assertEqual({'auth_url': 'http://k/v3'},
                         sections['keystone_authtoken'])
        self.assertNotIn('oslo_policy', sections)
