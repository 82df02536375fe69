"""Hypervisors (``/os-hypervisors``, admin): the compute nodes, what
their servers use, and, as this fork adds, their PCI devices.

The shapes follow upstream's per microversion: integer ids before 2.53
and compute node uuids from it (with ``hypervisor_hostname_pattern`` and
``with_servers`` replacing the ``search`` and ``servers`` paths), the
usage fields and ``/statistics`` and ``/uptime`` until 2.88. Usage is
counted from the servers the database places on each node; the
hypervisor version and host IP are not tracked and show as 0 and None.
``GET /os-hypervisors/{id}/pci-devices`` lists a node's PCI devices with
their holder, NVLink group and health; it is this fork's and has no
upstream counterpart.
"""

import json

from oslo_utils import uuidutils

from nova.api import services
from nova.api import validation
from nova.api import version_history
from nova.db import api as db
from nova.db import records
from nova import exception
from nova.pci import device as pci_device
from nova import policies
from nova.servicegroup import api as servicegroup

# The usage fields 2.88 removes from a hypervisor's detail.
_USAGE_FIELDS = ('current_workload', 'disk_available_least',
                 'free_disk_gb', 'free_ram_mb', 'local_gb', 'local_gb_used',
                 'memory_mb', 'memory_mb_used', 'running_vms', 'vcpus',
                 'vcpus_used')


def _gone_at(req, change: version_history.Change, what: str) -> None:
    """404 for a path upstream removed at ``change``."""
    if req.api_version.at_least(change):
        raise exception.NotFound(
            '%s was removed in microversion %s.' % (what, change))


_Hypervisor = tuple[records.ComputeNode, records.Service | None]


def _nodes(req) -> list[_Hypervisor]:
    """(compute node, its compute service) pairs, in id order; a node
    belongs to the compute service of its host."""
    by_host = {service.host: service for service in db.service_get_all(
        req.context, binary=services.COMPUTE_BINARY)}
    return [(node, by_host.get(node.host))
            for node in db.compute_node_get_all(req.context)]


def _servers_on(req) -> dict[str, list[records.Instance]]:
    """Node name -> the servers the database places there."""
    placed: dict[str, list[records.Instance]] = {}
    for instance in db.instance_get_all(req.context):
        if instance.node:
            placed.setdefault(instance.node, []).append(instance)
    return placed


def _usage(node: records.ComputeNode,
           servers: list[records.Instance]) -> dict:
    flavors = [s.flavor for s in servers if s.flavor is not None]
    vcpus_used = sum(f.vcpus for f in flavors)
    memory_used = sum(f.memory_mb for f in flavors)
    disk_used = sum(f.root_gb for f in flavors)
    return {
        'vcpus': node.vcpus, 'vcpus_used': vcpus_used,
        'memory_mb': node.memory_mb, 'memory_mb_used': memory_used,
        'local_gb': node.local_gb, 'local_gb_used': disk_used,
        'free_ram_mb': node.memory_mb - memory_used,
        'free_disk_gb': node.local_gb - disk_used,
        'disk_available_least': node.local_gb - disk_used,
        'running_vms': len(servers),
        'current_workload': sum(1 for s in servers if s.task_state),
    }


def _brief(req, node: records.ComputeNode,
           service: records.Service | None) -> dict:
    up = service is not None and servicegroup.is_up(service, req.conf)
    return {
        'id': (node.uuid
               if req.api_version.at_least(version_history.UUID_IDS)
               else node.id),
        'hypervisor_hostname': node.hypervisor_hostname,
        'state': 'up' if up else 'down',
        'status': ('disabled' if service is None or service.disabled
                   else 'enabled'),
    }


def _detail(req, node: records.ComputeNode,
            service: records.Service | None, servers: list[dict]) -> dict:
    view = _brief(req, node, service)
    view.update({
        'hypervisor_type': node.hypervisor_type or 'QEMU',
        'hypervisor_version': 0,
        'host_ip': None,
        'service': {
            'host': node.host,
            'id': (service.uuid
                   if req.api_version.at_least(version_history.UUID_IDS)
                   else service.id) if service else None,
            'disabled_reason': service.disabled_reason if service
            else None},
    })
    if req.api_version.at_least(version_history.HYPERVISOR_USAGE_GONE):
        view['uptime'] = None
    else:
        view.update(_usage(node, servers))
        # A JSON string before 2.28, an object after, as upstream.
        view['cpu_info'] = (
            {} if req.api_version.at_least(version_history.CPU_INFO_OBJECT)
            else json.dumps({}))
    return view


def _with_servers(view: dict, servers: list[dict]) -> dict:
    view['servers'] = [{'name': s.display_name, 'uuid': s.uuid}
                       for s in servers]
    return view


def _listing(req, detail: bool) -> list[dict]:
    """The hypervisors of a listing, with its pattern, servers and
    pagination (2.53 query parameters)."""
    nodes = _nodes(req)
    placed = _servers_on(req)
    with_servers = False
    if req.api_version.at_least(version_history.UUID_IDS):
        pattern = req.GET.get('hypervisor_hostname_pattern')
        if pattern is not None:
            nodes = [(node, service) for node, service in nodes
                     if pattern in node.hypervisor_hostname]
            if not nodes:
                raise exception.NotFound(
                    'No hypervisor matching %r.' % pattern)
        value = req.GET.get('with_servers')
        with_servers = bool(value) and validation.boolean('with_servers',
                                                          value)
    views = []
    for node, service in nodes:
        servers = placed.get(node.hypervisor_hostname, [])
        view = (_detail(req, node, service, servers) if detail
                else _brief(req, node, service))
        if with_servers:
            _with_servers(view, servers)
        views.append(view)
    if req.api_version.at_least(version_history.HYPERVISOR_PAGING):
        views = validation.paginate(req, views, lambda view: view['id'])
    return views


def index(req) -> tuple:
    """GET /os-hypervisors."""
    req.policy.authorize(req.context, policies.HYPERVISORS_LIST)
    return 200, {'hypervisors': _listing(req, detail=False)}


def detail(req) -> tuple:
    """GET /os-hypervisors/detail."""
    req.policy.authorize(req.context, policies.HYPERVISORS_LIST_DETAIL)
    return 200, {'hypervisors': _listing(req, detail=True)}


def _find(req, hypervisor_id: str) -> _Hypervisor:
    """The node of an id (a uuid from 2.53, an integer before)."""
    by_uuid = req.api_version.at_least(version_history.UUID_IDS)
    if by_uuid and not uuidutils.is_uuid_like(hypervisor_id):
        raise exception.APIValidationError(
            field='hypervisor_id',
            reason='%r is not a hypervisor uuid' % hypervisor_id)
    for node, service in _nodes(req):
        if (node.uuid if by_uuid else str(node.id)) == hypervisor_id:
            return node, service
    raise exception.NotFound('Hypervisor %s could not be found.' %
                             hypervisor_id)


def show(req, hypervisor_id: str) -> tuple:
    """GET /os-hypervisors/{id} (2.53: ``with_servers``)."""
    req.policy.authorize(req.context, policies.HYPERVISORS_SHOW)
    node, service = _find(req, hypervisor_id)
    servers = _servers_on(req).get(node.hypervisor_hostname, [])
    view = _detail(req, node, service, servers)
    value = req.GET.get('with_servers')
    if (req.api_version.at_least(version_history.UUID_IDS) and value
            and validation.boolean('with_servers', value)):
        _with_servers(view, servers)
    return 200, {'hypervisor': view}


def uptime(req, hypervisor_id: str) -> tuple:
    """GET /os-hypervisors/{id}/uptime (until 2.88): not tracked, so 501
    as upstream answers for a driver without uptime (its body would be a
    string)."""
    req.policy.authorize(req.context, policies.HYPERVISORS_UPTIME)
    _gone_at(req, version_history.HYPERVISOR_USAGE_GONE,
             '/os-hypervisors/{id}/uptime')
    _find(req, hypervisor_id)
    raise exception.HypervisorUptimeNotSupported()


def statistics(req) -> tuple:
    """GET /os-hypervisors/statistics (until 2.88): the sums over every
    node."""
    req.policy.authorize(req.context, policies.HYPERVISORS_STATISTICS)
    _gone_at(req, version_history.HYPERVISOR_USAGE_GONE,
             '/os-hypervisors/statistics')
    nodes = _nodes(req)
    placed = _servers_on(req)
    totals = dict.fromkeys(_USAGE_FIELDS, 0)
    for node, _service in nodes:
        for key, value in _usage(
                node, placed.get(node.hypervisor_hostname, [])).items():
            totals[key] += value
    return 200, {'hypervisor_statistics': dict(totals, count=len(nodes))}


def _matching(req, pattern: str) -> list[_Hypervisor]:
    found = [(node, service) for node, service in _nodes(req)
             if pattern in node.hypervisor_hostname]
    if not found:
        raise exception.NotFound('No hypervisor matching %r.' % pattern)
    return found


def search(req, pattern: str) -> tuple:
    """GET /os-hypervisors/{pattern}/search (before 2.53)."""
    req.policy.authorize(req.context, policies.HYPERVISORS_SEARCH)
    _gone_at(req, version_history.UUID_IDS,
             '/os-hypervisors/{pattern}/search')
    return 200, {'hypervisors': [_brief(req, node, service)
                                 for node, service in _matching(req,
                                                                pattern)]}


def servers(req, pattern: str) -> tuple:
    """GET /os-hypervisors/{pattern}/servers (before 2.53)."""
    req.policy.authorize(req.context, policies.HYPERVISORS_SERVERS)
    _gone_at(req, version_history.UUID_IDS,
             '/os-hypervisors/{pattern}/servers')
    placed = _servers_on(req)
    return 200, {'hypervisors': [
        _with_servers(_brief(req, node, service),
                      placed.get(node.hypervisor_hostname, []))
        for node, service in _matching(req, pattern)]}


def pci_devices(req, hypervisor_id: str) -> tuple:
    """GET /os-hypervisors/{id}/pci-devices: the node's PCI devices."""
    req.policy.authorize(req.context, policies.HYPERVISORS_PCI_DEVICES)
    node, _service = _find(req, hypervisor_id)
    devices = sorted((pci_device.TrackedDevice.from_row(row) for row in
                      db.pci_device_get_all_by_node(req.context, node.id)),
                     key=lambda device: device.address)
    return 200, {'pci_devices': [{
        'address': device.address,
        'vendor_id': device.vendor_id,
        'product_id': device.product_id,
        'dev_type': device.dev_type,
        'numa_node': device.numa_node,
        'status': device.status,
        'instance_uuid': device.instance_uuid,
        'group': device.group_path or None,
        'health': device.health,
        'health_reason': device.health_reason,
    } for device in devices]}
