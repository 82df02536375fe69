"""A rebuild's answer lacked the key name and user data it took.

Found by Tempest's ``ServerShowV254Test`` and ``ServerShowV257Test``
(and its 2.75 and 2.96 rebuild tests, which fail on more): from 2.54 the
answer to a rebuild shows ``key_name`` and from 2.57 ``user_data``, as
upstream's; this API left both out. Each answer is checked against
Tempest's own schema of its microversion.
"""

import base64

from tempest.lib.api_schema.response.compute.v2_54 import servers as v2_54
from tempest.lib.api_schema.response.compute.v2_57 import servers as v2_57
from tempest.lib.common import jsonschema_validator

from nova.tests.functional import test_boot_gpu_groups as boot

USER_DATA = base64.b64encode(b'#!/bin/sh\necho hi\n').decode()


class TempestRebuildAnswerTest(boot.BootTestBase):

    def rebuild(self, server_id, version, body):
        resp = self.session.post(
            self.allinone.api_url + '/servers/%s/action' % server_id,
            json={'rebuild': body},
            headers={'X-OpenStack-Nova-API-Version': version})
        self.assertEqual(202, resp.status_code, resp.text)
        return resp.json()

    def test_rebuild_answers_per_microversion(self):
        self.start_services()
        flavor = self.api('POST', '/flavors', {'flavor': {
            'name': 'small', 'ram': 512, 'vcpus': 1, 'disk': 0}}
        )['flavor']['id']
        server_id = self.boot(flavor)['id']
        for version, schema, body in (
                ('2.54', v2_54, {'imageRef': 'none', 'key_name': None}),
                ('2.57', v2_57, {'imageRef': 'none',
                                 'user_data': USER_DATA})):
            answer = self.rebuild(server_id, version, body)
            # As Tempest's clients check an answer.
            jsonschema_validator.JSONSCHEMA_VALIDATOR(
                schema.rebuild_server['response_body'],
                format_checker=jsonschema_validator.FORMAT_CHECKER
            ).validate(answer)
            self.assertIsNone(answer['server']['key_name'], version)
            if version != '2.54':
                self.assertEqual(USER_DATA, answer['server']['user_data'])
            self.wait_for(server_id, 'ACTIVE')
        answer = self.rebuild(server_id, '2.53', {'imageRef': 'none'})
        self.assertNotIn('key_name', answer['server'])
