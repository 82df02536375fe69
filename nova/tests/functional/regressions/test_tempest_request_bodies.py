"""Request bodies a stock client sends that upstream Nova accepts.

Found by running Tempest's compute API tests: flavors created with an
integer ``id`` and ``os-flavor-access:is_public`` as the string "True",
services forced down with the string "true", and ``{}`` as the value of
the actions that take no argument (``os-stop``, ``os-start``,
``shelve``, ``shelveOffload``, ``unshelve``, ``migrate``), which
python-novaclient and Tempest always send, were refused with 400; every
test of those areas failed in its set-up.
"""

from nova.tests.functional import test_resize


class TempestRequestBodiesTest(test_resize.MoveTestBase):

    def test_integer_flavor_id_and_string_is_public(self):
        self.start()
        flavor = self.api('POST', '/flavors', {'flavor': {
            'name': 'tempest-flavor', 'id': 424242, 'vcpus': 4,
            'ram': 4096, 'disk': 0,
            'os-flavor-access:is_public': 'True'}})['flavor']
        self.assertEqual(('424242', True), (
            flavor['id'], flavor['os-flavor-access:is_public']))
        self.api('POST', '/flavors/424242/os-extra_specs', {
            'extra_specs': {'pci_passthrough:alias': 'h200:2'}})
        server = self.boot('424242', 'vm')
        # 2.47 server views name the flavor.
        self.assertEqual('tempest-flavor', server['flavor']['original_name'])
        self.assert_server_holds(server, test_resize.PAIRS)
        private = self.api('POST', '/flavors', {'flavor': {
            'name': 'tempest-private', 'id': 424243, 'vcpus': 1,
            'ram': 512, 'disk': 0,
            'os-flavor-access:is_public': 'False'}})['flavor']
        self.assertIs(False, private['os-flavor-access:is_public'])
        listed = {f['id'] for f in self.api('GET', '/flavors')['flavors']}
        self.assertIn('424242', listed)
        self.assertNotIn('424243', listed)

    def test_actions_without_argument_take_an_empty_object(self):
        self.start()
        server = self.boot(self.flavors[2], 'vm')
        uuid = server['id']
        pair = self.gpus_of(server)
        self.action(uuid, {'os-stop': {}})
        self.wait_settled(uuid, 'SHUTOFF')
        self.action(uuid, {'os-start': {}})
        self.wait_settled(uuid, 'ACTIVE')
        self.action(uuid, {'shelve': {}})
        # shelved_offload_time is 0: the server passes SHELVED on its
        # way, and an unshelve while it offloads is refused (409).
        self.wait_settled(uuid, 'SHELVED_OFFLOADED')
        self.action(uuid, {'unshelve': {}})
        unshelved = self.wait_settled(uuid, 'ACTIVE')
        self.assert_server_holds(unshelved, test_resize.PAIRS)
        # A cold migration before 2.56 (no host) with {}.
        source = unshelved['OS-EXT-SRV-ATTR:host']
        self.action(uuid, {'migrate': {}})
        moved = self.wait_settled(uuid, 'VERIFY_RESIZE')
        self.assertNotEqual(source, moved['OS-EXT-SRV-ATTR:host'])
        confirmed = self.confirm(uuid)
        self.assert_server_holds(confirmed, test_resize.PAIRS)
        self.assert_consistent()
        # An argument none of them takes is still refused, naming it.
        resp = self.action(uuid, {'os-stop': {'force': True}},
                           expect=(400,))
        self.assertIn("'force' was unexpected", resp.text)
        resp = self.action(uuid, {'migrate': {'host': 'cmp1'}},
                           expect=(400,))
        self.assertIn('2.56', resp.text)
        self.assertEqual(2, len(pair))

    def test_forced_down_as_a_string(self):
        self.start()
        headers = {'X-OpenStack-Nova-API-Version': '2.53'}
        [service] = [s for s in self.session.get(
            self.allinone.api_url + '/os-services?binary=nova-compute'
            '&host=cmp2', headers=headers).json()['services']]
        resp = self.session.put(
            self.allinone.api_url + '/os-services/' + service['id'],
            json={'forced_down': 'true'}, headers=headers)
        self.assertEqual(200, resp.status_code, resp.text)
        self.assertEqual((True, 'down'), (
            resp.json()['service']['forced_down'],
            resp.json()['service']['state']))
