"""nova.rpc through a real RabbitMQ broker, on private virtual hosts.

The checks every transport must pass are shared with the in-process
transport's unit tests (``nova.tests.unit.test_rpc``).
"""

import time

from oslo_config import cfg
import oslo_messaging

from nova import context as nova_context
from nova import rpc
from nova import test
from nova.tests.fixtures import rabbit as rabbit_fixture
from nova.tests.unit import test_rpc as unit_rpc


class TestRabbitTransport(unit_rpc.RPCChecks, test.TestCase):
    """The same checks through a real RabbitMQ broker, on a private vhost."""

    def transport_url(self) -> str:
        self.vhost = rabbit_fixture.vhost_or_skip(self)
        return self.vhost.url

    def test_transport_is_rabbit(self):
        self.assertEqual(self.vhost.url, self.rpc.conf.transport_url)
        self.assertIn('/nova-test-', self.vhost.url)
        self.assertEqual('RabbitDriver', type(rpc.TRANSPORT._driver).__name__)


class TestRabbitVhostIsolation(test.TestCase):
    """Two private vhosts on one broker never see each other's messages,
    although both use nova's exchange, topic and server names."""

    CASTS = 10

    def _serve(self, url: str
               ) -> tuple[unit_rpc.Endpoint, oslo_messaging.RPCClient]:
        conf = cfg.ConfigOpts()
        rpc.set_defaults(conf)
        conf.set_override('transport_url', url)
        transport = oslo_messaging.get_rpc_transport(conf)
        self.addCleanup(transport.cleanup)
        endpoint = unit_rpc.Endpoint()
        target = oslo_messaging.Target(topic='conductor', server='host1')
        server = oslo_messaging.get_rpc_server(
            transport, target, [endpoint],
            serializer=rpc.RequestContextSerializer())
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        client = oslo_messaging.get_rpc_client(
            transport, oslo_messaging.Target(topic='conductor'),
            serializer=rpc.RequestContextSerializer())
        return endpoint, client

    def test_casts_stay_in_their_vhost(self):
        served = {}
        for name in ('a', 'b'):
            served[name] = self._serve(rabbit_fixture.vhost_or_skip(self).url)
        context = nova_context.RequestContext(user_id='u', project_id='p')
        # All of one vhost's casts, then all of the other's: a shared queue
        # would hand them out alternately to both servers.
        for name, (_endpoint, client) in served.items():
            for index in range(self.CASTS):
                client.cast(context, 'record', value='%s%d' % (name, index))
        for name, (endpoint, _client) in served.items():
            # Were the queues shared, each server would get some of the
            # other's casts and one of them fewer than CASTS of its own.
            deadline = time.monotonic() + 30
            while (len(endpoint.casts) < self.CASTS and
                   time.monotonic() < deadline):
                time.sleep(0.1)
            self.assertEqual(
                ['%s%d' % (name, i) for i in range(self.CASTS)],
                sorted((v for _r, v in endpoint.casts),
                       key=lambda v: int(v[1:])))
