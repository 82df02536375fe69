"""Which slices of the fleet a scheduling request asks Placement about.

Placement (16.0) resolves each request group of one provider (every
device of a PCI request, and the group provider of a device group) over
the whole fleet: it reads the traits and builds the summary of every tree
with a matching free provider, and only then drops the trees outside
``root_required``. A band query on 1,000 hosts so costs about a second
whatever the band holds. Computes therefore put their shard traits
(``nova.pci.placement_names``) on every PCI provider as well as on the
root, and a shard query requires them in every such group: Placement's
trait filter then keeps only the shard's providers before any tree is
read, and on the root they keep a shard without a host in the band as
cheap as an empty band. (Required traits only: a forbidden trait makes
Placement list every provider that has it, the fleet again.)

The scheduler splits the fleet into ``2**level`` shards of about
``[scheduler]band_shard_hosts`` compute hosts each and asks one shard
(random, so concurrent requests and several schedulers spread; or the
shard of a requested host), fullest band first within it. When no band
of that shard has a usable candidate it widens to the shard's parent
(half as many shards, twice the hosts), and so on up to the whole fleet:
a query costs what its shard holds, and a request that only far hosts
can take costs at most about twice the whole-fleet query.
"""

import dataclasses
import random

from nova.pci import placement_names


@dataclasses.dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``level`` (one of ``2**level``)."""

    level: int
    index: int

    def traits(self) -> set[str]:
        """Traits a query for this shard requires of its providers."""
        return placement_names.shard_query(self.level, self.index)


def level_for(hosts: int, per_shard: int) -> int:
    """The smallest level whose shards hold at most ``per_shard`` of
    ``hosts`` on average (capped at the finest level); 0 for
    ``per_shard`` 0 (no shards)."""
    level = 0
    while per_shard and level < placement_names.SHARD_BITS and \
            hosts > per_shard << level:
        level += 1
    return level


def widening(level: int, index: int) -> list[Shard | None]:
    """The shards to ask in turn: shard ``index`` of ``level`` (taken
    modulo ``2**level``), then each parent of it, then None for the whole
    fleet."""
    return [Shard(finer, index % (1 << finer))
            for finer in range(level, 0, -1)] + [None]


def for_request(hosts: int, per_shard: int, requested_node: str | None,
                rng: random.Random) -> list[Shard | None]:
    """The shards a request asks in turn on a fleet of ``hosts`` compute
    hosts: one of about ``per_shard`` hosts, the one of
    ``requested_node`` (a node name) when the request names a host, else
    one at random, then wider ones."""
    level = level_for(hosts, per_shard)
    index = (placement_names.shard_number(requested_node)
             if requested_node is not None else rng.randrange(1 << level))
    return widening(level, index)
