"""Hand-built HGX H200 hosts in a real Placement and nova database.

Each host is a compute service and node in the database and, in
Placement, the grouped tree nova-compute reports (compute node -> board ->
two quads -> two pairs each -> 8 GPUs with member-index traits), with the
compute node UUID as root provider UUID.
"""

import uuid

from oslo_config import cfg

import nova.conf
from nova.db import api as db
from nova.pci import request as pci_request

ADDRESSES = ['0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0',
             '0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0']
# name -> (parent group or None, GPU numbers 1..8)
GROUPS = {
    'board': (None, (1, 2, 3, 4, 5, 6, 7, 8)),
    'quad-a': ('board', (1, 2, 3, 4)),
    'quad-b': ('board', (5, 6, 7, 8)),
    'pair-a1': ('quad-a', (1, 3)),
    'pair-a2': ('quad-a', (2, 4)),
    'pair-b1': ('quad-b', (5, 7)),
    'pair-b2': ('quad-b', (6, 8)),
}
PAIRS = [frozenset(gpus) for name, (_p, gpus) in GROUPS.items()
         if name.startswith('pair-')]
FLAVOR = {'id': 1, 'flavorid': 'gpu', 'name': 'gpu', 'vcpus': 4,
          'memory_mb': 4096, 'root_gb': 0, 'extra_specs': {}}
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


def create_instance(context, gpus: int) -> dict:
    """A building instance asking for ``gpus`` H200 (0: none)."""
    requests = [gpu_request(gpus)] if gpus else []
    return db.instance_create(context, {
        'display_name': 'vm', 'project_id': 'proj', 'user_id': 'user',
        'flavor_id': FLAVOR['id'], 'flavor': FLAVOR,
        'vm_state': 'building', 'task_state': 'scheduling',
        'pci_requests': pci_request.requests_to_primitive(requests)})


def _member_traits(gpu: int) -> set[str]:
    traits = set()
    for _parent, gpus in GROUPS.values():
        if gpu in gpus:
            ordered = sorted(gpus, key=lambda g: ADDRESSES[g - 1])
            traits.add('CUSTOM_PCI_GROUP_NVLINK_%d_M%d' % (
                len(gpus), ordered.index(gpu)))
    return traits


class GpuHosts:
    """Builds hosts and inspects Placement for one test."""

    def __init__(self, test, api, context) -> None:
        self.test = test
        self.api = api            # PlacementFixture.api
        self.context = context
        self.roots: dict[str, str] = {}           # host -> root RP
        self.gpus: dict[str, dict[int, str]] = {}  # host -> GPU -> RP

    def _call(self, method: str, url: str, body=None,
              expect=(200, 201, 204)):
        resp = getattr(self.api, method)(url, json=body)
        self.test.assertIn(resp.status_code, expect, '%s %s: %s' % (
            method, url, resp.text))
        return resp.json() if resp.text else None

    def _provider(self, name: str, parent: str | None, inventory=None,
                  traits=()) -> str:
        rp = str(uuid.uuid4())
        self._call('post', '/resource_providers', {
            'name': name, 'uuid': rp, 'parent_provider_uuid': parent})
        generation = 0
        if inventory:
            generation = self._call(
                'put', '/resource_providers/%s/inventories' % rp, {
                    'resource_provider_generation': generation,
                    'inventories': inventory})['resource_provider_generation']
        for trait in traits:
            if trait.startswith('CUSTOM_'):
                self._call('put', '/traits/%s' % trait)
        if traits:
            self._call('put', '/resource_providers/%s/traits' % rp, {
                'resource_provider_generation': generation,
                'traits': sorted(traits)})
        return rp

    def add_host(self, host: str, disabled: bool = False) -> str:
        """Create the host in the database and Placement; its root RP."""
        service = db.service_create(self.context, {
            'host': host, 'binary': 'nova-compute', 'topic': 'compute',
            'disabled': disabled})
        root = self._provider(host, None, {
            'VCPU': {'total': 64}, 'MEMORY_MB': {'total': 65536}},
            {'OWNER_NOVA'})
        db.compute_node_create(self.context, {
            'uuid': root, 'host': host, 'hypervisor_hostname': host,
            'vcpus': 64, 'memory_mb': 65536, 'service_id': service['id']})
        group_rps = {}
        for name, (parent, gpus) in GROUPS.items():   # parents first
            group_rps[name] = self._provider(
                '%s_%s' % (host, name),
                group_rps[parent] if parent else root,
                traits={'CUSTOM_PCI_GROUP_NVLINK',
                        'CUSTOM_PCI_GROUP_NVLINK_%d' % len(gpus)})
        self.gpus[host] = {}
        for name, (_parent, gpus) in GROUPS.items():
            if name.startswith('pair-'):
                for gpu in gpus:
                    self.gpus[host][gpu] = self._provider(
                        '%s_%s' % (host, ADDRESSES[gpu - 1].upper()),
                        group_rps[name],
                        {'PGPU': {'total': 1, 'max_unit': 1}},
                        {'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'} |
                        _member_traits(gpu))
        self.roots[host] = root
        return root

    def use(self, host: str, gpus, consumer: str | None = None) -> str:
        """Allocate GPUs of ``host`` to another consumer; its UUID."""
        consumer = consumer or str(uuid.uuid4())
        self.allocate(consumer, {self.gpus[host][gpu]: {'PGPU': 1}
                                 for gpu in gpus})
        return consumer

    def allocate(self, consumer: str, resources: dict[str, dict]) -> None:
        """PUT allocations (provider -> {RC: amount}) for a new consumer."""
        self._call('put', '/allocations/%s' % consumer, {
            'allocations': {rp: {'resources': res}
                            for rp, res in resources.items()},
            'project_id': 'other', 'user_id': 'other',
            'consumer_generation': None, 'consumer_type': 'INSTANCE'})

    def allocations(self, consumer: str) -> dict[str, dict]:
        """Provider -> resources Placement holds for ``consumer``."""
        body = self._call('get', '/allocations/%s' % consumer)
        return {rp: alloc['resources']
                for rp, alloc in body['allocations'].items()}

    def gpus_of(self, host: str, providers) -> set[int]:
        """GPU numbers of ``host`` among the given provider UUIDs."""
        by_rp = {rp: gpu for gpu, rp in self.gpus[host].items()}
        return {by_rp[rp] for rp in providers if rp in by_rp}
