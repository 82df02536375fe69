"""Which request sizes a host can take without breaking a free group.

A request for N devices of a class packs best on a wholly free group of
exactly N devices whose enclosing group (the next larger group holding
it) is not wholly free: taking it breaks no larger free group, which a
later, larger request may need (the buddy rule). Computes publish the
sizes their host can take this way as root traits
(``nova.pci.placement_names.fit_trait``), so that the scheduler can ask
Placement for such hosts first instead of finding them among the
candidates of a whole band.
"""

from collections.abc import Collection, Iterable


def fitting_sizes(groups: Iterable[frozenset[str]],
                  busy: Collection[str]) -> set[int]:
    """Sizes of the wholly free ``groups`` (device sets, single devices
    included) whose smallest enclosing group is not wholly free, or that
    no group encloses; ``busy`` are the devices that are not free."""
    groups = {group for group in groups if group}
    sizes = set()
    for group in groups:
        if not group.isdisjoint(busy):
            continue
        enclosing = min((other for other in groups if group < other),
                        key=len, default=None)
        if enclosing is None or not enclosing.isdisjoint(busy):
            sizes.add(len(group))
    return sizes
