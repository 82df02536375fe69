"""What a user says of a server, kept and shown as upstream's API does.

Found by Tempest's server tests: ``PUT /servers/{id}`` (rename,
description) was missing; ``description`` (2.19), ``accessIPv4``/``v6``
and ``user_data`` were accepted on create and dropped; rebuild refused
``user_data`` (2.57) and ``key_name`` (2.54) although ``/`` advertised
2.96, and dropped ``metadata``; the answers of rebuild and update showed
every field before 2.75, where upstream shows fewer; ``server_groups``
(2.71) appeared in lists; and ``/`` did not list the v2.0 API.
"""

import base64

from nova.tests.functional import test_server_actions

USER_DATA = base64.b64encode(b'#cloud-config\n').decode()


class TempestServerFieldsTest(test_server_actions.ServerActionsBase):

    def call(self, method, path, body=None, version='2.19',
             token='admin'):
        return self.session.request(
            method, self.allinone.api_url + path, json=body,
            headers={'X-Auth-Token': token,
                     'X-OpenStack-Nova-API-Version': version})

    def ok(self, method, path, body=None, version='2.19', status=200):
        resp = self.call(method, path, body, version)
        self.assertEqual(status, resp.status_code, resp.text)
        return resp.json() if resp.content else None

    def refused(self, method, path, body, version, *words):
        resp = self.call(method, path, body, version)
        self.assertEqual(400, resp.status_code, resp.text)
        for word in words:
            self.assertIn(word, resp.text)

    def test_fields_on_create_update_and_rebuild(self):
        self.start_services()
        flavor = self.gpu_flavors()[1]
        server = {'name': 'job', 'flavorRef': flavor, 'imageRef': 'none'}

        self.refused('POST', '/servers', {'server': dict(
            server, description='d')}, '2.18', 'description', '2.19')
        self.refused('POST', '/servers', {'server': dict(
            server, accessIPv4='10.0.0.300')}, '2.19', 'accessIPv4',
            '10.0.0.300')
        self.refused('POST', '/servers', {'server': dict(
            server, accessIPv6='10.0.0.1')}, '2.19', 'accessIPv6')
        self.refused('POST', '/servers', {'server': dict(
            server, user_data='not base64!')}, '2.19', 'user_data')

        uuid = self.ok('POST', '/servers', {'server': dict(
            server, description='training', accessIPv4='192.0.2.7',
            accessIPv6='2001:db8::7', user_data=USER_DATA)},
            status=202)['server']['id']
        self.wait_status(uuid, 'ACTIVE')
        shown = self.ok('GET', '/servers/' + uuid, version='2.71')['server']
        self.assertEqual(('training', '192.0.2.7', '2001:db8::7', USER_DATA,
                          'job', []), (
            shown['description'], shown['accessIPv4'], shown['accessIPv6'],
            shown['OS-EXT-SRV-ATTR:user_data'],
            shown['OS-EXT-SRV-ATTR:hostname'], shown['server_groups']))
        listed = self.ok('GET', '/servers/detail',
                         version='2.71')['servers']
        self.assertNotIn('server_groups', listed[0])
        self.assertNotIn('OS-EXT-SRV-ATTR:user_data', self.ok(
            'GET', '/servers/' + uuid, version='2.2')['server'])

        # PUT /servers/{id}: fewer fields before 2.75, all of them after.
        updated = self.ok('PUT', '/servers/' + uuid, {'server': {
            'name': 'job-2', 'description': None}})['server']
        self.assertEqual(('job-2', None), (updated['name'],
                                           updated['description']))
        self.assertNotIn('OS-EXT-STS:vm_state', updated)
        updated = self.ok('PUT', '/servers/' + uuid, {'server': {
            'accessIPv4': ''}}, version='2.75')['server']
        self.assertEqual(('', 'active'), (updated['accessIPv4'],
                                          updated['OS-EXT-STS:vm_state']))
        self.refused('PUT', '/servers/' + uuid, {'server': {
            'flavorRef': flavor}}, '2.75', 'flavorRef')

        # rebuild: user_data from 2.57, metadata replaced.
        rebuild = {'rebuild': {'imageRef': 'none', 'user_data': USER_DATA}}
        self.refused('POST', '/servers/%s/action' % uuid, rebuild, '2.56',
                     'user_data', '2.57')
        answer = self.ok('POST', '/servers/%s/action' % uuid, {'rebuild': {
            'imageRef': 'none', 'user_data': None,
            'metadata': {'team': 'vision'}}}, version='2.57',
            status=202)['server']
        # The answer shows the key pair from 2.54 (Tempest's schema).
        self.assertIsNone(answer['key_name'])
        self.assertEqual({'team': 'vision'}, answer['metadata'])
        self.wait_status(uuid, 'ACTIVE')
        shown = self.ok('GET', '/servers/' + uuid, version='2.57')['server']
        self.assertIsNone(shown['OS-EXT-SRV-ATTR:user_data'])
        self.assertEqual({'team': 'vision'}, shown['metadata'])
        answer = self.ok('POST', '/servers/%s/action' % uuid, {'rebuild': {
            'imageRef': 'none', 'description': 'again'}}, version='2.75',
            status=202)['server']
        self.assertEqual(('again', None), (answer['description'],
                                           answer['key_name']))
        self.wait_status(uuid, 'ACTIVE')
        self.assert_consistent()

    def test_versions_list_v2_0_and_v2_1(self):
        self.start_services()
        resp = self.session.get(self.allinone.api_url.rsplit('/v2.1', 1)[0]
                                + '/')
        self.assertEqual(['v2.0', 'v2.1'],
                         [v['id'] for v in resp.json()['versions']])
        legacy = resp.json()['versions'][0]['links'][0]['href']
        self.assertEqual('v2.0', self.session.get(legacy).json()[
            'version']['id'])
