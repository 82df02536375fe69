"""The host's NUMA topology, as the compute driver reports it.

Only what PCI NUMA affinity and hugepages need: each NUMA node's CPUs,
memory, socket and hugepage pools. A node whose CPUs sit on several
sockets (or on sockets libvirt does not name) has no single socket; a
host with such a node cannot promise ``socket`` PCI NUMA affinity.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class PagePool:
    """A NUMA node's pool of ``total`` hugepages of ``size_kib`` KiB (what
    the kernel reserved: ``nr_hugepages`` of the node), used by guests or
    not."""

    size_kib: int
    total: int


@dataclasses.dataclass(frozen=True)
class NUMACell:
    """One host NUMA node; ``pages`` are its hugepage pools (not the
    base page size)."""

    id: int
    cpus: tuple[int, ...]
    memory_mb: int
    socket: int | None
    pages: tuple[PagePool, ...] = ()

    def pool(self, size_kib: int) -> int:
        """Hugepages of ``size_kib`` KiB this node has in total (0: none)."""
        return sum(p.total for p in self.pages if p.size_kib == size_kib)


@dataclasses.dataclass(frozen=True)
class HostNUMATopology:
    """The NUMA nodes of a host; no cells when the driver cannot tell."""

    cells: tuple[NUMACell, ...] = ()

    def cell(self, node: int | None) -> NUMACell | None:
        """The cell of NUMA node ``node``, or None if unknown."""
        for cell in self.cells:
            if cell.id == node:
                return cell
        return None

    def socket_of(self, node: int | None) -> int | None:
        """The socket of NUMA node ``node``, None when not a single one."""
        cell = self.cell(node)
        return cell.socket if cell is not None else None

    @property
    def sockets_known(self) -> bool:
        """True when every node lies on one known socket, so devices can
        be matched to the guest's socket (``socket`` affinity)."""
        return bool(self.cells) and all(
            cell.socket is not None for cell in self.cells)

    def cpus_of(self, nodes: tuple[int, ...]) -> tuple[int, ...]:
        """Host CPUs of ``nodes``, sorted; unknown nodes add none."""
        return tuple(sorted(cpu for node in nodes
                            for cpu in getattr(self.cell(node), 'cpus', ())))


def format_cpu_set(cpus: tuple[int, ...]) -> str:
    """``(0, 1, 2, 5)`` -> ``"0-2,5"``, libvirt's cpuset syntax."""
    ranges = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ','.join(str(a) if a == b else '%d-%d' % (a, b)
                    for a, b in ranges)
