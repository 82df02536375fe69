"""Every answer of the Compute API in upstream's shape, per microversion.

Tempest's compute service clients check each response against the
schema Tempest publishes for the request's microversion (upstream's
api-ref, in ``tempest.lib.api_schema.response.compute``): here they drive
nova-all's real REST API, with a real Glance, at the microversions where
the shapes change, and any difference fails the call with Tempest's
InvalidHTTPResponseBody naming the field.
"""

import time

from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives import serialization
import fixtures
from tempest.lib import auth
from tempest.lib import exceptions as tempest_exc
from tempest.lib.services.compute import availability_zone_client
from tempest.lib.services.compute import flavors_client
from tempest.lib.services.compute import hypervisor_client
from tempest.lib.services.compute import images_client
from tempest.lib.services.compute import keypairs_client
from tempest.lib.services.compute import limits_client
from tempest.lib.services.compute import migrations_client
from tempest.lib.services.compute import servers_client
from tempest.lib.services.compute import services_client
from tempest.lib.services.compute import versions_client

from nova.api import microversion
from nova.tests.functional import test_images

# Where the response shapes change (Tempest's schema modules), and the
# newest microversion this API serves.
VERSIONS = ('2.1', '2.3', '2.9', '2.16', '2.19', '2.26', '2.35', '2.36',
            '2.47', '2.54', '2.57', '2.63', '2.69', '2.71', '2.73', '2.75',
            '2.79', '2.90', microversion.MAX_VERSION)
TIMEOUT = 60


class _NoAuthCredentials(auth.Credentials):
    """noauth2's credentials: a token naming the caller."""

    ATTRIBUTES = ['token']

    def is_valid(self):
        return True


class NoAuth2Provider(auth.AuthProvider):
    """Tempest's auth provider for nova-api's noauth2 mode: the token is
    sent as is, every request goes to the one Compute endpoint."""

    def __init__(self, endpoint: str, token: str = 'admin') -> None:
        super().__init__(_NoAuthCredentials(token=token))
        self.endpoint = endpoint

    def _decorate_request(self, filters, method, url, headers=None,
                          body=None, auth_data=None):
        headers = dict(headers or {}, **{
            'X-Auth-Token': self.credentials.token})
        base = self.base_url(filters)
        return (base if not url else '%s/%s' % (base, url.lstrip('/')),
                headers, body)

    def _get_auth(self):
        return self.credentials.token, {}

    def get_token(self):
        return self.credentials.token

    def _fill_credentials(self, auth_data_body):
        pass

    def is_expired(self, auth_data):
        return False

    def base_url(self, filters, auth_data=None):
        return self.endpoint


def _public_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH,
                            serialization.PublicFormat.OpenSSH).decode()


class ResponseSchemaTest(test_images.ImageTestBase):
    """One test per microversion; each runs every served call once."""

    def setUp(self):
        super().setUp()
        provider = NoAuth2Provider(self.allinone.api_url)
        self.clients = {
            cls: cls(provider, 'compute', 'RegionOne', **(
                # No adminPass: no metadata service or config drive
                # could hand it to the guest ([api]enable_instance_password
                # False upstream).
                {'enable_instance_password': False}
                if cls is servers_client.ServersClient else {}))
            for cls in (availability_zone_client.AvailabilityZoneClient,
                        flavors_client.FlavorsClient,
                        hypervisor_client.HypervisorClient,
                        images_client.ImagesClient,
                        keypairs_client.KeyPairsClient,
                        limits_client.LimitsClient,
                        migrations_client.MigrationsClient,
                        servers_client.ServersClient,
                        services_client.ServicesClient,
                        versions_client.VersionsClient)}
        self.image = self.glance.upload('cirros', kernel_id='none')

    def at(self, version: str) -> None:
        """Send ``version`` on every request (and check the answer's)."""
        self.useFixture(fixtures.MonkeyPatch(
            'tempest.lib.services.compute.base_compute_client.'
            'COMPUTE_MICROVERSION', version))

    def client(self, cls):
        return self.clients[cls]

    def wait(self, server_id: str, status: str) -> dict:
        servers = self.client(servers_client.ServersClient)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            server = servers.show_server(server_id)['server']
            if server['status'] in (status, 'ERROR') and \
                    server.get('OS-EXT-STS:task_state') is None:
                self.assertEqual(status, server['status'], server)
                return server
            time.sleep(0.1)
        self.fail('server %s never reached %s' % (server_id, status))

    # The calls --------------------------------------------------------------

    def check_versions(self):
        versions = self.client(versions_client.VersionsClient)
        self.assertIn('v2.1', [v['id'] for v in
                               versions.list_versions()['versions']])
        shown = versions.get_version_by_url(self.allinone.api_url)
        self.assertEqual('v2.1', shown['version']['id'])

    def check_flavors(self):
        flavors = self.client(flavors_client.FlavorsClient)
        created = flavors.create_flavor(
            name='schema', ram=512, vcpus=1, disk=1,
            id='schema-flavor')['flavor']
        self.addCleanup(flavors.delete_flavor, created['id'])
        flavors.set_flavor_extra_spec(created['id'], **{
            'hw:machine_type': 'q35'})
        self.assertEqual({'hw:machine_type': 'q35'},
                         flavors.list_flavor_extra_specs(
                             created['id'])['extra_specs'])
        flavors.show_flavor_extra_spec(created['id'], 'hw:machine_type')
        flavors.update_flavor_extra_spec(created['id'], 'hw:machine_type',
                                         **{'hw:machine_type': 'pc'})
        flavors.unset_flavor_extra_spec(created['id'], 'hw:machine_type')
        flavors.show_flavor(created['id'])
        listed = flavors.list_flavors()['flavors']
        self.assertIn(created['id'], [f['id'] for f in listed])
        flavors.list_flavors(detail=True)

    def check_keypairs(self):
        keypairs = self.client(keypairs_client.KeyPairsClient)
        keypairs.create_keypair(name='schema-key', public_key=_public_key())
        self.assertEqual(['schema-key'], [
            k['keypair']['name'] for k in
            keypairs.list_keypairs()['keypairs']])
        keypairs.show_keypair('schema-key')
        keypairs.delete_keypair('schema-key')

    def check_servers(self, version):
        servers = self.client(servers_client.ServersClient)
        at_least = microversion.APIVersion.parse(version).at_least
        created = servers.create_server(
            name='schema-vm', imageRef=self.image.id,
            flavorRef=self.flavor_id, metadata={'team': 'ml'},
            accessIPv4='192.0.2.10')['server']
        server_id = created['id']
        server = self.wait(server_id, 'ACTIVE')
        self.assertEqual('192.0.2.10', server['accessIPv4'])
        servers.list_servers()
        listed = servers.list_servers(detail=True)['servers']
        self.assertEqual([server_id], [s['id'] for s in listed])
        updated = servers.update_server(
            server_id, name='schema-vm2', accessIPv6='2001:db8::1',
            **({'description': 'checked'} if at_least('2.19') else {}))
        self.assertEqual('2001:db8::1', updated['server']['accessIPv6'])
        servers.list_server_metadata(server_id)
        self.assertEqual({'owner': 'ml'}, servers.set_server_metadata(
            server_id, {'owner': 'ml'})['metadata'])
        servers.update_server_metadata(server_id, {'owner': 'ml'})
        servers.set_server_metadata_item(server_id, 'owner', {'owner': 'x'})
        servers.show_server_metadata_item(server_id, 'owner')
        servers.delete_server_metadata_item(server_id, 'owner')
        servers.rebuild_server(server_id, self.image.id, name='rebuilt',
                               accessIPv4='192.0.2.11')
        rebuilt = self.wait(server_id, 'ACTIVE')
        self.assertEqual('192.0.2.11', rebuilt['accessIPv4'])
        servers.stop_server(server_id)
        self.wait(server_id, 'SHUTOFF')
        servers.start_server(server_id)
        self.wait(server_id, 'ACTIVE')
        servers.lock_server(server_id)
        servers.unlock_server(server_id)
        actions = servers.list_instance_actions(server_id)[
            'instanceActions']
        self.assertIn('rebuild', [a['action'] for a in actions])
        servers.show_instance_action(server_id, actions[0]['request_id'])
        self.check_images(version, server_id)
        servers.delete_server(server_id)

    def check_images(self, version, server_id):
        """The image proxy up to 2.35, 404 after."""
        images = self.client(images_client.ImagesClient)
        if microversion.APIVersion.parse(version).at_least('2.36'):
            for detail in (False, True):
                self.assertRaises(tempest_exc.NotFound, images.list_images,
                                  detail=detail)
            self.assertRaises(tempest_exc.NotFound, images.show_image,
                              self.image.id)
            self.assertRaises(tempest_exc.NotFound, images.delete_image,
                              self.image.id)
            return
        snapshot = images.create_image(server_id, name='schema-snap')
        snapshot_id = snapshot.response['location'].rsplit('/', 1)[-1]
        self.wait(server_id, 'ACTIVE')
        shown = images.show_image(snapshot_id)['image']
        self.assertEqual(('schema-snap', 'ACTIVE', 100, server_id),
                         (shown['name'], shown['status'],
                          shown['progress'], shown['server']['id']))
        self.assertEqual({self.image.id, snapshot_id}, {
            i['id'] for i in images.list_images()['images']})
        detail = images.list_images(detail=True)['images']
        self.assertEqual({self.image.id: 'none'}, {
            i['id']: i['metadata'].get('kernel_id') for i in detail
            if 'server' not in i})
        self.assertEqual(['cirros'], [i['name'] for i in images.list_images(
            name='cirros')['images']])
        # Upstream's proxy filters: the server (its id or a link), the
        # kind of image, the status, sizes and time.
        server_link = self.allinone.api_url + '/servers/' + server_id
        for params in ({'server': server_id}, {'server': server_link},
                       {'type': 'snapshot'}, {'status': 'ACTIVE',
                                              'type': 'snapshot'}):
            self.assertEqual([snapshot_id], [
                i['id'] for i in images.list_images(**params)['images']],
                params)
        self.assertEqual([], images.list_images(type='backup')['images'])
        self.assertEqual([], images.list_images(
            detail=True, minRam=10 ** 6)['images'])
        self.assertEqual(2, len(images.list_images(
            **{'changes-since': '2000-01-01T00:00:00Z'})['images']))
        self.assertRaises(tempest_exc.NotFound, images.delete_image, '')
        images.set_image_metadata(snapshot_id, {'purpose': 'schema'})
        images.update_image_metadata(snapshot_id, {'stage': 'one'})
        self.assertEqual({'purpose': 'schema', 'stage': 'one'}, {
            k: v for k, v in images.list_image_metadata(snapshot_id)[
                'metadata'].items() if k in ('purpose', 'stage')})
        images.set_image_metadata_item(snapshot_id, 'stage',
                                       {'stage': 'two'})
        self.assertEqual({'stage': 'two'}, images.show_image_metadata_item(
            snapshot_id, 'stage')['meta'])
        images.delete_image_metadata_item(snapshot_id, 'stage')
        self.assertRaises(tempest_exc.NotFound,
                          images.show_image_metadata_item, snapshot_id,
                          'stage')
        images.delete_image(snapshot_id)
        self.assertRaises(tempest_exc.NotFound, images.show_image,
                          snapshot_id)
        self.assertRaises(tempest_exc.NotFound, images.delete_image,
                          snapshot_id)

    def check_hypervisors(self, version):
        hypervisors = self.client(hypervisor_client.HypervisorClient)
        at_least = microversion.APIVersion.parse(version).at_least
        listed = hypervisors.list_hypervisors()['hypervisors']
        self.assertEqual(1, len(listed))
        if at_least('2.88'):
            # Tempest has no schema of 2.88's details (usage fields gone,
            # 'uptime' added): its 2.53 one would fail them.
            return
        hypervisors.list_hypervisors(detail=True)
        hypervisors.show_hypervisor(listed[0]['id'])
        hypervisors.show_hypervisor_statistics()
        # Not tracked: 501, as upstream for a driver without uptime.
        self.assertRaises(tempest_exc.NotImplemented,
                          hypervisors.show_hypervisor_uptime,
                          listed[0]['id'])
        if not at_least('2.53'):
            name = listed[0]['hypervisor_hostname']
            hypervisors.search_hypervisor(name)
            hypervisors.list_servers_on_hypervisor(name)

    def check_services(self, version):
        services = self.client(services_client.ServicesClient)
        listed = services.list_services(binary='nova-compute')['services']
        self.assertEqual(['cmp1'], [s['host'] for s in listed])
        if microversion.APIVersion.parse(version).at_least('2.53'):
            services.update_service(listed[0]['id'], status='enabled')

    def check_limits_and_migrations(self):
        limits = self.client(limits_client.LimitsClient).show_limits()
        self.assertEqual(-1, limits['limits']['absolute'][
            'maxTotalInstances'])
        self.client(migrations_client.MigrationsClient).list_migrations()
        zones = self.client(availability_zone_client.AvailabilityZoneClient)
        self.assertEqual(['nova'], [z['zoneName'] for z in zones.
                                    list_availability_zones()[
                                        'availabilityZoneInfo']])
        zones.list_availability_zones(detail=True)

    def check(self, version):
        self.at(version)
        self.check_versions()
        self.check_flavors()
        self.check_keypairs()
        self.check_hypervisors(version)
        self.check_services(version)
        self.check_limits_and_migrations()
        self.check_servers(version)


def _test_at(version):
    def test(self):
        self.check(version)
    test.__name__ = 'test_shapes_at_%s' % version.replace('.', '_')
    test.__doc__ = 'Every call at microversion %s.' % version
    return test


for _version in VERSIONS:
    _test = _test_at(_version)
    setattr(ResponseSchemaTest, _test.__name__, _test)
