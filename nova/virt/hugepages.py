"""Hugepages: what a guest asks for, and which host pages back it.

A flavor asks with ``hw:mem_page_size`` (an image with
``hw_mem_page_size``), as upstream:

* ``small``: ordinary pages, no hugepages (as if the key were absent;
  unlike upstream this does not give the guest a NUMA topology).
* ``large``: the largest hugepage size whose pages fit on the guest's
  host nodes, falling back to smaller hugepage sizes; never ordinary
  pages.
* ``any``: like ``large``, but when no hugepage size fits the guest gets
  ordinary pages (upstream tries the small pages last too, and this fork
  does not count ordinary memory per node, so the guest is then built
  like one without the key).
* a size: ``2MB``, ``1GB``, ``2MiB``, ``1G`` (binary units), or an integer
  in KiB (``2048``, ``1048576``): exactly pages of that size (``4``, the
  base page, is ``small``).

The image may only choose when the flavor says ``large`` or ``any``
(upstream's rule: a flavor without the key or with an exact size is not
overridden by an image).

Hugepages imply NUMA placement, as upstream: each guest NUMA cell (one
unless ``hw:numa_nodes`` says more) is backed by pages of one host node.
A guest confined by its PCI devices (see nova.pci.numa) takes its pages
on those nodes; any other guest's cells go to distinct host nodes, the
lowest-numbered nodes with enough free pages first (packing, so large
guests still find whole nodes). One page size backs the whole guest.
The pages of a node are its pools (``hardware.PagePool``) less those
the guests nova placed there hold; pages used outside nova are not
seen.
"""

import dataclasses
import re
from collections.abc import Iterable, Mapping

from nova import exception
from nova.virt import hardware

MEM_PAGE_SIZE_SPEC = 'hw:mem_page_size'
MEM_PAGE_SIZE_PROP = 'hw_mem_page_size'

SMALL = 'small'
LARGE = 'large'
ANY = 'any'
_KEYWORDS = (SMALL, LARGE, ANY)

ALLOWED = ('small, large, any, a size with a binary unit such as 2MB or '
           '1GB, or an integer number of KiB such as 2048 or 1048576')

# "2MB", "1 GiB", "2048K", "2097152B"; the unit is binary (upstream reads
# these with oslo's IEC units). A bare integer is KiB.
_SIZE_RE = re.compile(r'^(\d+)\s*([KMGT]i?)?(B)?$', re.IGNORECASE)
_UNIT_BYTES = {'': 1, 'K': 1024, 'M': 1024 ** 2, 'G': 1024 ** 3,
               'T': 1024 ** 4}


@dataclasses.dataclass(frozen=True)
class PageRequest:
    """A guest's hugepage request: ``size_kib`` exactly, or (None) the
    largest size that fits; ``fallback`` lets it run on ordinary pages
    when no size fits (``any``)."""

    size_kib: int | None = None
    fallback: bool = False


@dataclasses.dataclass(frozen=True)
class GuestPages:
    """The hugepages a guest holds on a host: pages of ``page_size_kib``
    KiB; guest cell i has ``cell_memory_mb[i]`` MiB on host node
    ``numa_nodes[i % len(numa_nodes)]`` (as GuestSpec.numa_nodes)."""

    page_size_kib: int
    numa_nodes: tuple[int, ...]
    cell_memory_mb: tuple[int, ...]

    def cell_nodes(self) -> tuple[int, ...]:
        """The host node of each guest cell."""
        return tuple(self.numa_nodes[index % len(self.numa_nodes)]
                     for index in range(len(self.cell_memory_mb)))

    def pages_by_node(self) -> dict[int, int]:
        """Host node -> pages held there."""
        result: dict[int, int] = {}
        for node, mib in zip(self.cell_nodes(), self.cell_memory_mb):
            result[node] = result.get(node, 0) + \
                mib * 1024 // self.page_size_kib
        return result


def _parse(value: object) -> str | int | None:
    """A keyword or a size in KiB; None when not a valid value."""
    text = str(value).strip()
    if text.lower() in _KEYWORDS:
        return text.lower()
    match = _SIZE_RE.match(text)
    if not match:
        return None
    number, prefix, byte = match.groups()
    if not prefix and not byte:
        kib = int(number)
    else:
        size = int(number) * _UNIT_BYTES[(prefix or '')[:1].upper()]
        if size % 1024:
            return None
        kib = size // 1024
    # A page is at least 4 KiB and a power of two.
    if kib < 4 or kib & (kib - 1):
        return None
    return kib


# x86's base page: asking for it exactly is asking for ordinary pages.
BASE_PAGE_KIB = 4


def _request(value: str | int) -> PageRequest | None:
    if value in (SMALL, BASE_PAGE_KIB):
        return None
    if value in (LARGE, ANY):
        return PageRequest(fallback=value == ANY)
    return PageRequest(size_kib=int(value))


def check_extra_specs(extra_specs: Mapping[str, object]) -> None:
    """Refuse a bad ``hw:mem_page_size``, naming it and what is allowed."""
    value = extra_specs.get(MEM_PAGE_SIZE_SPEC)
    if value is not None and _parse(value) is None:
        raise exception.FlavorExtraSpecInvalid(
            key=MEM_PAGE_SIZE_SPEC, value=value,
            reason='allowed values are %s (a power of two of at least '
                   '4 KiB)' % ALLOWED)


def check_image_properties(properties: Mapping[str, str]) -> None:
    """Refuse a bad ``hw_mem_page_size`` image property."""
    value = properties.get(MEM_PAGE_SIZE_PROP)
    if value is not None and _parse(value) is None:
        raise exception.Invalid(reason=(
            'image property %s %r is not allowed; allowed values are %s' % (
                MEM_PAGE_SIZE_PROP, value, ALLOWED)))


def request_of(extra_specs: Mapping[str, object] | None,
               image_properties: Mapping[str, str] | None = None
               ) -> PageRequest | None:
    """The hugepage request of a flavor and image (None: ordinary pages);
    Invalid when the image asks for a page size the flavor does not let
    it choose (the flavor must say ``large`` or ``any``)."""
    extra_specs = extra_specs or {}
    image_properties = image_properties or {}
    check_extra_specs(extra_specs)
    check_image_properties(image_properties)
    flavor_value = extra_specs.get(MEM_PAGE_SIZE_SPEC)
    image_value = image_properties.get(MEM_PAGE_SIZE_PROP)
    flavor_size = _parse(flavor_value) if flavor_value is not None \
        else None
    if image_value is not None:
        if flavor_size not in (LARGE, ANY):
            raise exception.Invalid(reason=(
                'image property %s=%s is not allowed with flavor %s=%s; '
                'the flavor must set %s to large or any to let the image '
                'choose the page size' % (
                    MEM_PAGE_SIZE_PROP, image_value, MEM_PAGE_SIZE_SPEC,
                    flavor_value if flavor_value is not None else '<unset>',
                    MEM_PAGE_SIZE_SPEC)))
        return _request(_parse(image_value))
    if flavor_size is None:
        return None
    return _request(flavor_size)


def check_flavor(extra_specs: Mapping[str, object], memory_mb: int,
                 cells: int) -> None:
    """With an exact page size, each of the flavor's ``cells`` NUMA cells
    must hold a whole number of pages (``memory_mb`` split evenly)."""
    request = request_of(extra_specs)
    if request is None or request.size_kib is None:
        return
    if (memory_mb // cells) * 1024 % request.size_kib:
        raise exception.FlavorExtraSpecInvalid(
            key=MEM_PAGE_SIZE_SPEC, value=extra_specs[MEM_PAGE_SIZE_SPEC],
            reason='each of the guest\'s %d NUMA cell(s) has %d MiB, not a '
                   'whole number of %d KiB pages' % (
                       cells, memory_mb // cells, request.size_kib))


def _free(topology: hardware.HostNUMATopology,
          used: Mapping[tuple[int, int], int], node: int,
          size_kib: int) -> int:
    cell = topology.cell(node)
    total = cell.pool(size_kib) if cell is not None else 0
    return total - used.get((node, size_kib), 0)


def _sizes(topology: hardware.HostNUMATopology,
           nodes: Iterable[int]) -> list[int]:
    """Hugepage sizes the ``nodes`` have pools of, largest first."""
    nodes = set(nodes)
    return sorted({pool.size_kib for cell in topology.cells
                   if cell.id in nodes for pool in cell.pages
                   if pool.total > 0}, reverse=True)


def _fits(pages: GuestPages, topology: hardware.HostNUMATopology,
          used: Mapping[tuple[int, int], int]) -> bool:
    return all(count <= _free(topology, used, node, pages.page_size_kib)
               for node, count in pages.pages_by_node().items())


def _describe(topology: hardware.HostNUMATopology,
              used: Mapping[tuple[int, int], int], nodes: Iterable[int],
              size_kib: int) -> str:
    parts = []
    for node in sorted(set(nodes)):
        cell = topology.cell(node)
        total = cell.pool(size_kib) if cell is not None else 0
        parts.append('node %d: %d of %d free' % (
            node, total - used.get((node, size_kib), 0), total))
    return ', '.join(parts)


def place(request: PageRequest, memory_mb: int, cells: int,
          topology: hardware.HostNUMATopology,
          used: Mapping[tuple[int, int], int],
          confined: tuple[int, ...] = ()) -> GuestPages | None:
    """Where a guest of ``memory_mb`` MiB in ``cells`` NUMA cells gets
    its pages (see the module docstring), given the pages ``used`` by
    other guests ((node, size in KiB) -> pages) and the host nodes its
    devices confine it to (``confined``; empty: any node). None when an
    ``any`` request runs on ordinary pages; HugepagesUnavailable naming
    the size, nodes and free pages when nothing fits."""
    cell_mib = memory_mb // cells
    nodes = confined or tuple(cell.id for cell in topology.cells)
    sizes = [request.size_kib] if request.size_kib else \
        _sizes(topology, nodes)
    tried = []
    for size in sizes:
        if cell_mib * 1024 % size:
            tried.append('%d KiB pages: %d MiB per guest cell is not a '
                         'whole number of them' % (size, cell_mib))
            continue
        if confined:
            chosen = confined
        else:
            # Distinct host nodes, one per guest cell, lowest id first.
            chosen = tuple(node for node in sorted(nodes) if
                           cell_mib * 1024 // size <=
                           _free(topology, used, node, size))[:cells]
            if len(chosen) < cells:
                chosen = ()
        pages = GuestPages(page_size_kib=size, numa_nodes=chosen,
                           cell_memory_mb=(cell_mib,) * cells)
        if chosen and _fits(pages, topology, used):
            return pages
        tried.append('%d KiB pages: %d needed per guest cell on %s, '
                     'host %s' % (
                         size, cell_mib * 1024 // size,
                         'host node(s) %s' % ','.join(map(str, confined))
                         if confined else '%d distinct host node(s)' % cells,
                         _describe(topology, used, nodes, size)))
    if request.fallback:
        return None
    if not sizes:
        tried.append('host node(s) %s have no hugepages' %
                     ','.join(map(str, nodes)) if nodes else
                     'the host reports no NUMA nodes')
    raise exception.HugepagesUnavailable(
        memory_mb=memory_mb, cells=cells, reason='; '.join(tried))
