"""The fleet's PCI gauges (nova.fleet.metrics), from a real database."""

import prometheus_client
import sqlalchemy as sa

from nova import context as nova_context
from nova.db import api as db_api
from nova import test
from nova.pci import device as pci_device
from nova.fleet import metrics as fleet_metrics
from nova.tests.fixtures import database as db_fixture

# One HGX-like board per host: a quad of two pairs, and a lone pair.
_PATHS = ('board/quad/pair-a', 'board/quad/pair-a', 'board/quad/pair-b',
          'board/quad/pair-b', 'board/pair-c', 'board/pair-c')


class FleetMetricsTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        self.ctx = nova_context.get_admin_context()

    def _add_host(self, host: str, held: dict[int, str]) -> None:
        """A compute with six GPUs; ``held``: device index -> instance."""
        service = db_api.service_create(self.ctx, {
            'host': host, 'binary': 'nova-compute'})
        node = db_api.compute_node_create(self.ctx, {
            'host': host, 'hypervisor_hostname': host,
            'service_id': service.id})
        for index, path in enumerate(_PATHS):
            instance = held.get(index)
            db_api.pci_device_create(self.ctx, {
                'compute_node_id': node.id,
                'address': '0000:%02x:00.0' % (index + 1),
                'vendor_id': '10de', 'product_id': '2335',
                'dev_type': pci_device.DEV_TYPE_PCI, 'group_path': path,
                'status': (pci_device.ALLOCATED if instance
                           else pci_device.AVAILABLE),
                'instance_uuid': instance,
                'extra_info': pci_device.extra_info(
                    'true', 'false', resource_class='CUSTOM_H200')})

    def _scrape(self) -> int:
        """The SQL queries one scrape runs."""
        registry = prometheus_client.CollectorRegistry()
        registry.register(fleet_metrics.FleetCollector())
        statements = []

        def count(_conn, _cursor, statement, *_args):
            if statement.startswith('SELECT'):
                statements.append(statement)
        # Every engine: SQLite readers have one of their own.
        engine = sa.engine.Engine
        sa.event.listen(engine, 'before_cursor_execute', count)
        try:
            prometheus_client.generate_latest(registry)
        finally:
            sa.event.remove(engine, 'before_cursor_execute', count)
        return len(statements)

    @staticmethod
    def _value(families, name, **labels):
        for family in families:
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return sample.value
        raise AssertionError('no sample %s %s' % (name, labels))

    def test_gauges_per_host(self):
        self._add_host('hgx-1', {0: 'u1', 5: 'u2'})
        self._add_host('hgx-2', {})
        families = list(fleet_metrics.FleetCollector().collect())
        value = self._value
        self.assertEqual(2, value(families, 'nova_pci_devices', host='hgx-1',
                                  resource_class='CUSTOM_H200',
                                  state='used'))
        self.assertEqual(4, value(families, 'nova_pci_devices', host='hgx-1',
                                  resource_class='CUSTOM_H200',
                                  state='free'))
        self.assertEqual(0, value(families, 'nova_pci_devices', host='hgx-1',
                                  resource_class='CUSTOM_H200',
                                  state='unhealthy'))
        # hgx-1: pair-b is the only wholly free pair; no free quad or
        # board; its four free devices sit in no free quad.
        self.assertEqual(1, value(families, 'nova_pci_free_groups',
                                  host='hgx-1', size='2'))
        self.assertEqual(0, value(families, 'nova_pci_free_groups',
                                  host='hgx-1', size='4'))
        self.assertEqual(2, value(families, 'nova_pci_fragmented_devices',
                                  host='hgx-1', size='2'))
        self.assertEqual(4, value(families, 'nova_pci_fragmented_devices',
                                  host='hgx-1', size='4'))
        self.assertEqual(1, value(families, 'nova_pci_free_groups',
                                  host='hgx-2', size='6'))
        self.assertEqual(0, value(families, 'nova_pci_fragmented_devices',
                                  host='hgx-2', size='6'))

    def test_queries_per_scrape_do_not_grow_with_the_fleet(self):
        self._add_host('hgx-1', {0: 'u1'})
        small = self._scrape()
        for i in range(2, 12):
            self._add_host('hgx-%d' % i, {1: 'u%d' % i})
        large = self._scrape()
        # The compute nodes and every device: two queries.
        self.assertEqual(2, small)
        self.assertEqual(small, large)

    def test_exposition_follows_prometheus_names(self):
        self._add_host('hgx-1', {})
        registry = prometheus_client.CollectorRegistry()
        registry.register(fleet_metrics.FleetCollector())
        text = prometheus_client.generate_latest(registry).decode()
        self.assertIn('# TYPE nova_pci_devices gauge', text)
        self.assertIn('nova_pci_free_groups{host="hgx-1",size="2"} 3.0',
                      text)
