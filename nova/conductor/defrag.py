"""Carry out defragmentation plans: cold migrations that free a whole
device group, one confirmed move at a time.

``nova-manage pci defrag apply`` and the conductor's automatic mode
(``[scheduler]defrag_max_moves``) both run :func:`free_group`. Each move
is started and confirmed the way the Compute API does it
(``nova.conductor.migrate.start`` and ``confirm``), so it is an instance
action of the moved server with its own request id, and the migration
runs in a conductor like any other: ``migrate`` to the planned host
(``host`` as microversion 2.56 allows), then ``confirmResize`` once the
server is in VERIFY_RESIZE. The scheduler chooses the partition on that
host, best fit as the planner orders targets, so before each move the
plan is made again (``nova.fleet.defrag``) for the host being freed and the
moves left: a server landing on another free partition of its size than
planned changes the rest of the plan, never its validity. A failed move
is rolled back by the conductor (the server on its old partition) and
stops the run.

Who carries a move out is a :class:`Mover`: the conductor's own mode
starts moves in its process (:class:`ConductorMover`); ``nova-manage``
cannot join a deployment's messaging (nor nova-all's, which lives inside
its process) and calls the Compute API over REST (``nova.cmd.defrag``).

The automatic mode never runs inside a build: the conductor's build
asks :meth:`AutoDefrag.wants` whether a refusal is worth moving servers
for, and if so leaves the build waiting for a host and runs
:meth:`AutoDefrag.free_for` as a task of its own, which schedules the
build again when the moves are done (``nova.conductor.manager``).
"""

import dataclasses
import time
import typing
from typing import Callable

from oslo_config import cfg
from oslo_log import log as logging

from nova import context as nova_context
from nova import exception
from nova import states
from nova.conductor import migrate
from nova.conductor import rpcapi as conductor_rpcapi
from nova.db import api as db
from nova.db import records
from nova.fleet import defrag
from nova.scheduler import refusal

LOG = logging.getLogger(__name__)

_FAILED = (states.MIGRATION_ERROR, states.MIGRATION_FAILED)
_POLL = 0.2
# How long the automatic mode waits for one move (a cold migration of a
# guest, then its confirm) before it gives the build up.
AUTO_MOVE_TIMEOUT = 600


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a run ended: ``freed`` the group wholly free (None when no
    plan was left or a move failed), the moves made, and why it stopped
    without a free group (``failed_move``: a move failed, else no plan
    was left)."""

    freed: defrag.Partition | None
    moved: int
    failure: str | None = None
    failed_move: bool = False


def no_plan(size: int, host: str | None, max_moves: int) -> str:
    """Why there is no plan, in an operator's words."""
    return ('No plan of at most %d move(s) frees a group of %d devices%s: '
            'only servers with metadata %s=%s that are ACTIVE or SHUTOFF '
            'move, to free partitions of their size on other computes '
            'that are up' % (max_moves, size, ' on %s' % host if host
                             else '', defrag.ALLOW_KEY, defrag.ALLOW_VALUE))


def plan(context, conf: cfg.ConfigOpts, size: int, host: str | None,
         max_moves: int) -> defrag.Plan | None:
    """The cheapest plan for the fleet the database shows now."""
    boards, servers = defrag.load_fleet(context, conf)
    return defrag.plan(boards, servers, size, max_moves, host)


class Mover(typing.Protocol):
    """Carries out one move: the server cold-migrated to the move's
    target host and confirmed there when it returns; MigrationFailed
    (the conductor rolled it back, or it did not finish in time) or
    another NovaException otherwise."""

    def __call__(self, move: defrag.Move) -> None:
        ...


def free_group(context, conf: cfg.ConfigOpts, mover: Mover,
               size: int, host: str | None, max_moves: int,
               report: Callable[[str], None] = LOG.info) -> Outcome:
    """Move servers with ``mover`` until a group of ``size`` is wholly
    free (on ``host`` if given), at most ``max_moves``; ``report`` gets
    one line per move started."""
    moved = 0
    while True:
        found = plan(context, conf, size, host, max_moves - moved)
        if found is None:
            return Outcome(None, moved, no_plan(size, host,
                                                max_moves - moved))
        if not found.moves:
            return Outcome(found.freed, moved)
        # Later plans free a group on the same host.
        host = found.freed.host
        report('Moving %s' % found.describe()[0].split('. ', 1)[1])
        try:
            mover(found.moves[0])
        except exception.NovaException as exc:
            return Outcome(None, moved, exc.message, failed_move=True)
        moved += 1


class ConductorMover:
    """Moves through the conductor's move entry points in this process,
    waiting on the database: the conductor's automatic mode."""

    def __init__(self, context, conductor: conductor_rpcapi.ConductorAPI,
                 timeout: float) -> None:
        self.context = context
        self.conductor = conductor
        self.timeout = timeout

    def _wait(self, uuid: str, migration_uuid: str, done
              ) -> tuple[records.Instance, records.Migration]:
        """The instance and migration once ``done(instance, migration)``;
        MigrationFailed after the timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            instance = db.instance_get_by_uuid(self.context, uuid)
            migration = db.migration_get_by_uuid(self.context,
                                                 migration_uuid)
            if done(instance, migration):
                return instance, migration
            if time.monotonic() > deadline:
                raise exception.MigrationFailed(
                    instance_uuid=uuid, reason='migration %s is still %s '
                    'after %ds; it goes on without this run' % (
                        migration_uuid, migration.status, self.timeout))
            time.sleep(_POLL)

    def __call__(self, move: defrag.Move) -> None:
        """Cold-migrate and confirm one server. Each request has its own
        context, so its own request id: the server's instance actions
        tell them apart, as for REST requests."""
        instance = db.instance_get_by_uuid(self.context, move.server)
        migration = migrate.start(nova_context.get_admin_context(),
                                  self.conductor, instance, 'migration',
                                  host=move.target.host)
        instance, migration = self._wait(
            move.server, migration.uuid,
            lambda i, m: i.task_state is None and (
                m.status == states.MIGRATION_FINISHED or
                m.status in _FAILED))
        if migration.status != states.MIGRATION_FINISHED:
            raise exception.MigrationFailed(
                instance_uuid=move.server, reason='migration %s is %s, the '
                'server stays on %s: %s' % (
                    migration.uuid, migration.status,
                    move.source_host,
                    instance.fault_message or 'see its instance actions'))
        migrate.confirm(nova_context.get_admin_context(), self.conductor,
                        instance, wait=True)
        self._wait(move.server, migration.uuid,
                   lambda i, m: m.status == states.MIGRATION_CONFIRMED and
                   i.task_state is None)


class AutoDefrag:
    """The conductor's automatic mode (``[scheduler]defrag_max_moves``):
    free a group for a build refused for fragmentation only."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        # Built on first use: most conductors never move a server.
        self._conductor: conductor_rpcapi.ConductorAPI | None = None

    def wants(self, context, instance_uuid: str,
              codes: list[str]) -> int | None:
        """After the scheduler refused ``instance_uuid`` with the reason
        ``codes`` of its NoValidHost: the size of the group moves should
        free for it, or None when moving servers cannot help or is not
        allowed. Only a server asking one device group, refused for
        nothing but fragmentation (every part of the request is free
        somewhere, only no group of its size is wholly free: what moving
        servers can change), and only when the option allows moves."""
        if not self.conf.scheduler.defrag_max_moves or \
                set(codes) != {refusal.FRAGMENTATION}:
            return None
        requests = db.instance_get_by_uuid(context,
                                           instance_uuid).pci_requests
        if len(requests) != 1 or not requests[0].group_type:
            return None
        return requests[0].count

    def free_for(self, context, instance_uuid: str,
                 codes: list[str]) -> bool:
        """Move servers (at most ``[scheduler]defrag_max_moves``, each
        waited for) so a group of the size :meth:`wants` names is wholly
        free; whether one is, so the build is worth scheduling again.
        Runs for minutes with real guests: never in a build's thread."""
        size = self.wants(context, instance_uuid, codes)
        if size is None:
            return False
        if self._conductor is None:
            self._conductor = conductor_rpcapi.ConductorAPI(self.conf)
        outcome = free_group(
            context, self.conf,
            ConductorMover(context, self._conductor, AUTO_MOVE_TIMEOUT),
            size, None, self.conf.scheduler.defrag_max_moves,
            lambda line: LOG.info('Instance %s: %s to free a group of %d',
                                  instance_uuid, line, size))
        if outcome.freed is None:
            LOG.info('Instance %s: no group of %d freed after %d move(s): '
                     '%s', instance_uuid, size, outcome.moved,
                     outcome.failure)
            return False
        return True
