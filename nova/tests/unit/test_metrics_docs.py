"""The metrics guide and the Grafana dashboard name only metrics nova
serves, and the guide names every one."""

import json
import os
import re

from prometheus_client import registry as prometheus_registry

from nova.fleet import metrics as fleet_metrics
from nova.scheduler import metrics as scheduler_metrics
from nova import test
from nova.virt.libvirt import nvlink_metrics

ADMIN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'doc', 'source', 'admin')
GUIDE = os.path.join(ADMIN, 'metrics.rst')
DASHBOARD = os.path.join(ADMIN, 'grafana-gpu-fleet.json')
_NAME = re.compile(r'\bnova_[a-z_]+[a-z]\b')
# The series a metric family's samples are named by, per type.
_SUFFIXES = {'counter': ('_total',), 'histogram': ('_bucket', '_count',
                                                   '_sum'),
             'gauge': ('',)}


def _families() -> dict[str, set[str]]:
    """Family name -> the sample names nova serves for it."""
    collectors: list[prometheus_registry.Collector] = [
        fleet_metrics.FleetCollector(lambda: None),
        scheduler_metrics.REGISTRY,
        nvlink_metrics.PartitionCollector(dict)]
    found = {}
    for collector in collectors:
        # describe() where there is no data to collect (no database).
        describe = getattr(collector, 'describe', None)
        families = describe() if describe else collector.collect()
        for family in families:
            found[family.name] = {family.name + suffix
                                  for suffix in _SUFFIXES[family.type]}
    return found


class MetricsDocsTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.families = _families()
        self.served = set().union(*self.families.values())

    def test_dashboard_uses_served_metrics(self):
        with open(DASHBOARD, encoding='utf-8') as f:
            dashboard = json.load(f)
        exprs = [target['expr'] for panel in dashboard['panels']
                 for target in panel['targets']]
        used = {name for expr in exprs for name in _NAME.findall(expr)}
        self.assertEqual(set(), used - self.served)
        # Every family is on the dashboard.
        self.assertEqual(set(), {family for family, names in
                                 self.families.items()
                                 if not names & used})

    def test_guide_names_every_metric(self):
        with open(GUIDE, encoding='utf-8') as f:
            named = set(_NAME.findall(f.read()))
        self.assertEqual(set(), named - self.served - set(self.families))
        self.assertEqual(set(), {family for family, names in
                                 self.families.items()
                                 if not (names | {family}) & named})
