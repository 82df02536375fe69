"""``nova-manage pci defrag plan`` and ``apply``: free a whole device
group by cold-migrating servers the operator allowed to move.

``plan`` prints the cheapest plan of ``nova.pci.defrag`` for the fleet as
the database shows it. ``apply`` carries it out one move at a time
through the same paths as the REST API: a cold migration to the planned
host (``migrate`` with ``host``, as microversion 2.56 allows), then
``confirmResize`` once the server is in VERIFY_RESIZE. The scheduler
picks the partition on that host (best fit, as the planner orders
targets), so before each move the plan is made again from what the
database shows, for the host being freed and the moves left: a server
landing on another free partition of its size than planned changes the
rest of the plan, never its validity. A move that fails is rolled back
by the conductor (the server back on its partition), and ``apply``
stops there.
"""

import sys
import time

from oslo_config import cfg

from nova import context as nova_context
from nova import exception
from nova import states
from nova.compute import api as compute_api
from nova.db import api as db
from nova.pci import defrag

# Exit codes: 0 a plan (plan) or a freed group (apply).
NO_PLAN = 2
MOVE_FAILED = 3

_FAILED = (states.MIGRATION_ERROR, states.MIGRATION_FAILED)
_POLL = 0.2


def _plan(context, conf: cfg.ConfigOpts, size: int, host: str | None,
          max_moves: int) -> defrag.Plan | None:
    boards, servers = defrag.load_fleet(context, conf)
    return defrag.plan(boards, servers, size, max_moves, host)


def _no_plan(size: int, host: str | None, max_moves: int) -> str:
    return ('No plan of at most %d move(s) frees a group of %d devices%s: '
            'only servers with metadata %s=%s that are ACTIVE or SHUTOFF '
            'move, to free partitions of their size on other computes '
            'that are up' % (max_moves, size, ' on %s' % host if host
                             else '', defrag.ALLOW_KEY, defrag.ALLOW_VALUE))


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
    found = _plan(nova_context.get_admin_context(), conf, size, host,
                  max_moves)
    if found is None:
        print(_no_plan(size, host, max_moves), file=sys.stderr)
        return NO_PLAN
    print('\n'.join(found.describe()))
    return 0


def _wait(context, uuid: str, migration_uuid: str, done, timeout: float
          ) -> tuple[dict, dict]:
    """The instance and migration once ``done(instance, migration)``;
    MigrationFailed after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        instance = db.instance_get_by_uuid(context, uuid)
        migration = db.migration_get_by_uuid(context, migration_uuid)
        if done(instance, migration):
            return instance, migration
        if time.monotonic() > deadline:
            raise exception.MigrationFailed(
                instance_uuid=uuid, reason='migration %s is still %s after '
                '%ds (--timeout); it goes on without nova-manage' % (
                    migration_uuid, migration['status'], timeout))
        time.sleep(_POLL)


def _move(context, api: compute_api.API, move: defrag.Move,
          timeout: float) -> None:
    """Cold-migrate and confirm one server; MigrationFailed (the
    conductor rolled the move back) or another NovaException. Each
    request has its own context, so its own request id: the server's
    instance actions tell them apart, as for REST requests."""
    instance = db.instance_get_by_uuid(context, move.server)
    migration = api.migrate(nova_context.get_admin_context(), instance,
                            move.target.host)
    instance, migration = _wait(
        context, move.server, migration['uuid'],
        lambda i, m: i['task_state'] is None and (
            m['status'] == states.MIGRATION_FINISHED or
            m['status'] in _FAILED), timeout)
    if migration['status'] != states.MIGRATION_FINISHED:
        raise exception.MigrationFailed(
            instance_uuid=move.server, reason='migration %s is %s, the '
            'server stays on %s: %s' % (
                migration['uuid'], migration['status'], move.source_host,
                instance['fault_message'] or 'see its instance actions'))
    api.confirm_resize(nova_context.get_admin_context(), instance,
                       wait=True)
    _wait(context, move.server, migration['uuid'],
          lambda i, m: m['status'] == states.MIGRATION_CONFIRMED and
          i['task_state'] is None, timeout)


def apply(conf: cfg.ConfigOpts, size: int, host: str | None,
          max_moves: int, timeout: float,
          api: compute_api.API | None = None) -> int:
    """Carry out the cheapest plan, one confirmed move at a time; 0 when
    a group of ``size`` is wholly free, NO_PLAN when no plan exists,
    MOVE_FAILED at the first move that failed (rolled back)."""
    _check(size, max_moves)
    context = nova_context.get_admin_context()
    api = api or compute_api.API(conf)
    moved = 0
    while True:
        found = _plan(context, conf, size, host, max_moves - moved)
        if found is None:
            print(_no_plan(size, host, max_moves - moved) +
                  ('; %d move(s) were made' % moved if moved else ''),
                  file=sys.stderr)
            return NO_PLAN
        if not found.moves:
            print('%s %s is wholly free (%d device(s)) after %d move(s)' % (
                found.freed.host, found.freed.name, found.freed.size, moved))
            return 0
        # Later plans free a group on the same host.
        host = found.freed.host
        move = found.moves[0]
        print('Moving %s' % found.describe()[0].split('. ', 1)[1])
        try:
            _move(context, api, move, timeout)
        except exception.NovaException as exc:
            print('Stopped after %d move(s): %s' % (moved, exc.message),
                  file=sys.stderr)
            return MOVE_FAILED
        moved += 1
