"""Server group policies in the scheduler: where a member of a group
may land, where it would rather land, and the record of where it did.

A server group (``/os-server-groups``) has one policy for its members'
hosts, as upstream Nova's:

* ``affinity``: every member on one host;
* ``anti-affinity``: no two members on one host, or at most the group's
  ``max_server_per_host`` rule (microversion 2.64);
* ``soft-affinity`` / ``soft-anti-affinity`` (2.15): the same as a
  preference only; a host is never refused for them.

The hard policies drop hosts (``keep``) in the same step that drops
disabled or down hosts, so the search for candidates goes on to other
hosts and a refusal names the group and its policy. A soft policy is
tried as if hard first, on the hosts it likes best (``preferred``:
those without a member, or with the most members), since Placement's
answer may hold a few hosts only (``nova.scheduler.fullness`` asks for
the fullest first); when none of those fits, on every host, in the
order it prefers (``order``, before the fit order of
``nova.scheduler.choice.by_fit``).

Where a member is: its recorded host, the host the scheduler last
placed it on while it has a task in flight (a build not yet recorded by
its conductor, a move), and both ends of a move in progress.

Two members scheduled at once must not both take the last host the
policy allows. Upstream checks late, on the compute, and reschedules;
here the scheduler records each placement (``record``) with a
compare-and-swap on the group's generation, read with the members
before the decision: of two decisions made on the same state of the
group only one is recorded, and the other gives its claim back and
decides again on the new state (``SchedulerManager._choose``).
"""

from collections.abc import Iterable, Mapping
import collections
import dataclasses

from nova.db import api as db
from nova.db import records
from nova.scheduler import choice
from nova.scheduler import request_builder

AFFINITY = 'affinity'
ANTI_AFFINITY = 'anti-affinity'
SOFT_AFFINITY = 'soft-affinity'
SOFT_ANTI_AFFINITY = 'soft-anti-affinity'
# The policies of microversion 2.1, and those 2.15 adds.
HARD_POLICIES = (AFFINITY, ANTI_AFFINITY)
SOFT_POLICIES = (SOFT_AFFINITY, SOFT_ANTI_AFFINITY)
POLICIES = HARD_POLICIES + SOFT_POLICIES
# The one rule (2.64), for anti-affinity only; 1 when not given.
MAX_SERVER_PER_HOST = 'max_server_per_host'


@dataclasses.dataclass(frozen=True)
class GroupState:
    """What one scheduling decision knows of the group of the instance
    it places: the policy and how many of the other members each host
    holds, as of the group's ``generation``."""

    uuid: str
    policy: str
    generation: int
    max_per_host: int
    # How many members the group has, this instance among them.
    size: int
    # Host name -> the number of other members on it.
    others: Mapping[str, int]

    def refusal(self, host: str) -> str | None:
        """Why the policy forbids ``host``, or None if it allows it."""
        here = self.others.get(host, 0)
        if self.policy == ANTI_AFFINITY and here >= self.max_per_host:
            return ('%s holds %d server(s) of anti-affinity server group '
                    '%s (at most %d per host)' % (
                        host, here, self.uuid, self.max_per_host))
        if self.policy == AFFINITY and self.others and not here:
            return ('%s is not the host of affinity server group %s (its '
                    'servers are on %s)' % (
                        host, self.uuid, ', '.join(sorted(self.others))))
        return None

    @property
    def prefers(self) -> bool:
        """Whether a soft policy prefers some hosts to others now (it
        does once a member is placed)."""
        return self.policy in SOFT_POLICIES and bool(self.others)

    def preferred(self, host: str) -> bool:
        """Whether a soft policy likes ``host`` best: no other member
        there (soft-anti-affinity), or the most of them
        (soft-affinity)."""
        here = self.others.get(host, 0)
        if self.policy == SOFT_ANTI_AFFINITY:
            return here == 0
        if self.policy == SOFT_AFFINITY:
            return here == max(self.others.values(), default=0)
        return True

    def preference(self, host: str) -> int:
        """Sort key of ``host`` for the soft policies (lower first): the
        most members first for soft-affinity, the fewest for
        soft-anti-affinity; 0 for the hard ones."""
        here = self.others.get(host, 0)
        if self.policy == SOFT_AFFINITY:
            return -here
        if self.policy == SOFT_ANTI_AFFINITY:
            return here
        return 0


def member_hosts(member: records.ServerGroupMember,
                 migrations: Iterable[records.Migration]) -> set[str]:
    """The hosts ``member`` occupies for its group's policy: its host,
    the host it was last placed on while a task is in flight, and both
    ends of its ``migrations`` in progress."""
    hosts = {member.host}
    if member.task_state is not None:
        hosts.add(member.placed_host)
    for migration in migrations:
        hosts.update((migration.source_compute, migration.dest_compute))
    hosts.discard(None)
    return hosts


def state_of(group: records.ServerGroup, instance_uuid: str,
             migrations: Iterable[records.Migration]) -> GroupState:
    """The group as the decision placing ``instance_uuid`` sees it: its
    other members' hosts (``migrations``: the moves in progress of its
    members)."""
    moves = collections.defaultdict(list)
    for migration in migrations:
        moves[migration.instance_uuid].append(migration)
    others: collections.Counter[str] = collections.Counter()
    for member in group.members:
        if member.instance_uuid != instance_uuid:
            others.update(member_hosts(member, moves[member.instance_uuid]))
    return GroupState(
        uuid=group.uuid, policy=group.policy, generation=group.generation,
        max_per_host=int(group.rules.get(MAX_SERVER_PER_HOST, 1)),
        size=len(group.members), others=dict(others))


def load(context, instance_uuid: str) -> GroupState | None:
    """The state of the instance's server group, None if it is in none.
    """
    group = db.instance_group_get_by_instance(context, instance_uuid)
    if group is None:
        return None
    return state_of(group, instance_uuid, db.migration_get_in_progress(
        context, [member.instance_uuid for member in group.members]))


def keep(state: GroupState | None,
         usable: Mapping[str, records.ComputeNode], dropped: list[str],
         preferred_only: bool = False
         ) -> tuple[dict[str, records.ComputeNode], list[str]]:
    """Of the ``usable`` compute nodes (by provider UUID), those the
    policy allows (with ``preferred_only``, those a soft policy likes
    best); ``dropped`` with the reason for each one left out."""
    if state is None:
        return dict(usable), dropped
    kept, dropped = {}, list(dropped)
    for root, node in usable.items():
        reason = state.refusal(node.host)
        if reason is None and preferred_only and \
                not state.preferred(node.host):
            reason = '%s is not preferred by %s server group %s' % (
                node.host, state.policy, state.uuid)
        if reason is None:
            kept[root] = node
        else:
            dropped.append(reason)
    return kept, dropped


def order(state: GroupState | None,
          nodes: Mapping[str, records.ComputeNode],
          inner: choice.Order) -> choice.Order:
    """The candidate order ``inner``, then, for a soft policy, the
    hosts it prefers first (``nodes``: compute nodes by provider UUID).
    """
    if state is None or state.policy not in SOFT_POLICIES:
        return inner

    def ordered(candidates: list[choice.Candidate], summaries: dict,
                request: request_builder.ResourceRequest
                ) -> list[choice.Candidate]:
        return sorted(inner(candidates, summaries, request),
                      key=lambda candidate: state.preference(
                          nodes[candidate.host].host))
    return ordered


def record(context, state: GroupState, instance_uuid: str,
           host: str) -> bool:
    """Record the placement of ``instance_uuid`` on ``host`` if the group
    is still as the decision saw it; True if recorded. False: another
    member was placed meanwhile and the decision must be made again."""
    return db.instance_group_place(context, state.uuid, state.generation,
                                   instance_uuid, host)
