"""A deployment of separate service processes on RabbitMQ and MariaDB.

nova-api, nova-conductor, nova-scheduler and nova-compute run as their own
processes from one nova.conf, as an operator would start them, with
Placement served by the test. Skipped when RabbitMQ or MariaDB does not
answer on localhost.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import fixtures
import requests
import testtools

from nova import test
from nova.tests.fixtures import database as db_fixture
from nova.tests.fixtures import placement as placement_fixture
from nova.virt.libvirt import fakehost

RABBIT_URL = os.environ.get('NOVA_TEST_RABBIT_URL',
                            'rabbit://guest:guest@127.0.0.1:5672/')
BIN = os.path.dirname(sys.executable)
SERVICES = ('nova-conductor', 'nova-scheduler', 'nova-compute', 'nova-api')
TIMEOUT = 90


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class TestSeparateServices(test.TestCase):

    def setUp(self):
        super().setUp()
        if not _port_open('127.0.0.1', 5672):
            self.skipTest('RabbitMQ is not listening on 127.0.0.1:5672')
        url = db_fixture.server_url_or_skip(self, 'mysql')
        self.db = self.useFixture(db_fixture.Database(server_url=url))
        self.placement = self.useFixture(placement_fixture.PlacementFixture())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.api_port = _free_port()
        self.config = self._write_config()
        self.logs = {}
        for name in SERVICES:
            self._spawn(name)

    def _write_config(self) -> str:
        pci = fakehost.h200_pci_config()
        node = fakehost.write_node_xml(os.path.join(self.tmp, 'node.xml'),
                                       fakehost.hgx_h200_node_xml())
        lines = [
            '[DEFAULT]',
            'host = gpu-host-1',
            'state_path = %s' % self.tmp,
            'transport_url = %s' % RABBIT_URL,
            # Own exchange: other test runs on the same broker stay apart.
            'control_exchange = nova-test-%s' % uuid.uuid4().hex[:8],
            '[database]',
            'connection = %s' % self.db.url,
            '[api]',
            'listen = 127.0.0.1',
            'listen_port = %d' % self.api_port,
            '[libvirt]',
            'connection_uri = %s' % node,
            '[placement]',
            'auth_type = admin_token',
            'endpoint = %s' % self.placement.url,
            'token = admin',
            '[filter_scheduler]',
            'pci_in_placement = true',
            '[pci]',
            'report_in_placement = true',
        ]
        for name in ('device_spec', 'device_group', 'alias'):
            lines += ['%s = %s' % (name, value) for value in pci[name]]
        path = os.path.join(self.tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        return path

    def _spawn(self, name: str) -> None:
        log = open(os.path.join(self.tmp, name + '.log'), 'w+')
        self.addCleanup(log.close)
        proc = subprocess.Popen(
            [os.path.join(BIN, name), '--config-file', self.config],
            stdout=log, stderr=subprocess.STDOUT)
        self.logs[name] = log
        self.addCleanup(self._stop, proc)
        self.addOnException(lambda exc_info, n=name, f=log: self.addDetail(
            n, testtools.content.text_content(self._read(f))))

    @staticmethod
    def _read(log) -> str:
        log.flush()
        log.seek(0)
        return log.read()

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def api(self, method, path, body=None, expect=(200, 201, 202, 204)):
        resp = requests.request(
            method, 'http://127.0.0.1:%d/v2.1%s' % (self.api_port, path),
            headers={'X-Auth-Token': 'admin',
                     'Content-Type': 'application/json'},
            data=json.dumps(body) if body is not None else None, timeout=30)
        self.assertIn(resp.status_code, expect, resp.text)
        return resp.json() if resp.content else {}

    def _wait(self, check, what: str):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            result = check()
            if result:
                return result
            time.sleep(0.3)
        self.fail('timed out waiting for %s' % what)

    def _api_up(self) -> bool:
        try:
            return requests.get('http://127.0.0.1:%d/' % self.api_port,
                                timeout=2).ok
        except requests.ConnectionError:
            return False

    def _compute_reported(self) -> bool:
        # The last thing a compute reports: the devices' member traits.
        resp = self.placement.api.get(
            '/resource_providers?required=CUSTOM_PCI_GROUP_NVLINK_2_M1')
        return resp.ok and len(resp.json()['resource_providers']) == 4

    def test_boot_and_delete_across_processes(self):
        self._wait(self._api_up, 'nova-api')
        self._wait(self._compute_reported, 'nova-compute to report')
        flavor = self.api('POST', '/flavors', {'flavor': {
            'name': 'gpu.2x', 'vcpus': 8, 'ram': 8192, 'disk': 0}})['flavor']
        self.api('POST', '/flavors/%s/os-extra_specs' % flavor['id'],
                 {'extra_specs': {'pci_passthrough:alias': 'h200:2'}})
        server_id = self.api('POST', '/servers', {'server': {
            'name': 'vm1', 'flavorRef': flavor['id'],
            'imageRef': 'none'}})['server']['id']

        def settled():
            server = self.api('GET', '/servers/%s' % server_id)['server']
            return server if server['status'] != 'BUILD' else None
        server = self._wait(settled, 'the server to build')
        self.assertEqual('ACTIVE', server['status'], server)
        self.assertEqual('gpu-host-1', server['OS-EXT-SRV-ATTR:host'])

        allocations = self.placement.api.get(
            '/allocations/%s' % server_id).json()['allocations']
        names = {rp['uuid']: rp['name'] for rp in self.placement.api.get(
            '/resource_providers').json()['resource_providers']}
        gpus = {fakehost.H200_GPU_ADDRESSES.index(
                    names[rp].split('_', 1)[1].lower()) + 1
                for rp, alloc in allocations.items()
                if 'PGPU' in alloc['resources']}
        self.assertIn(gpus, [set(p) for p in
                             fakehost.H200_NVLINK_PAIRS.values()])

        self.api('DELETE', '/servers/%s' % server_id)
        self._wait(lambda: requests.get(
            'http://127.0.0.1:%d/v2.1/servers/%s' % (self.api_port,
                                                     server_id),
            headers={'X-Auth-Token': 'admin'}, timeout=10).status_code ==
            404, 'the server to be deleted')
        self.assertEqual({}, self.placement.api.get(
            '/allocations/%s' % server_id).json()['allocations'])
