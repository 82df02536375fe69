"""Policy: every route checks its rule; the defaults, rule by rule, through
the REST API with noauth2 tokens of an admin and of members of two
projects."""

import os

import fixtures

from oslo_policy import opts as policy_opts

from nova.api import wsgi_app
from nova.db import api as db
from nova import policies
from nova.tests.unit.api import fakes

SERVER = '{server}'
# The audit: the rule each authenticated route checks. A route added
# without an entry here fails test_table_covers_every_route.
ROUTE_RULES = {
    ('GET', '/v2.1/flavors'): policies.FLAVORS,
    ('POST', '/v2.1/flavors'): policies.FLAVOR_CREATE,
    ('GET', '/v2.1/flavors/detail'): policies.FLAVORS,
    ('GET', '/v2.1/flavors/{flavor_id}'): policies.FLAVORS,
    ('DELETE', '/v2.1/flavors/{flavor_id}'): policies.FLAVOR_DELETE,
    ('GET', '/v2.1/flavors/{flavor_id}/os-extra_specs'):
        policies.EXTRA_SPECS_INDEX,
    ('POST', '/v2.1/flavors/{flavor_id}/os-extra_specs'):
        policies.EXTRA_SPECS_CREATE,
    ('GET', '/v2.1/flavors/{flavor_id}/os-extra_specs/{key}'):
        policies.EXTRA_SPECS_SHOW,
    ('PUT', '/v2.1/flavors/{flavor_id}/os-extra_specs/{key}'):
        policies.EXTRA_SPECS_UPDATE,
    ('DELETE', '/v2.1/flavors/{flavor_id}/os-extra_specs/{key}'):
        policies.EXTRA_SPECS_DELETE,
    ('GET', '/v2.1/servers'): policies.SERVERS_INDEX,
    ('POST', '/v2.1/servers'): policies.SERVERS_CREATE,
    ('GET', '/v2.1/servers/detail'): policies.SERVERS_DETAIL,
    ('GET', '/v2.1/servers/{server_id}'): policies.SERVERS_SHOW,
    ('DELETE', '/v2.1/servers/{server_id}'): policies.SERVERS_DELETE,
    ('GET', '/v2.1/servers/{server_id}/metadata'): policies.METADATA_INDEX,
    ('POST', '/v2.1/servers/{server_id}/metadata'): policies.METADATA_UPDATE,
    ('PUT', '/v2.1/servers/{server_id}/metadata/{key}'):
        policies.METADATA_UPDATE,
    ('DELETE', '/v2.1/servers/{server_id}/metadata/{key}'):
        policies.METADATA_DELETE,
    # Each action has its own rule (server_actions); reboot stands for all.
    ('POST', '/v2.1/servers/{server_id}/action'): policies.SERVERS_REBOOT,
    ('GET', '/v2.1/servers/{server_id}/os-instance-actions'):
        policies.INSTANCE_ACTIONS_LIST,
    ('GET', '/v2.1/servers/{server_id}/os-instance-actions/{request_id}'):
        policies.INSTANCE_ACTIONS_SHOW,
    ('GET', '/v2.1/limits'): policies.LIMITS,
    ('GET', '/v2.1/os-availability-zone'): policies.AZ_LIST,
    ('GET', '/v2.1/os-availability-zone/detail'): policies.AZ_DETAIL,
    ('GET', '/v2.1/images'): policies.IMAGES,
    ('GET', '/v2.1/images/detail'): policies.IMAGES,
    ('GET', '/v2.1/images/{image_id}'): policies.IMAGES,
    ('DELETE', '/v2.1/images/{image_id}'): policies.IMAGES_UPDATE,
    ('GET', '/v2.1/images/{image_id}/metadata'): policies.IMAGES,
    ('POST', '/v2.1/images/{image_id}/metadata'): policies.IMAGES_UPDATE,
    ('PUT', '/v2.1/images/{image_id}/metadata'): policies.IMAGES_UPDATE,
    ('GET', '/v2.1/images/{image_id}/metadata/{key}'): policies.IMAGES,
    ('PUT', '/v2.1/images/{image_id}/metadata/{key}'):
        policies.IMAGES_UPDATE,
    ('DELETE', '/v2.1/images/{image_id}/metadata/{key}'):
        policies.IMAGES_UPDATE,
    ('GET', '/v2.1/servers/{server_id}/metadata/{key}'):
        policies.METADATA_INDEX,
    ('PUT', '/v2.1/servers/{server_id}/metadata'): policies.METADATA_UPDATE,
    ('GET', '/v2.1/os-migrations'): policies.MIGRATIONS_INDEX,
    ('GET', '/v2.1/servers/{server_id}/migrations'):
        policies.SERVER_MIGRATIONS,
    ('GET', '/v2.1/servers/{server_id}/migrations/{migration_id}'):
        policies.SERVER_MIGRATIONS,
    ('GET', '/v2.1/os-services'): policies.SERVICES_LIST,
    ('PUT', '/v2.1/os-services/{service_id}'): policies.SERVICES_UPDATE,
    ('PUT', '/v2.1/servers/{server_id}'): policies.SERVERS_UPDATE,
    ('GET', '/v2.1/os-keypairs'): policies.KEYPAIRS_INDEX,
    ('POST', '/v2.1/os-keypairs'): policies.KEYPAIRS_CREATE,
    ('GET', '/v2.1/os-keypairs/{keypair_name}'): policies.KEYPAIRS_SHOW,
    ('DELETE', '/v2.1/os-keypairs/{keypair_name}'): policies.KEYPAIRS_DELETE,
    ('GET', '/v2.1/os-server-groups'): policies.SERVER_GROUPS_INDEX,
    ('POST', '/v2.1/os-server-groups'): policies.SERVER_GROUPS_CREATE,
    ('GET', '/v2.1/os-server-groups/{group_id}'):
        policies.SERVER_GROUPS_SHOW,
    ('DELETE', '/v2.1/os-server-groups/{group_id}'):
        policies.SERVER_GROUPS_DELETE,
    ('GET', '/v2.1/os-quota-sets/{project_id}'): policies.QUOTA_SETS_SHOW,
    ('PUT', '/v2.1/os-quota-sets/{project_id}'): policies.QUOTA_SETS_UPDATE,
    ('DELETE', '/v2.1/os-quota-sets/{project_id}'):
        policies.QUOTA_SETS_DELETE,
    ('GET', '/v2.1/os-quota-sets/{project_id}/defaults'):
        policies.QUOTA_SETS_DEFAULTS,
    ('GET', '/v2.1/os-quota-sets/{project_id}/detail'):
        policies.QUOTA_SETS_DETAIL,
    ('GET', '/v2.1/os-quota-sets/{project_id}/pci-aliases'):
        policies.QUOTA_SETS_SHOW,
    ('PUT', '/v2.1/os-quota-sets/{project_id}/pci-aliases'):
        policies.QUOTA_SETS_UPDATE,
    ('GET', '/v2.1/os-quota-class-sets/{class_name}'):
        policies.QUOTA_CLASS_SETS_SHOW,
    ('PUT', '/v2.1/os-quota-class-sets/{class_name}'):
        policies.QUOTA_CLASS_SETS_UPDATE,
    ('GET', '/v2.1/os-hypervisors'): policies.HYPERVISORS_LIST,
    ('GET', '/v2.1/os-hypervisors/detail'): policies.HYPERVISORS_LIST_DETAIL,
    ('GET', '/v2.1/os-hypervisors/statistics'):
        policies.HYPERVISORS_STATISTICS,
    ('GET', '/v2.1/os-hypervisors/{hypervisor_id}'):
        policies.HYPERVISORS_SHOW,
    ('GET', '/v2.1/os-hypervisors/{hypervisor_id}/uptime'):
        policies.HYPERVISORS_UPTIME,
    ('GET', '/v2.1/os-hypervisors/{hypervisor_id}/pci-devices'):
        policies.HYPERVISORS_PCI_DEVICES,
    ('GET', '/v2.1/os-hypervisors/{pattern}/search'):
        policies.HYPERVISORS_SEARCH,
    ('GET', '/v2.1/os-hypervisors/{pattern}/servers'):
        policies.HYPERVISORS_SERVERS,
}
# Answered without a token, as upstream: version discovery.
PUBLIC_ROUTES = {('GET', '/'), ('GET', '/v2.1'), ('GET', '/v2.1/'),
                 ('GET', '/v2'), ('GET', '/v2/'),
                 ('GET', '/identity/v3')}
BODIES = {
    ('POST', '/v2.1/flavors'): {'flavor': {
        'name': 'new', 'ram': 512, 'vcpus': 1, 'disk': 0}},
    ('POST', '/v2.1/flavors/{flavor_id}/os-extra_specs'):
        {'extra_specs': {'hw:numa_nodes': '2'}},
    ('PUT', '/v2.1/flavors/{flavor_id}/os-extra_specs/{key}'):
        {'hw:numa_nodes': '2'},
    ('POST', '/v2.1/servers'): {'server': {'name': 'vm', 'flavorRef': 'f1'}},
    ('POST', '/v2.1/servers/{server_id}/action'):
        {'reboot': {'type': 'SOFT'}},
    ('PUT', '/v2.1/os-services/{service_id}'):
        {'host': 'cmp1', 'binary': 'nova-compute'},
    ('POST', '/v2.1/os-keypairs'): {'keypair': {'name': 'key1'}},
    ('POST', '/v2.1/os-server-groups'): {'server_group': {
        'name': 'g', 'policies': ['anti-affinity']}},
    ('PUT', '/v2.1/servers/{server_id}'): {'server': {'name': 'renamed'}},
    ('PUT', '/v2.1/os-quota-sets/{project_id}'):
        {'quota_set': {'instances': 1}},
    ('PUT', '/v2.1/os-quota-sets/{project_id}/pci-aliases'):
        {'quota_set': {'h200': 1}},
    ('PUT', '/v2.1/os-quota-class-sets/{class_name}'):
        {'quota_class_set': {'instances': 1}},
}


class PolicyTestCase(fakes.APITestCase):

    def setUp(self):
        super().setUp()
        self.make_flavor(extra_specs={'hw:numa_nodes': '1'})

    def use_policy_file(self, rules: dict[str, str]) -> None:
        """Rebuild the app with ``rules`` overriding the defaults."""
        path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'policy.yaml')
        with open(path, 'w') as f:
            f.writelines('"%s": "%s"\n' % item for item in rules.items())
        policy_opts.set_defaults(self.conf, policy_file=path)
        self.app = wsgi_app.make_app(self.conf, self.compute_api)

    def boot(self, token: str, name: str = 'vm') -> str:
        response = self.request('POST', '/v2.1/servers', {'server': {
            'name': name, 'flavorRef': 'f1'}}, token=token)
        self.assertEqual(202, response.status_int, response.text)
        return response.json['server']['id']

    def status(self, method: str, path: str, token: str, body=None,
               version=None) -> int:
        return self.request(method, path, body, token=token,
                            version=version).status_int


class TestEveryRouteChecksPolicy(PolicyTestCase):

    def test_table_covers_every_route(self):
        routed = {(method, path) for path, method, _h in
                  self.app.router.routes()}
        self.assertEqual(set(ROUTE_RULES) | PUBLIC_ROUTES, routed)
        defaults = {rule.name for rule in policies.list_rules()}
        self.assertLessEqual(set(ROUTE_RULES.values()), defaults)

    def test_each_route_refuses_when_its_rule_denies(self):
        """Even the admin is refused a route whose rule says no; the fault
        names the rule, so each route is shown to check its own rule."""
        server = self.boot(fakes.ADMIN)
        group = db.instance_group_create(self.admin_context, {
            'name': 'g', 'project_id': self.admin_context.project_id,
            'policy': 'affinity'})
        values = {'flavor_id': 'f1', 'key': 'hw:numa_nodes',
                  'group_id': group.uuid, 'server_id': server,
                  'image_id': 'c1',
                  'request_id': 'req-unknown', 'migration_id': '1',
                  'service_id': 'disable', 'hypervisor_id': '1',
                  'pattern': 'node', 'keypair_name': 'key1',
                  'project_id': 'proj-a', 'class_name': 'default'}
        for (method, template), rule in sorted(ROUTE_RULES.items()):
            self.use_policy_file({rule: '!'})
            response = self.request(method, template.format(**values),
                                    BODIES.get((method, template)))
            self.assertFault(response, 403, 'forbidden', rule)
        # Nothing was changed by the refused writes.
        self.assertIsNotNone(db.instance_get_by_uuid(self.admin_context,
                                                     server))
        self.assertEqual({'hw:numa_nodes': '1'}, db.flavor_extra_specs_get(
            self.admin_context, 'f1'))
        self.assertEqual(['f1'], [f.flavorid for f in db.flavor_get_all(
            self.admin_context, is_public=None)])

    def test_public_routes_need_no_token(self):
        for method, path in PUBLIC_ROUTES:
            self.assertEqual(200, self.status(method, path, token=None),
                             path)


class TestFlavorRules(PolicyTestCase):

    def test_flavors_readable_by_everyone(self):
        for token in (fakes.ADMIN, fakes.MEMBER, fakes.OTHER):
            for path in ('/v2.1/flavors', '/v2.1/flavors/detail',
                         '/v2.1/flavors/f1'):
                self.assertEqual(200, self.status('GET', path, token), path)

    def test_flavor_create_admin_only(self):
        body = BODIES['POST', '/v2.1/flavors']
        self.assertFault(self.request('POST', '/v2.1/flavors', body,
                                      token=fakes.MEMBER),
                         403, 'forbidden', policies.FLAVOR_CREATE)
        self.assertEqual(200, self.status('POST', '/v2.1/flavors',
                                          fakes.ADMIN, body))

    def test_flavor_delete_admin_only(self):
        self.assertFault(self.request('DELETE', '/v2.1/flavors/f1',
                                      token=fakes.MEMBER),
                         403, 'forbidden', policies.FLAVOR_DELETE)
        self.assertEqual(200, self.status('GET', '/v2.1/flavors/f1',
                                          fakes.MEMBER))
        self.assertEqual(202, self.status('DELETE', '/v2.1/flavors/f1',
                                          fakes.ADMIN))

    def test_extra_specs_readable_by_members(self):
        url = '/v2.1/flavors/f1/os-extra_specs'
        for token in (fakes.MEMBER, fakes.OTHER, fakes.ADMIN):
            response = self.request('GET', url, token=token)
            self.assertEqual({'hw:numa_nodes': '1'},
                             response.json['extra_specs'])
            response = self.request('GET', url + '/hw:numa_nodes',
                                    token=token)
            self.assertEqual({'hw:numa_nodes': '1'}, response.json)

    def test_extra_specs_in_views_follow_index_rule(self):
        server = self.boot(fakes.MEMBER)
        flavor = self.request('GET', '/v2.1/flavors/f1', token=fakes.MEMBER,
                              version='2.61').json['flavor']
        self.assertEqual({'hw:numa_nodes': '1'}, flavor['extra_specs'])
        self.use_policy_file({policies.EXTRA_SPECS_INDEX: 'role:admin'})
        flavor = self.request('GET', '/v2.1/flavors/f1', token=fakes.MEMBER,
                              version='2.61').json['flavor']
        self.assertNotIn('extra_specs', flavor)
        shown = self.request('GET', '/v2.1/servers/%s' % server,
                             token=fakes.MEMBER,
                             version='2.47').json['server']
        self.assertNotIn('extra_specs', shown['flavor'])
        shown = self.request('GET', '/v2.1/servers/%s' % server,
                             token=fakes.ADMIN,
                             version='2.47').json['server']
        self.assertEqual({'hw:numa_nodes': '1'},
                         shown['flavor']['extra_specs'])

    def test_extra_specs_writes_admin_only(self):
        url = '/v2.1/flavors/f1/os-extra_specs'
        for method, path, body, rule in (
                ('POST', url, {'extra_specs': {'hw:numa_nodes': '2'}},
                 policies.EXTRA_SPECS_CREATE),
                ('PUT', url + '/hw:numa_nodes', {'hw:numa_nodes': '2'},
                 policies.EXTRA_SPECS_UPDATE),
                ('DELETE', url + '/hw:numa_nodes', None,
                 policies.EXTRA_SPECS_DELETE)):
            before = db.flavor_extra_specs_get(self.admin_context, 'f1')
            self.assertFault(self.request(method, path, body,
                                          token=fakes.MEMBER),
                             403, 'forbidden', rule)
            self.assertEqual(before, db.flavor_extra_specs_get(
                self.admin_context, 'f1'))
            self.assertEqual(200, self.status(method, path, fakes.ADMIN,
                                              body))
        self.assertEqual({}, db.flavor_extra_specs_get(self.admin_context,
                                                       'f1'))


class TestServerRules(PolicyTestCase):

    def test_create_in_callers_project(self):
        server = self.boot(fakes.MEMBER)
        self.assertEqual('proj-a', db.instance_get_by_uuid(
            self.admin_context, server).project_id)

    def test_create_refused_without_member_role(self):
        self.use_policy_file({'project_member_or_admin': 'role:admin'})
        self.assertFault(self.request('POST', '/v2.1/servers', BODIES[
            'POST', '/v2.1/servers'], token=fakes.MEMBER),
            403, 'forbidden', policies.SERVERS_CREATE)
        self.assertEqual([], self.compute_api.calls)

    def test_lists_scoped_to_own_project(self):
        mine = self.boot(fakes.MEMBER)
        theirs = self.boot(fakes.OTHER)
        admins = self.boot(fakes.ADMIN)
        for token, expected in ((fakes.MEMBER, mine), (fakes.OTHER, theirs),
                                (fakes.ADMIN, admins)):
            for path in ('/v2.1/servers', '/v2.1/servers/detail'):
                listed = self.request('GET', path, token=token).json
                self.assertEqual([expected],
                                 [s['id'] for s in listed['servers']])

    def test_all_projects_admin_only(self):
        every = {self.boot(fakes.MEMBER), self.boot(fakes.OTHER)}
        for path, rule in (
                ('/v2.1/servers', policies.SERVERS_INDEX_ALL_PROJECTS),
                ('/v2.1/servers/detail',
                 policies.SERVERS_DETAIL_ALL_PROJECTS)):
            self.assertFault(self.request('GET', path + '?all_tenants=1',
                                          token=fakes.MEMBER),
                             403, 'forbidden', rule)
            listed = self.request('GET', path + '?all_tenants=1').json
            self.assertEqual(every, {s['id'] for s in listed['servers']})

    def test_show_owner_or_admin_other_project_404(self):
        server = self.boot(fakes.MEMBER)
        path = '/v2.1/servers/%s' % server
        self.assertEqual(200, self.status('GET', path, fakes.MEMBER))
        self.assertEqual(200, self.status('GET', path, fakes.ADMIN))
        self.assertFault(self.request('GET', path, token=fakes.OTHER),
                         404, 'itemNotFound', server)

    def test_delete_owner_or_admin_other_project_404(self):
        mine = self.boot(fakes.MEMBER, 'mine')
        other = self.boot(fakes.MEMBER, 'other')
        self.assertFault(self.request('DELETE', '/v2.1/servers/%s' % mine,
                                      token=fakes.OTHER),
                         404, 'itemNotFound', mine)
        self.assertNotIn(('delete', mine), self.compute_api.calls)
        self.assertEqual(204, self.status('DELETE', '/v2.1/servers/%s' % mine,
                                          fakes.MEMBER))
        self.assertEqual(204, self.status(
            'DELETE', '/v2.1/servers/%s' % other, fakes.ADMIN))
        self.assertEqual([('delete', mine), ('delete', other)],
                         [c for c in self.compute_api.calls
                          if c[0] == 'delete'])

    def test_own_server_refused_by_rule_is_403(self):
        server = self.boot(fakes.MEMBER)
        self.use_policy_file({policies.SERVERS_DELETE: 'role:admin'})
        self.assertFault(self.request('DELETE', '/v2.1/servers/%s' % server,
                                      token=fakes.MEMBER),
                         403, 'forbidden', policies.SERVERS_DELETE)

    def test_extended_attributes_admin_only(self):
        server = self.boot(fakes.MEMBER)
        db.instance_update(self.admin_context, server,
                           {'host': 'cmp1', 'node': 'cmp1.example'})
        attrs = ('OS-EXT-SRV-ATTR:host',
                 'OS-EXT-SRV-ATTR:hypervisor_hostname',
                 'OS-EXT-SRV-ATTR:instance_name')
        shown = self.request('GET', '/v2.1/servers/%s' % server,
                             token=fakes.MEMBER).json['server']
        (listed,) = self.request('GET', '/v2.1/servers/detail',
                                 token=fakes.MEMBER).json['servers']
        for view in (shown, listed):
            self.assertEqual(set(), set(attrs) & set(view))
            self.assertNotIn('cmp1', str(view))
        shown = self.request('GET', '/v2.1/servers/%s' % server,
                             token=fakes.ADMIN).json['server']
        (listed,) = self.request('GET', '/v2.1/servers/detail?all_tenants=1',
                                 token=fakes.ADMIN).json['servers']
        for view in (shown, listed):
            self.assertEqual(('cmp1', 'cmp1.example'),
                             (view[attrs[0]], view[attrs[1]]))
            self.assertIn(server, view[attrs[2]])


class TestMiscRules(PolicyTestCase):

    def test_limits_own_project_or_admin(self):
        self.boot(fakes.MEMBER)
        used = self.request('GET', '/v2.1/limits', token=fakes.OTHER).json
        self.assertEqual(0, used['limits']['absolute']['totalInstancesUsed'])
        self.assertFault(self.request('GET', '/v2.1/limits?tenant_id=proj-a',
                                      token=fakes.OTHER),
                         403, 'forbidden', policies.LIMITS_OTHER_PROJECT)
        used = self.request('GET', '/v2.1/limits?tenant_id=proj-a',
                            token=fakes.MEMBER).json
        self.assertEqual(1, used['limits']['absolute']['totalInstancesUsed'])
        used = self.request('GET', '/v2.1/limits?tenant_id=proj-a',
                            token=fakes.ADMIN).json
        self.assertEqual(1, used['limits']['absolute']['totalInstancesUsed'])

    def test_availability_zone_detail_admin_only(self):
        self.assertEqual(200, self.status('GET', '/v2.1/os-availability-zone',
                                          fakes.MEMBER))
        self.assertFault(self.request('GET',
                                      '/v2.1/os-availability-zone/detail',
                                      token=fakes.MEMBER),
                         403, 'forbidden', policies.AZ_DETAIL)
        self.assertEqual(200, self.status(
            'GET', '/v2.1/os-availability-zone/detail', fakes.ADMIN))

    def test_images_for_everyone(self):
        for token in (fakes.MEMBER, fakes.ADMIN):
            self.assertEqual(200, self.status('GET', '/v2.1/images/c1',
                                              token))
            self.assertEqual(200, self.status('GET', '/v2.1/images', token))
