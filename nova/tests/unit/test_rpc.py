"""Tests for nova.rpc on the in-process transport: calls, casts, contexts
and errors across threads (RabbitMQ: nova.tests.functional.test_rpc)."""

import json
import sys
import threading
import time
import uuid

from oslo_config import cfg
from oslo_context import context as oslo_context
import oslo_messaging
from oslo_messaging._drivers import common as messaging_common
import testtools

from nova import test
from nova import context as nova_context
from nova import exception
from nova import rpc
from nova.compute import manager as compute_manager
from nova.compute import rpcapi as compute_rpcapi
from nova.conductor import manager as conductor_manager
from nova.conductor import rpcapi as conductor_rpcapi
from nova.scheduler import manager as scheduler_manager
from nova.scheduler import rpcapi as scheduler_rpcapi
from nova.tests.fixtures import rpc as rpc_fixture


class Endpoint:
    """Records who called it and from which thread; serves API 1.2."""

    target = rpc.endpoint_target('1.2')

    def __init__(self):
        self.casts = []
        self.cast_done = threading.Event()

    def echo(self, context, value):
        current = oslo_context.get_current()
        return {'value': value, 'user_id': context.user_id,
                'project_id': context.project_id,
                'request_id': context.request_id,
                'global_request_id': context.global_request_id,
                'current_request_id': current and current.request_id,
                'context_class': type(context).__name__,
                'thread': threading.get_ident()}

    def record(self, context, value):
        self.casts.append((context.request_id, value))
        self.cast_done.set()

    def fail(self, context, instance_uuid):
        raise exception.RescheduledException(instance_uuid=instance_uuid,
                                             reason='disk on fire')

    @oslo_messaging.expected_exceptions(exception.NoValidHost)
    def refuse(self, context, codes):
        raise exception.NoValidHost(reason='nothing fits', codes=codes)

    @rpc.local_only
    def step(self, context, value):
        self.casts.append((context.request_id, value))


class RPCChecks:
    """Checks every transport must pass; subclasses pick the transport."""

    def transport_url(self) -> str | None:
        """The transport to test; None: nova's default."""
        return None

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture(
            test.make_conf(), transport_url=self.transport_url()))
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

    def test_request_ids_reach_the_handler_as_its_current_context(self):
        context = nova_context.RequestContext(
            user_id='alice', project_id='proj',
            global_request_id='req-%s' % uuid.uuid4())
        result = rpc.get_client(self.topic, timeout=30).call(
            context, 'echo', value=1)
        self.assertEqual(context.global_request_id,
                         result['global_request_id'])
        self.assertEqual(context.request_id, result['request_id'])
        # What logs and the Placement client of the handler see.
        self.assertEqual(context.request_id, result['current_request_id'])

    def test_decision_longer_than_rpc_response_timeout_is_waited_for(self):
        # Under a burst a scheduling decision outlasts
        # rpc_response_timeout; the build must not fail for it.
        self.rpc.conf.set_override('rpc_response_timeout', 1)
        scheduler = _Scheduler('1.2', takes=2.5)
        self.rpc.start_server(scheduler_rpcapi.TOPIC, 'sched1', [scheduler])
        self.assertEqual(SELECTION, scheduler_rpcapi.SchedulerAPI(
            self.rpc.conf).select_destination(self.context, 'i-1', [],
                                              'conductor-1'))
        self.assertEqual([True], scheduler.asked)

    def test_server_accepts_older_minor_version(self):
        cctxt = rpc.get_client(self.topic, timeout=30).prepare(version='1.0')
        self.assertEqual(1, cctxt.call(self.context, 'echo',
                                       value=1)['value'])

    def test_server_refuses_newer_versions(self):
        client = rpc.get_client(self.topic, timeout=30)
        for version in ('2.0', '1.3'):
            # The in-process driver hands back the server's exception;
            # a broker, a RemoteError naming it.
            error = self.assertRaises(
                (oslo_messaging.UnsupportedVersion,
                 oslo_messaging.RemoteError),
                client.prepare(version=version).call, self.context, 'echo',
                value=1)
            self.assertIn('Endpoint does not support RPC version %s' %
                          version, str(error))

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
        self.assertIn('Instance abc was not built on this host and may be '
                      'tried on another: '
                      'disk on fire', str(error))
        self.assertEqual('disk on fire', error.kwargs['reason'])

    def test_no_valid_host_keeps_its_codes(self):
        client = rpc.get_client(self.topic, timeout=30)
        error = self.assertRaises(
            exception.NoValidHost, client.call, self.context, 'refuse',
            codes=['spread_over_hosts', 'fragmentation'])
        self.assertEqual(['fragmentation', 'spread_over_hosts'],
                         error.kwargs['codes'])
        self.assertEqual('nothing fits', error.kwargs['reason'])

    def test_local_only_method_is_not_served(self):
        client = rpc.get_client(self.topic, timeout=30)
        error = self.assertRaises(
            (oslo_messaging.NoSuchMethod, oslo_messaging.RemoteError),
            client.call, self.context, 'step', value=1)
        self.assertIn('Endpoint does not support RPC method step',
                      str(error))
        self.assertEqual([], self.endpoint.casts)


class TestRemoteExceptionWire(test.TestCase):
    """What a broker carries of a nova exception: oslo.messaging's JSON
    of its args and kwargs, rebuilt in the caller as the same class (the
    in-process driver hands the exception object over unserialized)."""

    def _across_the_wire(self, error: Exception) -> Exception:
        try:
            raise error
        except Exception:
            data = messaging_common.serialize_remote_exception(
                sys.exc_info())
        return messaging_common.deserialize_remote_exception(
            data, rpc.ALLOWED_EXMODS)

    def test_no_valid_host_codes_reach_the_caller(self):
        sent = exception.NoValidHost(reason='nothing fits',
                                     codes=['fragmentation'])
        received = self._across_the_wire(sent)
        self.assertIsInstance(received, exception.NoValidHost)
        self.assertEqual(['fragmentation'], received.kwargs['codes'])
        self.assertEqual('nothing fits', received.kwargs['reason'])
        self.assertEqual(sent.message, received.message)

    def test_no_valid_host_of_an_older_scheduler_has_no_codes(self):
        # A scheduler of before the codes sends the reason alone.
        data = json.dumps({
            'class': 'NoValidHost', 'module': 'nova.exception',
            'message': 'No valid host was found.', 'tb': [],
            'args': ['No valid host was found.'],
            'kwargs': {'reason': 'nothing fits'}})
        received = messaging_common.deserialize_remote_exception(
            data, rpc.ALLOWED_EXMODS)
        self.assertIsInstance(received, exception.NoValidHost)
        self.assertEqual([], received.kwargs['codes'])


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


class TestVersionCap(test.TestCase):
    """[upgrade_levels]: a client refuses to send what a cap forbids."""

    def setUp(self):
        super().setUp()
        self.conf = test.make_conf()
        self.useFixture(rpc_fixture.RPCFixture(self.conf))
        self.context = nova_context.RequestContext(user_id='u',
                                                   project_id='p')

    def test_no_cap_sends_every_version(self):
        client = rpc.VersionedClient(self.conf, 'compute')
        self.assertIsNone(client.version_cap)
        self.assertTrue(client.can_send_version(compute_rpcapi.VERSION))
        self.assertEqual('1.2', client.prepare('prep_resize', '1.2')
                         .target.version)

    def test_cap_allows_older_and_equal_versions(self):
        self.conf.set_override('compute', '1.1', group='upgrade_levels')
        client = rpc.VersionedClient(self.conf, 'compute')
        self.assertTrue(client.can_send_version('1.0'))
        self.assertTrue(client.can_send_version('1.1'))
        self.assertFalse(client.can_send_version('1.2'))
        self.assertEqual('1.1', client.prepare('reboot_instance', '1.1')
                         .target.version)

    def test_capped_method_is_refused_naming_method_and_versions(self):
        self.conf.set_override('compute', '1.1', group='upgrade_levels')
        api = compute_rpcapi.ComputeAPI(self.conf)
        error = self.assertRaises(
            exception.RPCVersionCapped, api.resize_instance, self.context,
            'host1', 'instance-1', 'migration-1')
        self.assertEqual(
            'resize_instance needs nova-compute RPC API 1.2, but '
            '[upgrade_levels]compute caps messages to nova-compute at 1.1; '
            'raise or unset the cap once every nova-compute serves 1.2.',
            str(error))

    def test_console_output_needs_1_4(self):
        self.conf.set_override('compute', '1.3', group='upgrade_levels')
        api = compute_rpcapi.ComputeAPI(self.conf)
        error = self.assertRaises(
            exception.RPCVersionCapped, api.get_console_output,
            self.context, 'host1', 'instance-1', 10)
        self.assertIn('get_console_output needs nova-compute RPC API 1.4',
                      str(error))
        self.assertEqual(409, error.code)

    def test_cap_of_another_major_version_refuses_everything(self):
        self.conf.set_override('scheduler', '2.0', group='upgrade_levels')
        api = scheduler_rpcapi.SchedulerAPI(self.conf)
        self.assertRaises(exception.RPCVersionCapped, api.select_destination,
                          self.context, 'instance-1', [], 'conductor-1')

    def test_cap_must_be_a_version(self):
        error = self.assertRaises(ValueError, self.conf.set_override,
                                  'conductor', 'newton',
                                  group='upgrade_levels')
        self.assertIn('newton', str(error))

    def test_managers_serve_their_clients_versions(self):
        for manager_class, rpcapi in (
                (compute_manager.ComputeManager, compute_rpcapi),
                (conductor_manager.ConductorManager, conductor_rpcapi),
                (scheduler_manager.SchedulerManager, scheduler_rpcapi)):
            self.assertEqual(rpcapi.VERSION, manager_class.target.version)


class _OldCompute:
    """A nova-compute of RPC API 1.2: the PCI providers of a build or a
    move are its ``mappings``."""

    target = rpc.endpoint_target('1.2')

    def __init__(self):
        self.received = []

    def build_and_run_instance(self, context, instance_uuid, mappings):
        self.received.append(('build', instance_uuid, mappings))

    def prep_resize(self, context, instance_uuid, migration_uuid, mappings):
        self.received.append(('prep_resize', instance_uuid, mappings))


class _Scheduler:
    """Answers like a SchedulerManager of ``version``: the 1.2 form only
    when asked for it."""

    def __init__(self, version, takes: float = 0):
        self.target = rpc.endpoint_target(version)
        self.asked = []
        self.takes = takes

    def select_destination(self, context, instance_uuid, excluded_hosts,
                           build_owner, return_selection=False):
        self.asked.append(return_selection)
        time.sleep(self.takes)
        return SELECTION.to_primitive(legacy=not return_selection)


SELECTION = scheduler_rpcapi.Selection(
    host='cmp1', nodename='cmp1.node',
    allocation_request={'allocations': {'rp-gpu': {}},
                        'mappings': {'r-0': ['rp-gpu']}},
    pci_providers={'r': ['rp-gpu']})
PROVIDERS = {'r': ['rp-gpu']}


class TestPciProvidersVersions(test.TestCase):
    """The PCI providers are ``pci_providers`` from compute API 1.3 and
    scheduler API 1.2; older services still get and send ``mappings``."""

    def setUp(self):
        super().setUp()
        self.conf = test.make_conf()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture(self.conf))
        self.context = nova_context.RequestContext(user_id='u',
                                                   project_id='p')

    def test_selection_primitive_round_trips_in_both_forms(self):
        new = SELECTION.to_primitive()
        old = SELECTION.to_primitive(legacy=True)
        self.assertEqual(PROVIDERS, new['pci_providers'])
        self.assertNotIn('mappings', new)
        self.assertEqual(PROVIDERS, old['mappings'])
        self.assertNotIn('pci_providers', old)
        for primitive in (new, old):
            self.assertEqual(SELECTION,
                             scheduler_rpcapi.Selection.from_primitive(
                                 primitive))

    def test_capped_compute_client_sends_mappings_to_an_old_compute(self):
        old = _OldCompute()
        self.rpc.start_server('compute', 'old1', [old])
        self.conf.set_override('compute', '1.2', group='upgrade_levels')
        api = compute_rpcapi.ComputeAPI(self.conf)
        api.build_and_run_instance(self.context, 'old1', 'i-1', PROVIDERS)
        api.prep_resize(self.context, 'old1', 'i-1', 'm-1', PROVIDERS)
        self.assertEqual([('build', 'i-1', PROVIDERS),
                          ('prep_resize', 'i-1', PROVIDERS)], old.received)

    def test_uncapped_compute_client_needs_1_3(self):
        # An old compute refuses the 1.3 message rather than misreading
        # it: the cap above is what mixed versions need.
        self.rpc.start_server('compute', 'old1', [_OldCompute()])
        api = compute_rpcapi.ComputeAPI(self.conf)
        error = self.assertRaises(
            (oslo_messaging.UnsupportedVersion, oslo_messaging.RemoteError),
            api.build_and_run_instance, self.context, 'old1', 'i-1',
            PROVIDERS)
        self.assertIn('1.3', str(error))

    def test_scheduler_client_reads_either_answer(self):
        for version, cap, asked in (('1.2', None, True),
                                    ('1.1', '1.1', False)):
            scheduler = _Scheduler(version)
            server = self.rpc.start_server('scheduler', 's-' + version,
                                           [scheduler])
            self.conf.set_override('scheduler', cap,
                                   group='upgrade_levels')
            api = scheduler_rpcapi.SchedulerAPI(self.conf)
            self.assertEqual(SELECTION, api.select_destination(
                self.context, 'i-1', [], 'conductor-1'))
            self.assertEqual([asked], scheduler.asked)
            server.stop()
            server.wait()

    def test_compute_manager_understands_both_argument_names(self):
        self.assertEqual(PROVIDERS, compute_manager._sent_providers(
            None, PROVIDERS))
        self.assertEqual(PROVIDERS, compute_manager._sent_providers(
            PROVIDERS, None))
        self.assertEqual({}, compute_manager._sent_providers(None, None))


class TestClientWithoutInit(test.TestCase):

    def test_get_client_before_init_is_an_error(self):
        rpc.cleanup()
        error = self.assertRaises(RuntimeError, rpc.get_client, 'compute')
        self.assertIn('nova.rpc.init', str(error))
