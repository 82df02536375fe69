"""``nova-manage pci defrag plan`` and ``apply``: free a whole device
group by cold-migrating servers the operator allowed to move (see
``nova.fleet.defrag`` for the plan and ``nova.conductor.defrag`` for how
it is carried out).

``apply`` moves servers through the Compute API over REST, as an
admin, as any client could (``[nova]``, see ``nova.conf.nova_api``): a
command cannot join the services' messaging, and nova-all's lives
inside its own process. The plan is read from the database the
configuration names, as ``plan`` does.
"""

import sys
import time

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import token_endpoint
from oslo_config import cfg
from oslo_utils import netutils

from nova import cmd
from nova import context as nova_context
from nova import exception
from nova.conductor import defrag as conductor_defrag
from nova.conf import ksa
from nova.conf import nova_api
from nova.fleet import defrag as fleet_defrag

# Exit codes: 0 a plan (plan) or a freed group (apply).
NO_PLAN = 2
MOVE_FAILED = 3

# ``migrate`` names its target host from this microversion on.
MICROVERSION = '2.56'
# The token noauth2 takes as the admin (nova.api.auth).
NOAUTH_ADMIN_TOKEN = 'admin'
# Seconds between two reads of a moving server.
POLL_INTERVAL = 0.5
# Server states once a move step settled (no task in progress).
VERIFY_RESIZE = 'VERIFY_RESIZE'
SETTLED = ('ACTIVE', 'SHUTOFF')
# Addresses that mean "every interface": a client reaches them locally.
_ANY_ADDRESS = {'0.0.0.0': '127.0.0.1', '::': '::1'}


def _check(size: int, max_moves: int) -> None:
    if size < 1:
        raise exception.Invalid(reason='--size must be at least 1, not %d'
                                % size)
    if max_moves < 0:
        raise exception.Invalid(reason='--max-moves must be 0 or more, '
                                'not %d' % max_moves)


def plan(conf: cfg.ConfigOpts, size: int, host: str | None,
         max_moves: int) -> int:
    """Print the cheapest plan; 0 with one, NO_PLAN without."""
    _check(size, max_moves)
    found = conductor_defrag.plan(nova_context.get_admin_context(), conf,
                                  size, host, max_moves)
    if found is None:
        print(conductor_defrag.no_plan(size, host, max_moves),
              file=sys.stderr)
        return NO_PLAN
    print('\n'.join(found.describe()))
    return 0


def compute_api_adapter(conf: cfg.ConfigOpts) -> ks_adapter.Adapter:
    """The Compute API as ``[nova]`` describes it, at MICROVERSION.

    Without ``[nova]auth_type``, a noauth2 API of this configuration
    (``[api]listen``, ``listen_port``) with its admin token; a Keystone
    deployment must say how to authenticate (InvalidConfiguration).
    """
    group = nova_api.nova_group.name
    auth = None
    if not conf[group].auth_type:
        if conf.api.auth_strategy != 'noauth2':
            raise exception.InvalidConfiguration(
                reason='[nova]auth_type is not set, and [api]auth_strategy '
                'is %s: say how nova-manage authenticates to the Compute '
                'API with the keystoneauth options of [nova] (e.g. '
                'auth_type = password, auth_url, username, password, '
                'project_name, user_domain_name, project_domain_name)' %
                conf.api.auth_strategy)
        listen = cmd.api_listen_address(conf)
        address = _ANY_ADDRESS.get(listen, listen)
        auth = token_endpoint.Token('http://%s:%d/v2.1' % (
            netutils.escape_ipv6(address), conf.api.listen_port),
            NOAUTH_ADMIN_TOKEN)
    return ksa.load_adapter(conf, group, auth=auth,
                            default_microversion=MICROVERSION)


def _message(resp) -> str:
    """What the Compute API said in an error response (its fault body's
    message, else the body)."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()
    faults = [v for v in body.values() if isinstance(v, dict)] \
        if isinstance(body, dict) else []
    return faults[0].get('message', resp.text) if faults else resp.text


class RestMover:
    """Moves through the Compute API (``conductor_defrag.Mover``): a cold
    migration to the planned host (``migrate`` with ``host``), waited for
    by reading the server until VERIFY_RESIZE, then ``confirmResize``,
    waited for until the server is ACTIVE or SHUTOFF again, each wait at
    most ``timeout`` seconds."""

    def __init__(self, api: ks_adapter.Adapter, timeout: float) -> None:
        self.api = api
        self.timeout = timeout

    def _request(self, method: str, path: str, uuid: str,
                 **kwargs) -> dict:
        """The body of a successful request; MigrationFailed naming what
        the API said, or that it could not be reached."""
        try:
            resp = self.api.request(path, method, raise_exc=False,
                                    **kwargs)
        except ks_exc.ClientException as exc:
            raise exception.MigrationFailed(
                instance_uuid=uuid, reason='the Compute API could not be '
                'reached ([nova] options): %s' % exc)
        if resp.status_code >= 400:
            raise exception.MigrationFailed(
                instance_uuid=uuid, reason='%s %s answered %d: %s' % (
                    method, path, resp.status_code, _message(resp)))
        return resp.json() if resp.content else {}

    def _server(self, uuid: str) -> dict:
        return self._request('GET', '/servers/%s' % uuid, uuid)['server']

    def _wait(self, uuid: str, step: str, done) -> dict:
        """The server once ``done(server)``; MigrationFailed after the
        timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            server = self._server(uuid)
            if done(server):
                return server
            if time.monotonic() > deadline:
                raise exception.MigrationFailed(
                    instance_uuid=uuid, reason='the %s is still at status '
                    '%s, task %s after %ds; it goes on without this run' % (
                        step, server['status'],
                        server.get('OS-EXT-STS:task_state'), self.timeout))
            time.sleep(POLL_INTERVAL)

    def _migration_status(self, uuid: str) -> str:
        """The status of the server's newest migration."""
        views = self._request(
            'GET', '/os-migrations?instance_uuid=%s' % uuid,
            uuid)['migrations']
        return views[0]['status'] if views else 'not recorded'

    def __call__(self, move: fleet_defrag.Move) -> None:
        """Cold-migrate ``move.server`` to its target host, confirm."""
        uuid = move.server
        path = '/servers/%s/action' % uuid
        self._request('POST', path, uuid,
                      json={'migrate': {'host': move.target.host}})
        server = self._wait(uuid, 'migration', lambda s: s.get(
            'OS-EXT-STS:task_state') is None)
        if server['status'] != VERIFY_RESIZE:
            fault = (server.get('fault') or {}).get('message')
            raise exception.MigrationFailed(
                instance_uuid=uuid, reason='the migration is %s, the server '
                'is %s on %s: %s' % (
                    self._migration_status(uuid), server['status'],
                    server.get('OS-EXT-SRV-ATTR:host'),
                    fault or 'see openstack server event list %s' % uuid))
        self._request('POST', path, uuid, json={'confirmResize': None})
        server = self._wait(uuid, 'confirm', lambda s: s.get(
            'OS-EXT-STS:task_state') is None and s['status'] != VERIFY_RESIZE)
        if server['status'] not in SETTLED:
            raise exception.MigrationFailed(
                instance_uuid=uuid, reason='the confirm left the server %s'
                % server['status'])


def apply(conf: cfg.ConfigOpts, size: int, host: str | None,
          max_moves: int, timeout: float,
          mover: conductor_defrag.Mover | None = None) -> int:
    """Carry out the cheapest plan, one confirmed move at a time (through
    the Compute API unless ``mover`` is given); 0 when a group of
    ``size`` is wholly free, NO_PLAN when no plan exists, MOVE_FAILED at
    the first move that failed (rolled back)."""
    _check(size, max_moves)
    if mover is None:
        mover = RestMover(compute_api_adapter(conf), timeout)
    outcome = conductor_defrag.free_group(
        nova_context.get_admin_context(), conf, mover, size, host,
        max_moves, print)
    if outcome.freed is not None:
        print('%s %s is wholly free (%d device(s)) after %d move(s)' % (
            outcome.freed.host, outcome.freed.name, outcome.freed.size,
            outcome.moved))
        return 0
    if not outcome.failed_move:
        print(outcome.failure + ('; %d move(s) were made' % outcome.moved
                                 if outcome.moved else ''),
              file=sys.stderr)
        return NO_PLAN
    print('Stopped after %d move(s): %s' % (outcome.moved, outcome.failure),
          file=sys.stderr)
    return MOVE_FAILED
