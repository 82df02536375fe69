"""``nova-manage pci defrag plan`` and ``apply``: free a whole device
group by cold-migrating servers the operator allowed to move (see
``nova.pci.defrag`` for the plan and ``nova.conductor.defrag`` for how
it is carried out)."""

import sys

from oslo_config import cfg

from nova import context as nova_context
from nova import exception
from nova.compute import api as compute_api
from nova.conductor import defrag as conductor_defrag

# Exit codes: 0 a plan (plan) or a freed group (apply).
NO_PLAN = 2
MOVE_FAILED = 3


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


def apply(conf: cfg.ConfigOpts, size: int, host: str | None,
          max_moves: int, timeout: float,
          api: compute_api.API | None = None) -> int:
    """Carry out the cheapest plan, one confirmed move at a time; 0 when
    a group of ``size`` is wholly free, NO_PLAN when no plan exists,
    MOVE_FAILED at the first move that failed (rolled back)."""
    _check(size, max_moves)
    outcome = conductor_defrag.free_group(
        nova_context.get_admin_context(), conf, api or compute_api.API(conf),
        size, host, max_moves, timeout, print)
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
