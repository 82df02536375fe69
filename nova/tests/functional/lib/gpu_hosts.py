"""Hand-built HGX H200 hosts in a real Placement and nova database.

Each host is a compute service and node in the database and, in
Placement, the grouped tree nova-compute reports (compute node -> board ->
two quads -> two pairs each -> 8 GPUs with member-index traits), with the
compute node UUID as root provider UUID.
"""

import datetime
import uuid

from oslo_config import cfg
from oslo_utils import timeutils

import nova.conf
from nova import context as nova_context
from nova.db import api as db
from nova.db import records
from nova.pci import request as pci_request
from nova import test
from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import h200_placement
from nova.tests.fixtures import placement as placement_fixture

PAIRS = h200_placement.PAIRS
FLAVOR = records.FlavorSnapshot(id=1, flavorid='gpu', name='gpu', vcpus=4,
                                memory_mb=4096, root_gb=0, extra_specs={})
ALIAS = '{"name": "h200", "resource_class": "PGPU", "group_type": "nvlink"}'


def make_conf(placement) -> cfg.ConfigOpts:
    """Fresh nova options pointed at ``placement``, PCI in Placement on."""
    conf = cfg.ConfigOpts()
    nova.conf.register_all(conf)
    conf([], default_config_files=[], default_config_dirs=[])
    placement.configure_nova(conf)
    conf.set_override('pci_in_placement', True, group='filter_scheduler')
    conf.set_override('alias', [ALIAS], group='pci')
    return conf


def gpu_request(count: int) -> pci_request.InstancePCIRequest:
    return pci_request.InstancePCIRequest(
        request_id=str(uuid.uuid4()), alias_name='h200', count=count,
        spec=[{'resource_class': 'PGPU', 'group_type': 'nvlink'}],
        numa_policy='legacy', group_type='nvlink', resource_class='PGPU',
        traits=set())


def create_instance(context, gpus: int) -> records.Instance:
    """A building instance asking for ``gpus`` H200 (0: none)."""
    requests = [gpu_request(gpus)] if gpus else []
    return db.instance_create(context, {
        'display_name': 'vm', 'project_id': 'proj', 'user_id': 'user',
        'flavor_id': FLAVOR.id, 'flavor': FLAVOR,
        'vm_state': 'building', 'task_state': 'scheduling',
        'pci_requests': requests})


class GpuHosts:
    """Builds hosts and inspects Placement for one test."""

    def __init__(self, test, api, context) -> None:
        self.test = test
        self.builder = h200_placement.TreeBuilder(test, api)
        self.context = context
        self.roots: dict[str, str] = {}           # host -> root RP
        self.gpus: dict[str, dict[int, str]] = {}  # host -> GPU -> RP

    def add_host(self, host: str, disabled: bool = False) -> str:
        """Create the host in the database and Placement; its root RP."""
        service = db.service_create(self.context, {
            'host': host, 'binary': 'nova-compute', 'topic': 'compute',
            'disabled': disabled})
        root, self.gpus[host] = self.builder.h200_host(host)
        db.compute_node_create(self.context, {
            'uuid': root, 'host': host, 'hypervisor_hostname': host,
            'vcpus': 64, 'memory_mb': 65536, 'service_id': service.id})
        self.roots[host] = root
        return root

    def last_seen(self, host: str, seconds_ago: int) -> None:
        """The compute of ``host`` last reported ``seconds_ago`` ago."""
        service = db.service_get_by_host_and_binary(self.context, host,
                                                    'nova-compute')
        db.service_update(self.context, service.id, {
            'last_seen_up': timeutils.utcnow() - datetime.timedelta(
                seconds=seconds_ago)})

    def use(self, host: str, gpus, consumer: str | None = None) -> str:
        """Allocate GPUs of ``host`` to another consumer; its UUID."""
        consumer = consumer or str(uuid.uuid4())
        self.allocate(consumer, {self.gpus[host][gpu]: {'PGPU': 1}
                                 for gpu in gpus})
        return consumer

    def allocate(self, consumer: str, resources: dict[str, dict]) -> None:
        """PUT allocations (provider -> {RC: amount}) for a new consumer."""
        self.builder.call('put', '/allocations/%s' % consumer, {
            'allocations': {rp: {'resources': res}
                            for rp, res in resources.items()},
            'project_id': 'other', 'user_id': 'other',
            'consumer_generation': None, 'consumer_type': 'INSTANCE'})

    def allocations(self, consumer: str) -> dict[str, dict]:
        """Provider -> resources Placement holds for ``consumer``."""
        body = self.builder.call('get', '/allocations/%s' % consumer)
        return {rp: alloc['resources']
                for rp, alloc in body['allocations'].items()}

    def gpus_of(self, host: str, providers) -> set[int]:
        """GPU numbers of ``host`` among the given provider UUIDs."""
        by_rp = {rp: gpu for gpu, rp in self.gpus[host].items()}
        return {by_rp[rp] for rp in providers if rp in by_rp}


class GpuHostsTestCase(test.TestCase):
    """Real database and Placement, nova options pointed at them, and
    ``hosts`` to build hand-made H200 hosts in both."""

    def setUp(self):
        super().setUp()
        self.useFixture(db_fixture.Database())
        placement = self.useFixture(placement_fixture.PlacementFixture())
        self.placement = placement
        self.conf = make_conf(placement)
        self.admin = nova_context.get_admin_context()
        self.hosts = GpuHosts(self, placement.api, self.admin)
