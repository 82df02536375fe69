"""Shared test helpers: an app on a real test database and a compute_api
double that records its calls and writes instances through nova.db.api."""

import json

from oslo_config import cfg
from oslo_config import fixture as config_fixture
import webob

from nova import test
from nova.api import wsgi_app
from nova.compute import api as compute_api
import nova.conf
from nova import context as nova_context
from nova.db import api as db
from nova import exception
from nova.image import glance
from nova.tests.fixtures import database

ADMIN = 'admin'
MEMBER = 'alice:proj-a'
OTHER = 'bob:proj-b'


class FakeGlance:
    """Glance double: one active image, ``cirros``."""

    CIRROS = glance.ImageMeta('c1', 'cirros', 'active', 'qcow2', 'bare', 9)

    def find(self, image_ref):
        if image_ref in ('c1', 'cirros'):
            return self.CIRROS
        raise exception.ImageNotFound(image_id=image_ref)

    def show(self, image_id):
        if image_id == 'c1':
            return self.CIRROS
        raise exception.ImageNotFound(image_id=image_id)

    def image_url(self, image_id):
        return 'http://glance.test/v2/images/%s' % image_id

    def list(self, **filters):
        return [self.CIRROS] if filters.get('name') in (None, 'cirros') \
            else []


class FakeComputeAPI(object):
    """Boot-path double: creates BUILD instances with the flavor copied,
    records every call as (method, args)."""

    def __init__(self):
        self.calls = []
        self.glance_client = FakeGlance()

    def create(self, context, name, flavor_ref, image_ref, metadata,
               fields=None, min_count=1, max_count=1):
        self.calls.append(('create', name, flavor_ref, image_ref, metadata))
        flavor = db.flavor_get_by_flavorid(context, flavor_ref)
        return [db.instance_create(context, {
            'display_name': name, 'project_id': context.project_id,
            'user_id': context.user_id, 'flavor_id': flavor.id,
            'flavor': flavor.snapshot(),
            'vm_state': 'building',
            'task_state': 'scheduling', 'image_ref': image_ref,
            'server_metadata': metadata,
            'key_name': fields.key_name if fields else None})]

    def update_metadata_item(self, context, instance, key, value):
        self.calls.append(('update_metadata_item', key, value))
        return compute_api.API.update_metadata_item(self, context, instance,
                                                    key, value)

    def set_metadata(self, context, instance, metadata):
        # No quota here: nova.tests.functional.test_quotas checks it.
        self.calls.append(('set_metadata', instance.uuid, metadata))
        db.instance_update(context, instance.uuid,
                           {'server_metadata': metadata})
        return metadata

    def update(self, context, instance, values):
        self.calls.append(('update', instance.uuid, values))
        return compute_api.API.update(self, context, instance, values)

    def get(self, context, uuid):
        self.calls.append(('get', uuid))
        return db.instance_get_by_uuid(context, uuid)

    def get_all(self, context, detail):
        self.calls.append(('get_all', detail))
        return db.instance_get_all(context)

    def delete(self, context, uuid):
        self.calls.append(('delete', uuid))
        db.instance_destroy(context, uuid)

    # Server actions: recorded only (nova.compute.api checks states).

    def reboot(self, context, uuid, hard):
        self.calls.append(('reboot', uuid, hard))

    def stop(self, context, uuid):
        self.calls.append(('stop', uuid))

    def start(self, context, uuid):
        self.calls.append(('start', uuid))

    def rebuild(self, context, uuid, name=None, image_ref=None,
                values=None):
        self.calls.append(('rebuild', uuid))
        values = dict(values or {}, task_state='rebuilding',
                      image_ref=image_ref)
        values.pop('key_name', None)
        if name is not None:
            values['display_name'] = name
        return db.instance_update(context, uuid, values)

    def get_console_output(self, context, instance, tail_length):
        self.calls.append(('get_console_output', instance.uuid,
                           tail_length))
        return 'line 1\x1b[0m\x07\nline 2\tend\n'

    def shelve(self, context, uuid):
        self.calls.append(('shelve', uuid))

    def shelve_offload(self, context, uuid):
        self.calls.append(('shelve_offload', uuid))

    def unshelve(self, context, uuid):
        self.calls.append(('unshelve', uuid))

    def lock(self, context, instance, reason):
        self.calls.append(('lock', instance.uuid, reason))

    def unlock(self, context, instance):
        self.calls.append(('unlock', instance.uuid))

    def reset_state(self, context, instance, vm_state):
        self.calls.append(('reset_state', instance.uuid, vm_state))


class APITestCase(test.TestCase):
    """Runs requests through make_app with a migrated SQLite database."""

    aliases = ['{"name": "h200", "vendor_id": "10de", '
               '"product_id": "2335"}']

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.conf = cfg.ConfigOpts()
        nova.conf.register_all(self.conf)
        self.conf([], project='nova')
        self.compute_api = FakeComputeAPI()
        self.app = wsgi_app.make_app(self.conf, self.compute_api)
        # Overrides live on option groups shared between ConfigOpts
        # objects; the fixture resets them when the test ends.
        self.config = self.useFixture(config_fixture.Config(self.conf))
        self.config.config(alias=self.aliases, group='pci')
        # Aliases are only served through Placement scheduling.
        self.config.config(pci_in_placement=True, group='filter_scheduler')
        self.admin_context = nova_context.get_admin_context()

    def request(self, method, path, body=None, token=ADMIN, version=None,
                headers=None):
        """Send one request; returns the webob response."""
        req = webob.Request.blank(path, method=method)
        if token is not None:
            req.headers['X-Auth-Token'] = token
        if version is not None:
            req.headers['OpenStack-API-Version'] = 'compute %s' % version
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = 'application/json'
        req.headers.update(headers or {})
        return req.get_response(self.app)

    def assertFault(self, response, status, name, *fragments):
        """The response is a Nova-shaped fault whose message contains
        every fragment."""
        self.assertEqual(status, response.status_int, response.text)
        fault = response.json[name]
        self.assertEqual(status, fault['code'])
        for fragment in fragments:
            self.assertIn(fragment, fault['message'])
        return fault['message']

    def make_flavor(self, flavorid='f1', name='small', extra_specs=None,
                    **values):
        values = {'flavorid': flavorid, 'name': name, 'vcpus': 2,
                  'memory_mb': 2048, 'root_gb': 20, **values}
        return db.flavor_create(self.admin_context, values, extra_specs)
