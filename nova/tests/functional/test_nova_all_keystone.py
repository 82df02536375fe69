"""nova-all under a real Keystone, run as an operator runs it.

``nova-all`` is a child process whose nova.conf says ``[api]auth_strategy
= keystone`` and carries the ``[keystone_authtoken]`` and ``[glance]``
credentials of nova's service user, nothing more; Keystone is the
``keystone`` package in its own process. A member of a project uploads an
image to nova-all's Glance and boots a server from it through the Compute
API, each with a Keystone token, and the server becomes ACTIVE: Glance
validated the tokens, and every compute downloaded the image with
``[glance]``'s credentials.
"""

import os
import time

import fixtures
from testtools import content

from nova import test
from nova.tests.fixtures import glance as glance_fixture
from nova.tests.fixtures import keystone
from nova.tests.functional.lib import deployment

TIMEOUT = 180


class NovaAllKeystoneBase(test.TestCase):
    """Keystone with nova's service user and alice (project alpha), and
    nova-all under it on demand."""

    TIMEOUT = 2 * TIMEOUT

    def setUp(self):
        super().setUp()
        self.keystone = self.useFixture(keystone.KeystoneFixture())
        # nova's service user, with the admin role in the service project
        # as upstream's install guide gives it: nova reads every
        # project's images with it.
        self.keystone.add_user('nova', 'nova-pw', 'service', 'admin')
        self.keystone.add_user('alice', 'alice-pw', 'alpha')
        self.alice = self.keystone.session('alice', 'alice-pw', 'alpha')
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def conf(self) -> dict[str, dict]:
        """nova.conf's Keystone part, as the deployment guide has it."""
        service_user = {
            'auth_type': 'password', 'auth_url': self.keystone.url,
            'username': 'nova', 'password': 'nova-pw',
            'project_name': 'service', 'user_domain_id': 'default',
            'project_domain_id': 'default'}
        return {
            'api': {'auth_strategy': 'keystone'},
            # The test Keystone has public endpoints only.
            'keystone_authtoken': dict(
                service_user, www_authenticate_uri=self.keystone.url,
                interface='public'),
            'glance': service_user,
        }

    def start(self, **kwargs) -> deployment.AllInOne:
        nova_all = deployment.AllInOne(
            workdir=os.path.join(self.tmp, 'nova-all'),
            extra_conf=self.conf(), **kwargs)
        self.addOnException(lambda _exc: self._attach_logs(nova_all))
        return self.useFixture(nova_all)

    def _attach_logs(self, nova_all: deployment.AllInOne) -> None:
        for name, text in nova_all.logs().items():
            self.addDetail(name, content.text_content(text[-20000:]))
        glance_log = os.path.join(nova_all.workdir, 'glance',
                                  'glance-api.log')
        if os.path.exists(glance_log):
            with open(glance_log) as f:
                self.addDetail('glance-api.log',
                               content.text_content(f.read()[-20000:]))

    def call(self, method: str, url: str, expect=(200, 201, 202, 204),
             session=None, **kwargs):
        """One request with a Keystone token (alice's unless given)."""
        resp = (session or self.alice).request(url, method, raise_exc=False,
                                               **kwargs)
        self.assertIn(resp.status_code, expect, resp.text)
        if 'json' not in resp.headers.get('Content-Type', ''):
            return {}
        return resp.json()

    def upload_image(self, glance_url: str) -> str:
        """An image uploaded through Glance's API with alice's token."""
        image = self.call('POST', glance_url + '/v2/images', json={
            'name': 'tiny', 'disk_format': 'qcow2',
            'container_format': 'bare'})
        path = glance_fixture.blank_qcow2(os.path.join(self.tmp, 't.qcow2'))
        with open(path, 'rb') as f:
            self.call('PUT', glance_url + '/v2/images/%s/file' % image['id'],
                      data=f,
                      headers={'Content-Type': 'application/octet-stream'})
        shown = self.call('GET', glance_url + '/v2/images/%s' % image['id'])
        self.assertEqual('active', shown['status'])
        return image['id']

    def boot(self, nova_all: deployment.AllInOne, image_id: str) -> dict:
        """A server of the image through the Compute API, until it leaves
        BUILD: the flavor by the admin, the server by alice."""
        api = nova_all.api_url
        flavor = self.call('POST', api + '/flavors',
                           session=self.keystone.admin,
                           json={'flavor': {'name': 'small', 'vcpus': 2,
                                            'ram': 2048, 'disk': 1}})
        server = self.call('POST', api + '/servers', json={'server': {
            'name': 'vm1', 'flavorRef': flavor['flavor']['id'],
            'imageRef': image_id}})['server']
        deadline = time.monotonic() + TIMEOUT
        while True:
            shown = self.call('GET', api + '/servers/%s' % server['id'])
            if shown['server']['status'] != 'BUILD' or \
                    time.monotonic() > deadline:
                return shown['server']
            time.sleep(0.5)

    def assert_boots_from_glance(self, nova_all: deployment.AllInOne
                                 ) -> None:
        # Glance asks for a token: it runs with keystonemiddleware.
        self.call('GET', nova_all.glance_url + '/v2/images', expect=(401,),
                  authenticated=False)
        image_id = self.upload_image(nova_all.glance_url)
        server = self.boot(nova_all, image_id)
        self.assertEqual('ACTIVE', server['status'], server)
        self.assertEqual(image_id, server['image']['id'])
        # The Compute API too takes no request without a token.
        self.call('GET', nova_all.api_url + '/servers', expect=(401,),
                  authenticated=False)


class TestNovaAllKeystone(NovaAllKeystoneBase):

    def test_computes_sharing_the_configuration(self):
        self.assert_boots_from_glance(self.start(computes=1))

    def test_computes_with_their_own_files(self):
        # --compute NAME=FILE: each compute's file sets only its own
        # options; the [glance] credentials come from the shared file.
        self.assert_boots_from_glance(self.start(compute_files={
            'hgx-1': {'DEFAULT': {'update_resources_interval': 30}}}))
