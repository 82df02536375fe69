"""The metrics endpoint (nova.metrics_endpoint) over real HTTP."""

import prometheus_client
import requests

from nova.cmd import metrics as metrics_cmd
from nova import exception
from nova import metrics_endpoint
from nova import test


class MetricsEndpointTest(test.TestCase):

    def test_serves_the_collectors_given(self):
        registry = prometheus_client.CollectorRegistry()
        counter = prometheus_client.Counter(
            'nova_test_things', 'Things.', registry=registry)
        counter.inc(3)
        server = metrics_endpoint.make_server([registry], '127.0.0.1', 0)
        server.start()
        self.addCleanup(server.stop)
        resp = requests.get(server.url + '/metrics', timeout=10)
        self.assertEqual(200, resp.status_code)
        self.assertIn('text/plain', resp.headers['Content-Type'])
        self.assertIn('nova_test_things_total 3.0', resp.text)

    def test_port_zero_serves_nothing(self):
        conf = test.make_conf()
        self.assertEqual(0, conf.metrics.listen_port)
        self.assertIsNone(metrics_endpoint.serve(conf, []))

    def test_nova_metrics_needs_a_port(self):
        error = self.assertRaises(exception.InvalidConfiguration,
                                  metrics_cmd._serve, test.make_conf())
        self.assertIn('[metrics]listen_port', error.message)
