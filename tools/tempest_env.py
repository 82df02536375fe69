"""Run Tempest's compute API tests against nova-all under a real Keystone.

What ``tools/tempest.sh`` runs: in a work directory it

- starts Keystone (the ``keystone`` package, SQLite, fernet tokens) with
  its admin, and nova's service user (admin in project ``service``);
  Tempest makes its own projects and users (dynamic credentials);
- writes two generated HGX H200 hosts with ``tools/fake_hosts.py`` and
  starts ``nova-all`` on them with ``[api]auth_strategy = keystone``;
- registers the compute, image and placement endpoints in Keystone's
  catalog, uploads two public images to nova-all's Glance and creates two
  flavors through the Compute API;
- writes ``tempest.conf``: only nova and glance available, the features
  ``doc/source/admin/compute-api.rst`` lists as not served turned off,
  the microversion range read from the Compute API's ``GET /``;
- runs ``tempest run`` with ``tools/tempest-exclusions.txt`` excluded
  (every line says why), all of ``tempest.api.compute`` or, with
  ``--subset``, the tests of ``tools/tempest-subset.txt``;
- prints ``tempest: N passed, N failed, N skipped`` and each failed
  test, and exits 1 on any failure.

The work directory (``--workdir``, else a temporary one) keeps the logs
of Keystone, nova-all and Tempest; a temporary one is removed after a
run without failures.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from keystoneauth1 import session as ks_session

import fake_hosts
import test_summary
from nova.tests.fixtures import glance as glance_fixture
from nova.tests.fixtures import keystone
from nova.tests.functional.lib import deployment

TOOLS = os.path.dirname(os.path.abspath(__file__))
EXCLUSIONS = os.path.join(TOOLS, 'tempest-exclusions.txt')
SUBSET = os.path.join(TOOLS, 'tempest-subset.txt')
FULL_REGEX = r'^tempest\.api\.compute\.'
HOSTS = {'hgx-1': 'hgx-h200', 'hgx-2': 'hgx-h200'}
NOVA_USER = ('nova', 'nova-service-secret', 'service')
# Tempest's flavors: small, a bigger one to resize to.
FLAVORS = (('tempest.1', 1, 512, 1), ('tempest.2', 2, 1024, 1))
BUILD_TIMEOUT = 300


def _request(session: ks_session.Session, method: str, url: str,
             **kwargs) -> dict:
    resp = session.request(url, method, raise_exc=False, **kwargs)
    if resp.status_code >= 400:
        raise RuntimeError('%s %s: %d %s' % (method, url, resp.status_code,
                                             resp.text[:2000]))
    if 'json' in resp.headers.get('Content-Type', ''):
        return resp.json()
    return {}


def nova_all_conf(keystone_url: str, api_port: int,
                  glance_port: int, placement_port: int
                  ) -> dict[str, dict]:
    """nova.conf's Keystone part and ports, as the deployment guide
    has it: the service user validates tokens and reads images."""
    user, password, project = NOVA_USER
    service_user = {
        'auth_type': 'password', 'auth_url': keystone_url,
        'username': user, 'password': password, 'project_name': project,
        'user_domain_id': 'default', 'project_domain_id': 'default'}
    return {
        'api': {'auth_strategy': 'keystone', 'listen': '127.0.0.1',
                'listen_port': api_port},
        'all_in_one': {'placement_listen_port': placement_port,
                       'glance_listen_port': glance_port},
        # This Keystone has public endpoints only.
        'keystone_authtoken': dict(service_user,
                                   www_authenticate_uri=keystone_url,
                                   interface='public'),
        'glance': service_user,
    }


def register_endpoints(admin: ks_session.Session, keystone_url: str,
                       endpoints: dict[str, tuple[str, str]]) -> None:
    """Catalog entries: service type -> (service name, public URL)."""
    for service_type, (name, url) in endpoints.items():
        entry = _request(admin, 'POST', keystone_url + '/services', json={
            'service': {'type': service_type, 'name': name}})['service']
        _request(admin, 'POST', keystone_url + '/endpoints', json={
            'endpoint': {'service_id': entry['id'], 'interface': 'public',
                         'region_id': 'RegionOne', 'url': url}})


def upload_image(admin: ks_session.Session, glance_url: str, name: str,
                 workdir: str) -> str:
    """A public qcow2 image in Glance; returns its id."""
    image = _request(admin, 'POST', glance_url + '/v2/images', json={
        'name': name, 'disk_format': 'qcow2', 'container_format': 'bare',
        'visibility': 'public'})
    path = glance_fixture.blank_qcow2(os.path.join(workdir, name + '.qcow2'))
    with open(path, 'rb') as f:
        _request(admin, 'PUT', glance_url + '/v2/images/%s/file' % image['id'],
                 data=f, headers={'Content-Type': 'application/octet-stream'})
    return image['id']


def wait_for_hypervisors(admin: ks_session.Session, api_url: str,
                         count: int) -> None:
    """Until the Compute API lists ``count`` hypervisors: every generated
    host's compute reported in."""
    deadline = time.monotonic() + deployment.READY_TIMEOUT
    while True:
        found = _request(admin, 'GET', api_url + '/os-hypervisors')
        if len(found['hypervisors']) >= count:
            return
        if time.monotonic() > deadline:
            raise RuntimeError('only %s of %d hypervisors after %ss' % (
                found['hypervisors'], count, deployment.READY_TIMEOUT))
        time.sleep(1)


def microversions(api_root: str) -> tuple[str, str]:
    """(min, max) microversion of v2.1 as the Compute API's GET / says."""
    versions = _request(ks_session.Session(), 'GET', api_root + '/',
                        authenticated=False)['versions']
    (v21,) = [v for v in versions if v['id'] == 'v2.1']
    return v21['min_version'], v21['version']


def tempest_conf(keystone_url: str, images: list[str], flavors: list[str],
                 versions: tuple[str, str], log_dir: str) -> dict:
    """tempest.conf: nova and glance only, and what compute-api.rst says
    is not served turned off."""
    return {
        'DEFAULT': {'log_dir': log_dir, 'log_file': 'tempest.log'},
        'auth': {'use_dynamic_credentials': 'true',
                 'admin_username': 'admin',
                 'admin_password': keystone.ADMIN_PASSWORD,
                 'admin_project_name': 'admin',
                 'admin_domain_name': 'Default',
                 'create_isolated_networks': 'false'},
        'identity': {'uri_v3': keystone_url, 'auth_version': 'v3',
                     'region': 'RegionOne', 'v3_endpoint_type': 'public'},
        'identity-feature-enabled': {'api_v2': 'false'},
        'service_available': {'nova': 'true', 'glance': 'true',
                              'neutron': 'false', 'cinder': 'false',
                              'swift': 'false'},
        'compute': {
            'image_ref': images[0], 'image_ref_alt': images[1],
            'flavor_ref': flavors[0], 'flavor_ref_alt': flavors[1],
            'min_microversion': versions[0],
            'max_microversion': versions[1],
            'min_compute_nodes': len(HOSTS),
            'build_timeout': BUILD_TIMEOUT, 'build_interval': 1,
            'region': 'RegionOne'},
        'compute-feature-enabled': {
            # Served (server-actions.rst, moves.rst, images.rst).
            'resize': 'true', 'cold_migration': 'true', 'shelve': 'true',
            'snapshot': 'true', 'console_output': 'true',
            # Not served for GPU guests here (compute-api.rst).
            'live_migration': 'false', 'pause': 'false',
            'suspend': 'false', 'rescue': 'false', 'vnc_console': 'false',
            'spice_console': 'false', 'serial_console': 'false',
            # No networking or block storage service (by design).
            'interface_attach': 'false', 'attach_encrypted_volume': 'false',
            # Not built yet (compute-api.rst).
            'metadata_service': 'false', 'config_drive': 'false',
            'change_password': 'false', 'personality': 'false',
            # Guests get no password: a create answers without
            # adminPass, as upstream with [api]enable_instance_password
            # = False.
            'enable_instance_password': 'false',
            'shelve_migrate': 'false'},
        'image': {'region': 'RegionOne', 'endpoint_type': 'public'},
        'validation': {'run_validation': 'false'},
    }


def run_tempest(workdir: str, conf: str, subset: bool,
                concurrency: int) -> int:
    """``tempest run`` in ``workdir``; prints the totals, returns the
    number of failed tests."""
    argv = [os.path.join(deployment.BIN, 'tempest'), 'run',
            '--config-file', conf, '--concurrency', str(concurrency),
            '--exclude-list', EXCLUSIONS]
    argv += (['--include-list', SUBSET] if subset
             else ['--regex', FULL_REGEX])
    print('+ ' + ' '.join(argv), flush=True)
    with open(os.path.join(workdir, 'tempest-run.log'), 'w') as log:
        subprocess.run(argv, cwd=workdir, stdout=log,
                       stderr=subprocess.STDOUT, check=False)
    summary = test_summary.last_run(cwd=workdir)
    failed = sorted(case.id() for case, _detail in
                    summary.errors + summary.failures)
    skipped = len(summary.skipped)
    print('tempest: %d passed, %d failed, %d skipped' % (
        summary.testsRun - len(failed) - skipped, len(failed), skipped))
    for test_id in failed:
        print('FAILED %s' % test_id)
    if summary.testsRun == 0:
        print('tempest ran no test (see %s)' % os.path.join(
            workdir, 'tempest-run.log'))
        return 1
    return len(failed)


def create_flavors(admin: ks_session.Session, api_url: str) -> list[str]:
    """``FLAVORS`` through the Compute API; returns their ids."""
    return [_request(admin, 'POST', api_url + '/flavors', json={
        'flavor': {'name': name, 'vcpus': vcpus, 'ram': ram, 'disk': disk}}
    )['flavor']['id'] for name, vcpus, ram, disk in FLAVORS]


def run(workdir: str, subset: bool, concurrency: int) -> int:
    """Set everything up in ``workdir``, run Tempest, tear it down;
    returns the number of failed tests."""
    hosts_dir = os.path.join(workdir, 'hosts')
    os.makedirs(hosts_dir)
    argv = fake_hosts.write_fleet(hosts_dir, HOSTS)
    with keystone.KeystoneFixture() as ks:
        user, password, project = NOVA_USER
        ks.add_user(user, password, project, 'admin')
        api_port, glance_port, placement_port = (
            deployment.free_port() for _ in range(3))
        # nova-all reads the generated nova.conf, then this one.
        own = deployment.write_conf(
            os.path.join(hosts_dir, 'keystone.conf'),
            nova_all_conf(ks.url, api_port, glance_port, placement_port))
        api_root = 'http://127.0.0.1:%d' % api_port
        api_url = api_root + '/v2.1'
        glance_url = 'http://127.0.0.1:%d' % glance_port
        nova_all = deployment.ServiceProcess(
            'nova-all', [os.path.join(deployment.BIN, argv[0]), *argv[1:3],
                         '--config-file', own, *argv[3:]],
            os.path.join(workdir, 'nova-all.log'),
            deployment.http_ready(api_root))
        nova_all.start()
        try:
            nova_all.wait_ready()
            register_endpoints(ks.admin, ks.url, {
                'compute': ('nova', api_url),
                'image': ('glance', glance_url),
                'placement': ('placement',
                              'http://127.0.0.1:%d' % placement_port)})
            wait_for_hypervisors(ks.admin, api_url, len(HOSTS))
            images = [upload_image(ks.admin, glance_url, name, workdir)
                      for name in ('tempest-image', 'tempest-image-alt')]
            conf = deployment.write_conf(
                os.path.join(workdir, 'tempest.conf'),
                tempest_conf(ks.url, images, create_flavors(ks.admin, api_url),
                             microversions(api_root), workdir))
            return run_tempest(workdir, conf, subset, concurrency)
        finally:
            nova_all.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--subset', action='store_true',
                        help='only the tests of tools/tempest-subset.txt')
    parser.add_argument('--concurrency', type=int, default=2,
                        help='Tempest worker processes (default 2)')
    parser.add_argument('--workdir',
                        help='where the logs go (kept); default a '
                             'temporary directory, removed on success')
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix='nova-tempest-')
    os.makedirs(workdir, exist_ok=True)
    print('work directory: %s' % workdir, flush=True)
    failed = run(workdir, args.subset, args.concurrency)
    if failed == 0 and not args.workdir:
        shutil.rmtree(workdir)
    else:
        print('logs: %s' % workdir)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
