"""The hugepages each guest on this host holds, so no two take the same.

Placement does not model hugepages (neither does upstream, whose
NUMATopologyFilter checks them on the host state): the compute claims a
guest's pages when it builds or moves the guest here, and a guest whose
pages do not fit fails the build like any other compute claim
(HugepagesUnavailable; the conductor tries another host). Which size
and which host nodes is nova.virt.hugepages' choice.

Nothing is stored for it: the size and host nodes are written into the
guest's domain (``<memoryBacking>``, ``<numatune>``), and a compute that
starts counts them again from the guests its hypervisor holds
(``ComputeDriver.get_guest_hugepages``).
"""

import threading
from collections.abc import Mapping

from nova.virt import hardware
from nova.virt import hugepages


class HugepageTracker:
    """Instance uuid -> the hugepages its guest holds on this host.

    ``lock`` is the compute's claim lock (the one PCI claims take), so a
    check and its claim are one step however many builds run at once.
    """

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._held: dict[str, hugepages.GuestPages] = {}

    def load(self, held: Mapping[str, hugepages.GuestPages]) -> None:
        """Count exactly the guests ``held`` (the hypervisor's, at start)."""
        with self._lock:
            self._held = dict(held)

    def held(self, instance_uuid: str) -> hugepages.GuestPages | None:
        """The pages the instance holds here, None for none."""
        with self._lock:
            return self._held.get(instance_uuid)

    def used(self) -> dict[tuple[int, int], int]:
        """(host node, page size in KiB) -> pages the guests hold."""
        with self._lock:
            return _used(self._held.values())

    def claim(self, instance_uuid: str, request: hugepages.PageRequest | None,
              memory_mb: int, cells: int,
              topology: hardware.HostNUMATopology,
              confined: tuple[int, ...]) -> hugepages.GuestPages | None:
        """The pages for a guest of ``memory_mb`` MiB in ``cells`` cells
        asking ``request`` (None: ordinary pages), confined to host nodes
        ``confined`` by its devices (empty: not confined).

        The pages the instance holds already are kept when they still
        serve it (a rebuild, a revert to the host it held them on); else
        they are given up for the new claim (a resize onto the same host)
        but kept if that claim fails. HugepagesUnavailable when the pages
        do not fit (see ``hugepages.place``).
        """
        with self._lock:
            held = self._held.get(instance_uuid)
            if request is None:
                self._held.pop(instance_uuid, None)
                return None
            if held is not None and _serves(held, request, memory_mb,
                                            cells, confined):
                return held
            others = _used(pages for uuid, pages in self._held.items()
                           if uuid != instance_uuid)
            pages = hugepages.place(request, memory_mb, cells, topology,
                                    others, confined)
            if pages is None:
                self._held.pop(instance_uuid, None)
            else:
                self._held[instance_uuid] = pages
            return pages

    def free(self, instance_uuid: str) -> None:
        """Give up the instance's pages here (idempotent)."""
        with self._lock:
            self._held.pop(instance_uuid, None)


def _used(held) -> dict[tuple[int, int], int]:
    used: dict[tuple[int, int], int] = {}
    for pages in held:
        for node, count in pages.pages_by_node().items():
            key = (node, pages.page_size_kib)
            used[key] = used.get(key, 0) + count
    return used


def _serves(held: hugepages.GuestPages, request: hugepages.PageRequest,
            memory_mb: int, cells: int, confined: tuple[int, ...]) -> bool:
    """Whether pages held already are what a new claim would ask for:
    the requested size (any for ``large``/``any``), the same cells, and
    the nodes the devices confine the guest to."""
    if request.size_kib not in (None, held.page_size_kib):
        return False
    if held.cell_memory_mb != (memory_mb // cells,) * cells:
        return False
    return not confined or held.cell_nodes() == tuple(
        confined[index % len(confined)] for index in range(cells))
