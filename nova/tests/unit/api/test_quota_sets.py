"""os-quota-sets, os-quota-class-sets and /limits through the WSGI app on
a real database: key sets per microversion (as Tempest compares them),
defaults, validation and policy."""

import jsonschema
from tempest.lib.api_schema.response.compute.v2_1 import limits as limits_v21
from tempest.lib.api_schema.response.compute.v2_1 import \
    quota_classes as classes_v21
from tempest.lib.api_schema.response.compute.v2_1 import quotas as quotas_v21
from tempest.lib.api_schema.response.compute.v2_36 import \
    limits as limits_v236
from tempest.lib.api_schema.response.compute.v2_36 import \
    quotas as quotas_v236
from tempest.lib.api_schema.response.compute.v2_39 import \
    limits as limits_v239
from tempest.lib.api_schema.response.compute.v2_50 import \
    quota_classes as classes_v250
from tempest.lib.api_schema.response.compute.v2_57 import \
    limits as limits_v257
from tempest.lib.api_schema.response.compute.v2_57 import \
    quota_classes as classes_v257
from tempest.lib.api_schema.response.compute.v2_57 import \
    quotas as quotas_v257

from nova import context as nova_context
from nova.db import api as db
from nova.tests.unit.api import fakes

BASE = {'instances', 'cores', 'ram', 'metadata_items', 'key_pairs',
        'server_groups', 'server_group_members', 'injected_files',
        'injected_file_content_bytes', 'injected_file_path_bytes',
        'fixed_ips', 'floating_ips', 'security_groups',
        'security_group_rules'}
NETWORK = {'fixed_ips', 'floating_ips', 'security_groups',
           'security_group_rules'}
INJECTED = {'injected_files', 'injected_file_content_bytes',
            'injected_file_path_bytes'}
SERVER_GROUPS = {'server_groups', 'server_group_members'}
DEFAULTS = {'instances': -1, 'cores': -1, 'ram': -1,
            'metadata_items': 128, 'key_pairs': 100, 'server_groups': 10,
            'server_group_members': 10, 'injected_files': 5,
            'injected_file_content_bytes': 10240,
            'injected_file_path_bytes': 255, 'fixed_ips': -1,
            'floating_ips': -1, 'security_groups': -1,
            'security_group_rules': -1}
QS = '/v2.1/os-quota-sets/proj-a'


class QuotaTestCase(fakes.APITestCase):

    def setUp(self):
        super().setUp()
        self.compute_api.aliases = {'h200': None, 'a100': None}
        self.make_flavor()

    def get(self, path, version=None, token=fakes.ADMIN):
        response = self.request('GET', path, token=token, version=version)
        self.assertEqual(200, response.status_int, response.text)
        return response.json

    def put(self, path, body, version=None, status=200):
        response = self.request('PUT', path, body, version=version)
        self.assertEqual(status, response.status_int, response.text)
        return response.json

    def boot(self, token=fakes.MEMBER):
        response = self.request('POST', '/v2.1/servers', {'server': {
            'name': 'vm', 'flavorRef': 'f1'}}, token=token)
        self.assertEqual(202, response.status_int, response.text)


class TestQuotaSetKeys(QuotaTestCase):

    def test_show_keys_per_microversion(self):
        for version, keys in (('2.1', BASE), ('2.35', BASE),
                              ('2.36', BASE - NETWORK),
                              ('2.56', BASE - NETWORK),
                              ('2.57', BASE - NETWORK - INJECTED),
                              ('2.96', BASE - NETWORK - INJECTED)):
            for path in (QS, QS + '/defaults'):
                quota_set = self.get(path, version)['quota_set']
                self.assertEqual(keys | {'id'}, set(quota_set),
                                 (version, path))
                self.assertEqual('proj-a', quota_set['id'])
                self.assertEqual({k: DEFAULTS[k] for k in keys},
                                 {k: quota_set[k] for k in keys})
            detail = self.get(QS + '/detail', version)['quota_set']
            self.assertEqual(keys | {'id'}, set(detail), version)
            self.assertEqual({'limit': -1, 'in_use': 0, 'reserved': 0},
                             detail['instances'])

    def test_update_keys_per_microversion_and_no_id(self):
        answer = self.put(QS, {'quota_set': {'cores': 40}}, '2.1')
        self.assertEqual(BASE, set(answer['quota_set']))
        self.assertEqual(40, answer['quota_set']['cores'])
        answer = self.put(QS, {'quota_set': {'ram': '1024'}}, '2.57')
        self.assertEqual(BASE - NETWORK - INJECTED, set(answer['quota_set']))
        self.assertEqual(1024, answer['quota_set']['ram'])
        # Keys a microversion dropped are refused from it on.
        for version, key in (('2.36', 'floating_ips'),
                             ('2.57', 'injected_files')):
            response = self.request('PUT', QS, {'quota_set': {key: 1}},
                                    version=version)
            self.assertFault(response, 400, 'badRequest', key)
        self.put(QS, {'quota_set': {'floating_ips': 3}}, '2.35')
        self.assertEqual(3, self.get(QS, '2.35')['quota_set']['floating_ips'])

    def test_class_keys_per_microversion(self):
        path = '/v2.1/os-quota-class-sets/default'
        for version, keys in (('2.1', BASE - SERVER_GROUPS),
                              ('2.49', BASE - SERVER_GROUPS),
                              ('2.50', BASE - NETWORK),
                              ('2.57', BASE - NETWORK - INJECTED)):
            quota_class = self.get(path, version)['quota_class_set']
            self.assertEqual(keys | {'id'}, set(quota_class), version)
            self.assertEqual('default', quota_class['id'])
        answer = self.put(path, {'quota_class_set': {'instances': 7}},
                          '2.50')['quota_class_set']
        self.assertEqual(BASE - NETWORK, set(answer))
        self.assertEqual(7, answer['instances'])
        response = self.request('PUT', path, {'quota_class_set': {
            'server_groups': 1}}, version='2.49')
        self.assertFault(response, 400, 'badRequest', 'server_groups')


class TestQuotaSetValues(QuotaTestCase):

    def test_project_user_class_and_config_precedence(self):
        self.config.config(cores=30, group='quota')
        self.assertEqual(30, self.get(QS)['quota_set']['cores'])
        self.put('/v2.1/os-quota-class-sets/default',
                 {'quota_class_set': {'cores': 25, 'ram': 4096}})
        self.assertEqual(25, self.get(QS)['quota_set']['cores'])
        self.assertEqual(25, self.get(QS + '/defaults')['quota_set']['cores'])
        self.put(QS, {'quota_set': {'cores': 12}})
        self.put(QS + '?user_id=alice', {'quota_set': {'cores': 4}})
        self.assertEqual(12, self.get(QS)['quota_set']['cores'])
        user = self.get(QS + '?user_id=alice')['quota_set']
        self.assertEqual((4, 4096), (user['cores'], user['ram']))
        # Another project keeps the defaults.
        other = self.get('/v2.1/os-quota-sets/proj-b')['quota_set']
        self.assertEqual(25, other['cores'])
        # DELETE of the user's limits, then of the project's.
        self.assertEqual(202, self.request(
            'DELETE', QS + '?user_id=alice').status_int)
        self.assertEqual(12, self.get(QS + '?user_id=alice')[
            'quota_set']['cores'])
        self.put(QS + '?user_id=alice', {'quota_set': {'cores': 4}})
        self.assertEqual(202, self.request('DELETE', QS).status_int)
        self.assertEqual(25, self.get(QS + '?user_id=alice')[
            'quota_set']['cores'])

    def test_bad_values_are_400_naming_key_and_value(self):
        for value in (-2, 'ten', '1.5', 2 ** 31, True, None):
            response = self.request('PUT', QS, {'quota_set': {
                'cores': value}})
            self.assertFault(response, 400, 'badRequest', 'cores',
                             repr(value))
        response = self.request('PUT', QS, {'quota_set': {'gpus': 1}})
        self.assertFault(response, 400, 'badRequest', 'gpus')
        response = self.request('PUT', QS, {'quota_set': {'cores': 1,
                                                          'force': 'maybe'}})
        self.assertFault(response, 400, 'badRequest', 'force')
        self.assertEqual(-1, self.get(QS)['quota_set']['cores'])
        self.put(QS, {'quota_set': {'cores': '-1', 'ram': ' 2048 '}})
        quota_set = self.get(QS)['quota_set']
        self.assertEqual((-1, 2048), (quota_set['cores'], quota_set['ram']))

    def test_limit_below_usage_refused_unless_forced(self):
        self.boot()
        self.boot()
        message = self.assertFault(
            self.request('PUT', QS, {'quota_set': {'instances': 1}}),
            400, 'badRequest')
        self.assertEqual('Quota limit 1 for instances must be greater than '
                         'or equal to already used and reserved 2.',
                         message)
        self.assertFault(
            self.request('PUT', QS, {'quota_set': {'cores': 3}}),
            400, 'badRequest', 'cores', 'reserved 4')
        self.put(QS, {'quota_set': {'instances': 2, 'cores': -1}})
        self.put(QS, {'quota_set': {'instances': 1, 'force': True}})
        detail = self.get(QS + '/detail')['quota_set']
        self.assertEqual({'limit': 1, 'in_use': 2, 'reserved': 0},
                         detail['instances'])
        self.assertEqual({'limit': -1, 'in_use': 4096, 'reserved': 0},
                         detail['ram'])

    def test_user_limit_above_project_limit_refused(self):
        self.put(QS, {'quota_set': {'instances': 5}})
        self.assertFault(
            self.request('PUT', QS + '?user_id=alice',
                         {'quota_set': {'instances': 6}}),
            400, 'badRequest', 'Quota limit 6 for instances must be less '
            'than or equal to 5')
        self.put(QS + '?user_id=alice', {'quota_set': {'instances': 5}})

    def test_policy(self):
        self.assertEqual(200, self.request('GET', QS,
                                           token=fakes.MEMBER).status_int)
        self.assertEqual(200, self.request('GET', QS + '/detail',
                                           token=fakes.MEMBER).status_int)
        for method, path, body in (
                ('GET', '/v2.1/os-quota-sets/proj-b', None),
                ('GET', '/v2.1/os-quota-sets/proj-b/detail', None),
                ('PUT', QS, {'quota_set': {'cores': 1}}),
                ('DELETE', QS, None),
                ('GET', '/v2.1/os-quota-class-sets/default', None),
                ('PUT', '/v2.1/os-quota-class-sets/default',
                 {'quota_class_set': {'cores': 1}})):
            self.assertFault(self.request(method, path, body,
                                          token=fakes.MEMBER),
                             403, 'forbidden', 'os-quota')
        # Everyone reads the defaults.
        self.assertEqual(200, self.request(
            'GET', '/v2.1/os-quota-sets/proj-b/defaults',
            token=fakes.MEMBER).status_int)
        self.assertEqual(-1, self.get(QS)['quota_set']['cores'])


class TestPciAliasQuotas(QuotaTestCase):

    PCI = QS + '/pci-aliases'

    def test_defaults_set_and_shown_apart_from_upstream_keys(self):
        self.config.config(pci_alias_limits={'h200': '16'}, group='quota')
        shown = self.get(self.PCI)['quota_set']
        self.assertEqual({'id': 'proj-a',
                          'a100': {'limit': -1, 'in_use': 0, 'reserved': 0},
                          'h200': {'limit': 16, 'in_use': 0,
                                   'reserved': 0}}, shown)
        answer = self.put(self.PCI, {'quota_set': {'h200': '4'}})
        self.assertEqual({'quota_set': {'a100': -1, 'h200': 4}}, answer)
        self.assertEqual(4, self.get(self.PCI)['quota_set']['h200']['limit'])
        self.put(self.PCI + '?user_id=alice', {'quota_set': {'h200': 2}})
        self.assertEqual(2, self.get(self.PCI + '?user_id=alice')[
            'quota_set']['h200']['limit'])
        # Upstream's key set is untouched.
        self.assertEqual(BASE | {'id'}, set(self.get(QS)['quota_set']))
        # Resetting the project forgets its alias limits too.
        self.request('DELETE', QS)
        self.assertEqual(16, self.get(self.PCI)['quota_set']['h200']['limit'])

    def test_unknown_alias_is_400_naming_it_and_the_aliases(self):
        response = self.request('PUT', self.PCI, {'quota_set': {'h100': 1}})
        self.assertFault(response, 400, 'badRequest', "'h100'", 'a100, h200')
        response = self.request('PUT', self.PCI, {'quota_set': {'h200': -3}})
        self.assertFault(response, 400, 'badRequest', 'h200', '-3')
        self.assertFault(self.request('PUT', self.PCI, {'quota_set': {
            'h200': 1}}, token=fakes.MEMBER), 403, 'forbidden')


class TestLimits(QuotaTestCase):

    ALWAYS = {'maxTotalInstances', 'maxTotalCores', 'maxTotalRAMSize',
              'maxServerMeta', 'maxTotalKeypairs', 'maxServerGroups',
              'maxServerGroupMembers', 'totalInstancesUsed',
              'totalCoresUsed', 'totalRAMUsed', 'totalServerGroupsUsed'}
    NETWORK = {'maxTotalFloatingIps', 'maxSecurityGroups',
               'maxSecurityGroupRules', 'totalFloatingIpsUsed',
               'totalSecurityGroupsUsed'}
    PERSONALITY = {'maxPersonality', 'maxPersonalitySize'}

    def test_keys_per_microversion(self):
        for version, keys in (
                ('2.1', self.ALWAYS | self.NETWORK | self.PERSONALITY
                 | {'maxImageMeta'}),
                ('2.36', self.ALWAYS | self.PERSONALITY | {'maxImageMeta'}),
                ('2.39', self.ALWAYS | self.PERSONALITY),
                ('2.57', self.ALWAYS)):
            limits = self.get('/v2.1/limits', version)['limits']
            self.assertEqual(keys, set(limits['absolute']), version)
            self.assertEqual([], limits['rate'])

    def test_real_limits_and_usage(self):
        self.put(QS, {'quota_set': {'instances': 4, 'cores': 9}})
        self.boot()
        absolute = self.get('/v2.1/limits', token=fakes.MEMBER)[
            'limits']['absolute']
        self.assertEqual(
            (4, 9, -1, 1, 2, 2048),
            (absolute['maxTotalInstances'], absolute['maxTotalCores'],
             absolute['maxTotalRAMSize'], absolute['totalInstancesUsed'],
             absolute['totalCoresUsed'], absolute['totalRAMUsed']))
        other = self.get('/v2.1/limits', token=fakes.OTHER)[
            'limits']['absolute']
        self.assertEqual((-1, 0), (other['maxTotalInstances'],
                                   other['totalInstancesUsed']))


class TestStoredRows(QuotaTestCase):

    def test_rows_are_typed_records(self):
        self.put(QS + '?user_id=alice', {'quota_set': {'cores': 3}})
        ctx = nova_context.get_admin_context()
        (row,) = db.quota_get_all(ctx, 'proj-a', 'alice')
        self.assertEqual(('cores', 3, 'proj-a', 'alice'),
                         (row.resource, row.hard_limit, row.project_id,
                          row.user_id))
        self.assertEqual([], db.quota_get_all(ctx, 'proj-a'))


class TestTempestSchemas(QuotaTestCase):
    """Responses pass Tempest's own response schemas (its compatibility
    bar), which list the exact keys per microversion."""

    def assertSchema(self, schema, response):
        self.assertIn(response.status_int, schema['status_code'],
                      response.text)
        if 'response_body' in schema:
            jsonschema.validate(response.json, schema['response_body'])

    def test_quota_sets(self):
        for version, module in (('2.1', quotas_v21), ('2.35', quotas_v21),
                                ('2.36', quotas_v236), ('2.56', quotas_v236),
                                ('2.57', quotas_v257), ('2.96', quotas_v257)):
            for path in (QS, QS + '/defaults', QS + '?user_id=alice'):
                self.assertSchema(module.get_quota_set,
                                  self.request('GET', path, version=version))
            self.assertSchema(module.get_quota_set_details, self.request(
                'GET', QS + '/detail', version=version))
            self.assertSchema(module.update_quota_set, self.request(
                'PUT', QS, {'quota_set': {'cores': 30, 'force': True}},
                version=version))
            self.assertSchema(module.delete_quota, self.request(
                'DELETE', QS, version=version))

    def test_quota_class_sets(self):
        path = '/v2.1/os-quota-class-sets/default'
        for version, module in (('2.1', classes_v21), ('2.49', classes_v21),
                                ('2.50', classes_v250),
                                ('2.57', classes_v257)):
            self.assertSchema(module.get_quota_class_set,
                              self.request('GET', path, version=version))
            self.assertSchema(module.update_quota_class_set, self.request(
                'PUT', path, {'quota_class_set': {'cores': 30}},
                version=version))

    def test_limits(self):
        self.boot()
        for version, module in (('2.1', limits_v21), ('2.36', limits_v236),
                                ('2.39', limits_v239), ('2.57', limits_v257)):
            self.assertSchema(module.get_limit, self.request(
                'GET', '/v2.1/limits', token=fakes.MEMBER, version=version))
