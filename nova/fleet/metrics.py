"""The fleet's PCI devices and free groups as Prometheus gauges.

Read from the database at each scrape with a fixed number of queries
whatever the fleet's size (``nova.fleet.board.load_fleet``: the compute
nodes and every device), so they show what the PCI trackers recorded,
the same numbers ``nova-manage pci board`` prints. Every series has a
``host`` label; the fleet is their sum (``sum without (host)``):

* ``nova_pci_devices{host, resource_class, state}``: tracked devices by
  Placement resource class and state: ``free``, ``used`` (held by a
  server), ``unhealthy`` (0 until device health lands, see
  ``nova.fleet.board.unhealthy``) or ``withheld`` (not offered, e.g. in a
  partition Fabric Manager cannot activate); the total is the sum over
  ``state``;
* ``nova_pci_free_groups{host, size}``: groups of ``size`` devices whose
  devices are all free, what the next request of that size can get
  (size 1: free devices offered alone);
* ``nova_pci_fragmented_devices{host, size}``: free devices in no wholly
  free group of ``size`` (2 or more): free capacity a request of that
  size cannot use.
"""

from collections.abc import Callable, Iterator

from prometheus_client import core

from nova import context as nova_context
from nova.fleet import board


def families(boards: list[board.HostBoard]
             ) -> list[core.GaugeMetricFamily]:
    """The gauges of ``boards``."""
    devices = core.GaugeMetricFamily(
        'nova_pci_devices', 'Tracked PCI devices by resource class and '
        'state (free, used, unhealthy, withheld).',
        labels=['host', 'resource_class', 'state'])
    free_groups = core.GaugeMetricFamily(
        'nova_pci_free_groups', 'Groups of the size whose devices are all '
        'free (size 1: free devices offered alone).',
        labels=['host', 'size'])
    fragmented = core.GaugeMetricFamily(
        'nova_pci_fragmented_devices', 'Free devices in no wholly free '
        'group of the size.', labels=['host', 'size'])
    for host_board in boards:
        counts: dict[str, dict[str, int]] = {}
        for dev in host_board.devices:
            by_state = counts.setdefault(
                board.resource_class(dev),
                dict.fromkeys(board.STATES, 0))
            by_state[host_board.state(dev)] += 1
        for rc, by_state in sorted(counts.items()):
            for state, count in by_state.items():
                devices.add_metric([host_board.host, rc, state], count)
        for size, count in sorted(host_board.free_partitions().items()):
            free_groups.add_metric([host_board.host, str(size)], count)
        for size, count in sorted(host_board.fragmented().items()):
            fragmented.add_metric([host_board.host, str(size)], count)
    return [devices, free_groups, fragmented]


class FleetCollector:
    """A prometheus_client collector of the fleet's boards, read from the
    database at each scrape."""

    def __init__(self, get_context: Callable[[], object] =
                 nova_context.get_admin_context) -> None:
        self._get_context = get_context

    def describe(self) -> list[core.GaugeMetricFamily]:
        """The families without reading the database (registering the
        collector asks for them)."""
        return families([])

    def collect(self) -> Iterator[core.GaugeMetricFamily]:
        yield from families(board.load_fleet(self._get_context(),
                                             names=False))
