"""The nova-all demo: one flavor per GPU count always gets an NVLink group.

Uploads a small test image to nova-all's Glance, creates flavors
gpu.1x/2x/4x/8x (``pci_passthrough:alias=h200:N``) through the REST API,
boots a mix of servers from the image on HGX H200 hosts (each gets a
qcow2 overlay of the image, downloaded once per host), deletes one and
boots into the hole it left, then prints every host's GPU board (which
server holds which GPU, also as a picture, ``board.html`` next to the
log) and checks that each server got exactly one declared partition.
"""

import json
import os
import subprocess
import tempfile
import time

import requests

from nova import context as nova_context
from nova.db import api as db
from nova.fleet import board as fleet_board
from nova.fleet import board_svg
from nova.image import glance
from nova.virt.fake import host as fakehost
from nova.virt.libvirt import gpu_modules

_SIZES = (1, 2, 4, 8)
# (server name, GPUs) in boot order; the last one cannot fit anymore.
_BOOTS = (('train-a', 4), ('pair-1', 2), ('solo-1', 1), ('solo-2', 1),
          ('train-b', 8), ('pair-2', 2))
_BUILD_TIMEOUT = 120


def configure(conf) -> None:
    """Defaults for the demo: the H200 [pci] config and a fresh state."""
    pci = fakehost.h200_pci_config()
    conf.set_default('state_path', tempfile.mkdtemp(prefix='nova-demo-'))
    conf.set_default('host', 'hgx')
    conf.set_default('report_in_placement', True, group='pci')
    for name in ('device_spec', 'device_group', 'alias'):
        conf.set_default(name, pci[name], group='pci')
    conf.set_default('pci_in_placement', True, group='filter_scheduler')
    # Each generated host gets a fake Fabric Manager that nova drives.
    conf.set_default('nvlink_partitions', 'fabric_manager', group='libvirt')


class _Client:
    """Minimal Compute API client (admin token of the noauth2 API)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.session.headers.update({
            'X-Auth-Token': 'admin', 'Content-Type': 'application/json',
            'OpenStack-API-Version': 'compute 2.96'})

    def call(self, method: str, path: str, body: dict | None = None,
             expect: tuple = (200, 201, 202, 204)) -> dict:
        resp = self.session.request(method, self.url + path,
                                    data=json.dumps(body) if body else None)
        if resp.status_code not in expect:
            raise RuntimeError('%s %s -> %s %s' % (method, path,
                                                   resp.status_code,
                                                   resp.text))
        return resp.json() if resp.content else {}

    def create_flavor(self, gpus: int) -> str:
        name = 'gpu.%dx' % gpus
        flavor_id = self.call('POST', '/flavors', {'flavor': {
            'name': name, 'vcpus': 16 * gpus, 'ram': 65536 * gpus,
            'disk': 0}})['flavor']['id']
        self.call('POST', '/flavors/%s/os-extra_specs' % flavor_id, {
            'extra_specs': {'pci_passthrough:alias': 'h200:%d' % gpus}})
        return flavor_id

    def boot(self, name: str, flavor_id: str, image_id: str) -> dict:
        server = self.call('POST', '/servers', {'server': {
            'name': name, 'flavorRef': flavor_id, 'imageRef': image_id}})
        return self.wait(server['server']['id'])

    def wait(self, server_id: str) -> dict:
        deadline = time.monotonic() + _BUILD_TIMEOUT
        while time.monotonic() < deadline:
            server = self.call('GET', '/servers/%s' % server_id)['server']
            if server['status'] in ('ACTIVE', 'ERROR'):
                return server
            time.sleep(0.2)
        raise RuntimeError('server %s still building after %ds' % (
            server_id, _BUILD_TIMEOUT))

    def delete(self, server_id: str) -> None:
        self.call('DELETE', '/servers/%s' % server_id)
        deadline = time.monotonic() + _BUILD_TIMEOUT
        while time.monotonic() < deadline:
            resp = self.session.get(self.url + '/servers/%s' % server_id)
            if resp.status_code == 404:
                return
            time.sleep(0.2)
        raise RuntimeError('server %s not deleted' % server_id)


def upload_image(conf) -> glance.ImageMeta:
    """A small empty qcow2 disk (1 GiB virtual) as the Glance image
    ``demo-image``, as ``openstack image create`` would upload it."""
    path = os.path.join(conf.state_path, 'demo-image.qcow2')
    subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', path, '1G'],
                   check=True)
    client = glance.GlanceClient(conf)
    image = client.create('demo-image', disk_format='qcow2')
    return client.upload(image.id, path)


def _module_ids(addresses) -> frozenset[int]:
    """Module IDs of generated-board GPUs: the numbering of Fabric
    Manager's partitions, which is not PCI order."""
    return frozenset(fakehost.H200_MODULE_IDS[a] for a in addresses)


def boards(hosts: list[str]) -> list[fleet_board.HostBoard]:
    """The board of each of ``hosts``, as ``nova-manage pci board``."""
    context = nova_context.get_admin_context()
    nodes = [db.compute_node_get_by_nodename(context, host)
             for host in hosts]
    return fleet_board.load(context, nodes)


def fabric_state(driver, held: dict[str, frozenset[int]],
                 names: dict[str, str]) -> tuple[str, bool]:
    """FM's partitions of a host, and whether exactly the servers' ones
    are active (``held``: server name -> module IDs of its GPUs)."""
    nvlink = driver.nvlink
    if nvlink is None:
        return '  (no Fabric Manager: [libvirt]nvlink_partitions = none)', \
            True
    holders = nvlink.holders()
    lines, ok = [], True
    for partition in nvlink.partitions():
        owner = holders.get(partition.id)
        name = names.get(owner, owner) if owner else None
        if partition.active or owner:
            good = partition.active and name in held and \
                set(held[name]) == set(partition.module_ids)
            ok &= good
            lines.append('    FM partition %-22s %-8s held by %-8s %s' % (
                partition.describe(),
                'ACTIVE' if partition.active else 'inactive',
                name or 'nobody', 'ok' if good else 'WRONG'))
    ok &= {n for n in held} <= {names.get(u) for u in holders.values()}
    lines = lines or ['    nothing active']
    return '\n'.join(['  Fabric Manager:'] + lines), ok


def run(allinone) -> int:
    """Run the scenario against a started AllInOne; 0 if all is valid."""
    client = _Client(allinone.api_url)
    image = upload_image(allinone.conf)
    print('Image: %s (%s, %d bytes) uploaded to Glance' % (
        image.name, image.id, image.size))
    flavors = {n: client.create_flavor(n) for n in _SIZES}
    print('Flavors: %s (one per GPU count, no topology in them)' % ', '.join(
        'gpu.%dx = pci_passthrough:alias=h200:%d' % (n, n) for n in _SIZES))
    servers = {}
    for name, gpus in _BOOTS:
        servers[name] = server = client.boot(name, flavors[gpus], image.id)
        where = server.get('OS-EXT-SRV-ATTR:host') or '-'
        fault = server.get('fault', {}).get('message', '')
        print('  boot %-8s gpu.%dx -> %-6s %s %s' % (
            name, gpus, server['status'], where, fault))
    print('Deleting train-a frees its quad; booting pair-3 (gpu.2x) into it')
    client.delete(servers.pop('train-a')['id'])
    servers['pair-3'] = server = client.boot('pair-3', flavors[2], image.id)
    print('  boot pair-3   gpu.2x -> %-6s %s' % (
        server['status'], server.get('OS-EXT-SRV-ATTR:host')))

    print('(service logs: %s/nova-all.log)' % allinone.conf.state_path)
    valid = set(gpu_modules.HGX_PARTITIONS.values())
    ok = True
    print()
    names = {i.uuid: i.display_name for i in db.instance_get_all(
        nova_context.get_admin_context())}
    host_boards = boards(allinone.compute_hosts)
    for host_board in host_boards:
        print(host_board.draw())
        held = {name: _module_ids(addresses)
                for name, addresses in host_board.holders().items()}
        fabric, fabric_ok = fabric_state(
            allinone.computes[host_board.host].driver, held, names)
        print(fabric)
        ok &= fabric_ok
        for name, modules in sorted(held.items()):
            good = modules in valid
            ok &= good
            print('    %-8s modules %-15s %s' % (
                name, ','.join(map(str, sorted(modules))),
                'valid NVLink partition' if good else 'INVALID'))
        print()
    print(fleet_board.draw_fleet_summary(host_boards))
    picture = os.path.join(allinone.conf.state_path, 'board.html')
    with open(picture, 'w', encoding='utf-8') as f:
        f.write(board_svg.fleet_html(host_boards))
    print('(the boards as a picture: %s)' % picture)
    print()
    expected_error = servers['pair-2']['status'] == 'ERROR'
    ok &= expected_error and all(
        s['status'] == 'ACTIVE' for n, s in servers.items() if n != 'pair-2')
    print('Result: %s' % ('every server got exactly one valid partition, '
                          'active in Fabric Manager, and nothing else is '
                          'active; pair-2 was refused (no free pair left)'
                          if ok else 'FAILED'))
    return 0 if ok else 1
