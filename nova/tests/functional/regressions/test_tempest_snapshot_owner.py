"""A server's snapshot was an image its owner could not see.

Found by Tempest's ``test_create_backup`` under Keystone: the image id
that ``createBackup`` answered was a 404 in Glance for the user who asked
for it. nova-all creates snapshot images with nova's service user, so
they belonged to the ``service`` project and were private to it. They
belong to the server's project now, as upstream's (created with the
user's token) do.
"""

import time

from nova.tests.functional import test_nova_all_keystone as base


class TempestSnapshotOwnerTest(base.NovaAllKeystoneBase):

    def test_snapshot_and_backup_belong_to_the_server_project(self):
        nova_all = self.start(computes=1)
        server = self.boot(nova_all, self.upload_image(nova_all.glance_url))
        self.assertEqual('ACTIVE', server['status'], server)
        action = nova_all.api_url + '/servers/%s/action' % server['id']
        headers = {'X-OpenStack-Nova-API-Version': '2.45'}
        project_id = self.alice.get_project_id()
        for body in ({'createImage': {'name': 'snap'}},
                     {'createBackup': {'name': 'back', 'backup_type': 'daily',
                                       'rotation': 1}}):
            image_id = self.call('POST', action, headers=headers,
                                 json=body)['image_id']
            # At once: the id answered is alice's image already.
            shown = self.call('GET', nova_all.glance_url +
                              '/v2/images/%s' % image_id)
            self.assertEqual(project_id, shown['owner'])
            deadline = time.monotonic() + base.TIMEOUT
            while shown['status'] != 'active' and \
                    time.monotonic() < deadline:
                time.sleep(0.5)
                shown = self.call('GET', nova_all.glance_url +
                                  '/v2/images/%s' % image_id)
            self.assertEqual('active', shown['status'], shown)
            # The server is done with it before the next one.
            while time.monotonic() < deadline:
                shown = self.call('GET', nova_all.api_url + '/servers/%s'
                                  % server['id'])['server']
                if shown['OS-EXT-STS:task_state'] is None:
                    break
                time.sleep(0.5)
            self.assertEqual(('ACTIVE', None), (
                shown['status'], shown['OS-EXT-STS:task_state']))
