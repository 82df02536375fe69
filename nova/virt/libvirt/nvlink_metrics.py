"""Fabric Manager partitions of a compute's hosts as Prometheus gauges.

Only the compute reaches its Fabric Manager, so the compute process
serves these (``nova.metrics_endpoint``); each scrape asks FM once per
host for its partitions (``fmpm -l``) and reads nova's records from
memory:

* ``nova_nvlink_partitions_active{host}``: partitions FM reports active;
* ``nova_nvlink_partitions_expected{host}``: partitions nova's records
  say a server holds, which should all be active (more active than
  expected: orphans or partitions activated behind nova's back; fewer:
  a server lost its NVLink partition);
* ``nova_nvlink_fabric_manager_up{host}``: 1 when FM answered the scrape's
  query, 0 when it did not (no ``active`` series then).
"""

from collections.abc import Callable, Iterator

from oslo_log import log as logging
from prometheus_client import core

from nova import exception
from nova.virt.libvirt import nvlink

LOG = logging.getLogger(__name__)


def _families() -> tuple[core.GaugeMetricFamily, ...]:
    """Empty active, expected and up gauges."""
    return (core.GaugeMetricFamily(
                'nova_nvlink_partitions_active', 'NVLink partitions Fabric '
                'Manager reports active.', labels=['host']),
            core.GaugeMetricFamily(
                'nova_nvlink_partitions_expected', 'NVLink partitions nova '
                'records as held by a server.', labels=['host']),
            core.GaugeMetricFamily(
                'nova_nvlink_fabric_manager_up', 'Whether Fabric Manager '
                'answered the partition query of this scrape.',
                labels=['host']))


class PartitionCollector:
    """A prometheus_client collector of the partitions of the hosts
    ``sources()`` returns (host -> its ``NVLinkPartitions``)."""

    def __init__(self, sources: Callable[[], dict[str,
                                                  nvlink.NVLinkPartitions]]
                 ) -> None:
        self._sources = sources

    @staticmethod
    def describe() -> list[core.GaugeMetricFamily]:
        """The families without asking Fabric Manager (registering the
        collector asks for them)."""
        return list(_families())

    def collect(self) -> Iterator[core.GaugeMetricFamily]:
        active, expected, up = _families()
        for host, parts in sorted(self._sources().items()):
            expected.add_metric([host], len(parts.holders()))
            try:
                listed = parts.partitions()
            except exception.FabricManagerError as err:
                LOG.warning('Metrics: Fabric Manager of %s did not list '
                            'its partitions: %s', host, err.message)
                up.add_metric([host], 0)
                continue
            up.add_metric([host], 1)
            active.add_metric([host], sum(1 for p in listed if p.active))
        yield from (active, expected, up)


def of_computes(managers) -> dict[str, nvlink.NVLinkPartitions]:
    """Host -> partitions of the compute ``managers`` whose driver drives
    Fabric Manager."""
    return {manager.host: manager.driver.nvlink for manager in managers
            if getattr(manager.driver, 'nvlink', None) is not None}
