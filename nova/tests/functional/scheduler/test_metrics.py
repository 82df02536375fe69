"""The scheduler's Prometheus counters (nova.scheduler.metrics), counted by
real decisions against real Placement and DB."""

from nova import exception
from nova.scheduler import manager
from nova.scheduler import metrics
from nova.scheduler import refusal
from nova.tests.functional.lib import gpu_hosts
from nova.tests.functional.scheduler import test_manager


class _Counts:
    """The scheduler's samples now, to compare with later ones (the
    registry is the process's, shared by every test)."""

    def __init__(self) -> None:
        self.before = self._read()

    @staticmethod
    def _read() -> dict:
        values = {}
        for family in metrics.REGISTRY.collect():
            for sample in family.samples:
                values[(sample.name,
                        tuple(sorted(sample.labels.items())))] = sample.value
        return values

    def delta(self, name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return self._read().get(key, 0.0) - self.before.get(key, 0.0)


class TestSchedulerMetrics(gpu_hosts.GpuHostsTestCase):
    """Each decision observed once, with its outcome and reasons."""

    def setUp(self):
        super().setUp()
        self.context = self.admin
        self.scheduler = manager.SchedulerManager(self.conf)

    # Asks as the conductor does (see test_manager).
    _select = test_manager.TestSelectDestination._select

    def _decisions(self, counts, devices, outcome):
        return counts.delta('nova_scheduler_decision_duration_seconds_count',
                            devices=devices, outcome=outcome)

    def test_metrics_of_a_scheduled_pair(self):
        self.hosts.add_host('cmp1')
        counts = _Counts()
        self._select(gpu_hosts.create_instance(self.context, 2))
        self.assertEqual(1, self._decisions(counts, '2', 'scheduled'))
        self.assertEqual(0, self._decisions(counts, '2', 'refused'))
        self.assertEqual(0, counts.delta(
            'nova_scheduler_claim_conflicts_total'))

    def test_metrics_of_a_claim_conflict_and_a_new_query(self):
        self.conf.set_override('max_placement_results', 1, 'scheduler')
        for host in ('cmp1', 'cmp2'):
            self.hosts.add_host(host)
        self.scheduler = manager.SchedulerManager(
            self.conf, test_manager._RacingReportClient(self.conf,
                                                        self.hosts))
        counts = _Counts()
        self._select(gpu_hosts.create_instance(self.context, 8))
        self.assertEqual(1, counts.delta(
            'nova_scheduler_claim_conflicts_total'))
        self.assertEqual(1, counts.delta(
            'nova_scheduler_claim_retries_total'))
        self.assertEqual(1, self._decisions(counts, '8', 'scheduled'))

    def test_metrics_of_claims_all_taken(self):
        self.conf.set_override('max_placement_results', 1, 'scheduler')
        self.conf.set_override('max_claim_rounds', 1, 'scheduler')
        self.hosts.add_host('cmp1')
        self.scheduler = manager.SchedulerManager(
            self.conf, test_manager._RacingReportClient(self.conf,
                                                        self.hosts))
        counts = _Counts()
        self.assertRaises(exception.NoValidHost, self._select,
                          gpu_hosts.create_instance(self.context, 8))
        self.assertEqual(1, counts.delta('nova_scheduler_refusals_total',
                                         reason=refusal.CLAIMS_TAKEN))
        self.assertEqual(0, counts.delta(
            'nova_scheduler_claim_retries_total'))
        self.assertEqual(1, self._decisions(counts, '8', 'refused'))

    def test_refusal_reasons_are_counted(self):
        self.hosts.add_host('cmp1')
        self.hosts.use('cmp1', [5])
        counts = _Counts()
        self.assertRaises(exception.NoValidHost, self._select,
                          gpu_hosts.create_instance(self.context, 8))
        self.assertRaises(exception.NoValidHost, self._select,
                          gpu_hosts.create_instance(self.context, 4),
                          ['cmp1'])
        self.assertEqual(1, counts.delta('nova_scheduler_refusals_total',
                                         reason=refusal.TOO_FEW_DEVICES))
        self.assertEqual(1, counts.delta('nova_scheduler_refusals_total',
                                         reason=refusal.HOSTS_UNUSABLE))
        self.assertEqual(1, self._decisions(counts, '4', 'refused'))
