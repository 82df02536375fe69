"""Prometheus metrics of the separate-process deployment: nova-metrics,
each nova-scheduler and each nova-compute serve what they hold."""

import collections

import requests

from nova.fleet import board
from nova.tests.functional import test_deployment
from nova.tests.functional import test_metrics

BURST = 8


class TestDeploymentMetrics(test_deployment.DeploymentTestCase):

    METRICS = True

    def scrape(self, name: str) -> tuple[str, dict]:
        resp = requests.get(self.deployment.metrics_urls[name], timeout=60)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.text, test_metrics._samples(resp.text)

    def test_each_process_serves_what_it_holds(self):
        schedulers = sorted(name for name in self.deployment.metrics_urls
                            if name.startswith('nova-scheduler-'))
        self.assertEqual(2, len(schedulers))
        before = {name: self.scrape(name)[1] for name in schedulers}

        # 1, 2, 4 and 8 GPUs in turn: 30 GPUs asked of 16.
        accepted = self.client.create_servers(BURST)
        self.assertEqual(BURST, len(accepted), self.client.statuses)
        servers = self.client.wait_settled()
        status = collections.Counter(s['status'] for s in servers)
        self.assertEqual(BURST, status['ACTIVE'] + status['ERROR'])

        # nova-metrics: the fleet's devices, from the database.
        _text, fleet = self.scrape('nova-metrics')
        for host in self.deployment.hosts:
            self.assertEqual(8, test_metrics._sum(
                fleet, 'nova_pci_devices', host=host))
        self.assertEqual(
            sum(test_metrics._gpus(s) for s in servers
                if s['status'] == 'ACTIVE'),
            test_metrics._sum(fleet, 'nova_pci_devices', state=board.USED))

        # The schedulers: together, one decision per server.
        def decisions(outcome):
            name = 'nova_scheduler_decision_duration_seconds_count'
            return sum(
                test_metrics._sum(self.scrape(s)[1], name, outcome=outcome)
                - test_metrics._sum(before[s], name, outcome=outcome)
                for s in schedulers)
        self.assertEqual(status['ACTIVE'], decisions('scheduled'))
        self.assertEqual(status['ERROR'], decisions('refused'))

        # The computes serve their Fabric Manager gauges: none here, as
        # these hosts have no Fabric Manager ([libvirt]nvlink_partitions
        # = none), but the families are described.
        for host in self.deployment.hosts:
            text, samples = self.scrape('nova-compute-%s' % host)
            self.assertIn('# TYPE nova_nvlink_partitions_active gauge', text)
            self.assertEqual(0, test_metrics._sum(
                samples, 'nova_nvlink_partitions_active'))
