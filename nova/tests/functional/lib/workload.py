"""Load the way users do: many servers created and deleted at once.

The soak script and the deployment fault tests drive the Compute API with
:class:`ComputeClient`: concurrent ``POST /servers`` of mixed 1/2/4/8-GPU
flavors, concurrent deletes, waiting for servers to settle. Every HTTP
answer is counted; a 5xx is always a finding. :func:`findings` adds the
user-facing checks to the invariant checker's (:func:`check`).
"""

import collections
import concurrent.futures
import itertools
import json
import threading
import time

import requests

from nova import context as nova_context
from nova.db import api as db
from nova.db import records
from nova.pci import request as pci_request
from nova.tests.functional.lib import invariants
from nova.virt.fake import host as fakehost

SIZES = (1, 2, 4, 8)
TOKEN = 'admin'
SETTLE_TIMEOUT = 240
# Client-side bound of one request: a request nova-api never answers is
# counted as unanswered, not waited for.
REQUEST_TIMEOUT = 120
UNANSWERED = 'no answer'


def flavor_name(size: int) -> str:
    return 'gpu.%dx' % size


class ComputeClient:
    """The Compute API at ``api_url`` as an admin, counting answers.

    ``statuses`` counts HTTP status codes (and ``UNANSWERED`` for requests
    that got no HTTP answer: refused or cut connections); ``server_errors``
    lists every 5xx with its body.
    """

    def __init__(self, api_url: str, token: str = TOKEN) -> None:
        self.api_url = api_url.rstrip('/')
        self.token = token
        self.statuses: collections.Counter = collections.Counter()
        self.server_errors: list[str] = []
        self._lock = threading.Lock()

    def request(self, method: str, path: str, body=None
                ) -> requests.Response | None:
        """One request; None when no HTTP answer came."""
        try:
            resp = requests.request(
                method, self.api_url + path, timeout=REQUEST_TIMEOUT,
                headers={'X-Auth-Token': self.token,
                         'Content-Type': 'application/json',
                         'X-OpenStack-Nova-API-Version': '2.47'},
                data=None if body is None else json.dumps(body))
        except requests.RequestException:
            with self._lock:
                self.statuses[UNANSWERED] += 1
            return None
        with self._lock:
            self.statuses[resp.status_code] += 1
            if resp.status_code >= 500:
                self.server_errors.append('%s %s: %d %s' % (
                    method, path, resp.status_code, resp.text[:500]))
        return resp

    def _ok(self, method: str, path: str, body=None) -> dict:
        resp = self.request(method, path, body)
        if resp is None or resp.status_code >= 400:
            raise RuntimeError('%s %s failed: %s' % (
                method, path, 'no answer' if resp is None else
                '%d %s' % (resp.status_code, resp.text)))
        return resp.json() if resp.content else {}

    def ensure_flavors(self) -> dict[int, str]:
        """GPU count -> flavor id of ``gpu.<N>x`` (alias ``h200:<N>``),
        created if missing."""
        existing = {f['name']: f['id'] for f in
                    self._ok('GET', '/flavors')['flavors']}
        flavors = {}
        for size in SIZES:
            name = flavor_name(size)
            if name not in existing:
                existing[name] = self._ok('POST', '/flavors', {'flavor': {
                    'name': name, 'vcpus': 2 * size, 'ram': 1024 * size,
                    'disk': 0}})['flavor']['id']
                self._ok('POST', '/flavors/%s/os-extra_specs' %
                         existing[name], {'extra_specs': {
                             'pci_passthrough:alias': 'h200:%d' % size}})
            flavors[size] = existing[name]
        return flavors

    def _at_once(self, calls: list) -> list:
        """Run the callables all at once (one thread each, released
        together); their results in order."""
        if not calls:
            return []
        barrier = threading.Barrier(len(calls))

        def run(call):
            barrier.wait()
            return call()
        with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
            return list(pool.map(run, calls))

    def create_servers(self, count: int, prefix: str = 'soak',
                       sizes=SIZES) -> list[str]:
        """``count`` concurrent creates cycling through ``sizes``; the ids
        of the servers the API accepted."""
        flavors = self.ensure_flavors()
        plan = list(itertools.islice(itertools.cycle(sizes), count))

        def create(index: int, size: int):
            return lambda: self.request('POST', '/servers', {'server': {
                'name': '%s-%d-%dgpu' % (prefix, index, size),
                'flavorRef': flavors[size], 'imageRef': 'none'}})
        answers = self._at_once([create(i, size)
                                 for i, size in enumerate(plan)])
        return [resp.json()['server']['id'] for resp in answers
                if resp is not None and resp.status_code == 202]

    def delete_servers(self, ids: list[str]) -> None:
        """Delete the servers all at once (a 404 means already gone)."""
        self._at_once([lambda uuid=uuid: self.request(
            'DELETE', '/servers/%s' % uuid) for uuid in ids])

    def servers(self) -> list[dict]:
        """Every server (all projects), with details."""
        return self._ok('GET', '/servers/detail?all_tenants=1')['servers']

    def wait_settled(self, timeout: float = SETTLE_TIMEOUT) -> list[dict]:
        """Wait (bounded) until no server is in BUILD; the servers then
        (BUILD ones included if the time ran out)."""
        deadline = time.monotonic() + timeout
        while True:
            servers = self.servers()
            if (not any(s['status'] == 'BUILD' for s in servers) or
                    time.monotonic() > deadline):
                return servers
            time.sleep(1)

    def delete_all(self, timeout: float = SETTLE_TIMEOUT) -> list[str]:
        """Delete every server at once and wait (bounded) until they are
        gone; findings for servers still there."""
        self.delete_servers([s['id'] for s in self.servers()])
        deadline = time.monotonic() + timeout
        while True:
            left = self.servers()
            if not left or time.monotonic() > deadline:
                return ['server %s (%s) still exists %ds after its delete' %
                        (s['id'], s['status'], timeout) for s in left]
            time.sleep(1)


def handed_to_compute(instance: records.Instance) -> bool:
    """The conductor handed the build to a compute; it still builds."""
    return instance.vm_state == 'building' and bool(instance.host)


def wait_for_instance(match=lambda instance: True,
                      timeout: float = 60) -> records.Instance | None:
    """Wait (bounded) for an instance row ``match`` accepts; None if none
    did in time. The moment to inject a fault mid-burst.

    Read from the database: cheap, and it answers while nova-api is
    busy or gone.
    """
    context = nova_context.get_admin_context()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = next((i for i in db.instance_get_all(context)
                      if match(i)), None)
        if found is not None:
            return found
        time.sleep(0.05)
    return None


def _size(server: dict) -> int:
    """GPUs the server's flavor asks for."""
    spec = server['flavor']['extra_specs'].get('pci_passthrough:alias')
    return sum(count for _name, count in
               pci_request.parse_alias_extra_spec(spec)) if spec else 0


def free_partitions() -> dict[str, dict[int, int]]:
    """Host -> GPU count -> number of free HGX H200 partitions of that
    size (read from nova's device rows)."""
    context = nova_context.get_admin_context()
    pairs = {name: set(gpus) for name, gpus in
             fakehost.H200_NVLINK_PAIRS.items()}
    quads = [pairs[a] | pairs[b] for a, b in
             fakehost.H200_NVLINK_QUADS.values()]
    partitions = {1: [{gpu} for gpu in range(1, 9)],
                  2: list(pairs.values()), 4: quads, 8: [set(range(1, 9))]}
    free = {}
    for node in db.compute_node_get_all(context):
        idle = {fakehost.H200_GPU_ADDRESSES.index(row['address']) + 1
                for row in db.pci_device_get_all_by_node(context, node.id)
                if row['address'] in fakehost.H200_GPU_ADDRESSES and
                row['instance_uuid'] is None}
        free[node.hypervisor_hostname] = {
            size: sum(1 for p in parts if p <= idle)
            for size, parts in partitions.items()}
    return free


def check(client: ComputeClient, placement_url: str,
          fault_free: bool = False) -> dict[str, list[str]]:
    """Every check by name -> its violations, once servers settled.

    The invariants of :mod:`nova.tests.functional.lib.invariants` (devices,
    partitions, allocations, nothing in BUILD) plus what a user sees: any
    5xx, ERROR servers without a fault saying why, and, for loads without
    injected faults (``fault_free``), requests that got no answer and
    ERROR servers whose partition size is still free.
    """
    servers = client.wait_settled()
    checks = {
        'invariants (nothing in BUILD, one partition per ACTIVE server, '
        'allocations == held devices, no device twice, no leak)':
            invariants.check(client.api_url, client.token, placement_url,
                             settled=True),
        'no HTTP 5xx answer': list(client.server_errors),
        'every ERROR server has a fault': [
            'server %s is ERROR without a fault message' % s['id']
            for s in servers if s['status'] == 'ERROR' and
            not (s.get('fault') or {}).get('message')],
    }
    if fault_free:
        checks['every request answered'] = [
            '%d request(s) got no HTTP answer' % client.statuses[UNANSWERED]
        ] if client.statuses[UNANSWERED] else []
        free = free_partitions()
        checks['no ERROR server whose partition size is free'] = [
            'server %s (%d GPUs) is ERROR (%s) although %s still have a '
            'free %d-GPU partition' % (
                s['id'], _size(s),
                ' '.join(s.get('fault', {}).get('message', '').split())[:300],
                [h for h, sizes in sorted(free.items())
                 if sizes.get(_size(s))], _size(s))
            for s in servers if s['status'] == 'ERROR' and any(
                sizes.get(_size(s)) for sizes in free.values())]
    return checks


def describe(servers: list[dict], client: ComputeClient) -> str:
    """One line: servers by status and HTTP answers by code."""
    statuses = collections.Counter(s['status'] for s in servers)
    return 'servers %s; HTTP answers %s' % (
        dict(sorted(statuses.items())),
        dict(sorted(client.statuses.items(), key=str)))
