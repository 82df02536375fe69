"""Where the WSGI entry points read their configuration from."""

from nova import test
from nova import wsgi


class ConfigArgsTestCase(test.TestCase):

    def test_files_named_in_order(self):
        self.assertEqual(
            ['--config-file', '/etc/nova/nova.conf',
             '--config-file', '/etc/nova/api.conf'],
            wsgi.config_args({wsgi.CONFIG_FILES_ENV:
                              '/etc/nova/nova.conf; /etc/nova/api.conf;'}))

    def test_directory_gives_its_nova_conf(self):
        self.assertEqual(['--config-file', '/srv/nova/nova.conf'],
                         wsgi.config_args({wsgi.CONFIG_DIR_ENV: '/srv/nova'}))

    def test_files_win_over_the_directory(self):
        self.assertEqual(['--config-file', '/a.conf'], wsgi.config_args(
            {wsgi.CONFIG_FILES_ENV: '/a.conf', wsgi.CONFIG_DIR_ENV: '/b'}))

    def test_nothing_named_is_the_oslo_search_path(self):
        self.assertEqual([], wsgi.config_args({}))
        self.assertEqual([], wsgi.config_args(
            {wsgi.CONFIG_FILES_ENV: ' ', wsgi.CONFIG_DIR_ENV: ''}))
