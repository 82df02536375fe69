"""Prometheus metrics scraped from nova-all while a burst of GPU servers
boots, checked against the board (``nova.fleet.board``) and the API."""

import collections
import concurrent.futures
import threading

import prometheus_client
from prometheus_client import parser
import requests

from nova import metrics_endpoint
from nova.fleet import board
from nova.tests.functional import test_concurrent_boots
from nova.tests.functional import test_nvlink_partitions
from nova.tests.functional.lib import workload

HOSTS = test_concurrent_boots.HOSTS
GPUS_PER_HOST = 8
# Servers of 1, 2, 4 and 8 GPUs in turn: 45 GPUs asked of 16.
BURST = 12


def _gpus(server: dict) -> int:
    """GPUs of a burst server, named ``burst-<i>-<N>gpu``."""
    return int(server['name'].rsplit('-', 1)[1][:-len('gpu')])


def _samples(text: str) -> dict[tuple, float]:
    """(name, sorted labels) -> value of every sample of a scrape."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in parser.text_string_to_metric_families(text)
            for s in family.samples}


def _sum(samples: dict, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples that have ``labels``."""
    return sum(value for (sample, sample_labels), value in samples.items()
               if sample == name and set(labels.items()) <=
               set(sample_labels))


class TestMetricsDuringBurst(test_concurrent_boots.BurstTestBase):

    def setUp(self):
        super().setUp()
        # What nova-all serves on [metrics]listen_port, on a free port.
        server = metrics_endpoint.make_server(
            self.allinone.metrics_collectors(), '127.0.0.1', 0)
        server.start()
        self.addCleanup(server.stop)
        self.metrics_url = server.url + '/metrics'

    def scrape(self) -> dict[tuple, float]:
        resp = requests.get(self.metrics_url, timeout=60)
        self.assertEqual(200, resp.status_code, resp.text)
        return _samples(resp.text)

    def check_consistent(self, samples: dict) -> None:
        """What holds in any scrape, mid-burst too: each host's devices
        are all counted in exactly one state, and no more are used than
        exist."""
        for host in HOSTS:
            self.assertEqual(GPUS_PER_HOST, _sum(
                samples, 'nova_pci_devices', host=host))
            self.assertEqual(0, _sum(samples, 'nova_pci_devices', host=host,
                                     state=board.UNHEALTHY))

    def test_scrapes_during_a_burst_match_the_board(self):
        client = workload.ComputeClient(self.allinone.api_url)
        before = self.scrape()
        self.check_consistent(before)
        self.assertEqual(2, _sum(before, 'nova_pci_free_groups', size='8'))

        # Scrape over and over while the burst boots.
        done = threading.Event()
        during = []

        def scrape_until_done():
            while not done.is_set():
                during.append(self.scrape())
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            scraping = pool.submit(scrape_until_done)
            try:
                accepted = client.create_servers(BURST, prefix='burst')
                servers = client.wait_settled()
            finally:
                done.set()
            scraping.result()
        self.assertEqual(BURST, len(accepted))
        self.assertGreater(len(during), 0)
        for samples in during:
            self.check_consistent(samples)

        after = self.scrape()
        status = collections.Counter(s['status'] for s in servers)
        self.assertEqual(BURST, status['ACTIVE'] + status['ERROR'])
        self.assertGreater(status['ERROR'], 0)

        # The gauges are the board's numbers, host by host.
        for host_board in board.load_fleet(self.ctx):
            host = host_board.host
            states = collections.Counter(host_board.state(d)
                                         for d in host_board.devices)
            for state in board.STATES:
                self.assertEqual(states[state], _sum(
                    after, 'nova_pci_devices', host=host, state=state),
                    (host, state))
            for size, count in host_board.free_partitions().items():
                self.assertEqual(count, _sum(
                    after, 'nova_pci_free_groups', host=host,
                    size=str(size)), (host, size))
            for size, count in host_board.fragmented().items():
                self.assertEqual(count, _sum(
                    after, 'nova_pci_fragmented_devices', host=host,
                    size=str(size)), (host, size))
        # And the API's: the active servers hold the used GPUs.
        self.assertEqual(
            sum(_gpus(s) for s in servers if s['status'] == 'ACTIVE'),
            _sum(after, 'nova_pci_devices', state=board.USED))

        # One scheduling decision per server, scheduled or refused with
        # at least one reason each.
        def delta(name, **labels):
            return _sum(after, name, **labels) - _sum(before, name, **labels)
        decisions = 'nova_scheduler_decision_duration_seconds_count'
        self.assertEqual(status['ACTIVE'],
                         delta(decisions, outcome='scheduled'))
        self.assertEqual(status['ERROR'], delta(decisions, outcome='refused'))
        self.assertGreaterEqual(
            delta('nova_scheduler_refusals_total'), status['ERROR'])


class TestFabricManagerMetrics(test_nvlink_partitions.NVLinkTestBase):
    """nova-all's Fabric Manager gauges next to the board's."""

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        self.start_services()

    def scrape(self) -> dict[tuple, float]:
        registry = prometheus_client.CollectorRegistry()
        for collector in self.allinone.metrics_collectors():
            registry.register(collector)
        return _samples(prometheus_client.generate_latest(registry).decode())

    def test_active_expected_and_withheld(self):
        flavors = self.gpu_flavors()
        quad = self.partition_of(self.boot(flavors[4], 'q1'))
        samples = self.scrape()
        for name in ('nova_nvlink_partitions_active',
                     'nova_nvlink_partitions_expected',
                     'nova_nvlink_fabric_manager_up'):
            self.assertEqual(1, _sum(samples, name, host='cmp1'), name)

        # A pair of the other quad activated behind nova's back: active
        # but not expected, and its GPUs withheld once the compute sees it.
        other_pair = 5 if quad == 1 else 3
        self.fms['cmp1'].call('activate', other_pair)
        self.computes['cmp1'].update_available_resource()
        samples = self.scrape()
        self.assertEqual(2, _sum(samples, 'nova_nvlink_partitions_active',
                                 host='cmp1'))
        self.assertEqual(1, _sum(samples, 'nova_nvlink_partitions_expected',
                                 host='cmp1'))
        self.assertEqual(2, _sum(samples, 'nova_pci_devices', host='cmp1',
                                 state=board.WITHHELD))
        self.assertEqual(0, _sum(samples, 'nova_pci_free_groups',
                                 host='cmp1', size='4'))
