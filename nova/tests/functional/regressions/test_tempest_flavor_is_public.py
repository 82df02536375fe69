"""Flavor listings refused the short boolean spellings of ``is_public``.

Found by Tempest's ``test_is_public_string_variations`` (admin flavors):
``GET /flavors/detail?is_public=f`` answered HTTP 400 (*'f' is not a
boolean*) where upstream parses query booleans strictly but takes
``t``/``f`` and ``y``/``n`` as well as true/false, yes/no, on/off, 1/0.
A value that is none of them is still refused, naming the value.
"""

from nova.tests.functional import test_boot_gpu_groups as boot


class TempestFlavorIsPublicTest(boot.BootTestBase):

    def names(self, is_public):
        return {f['name'] for f in self.api(
            'GET', '/flavors/detail?is_public=%s' % is_public)['flavors']}

    def test_every_boolean_spelling_selects_the_flavors(self):
        self.start_services()
        self.api('POST', '/flavors', {'flavor': {
            'name': 'hidden', 'ram': 512, 'vcpus': 1, 'disk': 1,
            'os-flavor-access:is_public': 'False'}})
        self.api('POST', '/flavors', {'flavor': {
            'name': 'shown', 'ram': 512, 'vcpus': 1, 'disk': 1,
            'os-flavor-access:is_public': 'True'}})
        for spelling in ('f', 'F', 'false', 'no', 'n', 'off', '0'):
            names = self.names(spelling)
            self.assertIn('hidden', names, spelling)
            self.assertNotIn('shown', names, spelling)
        for spelling in ('t', 'T', 'true', 'yes', 'y', 'on', '1'):
            names = self.names(spelling)
            self.assertIn('shown', names, spelling)
            self.assertNotIn('hidden', names, spelling)
        self.assertTrue({'hidden', 'shown'} <= self.names('none'))

        resp = self.session.get(self.allinone.api_url +
                                '/flavors/detail?is_public=maybe')
        self.assertEqual(400, resp.status_code, resp.text)
        self.assertIn("'maybe' is not a boolean", resp.text)
