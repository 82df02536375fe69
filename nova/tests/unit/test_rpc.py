"""Tests for nova.rpc on the in-process transport: calls, casts, contexts
and errors across threads (RabbitMQ: nova.tests.functional.test_rpc)."""

import threading
import uuid

from oslo_config import cfg
import oslo_messaging
import testtools

from nova import test
from nova import context as nova_context
from nova import exception
from nova import rpc
from nova.tests.fixtures import rpc as rpc_fixture


class Endpoint:
    """Records who called it and from which thread."""

    def __init__(self):
        self.casts = []
        self.cast_done = threading.Event()

    def echo(self, context, value):
        return {'value': value, 'user_id': context.user_id,
                'project_id': context.project_id,
                'request_id': context.request_id,
                'context_class': type(context).__name__,
                'thread': threading.get_ident()}

    def record(self, context, value):
        self.casts.append((context.request_id, value))
        self.cast_done.set()

    def fail(self, context, instance_uuid):
        raise exception.RescheduledException(instance_uuid=instance_uuid,
                                             reason='disk on fire')


class RPCChecks:
    """Checks every transport must pass; subclasses pick the transport."""

    def transport_url(self) -> str | None:
        """The transport to test; None: nova's default."""
        return None

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture(
            transport_url=self.transport_url()))
        self.topic = 'test-%s' % uuid.uuid4().hex[:8]
        self.endpoint = Endpoint()
        self.rpc.start_server(self.topic, 'host1', [self.endpoint])
        self.context = nova_context.RequestContext(
            user_id='alice', project_id='proj')

    def test_call_returns_result_and_context_from_another_thread(self):
        client = rpc.get_client(self.topic, timeout=30)
        result = client.call(self.context, 'echo', value=[1, 'two'])
        self.assertEqual([1, 'two'], result['value'])
        self.assertEqual('alice', result['user_id'])
        self.assertEqual('proj', result['project_id'])
        self.assertEqual(self.context.request_id, result['request_id'])
        self.assertEqual('RequestContext', result['context_class'])
        self.assertNotEqual(threading.get_ident(), result['thread'])

    def test_call_to_named_server(self):
        client = rpc.get_client(self.topic, server='host1', timeout=30)
        self.assertEqual('x', client.call(self.context, 'echo',
                                          value='x')['value'])

    def test_cast_is_delivered(self):
        rpc.get_client(self.topic).cast(self.context, 'record', value=7)
        self.assertTrue(self.endpoint.cast_done.wait(30))
        self.assertEqual([(self.context.request_id, 7)],
                         self.endpoint.casts)

    def test_nova_exception_keeps_its_class(self):
        client = rpc.get_client(self.topic, timeout=30)
        error = self.assertRaises(
            exception.RescheduledException, client.call, self.context,
            'fail', instance_uuid='abc')
        self.assertIn('Build of instance abc was re-scheduled: '
                      'disk on fire', str(error))
        self.assertEqual('disk on fire', error.kwargs['reason'])


class TestFakeTransport(RPCChecks, testtools.TestCase):
    """The default in-process transport."""

    def test_default_transport_url_is_in_process(self):
        self.assertEqual('fake:/', self.rpc.conf.transport_url)

    def test_call_to_unserved_server_times_out(self):
        client = rpc.get_client(self.topic, server='nobody', timeout=0.2)
        self.assertRaises(oslo_messaging.MessagingTimeout, client.call,
                          self.context, 'echo', value=1)

    def test_init_twice_keeps_the_transport(self):
        transport = rpc.TRANSPORT
        rpc.init(cfg.ConfigOpts())
        self.assertIs(transport, rpc.TRANSPORT)


class TestClientWithoutInit(test.TestCase):

    def test_get_client_before_init_is_an_error(self):
        rpc.cleanup()
        error = self.assertRaises(RuntimeError, rpc.get_client, 'compute')
        self.assertIn('nova.rpc.init', str(error))
