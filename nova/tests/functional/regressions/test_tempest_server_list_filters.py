"""Server list filters that were ignored.

Found by Tempest's server list tests: ``flavor``, ``image``, ``name`` (a
regular expression upstream), ``changes-since`` and the sort keys of
``GET /servers`` and ``/servers/detail`` were dropped, so every server
came back whatever the query asked.
"""

from urllib import parse

from nova.tests.functional import test_server_actions


class TempestServerListFiltersTest(test_server_actions.ServerActionsBase):

    def listed(self, path, query):
        return [s['name'] for s in self.api(
            'GET', '%s?%s' % (path, parse.urlencode(query, doseq=True)))[
            'servers']]

    def test_filters_and_sort_keys(self):
        self.start_services()
        flavors = self.gpu_flavors()
        one = self.boot(flavors[1], 'train-1')
        two = self.boot(flavors[2], 'train-2')
        self.act(two['id'], {'os-stop': None})
        other = self.boot(flavors[1], 'infer-1')
        for path in ('/servers', '/servers/detail'):
            self.assertEqual({'train-1', 'infer-1'}, set(self.listed(
                path, {'flavor': flavors[1]})))
            self.assertEqual(['train-2'], self.listed(
                path, {'flavor': flavors[2]}))
            self.assertEqual({'train-1', 'train-2'}, set(self.listed(
                path, {'name': '^train-[0-9]$'})))
            self.assertEqual(['infer-1'], self.listed(
                path, {'name': 'fer'}))
            self.assertEqual([], self.listed(path, {'image': 'no-such'}))
            self.assertEqual(['infer-1', 'train-1', 'train-2'], self.listed(
                path, {'sort_key': 'display_name', 'sort_dir': 'asc'}))
            self.assertEqual([], self.listed(
                path, {'changes-since': '2999-01-01T00:00:00Z'}))
            self.assertEqual(3, len(self.listed(
                path, {'changes-since': '2000-01-01T00:00:00Z'})))
        self.wait_status(two['id'], 'SHUTOFF')
        self.assertEqual(['train-2'], self.listed(
            '/servers', {'status': 'SHUTOFF'}))
        # An admin-only filter from an admin filters.
        self.assertEqual(3, len(self.listed(
            '/servers', {'host': 'cmp1', 'all_tenants': '1'})))
        self.assertEqual([], self.listed(
            '/servers', {'host': 'cmp9', 'all_tenants': '1'}))
        resp = self.session.get(self.allinone.api_url +
                                '/servers?sort_key=colour')
        self.assertEqual(400, resp.status_code)
        self.assertIn('colour', resp.text)
        self.assertEqual({one['id'], other['id']}, {s['id'] for s in self.api(
            'GET', '/servers?flavor=%s' % flavors[1])['servers']})
